"""One-call helpers in the OpenAI Agents SDK's shape: `handoff()` (an output tool) and `agent_tool()` (`as_tool()`)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import ModelRetry, RunContext, Tool, ToolOutput
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.exceptions import UserError

from ..overflowing_tool_output._query_tools._names import run_names
from ._by_reference import (
    DEFAULT_ANSWER_CHARS,
    MAX_HANDLE_CHARS,
    MAX_HANDLES,
    check_answer_chars,
    handles_prompt,
    result_by_reference,
)
from ._config import check_flag, check_input_filter
from ._data import HandoffInputFilter
from ._delegation import Delegation, delegate

__all__ = ('agent_tool', 'handoff')

OnHandoff = Callable[..., Any]
"""`on_handoff(ctx)`, or `on_handoff(ctx, input)` with an `input_type`; sync or async."""


def _function_style(text: str) -> str:
    """`text` as a tool name: lower case, every character but letters, digits and `_` replaced by `_`."""
    return re.sub(r'[^a-z0-9_]', '_', text.strip().lower())


def _named(agent: AbstractAgent[Any, Any], override: str | None, setting: str) -> str:
    """The agent's name (for the default tool name and description); `override` stands in for a nameless agent."""
    name = agent.name or override
    if not name:
        raise UserError(f"The agent has no name: give it one (Agent(..., name='billing')) or pass {setting}.")
    return name


def _check_on_handoff(on_handoff: OnHandoff | None, takes_input: bool) -> None:
    if on_handoff is None:
        return
    if not callable(on_handoff):
        raise UserError(f'on_handoff must be a function, got {on_handoff!r}')
    wanted = 2 if takes_input else 1
    if len(inspect.signature(on_handoff).parameters) != wanted:
        raise UserError(
            'on_handoff must take two arguments: context and input'
            if takes_input
            else 'on_handoff must take one argument: context'
        )


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def handoff(
    agent: AbstractAgent[Any, Any],
    *,
    tool_name_override: str | None = None,
    tool_description_override: str | None = None,
    on_handoff: OnHandoff | None = None,
    input_type: type[Any] | None = None,
    input_filter: HandoffInputFilter | None = None,
    nest_handoff_history: bool | None = None,
    prompt: str | None = None,
    **delegate_kwargs: Any,
) -> ToolOutput[Any]:
    """A handoff to `agent`, in the OpenAI Agents SDK's shape, as one entry of an agent's `output_type`.

    The model sees an output tool named `transfer_to_<agent name>` (lower case, other characters as `_`) described
    as `Handoff to the <name> agent to handle the request.` followed by the agent's `description`. When the model
    calls it, `on_handoff` runs, then [`delegate`][pydantic_ai_harness.handoffs.delegate] runs `agent` on the
    conversation so far (the user's prompt included, once: no new user turn is added unless `prompt` is given),
    and the delegate's output is the run's output: control does not come back. The delegate's own handoffs chain
    on: [`last_agent`][pydantic_ai_harness.handoffs.last_agent] names the agent that answered.

    Args:
        agent: The agent taking over.
        tool_name_override: The tool's name, in place of `transfer_to_<agent name>`.
        tool_description_override: The tool's description, in place of the default.
        on_handoff: Called (sync or async) when the handoff is invoked, before the delegate runs: `on_handoff(ctx)`,
            or `on_handoff(ctx, input)` with an `input_type`.
        input_type: The type of the arguments the model passes with the handoff (a Pydantic model, a dataclass,
            ...): its schema is the tool's, and the validated value is passed to `on_handoff`.
        input_filter: The handoff input filter; see `delegate`.
        nest_handoff_history: Whether to nest the history when there is no filter; see `delegate`.
        prompt: A user turn added after the conversation for the delegate; by default none, as in the SDK: the
            delegate answers the conversation as it stands, the user's request included once.
        **delegate_kwargs: Passed to `delegate` (`history_mapper`, `summary_role`, `config`, `model`, ...).

    Returns:
        A `ToolOutput` to put in `output_type` (alone or in a list beside other outputs and handoffs).

    Raises:
        UserError: At construction, when the agent has no name and no `tool_name_override` is given, when
            `on_handoff` does not take one argument (two with `input_type`), or on an invalid setting.
    """
    name = _named(agent, tool_name_override, 'tool_name_override')
    tool_name = tool_name_override or _function_style(f'transfer_to_{name}')
    description = tool_description_override or (
        f'Handoff to the {name} agent to handle the request. {agent.description or ""}'.strip()
    )
    _check_on_handoff(on_handoff, input_type is not None)
    check_input_filter(input_filter)
    if nest_handoff_history is not None:
        check_flag('nest_handoff_history', nest_handoff_history)

    async def run(ctx: RunContext[Any], *handoff_input: Any) -> Any:
        if on_handoff is not None:
            await _maybe_await(on_handoff(ctx, *handoff_input))
        delegation = await delegate(
            agent,
            ctx,
            prompt,
            input_filter=input_filter,
            nest_handoff_history=nest_handoff_history,
            **delegate_kwargs,
        )
        return delegation.output

    async def transfer(ctx: RunContext[Any]) -> Any:
        return await run(ctx)

    async def transfer_with_input(ctx: RunContext[Any], input: Any) -> Any:
        return await run(ctx, input)

    # The input's schema is the tool's: pydantic-ai reads it from the annotation, set here to `input_type`.
    transfer_with_input.__annotations__ = {**transfer_with_input.__annotations__, 'input': input_type}
    function = transfer if input_type is None else transfer_with_input
    return ToolOutput(function, name=tool_name, description=description)


