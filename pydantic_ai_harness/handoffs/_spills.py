"""Spilled tool outputs across a delegation, and records too long for a summary.

The delegate inherits the delegating agent's `OverflowingToolOutput` (its store and its query tools) unless it has its
own, so every handle its history mentions can be paged. When it cannot be (the delegate reduces into another store,
or nobody can), the tool return says so plainly instead of pointing at tools that are not there.

A record longer than the summary's cap is cut (see `_long_records`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any, TypeGuard

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolReturnPart, UserPromptPart

from .._typing import is_items, is_object
from ..overflowing_tool_output import OverflowingToolOutput
from ..overflowing_tool_output._events import CONTENT_PREFIX, VALUE_PREFIX, file_handles
from ..overflowing_tool_output._query_tools._names import offered_names
from ._cut import with_content
from ._parts import Part, answers_tool_calls, rewrap
from ._transcript import (
    build_summary_from_records,
    get_conversation_history_wrappers,
    is_summary_candidate,
    parse_summary_text,
    render_item,
)

__all__ = (
    'agent_overflow',
    'find_overflow',
    'inherited_overflow',
    'mark_unreadable_spills',
    'metadata_handles',
    'readable_here',
    'spill_handles',
)

_inherited: ContextVar[OverflowingToolOutput | None] = ContextVar(
    'pydantic_ai_harness_inherited_overflow', default=None
)


def inherited_overflow() -> ContextVar[OverflowingToolOutput | None]:
    """The `OverflowingToolOutput` a delegation in progress runs its delegate with, for the delegations it makes."""
    return _inherited


def _is_capability(value: object) -> TypeGuard[AbstractCapability[Any]]:
    return isinstance(value, AbstractCapability)


def find_overflow(capabilities: Iterable[Any]) -> OverflowingToolOutput | None:
    """The first `OverflowingToolOutput` among `capabilities` and the capabilities they hold."""
    found: list[OverflowingToolOutput] = []

    def visit(capability: AbstractCapability[Any]) -> None:
        if isinstance(capability, OverflowingToolOutput) and not found:
            found.append(capability)

    for capability in capabilities:
        if _is_capability(capability):
            capability.apply(visit)
    return found[0] if found else None


def agent_overflow(agent: object, run_capabilities: Any = None) -> OverflowingToolOutput | None:
    """The `OverflowingToolOutput` of an agent (or given to its run with `capabilities=`), if any."""
    candidates: list[Any] = []
    root = getattr(agent, 'root_capability', None)
    if root is not None:
        candidates.append(root)
    if is_items(run_capabilities):
        candidates.extend(run_capabilities)
    return find_overflow(candidates)


def spill_handles(part: ToolReturnPart) -> list[str]:
    """The handles `OverflowingToolOutput` recorded in a tool return's metadata (return value and content)."""
    return metadata_handles(part.metadata)


def metadata_handles(metadata: object) -> list[str]:
    """The handles `OverflowingToolOutput` recorded in `metadata` (a tool return's, or a recorded answer's)."""
    if not is_object(metadata):
        return []
    handles = [
        v
        for k, v in metadata.items()
        if isinstance(v, str) and str(k).startswith('overflow') and str(k).endswith('_handle')
    ]
    # Each document of a list stored one by one (`<prefix>_handle` names the first of them only).
    documents = [h for prefix in (VALUE_PREFIX, CONTENT_PREFIX) for h, _ in file_handles(metadata, prefix)]
    handles += [handle for handle in documents if isinstance(handle, str)]
    return list(dict.fromkeys(handles))  # an aged spill names its handle twice (`overflow_handle`, `_aged_handle`)


def readable_here(effective: OverflowingToolOutput | None, source: OverflowingToolOutput | None) -> bool:
    """Whether a delegate reducing with `effective` can page the spills `source` made (the same store)."""
    if effective is None:
        return False
    if source is None or effective is source:
        return True
    return effective.store is not None and effective.store is source.store


def _unreadable_note(handles: Sequence[str]) -> str:
    quoted = ', '.join(f"'{handle}'" for handle in handles)
    names = offered_names()
    return (
        f'\n[Note: the full output saved under {quoted} cannot be read by this agent: it has no {names.read} or '
        f'{names.grep} over the store it is in. Work from the preview above, or ask the agent that handed over.]'
    )


_HANDLE_MENTION = re.compile(
    r'(?:Saved in full|Saved verbatim|The full original is saved|the full record is saved)(?: for \d+ \w+)? '
    r"under handle '([^'\n]+)'"
    r'|under handle "([^"\n]+)"'
)
"""How a spill preview, a binary spill, a summary marker, an aged return's stub and a cut record name their handle
(with how long a store that expires payloads keeps it: "for 7 days"); earlier releases quoted it in double quotes. Only these texts of the capability's own: any other text may name a "handle"."""

