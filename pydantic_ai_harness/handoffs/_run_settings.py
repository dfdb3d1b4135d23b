"""`Handoffs`: run-wide handoff settings, and the specialist's answer recorded in the delegating run's history."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT

from ._chain import ANSWERED_BY_AGENT_METADATA_KEY, agent_key, chain_messages, with_transfer_output
from ._config import HandoffConfig, SummaryRole, with_overrides
from ._data import HandoffHistoryMapper, HandoffInputFilter
from ._delegation import Delegation, RunHandoffs, active_run_handoffs, final_handoff
from ._recorded_answer import ANSWERED_BY_METADATA_KEY, recorded_answer
from ._worker import is_large, run_off_loop

__all__ = ('ANSWERED_BY_METADATA_KEY', 'Handoffs', 'answered_by')


@dataclass
class Handoffs(AbstractCapability[AgentDepsT]):
    """Run-wide handoff settings, the analogue of the OpenAI Agents SDK's `RunConfig` handoff fields.

    Every [`delegate`][pydantic_ai_harness.handoffs.delegate] call made during the run, and during the runs of the
    delegates it starts, uses `config` unless it passes a `config` of its own; per-call arguments still win over
    both. Add it to the agent (`Agent(..., capabilities=[Handoffs(...)])`) or to one run (`capabilities=` on
    `run`).

    When the run ends with a handoff made in an output function (the delegate's output is the run's output), the
    run's history gets a final response holding the delegate's answer, marked with the delegate's name (see
    [`answered_by`][pydantic_ai_harness.handoffs.answered_by]), so the conversation passed on to the next turn
    records who said what, as the OpenAI Agents SDK's `to_input_list()`: the handoff's call answered with
    `{"assistant": "<name>"}`, what each agent of a chain did in its own run (tool returns cut to
    `config.max_record_chars`), and the last agent's answer, marked with that agent (see
    [`last_agent`][pydantic_ai_harness.handoffs.last_agent]). pydantic-ai itself answers that call with
    `Final result processed.` only. That answer
    is held to a tool return's bounds: the run's `OverflowingToolOutput` reduces it as the return of the handoff's
    call (a long one is spilled, and the history names its handle), or, without one, it is cut to
    `config.max_record_chars`. The run's output is the whole answer.
    """

    config: HandoffConfig = field(default_factory=HandoffConfig)
    """The settings every delegation of the run uses unless it passes its own; the settings below, when given,
    replace its values (so `Handoffs(nest_handoff_history=True)` is `Handoffs(HandoffConfig(nest_handoff_history=True))`).
    """

    _: dataclasses.KW_ONLY

    input_filter: HandoffInputFilter | None = None
    """When not `None`, replaces `config.input_filter`."""

    nest_handoff_history: bool | None = None
    """When not `None`, replaces `config.nest_handoff_history`."""

    history_mapper: HandoffHistoryMapper | None = None
    """When not `None`, replaces `config.history_mapper`."""

    summary_role: SummaryRole | None = None
    """When not `None`, replaces `config.summary_role`."""

    forward_system_prompt: bool | None = None
    """When not `None`, replaces `config.forward_system_prompt`."""

    max_record_chars: int | None = None
    """When not `None`, replaces `config.max_record_chars`."""

    id: str | None = 'pydantic_ai_harness_handoffs'
    """The capability's id: one per agent; pass another to keep two."""

    def __post_init__(self) -> None:
        _check_config(self.config)
        self.config = with_overrides(
            self.config,
            input_filter=self.input_filter,
            nest_handoff_history=self.nest_handoff_history,
            history_mapper=self.history_mapper,
            summary_role=self.summary_role,
            forward_system_prompt=self.forward_system_prompt,
            max_record_chars=self.max_record_chars,
        )

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Make `config` the run-wide handoff settings for the length of the run."""
        variable = active_run_handoffs()
        token = variable.set(RunHandoffs(config=self.config, run_id=ctx.run_id))
        try:
            return await handler()
        finally:
            variable.reset(token)

    async def after_run(self, ctx: RunContext[AgentDepsT], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        """Record the delegate's answer when the run ended with an output-function handoff."""
        state = active_run_handoffs().get()
        if state is None:  # pragma: no cover (set by `wrap_run` around this hook)
            return result
        # `all_messages()` is the result's own history list (not `ctx.messages`, a copy by now): appended to in place.
        messages = result.all_messages()
        delegation = final_handoff(messages, [d for run_id, d in state.delegations if run_id == ctx.run_id])
        if delegation is not None:
            last = delegation.last
            with_transfer_output(messages, delegation)
            hops = functools.partial(chain_messages, delegation, self.config.max_record_chars)
            messages.extend(await run_off_loop(ctx, hops, large=_long_chain(delegation)))
            answer = await recorded_answer(
                ctx,
                messages,
                output=delegation.output,
                agent_name=last.agent_name,
                call_id=last.tool_call_id,
                tool_def=state.handoff_tools.get(last.tool_call_id or ''),
                max_chars=self.config.max_record_chars,
            )
            key = agent_key(last.agent)
            if key is not None:
                answer.metadata = {**(answer.metadata or {}), ANSWERED_BY_AGENT_METADATA_KEY: key}
            messages.append(answer)
        return result


def _long_chain(delegation: Delegation[Any]) -> bool:
    """Whether the runs of the chain `delegation` starts are too long to walk on the event loop."""
    link: Delegation[Any] | None = delegation
    runs: list[list[ModelMessage]] = []
    while link is not None:
        runs.append(link.result.all_messages()[link.given_messages :])
        link = link.handed_to
    return is_large(*runs)


def _check_config(config: object) -> None:
    if not isinstance(config, HandoffConfig):
        raise TypeError(f'Handoffs.config must be a HandoffConfig, got {type(config).__name__}')


def answered_by(messages: Sequence[ModelMessage]) -> str | None:
    """The name of the delegate whose answer ends `messages`, or `None` when the last answer is the run's own agent's.

    Use it to route the next user turn: a run that handed off to `billing` in an output function under the
    [`Handoffs`][pydantic_ai_harness.handoffs.Handoffs] capability ends with `billing`'s answer.
    """
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            name = (message.metadata or {}).get(ANSWERED_BY_METADATA_KEY)
            return name if isinstance(name, str) else None
    return None
