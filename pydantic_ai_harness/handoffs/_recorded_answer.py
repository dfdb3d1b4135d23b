"""The delegate's answer as `Handoffs` records it in the delegating run's history, held to a tool return's bounds.

The recorded answer is sent again with every later request of the conversation, like a tool return; aging takes
only tool returns, so an answer nothing reduced stayed whole for good (a 5 MB answer: 5,144,212 characters in the
next turn's request). It is reduced as a return of the handoff's call would be: by the delegating run's
`OverflowingToolOutput` when it has one (its bands, `tool_filter` and redaction; a spill names a handle the model
pages back with `read_tool_result`), else cut to `HandoffConfig.max_record_chars`, saying so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import RunContext, ToolReturn
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.tools import ToolDefinition

from .._typing import is_object
from ..overflowing_tool_output import OverflowingToolOutput
from ._cut import cut_text
from ._spills import find_overflow, inherited_overflow
from ._worker import run_off_loop, value_is_large

__all__ = ('ANSWERED_BY_METADATA_KEY', 'answer_text', 'recorded_answer', 'run_overflow')

ANSWERED_BY_METADATA_KEY = 'pydantic_ai_harness_answered_by'
"""`metadata` key of the response `Handoffs` appends to a run that handed off: the name of the agent that answered."""


def answer_text(output: Any) -> str:
    """The delegate's output as text: itself when it is a string, else JSON."""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=lambda value: getattr(value, '__dict__', str(value)))
    except (TypeError, ValueError):
        return str(output)


def _handoff_call(messages: Sequence[ModelMessage], call_id: str | None) -> ToolCallPart:
    """The call that handed off (an output tool's): in the last response, whose calls the run's last request
    answers; a stand-in if it is not there.
    """
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                    return part
            break
    return ToolCallPart('handoff', {}, call_id or 'handoff')


def run_overflow(ctx: RunContext[Any]) -> OverflowingToolOutput[Any] | None:
    """The run's `OverflowingToolOutput` (the agent's or the run's own), else the one its delegation inherits."""
    root = ctx.root_capability
    return (find_overflow([root]) if root is not None else None) or inherited_overflow().get()


async def _reduced(
    ctx: RunContext[Any],
    overflow: OverflowingToolOutput[Any],
    call: ToolCallPart,
    tool_def: ToolDefinition | None,
    output: Any,
) -> tuple[str, dict[str, Any]]:
    """`output` reduced by `overflow` as the return of `call` to `tool_def`: the text to record, and the notes on
    what was done.
    """
    try:
        args = call.args_as_dict()
    except ValueError:
        args = {}
    tool_def = tool_def or ToolDefinition(name=call.tool_name, kind='output')
    reduced = await overflow.after_tool_execute(ctx, call=call, tool_def=tool_def, args=args, result=output)
    notes: dict[str, Any] = {}
    if isinstance(reduced, ToolReturn):
        metadata: object = reduced.metadata
        notes = {str(key): value for key, value in metadata.items()} if is_object(metadata) else {}
        reduced = reduced.return_value
    if isinstance(reduced, str):
        return reduced, notes
    return await run_off_loop(ctx, functools.partial(answer_text, reduced), large=value_is_large(reduced)), notes


async def recorded_answer(
    ctx: RunContext[Any],
    messages: Sequence[ModelMessage],
    *,
    output: Any,
    agent_name: str | None,
    call_id: str | None,
    tool_def: ToolDefinition | None,
    max_chars: int | None,
) -> ModelResponse:
    """The response `Handoffs` appends for a handoff's answer: `output`, held to the bounds of a tool return.

    Reduced by the run's `OverflowingToolOutput` as the return of the handoff's call (`call_id`, to the output tool
    `tool_def`), when the run has one; else cut to `max_chars` (`None`: whole).
    """
    notes: dict[str, Any] = {}
    overflow = run_overflow(ctx)
    if overflow is not None:
        text, notes = await _reduced(ctx, overflow, _handoff_call(messages, call_id), tool_def, output)
    else:
        text = await run_off_loop(ctx, functools.partial(answer_text, output), large=value_is_large(output))
        if max_chars is not None:
            text = cut_text(text, max_chars, None)
    return ModelResponse(
        parts=[TextPart(text)],
        run_id=ctx.run_id,
        metadata={**notes, ANSWERED_BY_METADATA_KEY: agent_name or 'delegate'},
    )
