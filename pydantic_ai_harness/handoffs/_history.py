"""The delegate's history: built from a delegating call's context, filtered, checked, and headed by its own prompts."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
)

from ._data import HandoffInputData
from ._parts import PARENT_STATE_PARTS, Part, keep_parts, rewrap
from ._worker import run_off_loop

__all__ = (
    'apply_handoff_input_filter',
    'check_message_history',
    'handoff_input_from_context',
    'prepend_system_prompts',
    'return_ids',
    'without_system_prompts',
)

logger = logging.getLogger('pydantic_ai_harness.handoffs')

_STRIPPED_STATE = (*PARENT_STATE_PARTS, ToolAvailabilityDeltaPart)


def without_system_prompts(messages: Sequence[ModelMessage]) -> tuple[ModelMessage, ...]:
    """`messages` without their `SystemPromptPart`s; requests left empty are dropped."""
    return tuple(keep_parts(messages, lambda _message: _not_system_prompt))


def _not_system_prompt(part: Part) -> bool:
    return not isinstance(part, SystemPromptPart)


def prepend_system_prompts(history: list[ModelMessage], parts: Sequence[SystemPromptPart]) -> list[ModelMessage]:
    """`history` with `parts` at the head of its first message: into a leading request, or as a request of their
    own before a leading response (a summary written as an assistant turn).
    """
    if not parts or not history:
        return history
    first = history[0]
    if isinstance(first, ModelRequest):
        return [dataclasses.replace(first, parts=[*parts, *first.parts]), *history[1:]]
    return [ModelRequest(parts=list(parts)), *history]


def _without_parent_state(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    return keep_parts(messages, lambda _message: _not_parent_state)


def _not_parent_state(part: Part) -> bool:
    return not isinstance(part, _STRIPPED_STATE)


def _current_run_start(messages: Sequence[ModelMessage], run_id: str | None, end: int) -> int:
    """The index just after the current run's first request (its user prompt), or of the run's first response."""
    if run_id is not None:
        for index in range(end):
            message = messages[index]
            if message.run_id == run_id:
                return index + 1 if isinstance(message, ModelRequest) else index
    return end


def handoff_input_from_context(ctx: RunContext[Any], *, target_name: str | None = None) -> HandoffInputData:
    """Build the handoff input of a delegation from the delegating tool's (or output function's) context.

    `ctx.messages` is split into the three segments of a handoff:

    - `input_history`: every message up to and including the current run's first request (its user prompt);
    - `pre_handoff_items`: the current run's messages after that, up to the response that made the delegating call;
    - `new_items`: that response, and a request answering the delegating call with `{"assistant": "<target>"}`,
      so the history is valid to run on as it is and the delegate sees that control was transferred.

    Other tool calls made in parallel in that response have no result yet and are dropped (they are logged on the
    `pydantic_ai_harness.handoffs` logger). The parent agent's configuration state (instruction, model-settings,
    tool-availability and capability-load deltas) is never forwarded to another agent, so it is dropped too.

    Args:
        ctx: The run context of the delegating tool or output function.
        target_name: The name of the agent taking over, written into the handoff's tool output.

    Returns:
        The handoff input, with `run_context=ctx`.
    """
    messages = _without_parent_state(list(ctx.messages))
    last = len(messages) - 1
    if last < 0 or not isinstance(messages[last], ModelResponse):
        start = _current_run_start(messages, ctx.run_id, len(messages))
        return HandoffInputData(tuple(messages[:start]), tuple(messages[start:]), (), run_context=ctx)
    response = messages[last]
    assert isinstance(response, ModelResponse)
    start = _current_run_start(messages, ctx.run_id, last)
    handoff_call = next(
        (p for p in response.parts if isinstance(p, ToolCallPart) and p.tool_call_id == ctx.tool_call_id), None
    )
    dropped = [p for p in response.parts if isinstance(p, ToolCallPart) and p is not handoff_call]
    new_items: list[ModelMessage] = []
    if dropped:
        logger.info(
            'Handoff from tool call %r: dropping parallel tool calls without a result: %s',
            ctx.tool_call_id,
            ', '.join(f'{p.tool_name} ({p.tool_call_id})' for p in dropped),
        )
        kept = [p for p in response.parts if not any(p is d for d in dropped)]
        if kept:
            new_items.append(rewrap(response, kept))
    else:
        new_items.append(response)
    if handoff_call is not None:
        output = ToolReturnPart(
            tool_name=handoff_call.tool_name,
            content=json.dumps({'assistant': target_name or 'delegate'}),
            tool_call_id=handoff_call.tool_call_id,
        )
        new_items.append(ModelRequest(parts=[output], run_id=ctx.run_id))
    return HandoffInputData(
        input_history=tuple(messages[:start]),
        pre_handoff_items=tuple(messages[start:last]),
        new_items=tuple(new_items),
        run_context=ctx,
    )


def return_ids(message: ModelRequest) -> list[str]:
    """The ids of the tool calls that `message` answers: its tool returns and tool retries."""
    ids: list[str] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart) or part.part_kind == 'retry-prompt' and part.tool_name is not None:
            ids.append(part.tool_call_id)
    return ids


def check_message_history(messages: Sequence[ModelMessage]) -> None:
    """Check that a delegate can run on `messages` with a new prompt after them.

    Every tool call must be answered in the request(s) right after its response, every tool return must answer a
    call of the response right before it, no message may be empty, and the last response must not be suspended.

    Raises:
        UserError: Naming what is wrong, when the history is not valid.
    """
    pending: dict[str, str] = {}
    for index, message in enumerate(messages):
        if not message.parts:
            raise UserError(f'Invalid handoff history: message {index} has no parts.')
        if isinstance(message, ModelResponse):
            if pending:
                break
            pending = {p.tool_call_id: p.tool_name for p in message.parts if isinstance(p, ToolCallPart)}
            continue
        for call_id in return_ids(message):
            if call_id not in pending:
                raise UserError(
                    f'Invalid handoff history: the tool return for call {call_id!r} in message {index} answers no '
                    'tool call of the response before it. Remove tool calls and their returns together.'
                )
            del pending[call_id]
    if pending:
        calls = ', '.join(f'{name} ({call_id})' for call_id, name in pending.items())
        raise UserError(
            f'Invalid handoff history: the tool calls {calls} have no tool return. '
            'Remove tool calls and their returns together.'
        )
    last = messages[-1] if messages else None
    if isinstance(last, ModelResponse) and last.state == 'suspended':
        raise UserError('Invalid handoff history: it ends with a suspended response, which no new prompt can follow.')


async def apply_handoff_input_filter(
    input_filter: Any, data: HandoffInputData, *, large: bool = False
) -> HandoffInputData:
    """Run `input_filter` on `data`, awaiting an awaitable result, and check what it returns.

    With `large`, the filter is called in a worker thread (see `run_off_loop`): a synchronous filter does its work
    there, an async one only makes its coroutine there, which then runs on the event loop.

    Raises:
        UserError: `Invalid input filter: ...` if it is not callable, `Invalid input filter result: ...` if it does
            not return a `HandoffInputData`.
    """
    if not callable(input_filter):
        raise UserError(f'Invalid input filter: {input_filter}')
    large = large and not inspect.iscoroutinefunction(input_filter)  # an async def's call does no work
    filtered: Any = await run_off_loop(data.run_context, functools.partial(input_filter, data), large=large)
    if inspect.isawaitable(filtered):
        filtered = await filtered
    if not isinstance(filtered, HandoffInputData):
        raise UserError(f'Invalid input filter result: {filtered}')
    return filtered
