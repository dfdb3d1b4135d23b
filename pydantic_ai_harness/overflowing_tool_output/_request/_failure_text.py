"""The text a failing tool sends the model: `ModelRetry` messages and `ToolFailed` returns.

pydantic-ai builds them into a `ToolReturnPart` (`outcome='retried'` or `'failed'`) after every tool hook has run,
so `after_tool_execute` never sees them. They reach the model in the next request, where the capability holds them
to the rules of a return: secrets withheld, oversized text reduced by the tool's bands (and counted by the step
budget, which `_step_budget` does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import ModelRequest, ToolCallPart, ToolReturnPart

from .._actions._unit import with_notes
from ._step_budget import step_calls

__all__ = ('FAILURE_OUTCOMES', 'FailureReducer', 'reduce_failures')

FAILURE_OUTCOMES = ('retried', 'failed')
"""The outcomes of a tool return whose text the tool wrote about its own failure (`ModelRetry`, `ToolFailed`)."""

FailureReducer = Callable[[ToolCallPart, str], Awaitable[tuple[str, dict[str, Any]] | None]]
"""Makes a failure text fit: the new text and the metadata notes saying what was done, or `None` to keep it."""


async def reduce_failures(messages: Sequence[Any], reduce: FailureReducer) -> ModelRequest | None:
    """The last request with the failure texts of its tool calls replaced by what `reduce` makes of them.

    `None` when nothing changed, or when the last request does not answer tool calls.
    """
    found = step_calls(messages)
    if found is None:
        return None
    request, calls = found
    parts = list(request.parts)
    changed = False
    for index, part in enumerate(parts):
        if not isinstance(part, ToolReturnPart) or part.outcome not in FAILURE_OUTCOMES:
            continue
        if not isinstance(part.content, str) or part.tool_call_id not in calls:
            continue
        reduced = await reduce(calls[part.tool_call_id][1], part.content)
        if reduced is not None:
            text, notes = reduced
            parts[index] = replace(part, content=text, metadata=with_notes(part.metadata, notes))
            changed = True
    return replace(request, parts=parts) if changed else None