_NOTE_START = '\n[Note: the full output saved under '


def _mark_summary(text: str, wrappers: tuple[str, str]) -> str | None:
    """A summary's text with every record that names a handle saying it cannot be read here; `None` if unchanged."""
    if not is_summary_candidate(text):
        return None
    items = parse_summary_text(text, wrappers=wrappers)
    if items is None:
        return None
    changed = False
    for item in items:
        output = item.get('output')
        if (
            isinstance(output, str)
            and _NOTE_START not in output
            and (handles := [a or b for a, b in _HANDLE_MENTION.findall(output)])
        ):
            item['output'] = output + _unreadable_note(list(dict.fromkeys(handles)))
            changed = True
    return build_summary_from_records([render_item(item) for item in items], wrappers=wrappers) if changed else None


def _summary_part(message: ModelMessage, part: Part) -> bool:
    """Whether `part` may be a summary: assistant text, or a user prompt that is not tool output."""
    if isinstance(part, TextPart):
        return True
    return isinstance(part, UserPromptPart) and isinstance(part.content, str) and not answers_tool_calls(message)


_NAMES_A_HANDLE = 'under handle '
"""What every text `_HANDLE_MENTION` matches holds: a text without it names no handle, and needs no parsing."""


def _may_need_a_note(message: ModelMessage) -> bool:
    """A cheap first check (no parsing, no rendering): whether `message` holds a tool return with metadata (where
    spills record their handles), is a response whose metadata names a handle (an answer `Handoffs` recorded and
    the capability spilled), or holds a text that starts like a summary and names a handle.
    """
    if isinstance(message, ModelResponse) and message.metadata and metadata_handles(message.metadata):
        return True
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            if part.metadata:
                return True
            continue
        content = getattr(part, 'content', None)
        if isinstance(content, str) and is_summary_candidate(content) and _NAMES_A_HANDLE in content:
            return True
    return False


def _with_marked_summaries(message: ModelMessage, wrappers: tuple[str, str]) -> ModelMessage:
    marked: list[Part] = []
    changed = False
    for part in message.parts:
        content = getattr(part, 'content', None)
        if isinstance(content, str) and _summary_part(message, part):
            text = _mark_summary(content, wrappers)
            if text is not None:
                marked.append(dataclasses.replace(part, content=text))
                changed = True
                continue
        marked.append(part)
    return rewrap(message, marked) if changed else message


def _with_marked_returns(message: ModelRequest) -> ModelMessage:
    if not any(isinstance(part, ToolReturnPart) and spill_handles(part) for part in message.parts):
        return message
    parts: list[Part] = []
    for part in message.parts:
        text = part.model_response_str(wrap_if_error=False) if isinstance(part, ToolReturnPart) else ''
        if isinstance(part, ToolReturnPart) and (handles := spill_handles(part)) and _NOTE_START not in text:
            parts.append(with_content(part, text + _unreadable_note(handles)))
        else:
            parts.append(part)
    return rewrap(message, parts)


def _with_marked_answer(message: ModelResponse) -> ModelMessage:
    """A recorded answer the capability spilled: its text names the handle, and now says it cannot be read."""
    handles = metadata_handles(message.metadata)
    if not handles:
        return message
    parts: list[Part] = []
    changed = False
    for part in message.parts:
        if isinstance(part, TextPart) and _NOTE_START not in part.content and any(h in part.content for h in handles):
            parts.append(dataclasses.replace(part, content=part.content + _unreadable_note(handles)))
            changed = True
        else:
            parts.append(part)
    return rewrap(message, parts) if changed else message


def mark_unreadable_spills(messages: Sequence[ModelMessage]) -> tuple[ModelMessage, ...]:
    """`messages` with every spilled tool return, every spilled answer `Handoffs` recorded, and every summarized
    spill an earlier hop left in a summary, saying plainly that its handle cannot be read by the delegate.

    A message that names no handle is kept as it is, after a check that parses and renders nothing.
    """
    wrappers = get_conversation_history_wrappers()
    result: list[ModelMessage] = []
    for message in messages:
        if _may_need_a_note(message):
            message = _with_marked_summaries(message, wrappers)
            if isinstance(message, ModelRequest):
                message = _with_marked_returns(message)
            else:
                message = _with_marked_answer(message)
        result.append(message)
    return tuple(result)