def agent_tool(
    agent: AbstractAgent[Any, Any],
    *,
    tool_name: str | None = None,
    tool_description: str | None = None,
    custom_output_extractor: Callable[[Delegation[Any]], Any | Awaitable[Any]] | None = None,
    conversation: bool = False,
    input_filter: HandoffInputFilter | None = None,
    nest_handoff_history: bool | None = None,
    by_reference: bool = False,
    answer_chars: int = DEFAULT_ANSWER_CHARS,
    **delegate_kwargs: Any,
) -> Tool[Any]:
    """`agent` as a tool, the OpenAI Agents SDK's `Agent.as_tool()` in one call.

    The model sees a tool named after the agent (lower case, other characters as `_`) taking one string, `input`.
    When it calls it, [`delegate`][pydantic_ai_harness.handoffs.delegate] runs `agent` with `input` as its prompt
    and nothing else, as the SDK's agent tool does (its own system prompts and instructions apply); with
    `conversation=True` it runs on the conversation so far too (filtered as a handoff: pass `input_filter` or
    `nest_handoff_history`). The delegate's output is the tool's return: control comes back to the calling agent.

    Args:
        agent: The agent to run as a tool.
        tool_name: The tool's name, in place of the agent's name.
        tool_description: The tool's description, in place of the agent's `description`.
        custom_output_extractor: Turns the [`Delegation`][pydantic_ai_harness.handoffs.Delegation] into the tool's
            return (sync or async), in place of the delegate's output.
        conversation: Whether the agent also sees the conversation so far (the calling agent's history up to the
            call, its tool calls and outputs included), before `input`. Off by default, as in the SDK.
        input_filter: The handoff input filter, with `conversation=True`; see `delegate`.
        nest_handoff_history: Whether to nest the history when there is no filter, with `conversation=True`; see
            `delegate`.
        by_reference: Return the agent's result by reference: its answer cut to `answer_chars`, and a handle to
            its whole run (input, tool calls, tool outputs, answer) saved in the store of the calling agent's
            `OverflowingToolOutput`, which the calling agent reads with its query tools. The tool then also takes
            `handles`, earlier results the agent reads itself instead of being told them again (see
            [`result_by_reference`][pydantic_ai_harness.handoffs.result_by_reference]).
        answer_chars: With `by_reference`, the longest answer returned inline (1,000 characters by default).
        **delegate_kwargs: Passed to `delegate` (`history_mapper`, `summary_role`, `config`, `model`, ...).

    Returns:
        A pydantic-ai `Tool`, for `Agent(tools=[...])` or a toolset.

    Raises:
        UserError: At construction, when the agent has no name and no `tool_name` is given, when `input_filter` or
            `nest_handoff_history` is given without `conversation=True`, or on an invalid setting.
    """
    name = _named(agent, tool_name, 'tool_name')
    description = tool_description or agent.description or f'Ask the {name} agent.'
    check_input_filter(input_filter)
    if nest_handoff_history is not None:
        check_flag('nest_handoff_history', nest_handoff_history)
    check_flag('conversation', conversation)
    if not conversation and (input_filter is not None or nest_handoff_history):
        raise UserError(
            f'agent_tool({name!r}): input_filter and nest_handoff_history apply to the conversation, which an agent '
            'tool is not given by default: pass conversation=True as well, or drop them.'
        )
    check_flag('by_reference', by_reference)
    check_answer_chars(answer_chars)
    if by_reference and custom_output_extractor is not None:
        raise UserError("agent_tool: by_reference and custom_output_extractor both make the tool's return: pass one.")
    if custom_output_extractor is not None and not callable(custom_output_extractor):
        raise UserError(f'custom_output_extractor must be a function, got {custom_output_extractor!r}')

    async def run_agent(ctx: RunContext[Any], input: str) -> Any:
        """Ask the agent.

        Args:
            ctx: The calling run's context (not shown to the model).
            input: What to ask the agent.
        """
        delegation = await delegate(
            agent,
            ctx,
            input,
            conversation=conversation,
            input_filter=input_filter,
            nest_handoff_history=nest_handoff_history,
            **delegate_kwargs,
        )
        if custom_output_extractor is None:
            return delegation.output
        return await _maybe_await(custom_output_extractor(delegation))

    async def run_agent_by_reference(ctx: RunContext[Any], input: str, handles: list[str] | None = None) -> str:
        """Ask the agent.

        Args:
            ctx: The calling run's context (not shown to the model).
            input: What to ask the agent.
            handles: Handles of earlier saved results the agent should read for this (another agent's run, a saved
                tool output), instead of restating them in `input`.
        """
        handles = handles or []
        if len(handles) > MAX_HANDLES or any(len(handle) > MAX_HANDLE_CHARS for handle in handles):
            raise ModelRetry(
                f"Pass at most {MAX_HANDLES} handles, each as an earlier answer names it (under handle '...')."
            )
        delegation = await delegate(
            agent,
            ctx,
            handles_prompt(input, handles, run_names(ctx)),
            conversation=conversation,
            input_filter=input_filter,
            nest_handoff_history=nest_handoff_history,
            **delegate_kwargs,
        )
        return await result_by_reference(ctx, delegation, answer_chars=answer_chars)

    function = run_agent_by_reference if by_reference else run_agent
    return Tool(function, takes_ctx=True, name=tool_name or _function_style(name), description=description)
