"""`HandoffHistory`: apply a handoff filter or nesting to the history an agent is handed with `message_history=`."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.tools import AgentDepsT

from ._config import SummaryRole, check_history_settings
from ._data import HandoffHistoryMapper, HandoffInputData, HandoffInputFilter
from ._delegate_history import checked_history
from ._history import apply_handoff_input_filter, prepend_system_prompts, return_ids, without_system_prompts
from ._nesting import nest_handoff_history
from ._worker import is_large, run_off_loop

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.settings import ModelSettings

__all__ = ('PROCESSED_METADATA_KEY', 'HandoffHistory')

PROCESSED_METADATA_KEY = 'pydantic_ai_harness_handoff_history'
"""`metadata` key stamped on the rewritten earlier messages, holding the id of the run that rewrote them."""


@dataclass
class HandoffHistory(AbstractCapability[AgentDepsT]):
    """Treat the messages an agent is given with `message_history=` as a handoff from a previous agent.

    For applications that run agents one after another and pass the previous result's messages on
    (`next_agent.run(prompt, message_history=previous.all_messages(), capabilities=[HandoffHistory(...)])`). Before
    the run's first model request, the messages that precede the current run are taken as the handoff's
    `input_history` and rewritten with `input_filter`, or else nested when `nest_handoff_history` is set (a filter
    always wins, as in the OpenAI Agents SDK). The current run's own messages are never touched. The earlier
    agent's system prompts are dropped (unless `forward_system_prompt`) and the agent's own system prompts, static
    and dynamic, head the rewritten messages, since pydantic-ai adds them only to a run without history.

    The rewrite happens once per run: the rewritten messages are stamped in their `metadata` (never sent to a
    model) with the run id, and later requests of the same run leave them alone, so the history is not re-nested on
    every step and the provider's prompt cache stays valid.
    """

    input_filter: HandoffInputFilter | None = None
    """The handoff input filter applied to the earlier messages; it wins over nesting."""

    nest_handoff_history: bool = False
    """Whether to nest the earlier messages into a summary when there is no filter."""

    history_mapper: HandoffHistoryMapper | None = None
    """The mapper used for nesting in place of the default summary."""

    summary_role: SummaryRole = 'assistant'
    """Whether nesting writes its summaries as assistant turns (the OpenAI Agents SDK's choice) or as user turns."""

    forward_system_prompt: bool = False
    """Whether the earlier agent's system prompts stay in the rewritten messages. Off by default: the agent runs
    under its own system prompts (static and dynamic), which pydantic-ai would otherwise leave out of a run given a
    history."""

    def __post_init__(self) -> None:
        check_history_settings(self)

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Rewrite the messages that precede the current run, once per run."""
        if self.input_filter is None and not self.nest_handoff_history:
            return request_context
        messages = list(request_context.messages)
        start = _keep_answered_calls(messages, _current_run_index(messages, ctx.run_id))
        earlier = messages[:start]
        if not earlier or any(_stamp(message) == ctx.run_id for message in earlier):
            return request_context
        large = is_large(earlier)  # then every step that walks the history runs in a worker thread
        data = await run_off_loop(ctx, functools.partial(self._handed, ctx, earlier), large=large)
        if self.input_filter is not None:
            data = await apply_handoff_input_filter(self.input_filter, data, large=large)
        else:
            nest = functools.partial(
                nest_handoff_history, data, history_mapper=self.history_mapper, summary_role=self.summary_role
            )
            data = await run_off_loop(ctx, nest, large=large)
        rewritten = await run_off_loop(ctx, functools.partial(checked_history, data), large=large)
        own_prompts: list[SystemPromptPart] = []
        if ctx.agent is not None:
            own_prompts = await ctx.agent.system_prompt_parts(
                deps=ctx.deps,
                model=ctx.model if _is_model(ctx.model) else None,
                message_history=rewritten,
                prompt=ctx.prompt,
                usage=ctx.usage,
                model_settings=cast('ModelSettings | None', ctx.model_settings),
            )
        stamp = functools.partial(_stamped, rewritten, own_prompts, ctx.run_id)
        stamped = await run_off_loop(ctx, stamp, large=large)
        new_messages = [*stamped, *messages[start:]]
        request_context.messages = list(new_messages)
        ctx.messages[:] = new_messages
        return request_context

    def _handed(self, ctx: RunContext[AgentDepsT], earlier: list[ModelMessage]) -> HandoffInputData:
        """The earlier messages as a handoff's input history, without their system prompts unless forwarded."""
        handed = tuple(earlier) if self.forward_system_prompt else without_system_prompts(earlier)
        return HandoffInputData(input_history=handed, pre_handoff_items=(), new_items=(), run_context=ctx)


def _stamped(
    rewritten: list[ModelMessage], own_prompts: Sequence[SystemPromptPart], run_id: str | None
) -> list[ModelMessage]:
    """`rewritten` headed by the agent's own system prompts, every message stamped with the run id."""
    return [_with_stamp(message, run_id) for message in prepend_system_prompts(rewritten, own_prompts)]


def _is_model(model: object) -> TypeGuard[Model[Any]]:
    """Whether `model` is a request/response `Model` (not a realtime one), whose system prompts can be resolved."""
    return isinstance(model, Model)


def _current_run_index(messages: list[ModelMessage], run_id: str | None) -> int:
    """The index of the current run's first message (the trailing request when no message carries the run id)."""
    for index, message in enumerate(messages):
        if run_id is not None and message.run_id == run_id:
            return index
    return max(len(messages) - 1, 0)


def _keep_answered_calls(messages: list[ModelMessage], start: int) -> int:
    """Move the boundary before the last earlier response when the current run answers its tool calls.

    A run resumed with `deferred_tool_results` starts with the results of calls the previous run ended on; nesting
    that response away would orphan them, and the model would call the tools (and ask for approval) again.
    """
    if start == 0 or not isinstance(last := messages[start - 1], ModelResponse):
        return start
    call_ids = {part.tool_call_id for part in last.parts if isinstance(part, ToolCallPart)}
    answered = any(
        call_id in call_ids
        for message in messages[start:]
        if isinstance(message, ModelRequest)
        for call_id in return_ids(message)
    )
    return start - 1 if answered else start


def _stamp(message: ModelMessage) -> Any:
    return (message.metadata or {}).get(PROCESSED_METADATA_KEY)


def _with_stamp(message: ModelMessage, run_id: str | None) -> ModelMessage:
    return dataclasses.replace(message, metadata={**(message.metadata or {}), PROCESSED_METADATA_KEY: run_id})
