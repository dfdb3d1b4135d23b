"""The transcript layer: plain-dict records, the summary text, parsing a summary back, and the wrappers.

Everything here works on transcript items (`dict[str, Any]` shaped like OpenAI Responses input items:
`{'role': 'user', 'content': 'hi'}`, `{'arguments': ..., 'type': 'function_call'}`), so the summary format stays the
OpenAI Agents SDK's (records in its key order; an assistant message as `assistant: <text>` where the SDK writes its JSON
item) and summaries written by either library are recognised by the other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any

from .._typing import is_object

__all__ = (
    'DEFAULT_END_WRAPPER',
    'DEFAULT_START_WRAPPER',
    'EMPTY_TRANSCRIPT_TEXT',
    'KNOWN_ROLES',
    'LEGACY_SUMMARY_PREAMBLE',
    'SUMMARY_ONLY_TYPES',
    'SUMMARY_PREAMBLE',
    'TranscriptItem',
    'build_summary_from_records',
    'build_summary_text',
    'dumps',
    'get_conversation_history_wrappers',
    'parse_summary_text',
    'render_item',
    'reset_conversation_history_wrappers',
    'set_conversation_history_wrappers',
)

TranscriptItem = dict[str, Any]
"""One record of a transcript: a role message (`{'role': ..., 'content': ...}`) or a typed item."""

DEFAULT_START_WRAPPER = '<CONVERSATION HISTORY>'
"""The line that opens the records of a summary, unless changed with `set_conversation_history_wrappers`."""

DEFAULT_END_WRAPPER = '</CONVERSATION HISTORY>'
"""The line that closes the records of a summary, unless changed with `set_conversation_history_wrappers`."""

SUMMARY_PREAMBLE = 'For context, here is the conversation so far between the user and the previous agent:'
"""The first line of every summary written."""

LEGACY_SUMMARY_PREAMBLE = 'For context, here is the conversation so far:'
"""An older first line, still recognised when a summary is parsed back."""

EMPTY_TRANSCRIPT_TEXT = '(no previous turns recorded)'
"""The single body line of a summary of an empty transcript."""

KNOWN_ROLES = frozenset({'user', 'assistant', 'system', 'developer'})
"""Roles a bare record (`user` without a colon) is recovered as."""

SUMMARY_ONLY_TYPES = frozenset({'function_call', 'function_call_output', 'reasoning'})
"""Typed items that are only ever summarized, never forwarded verbatim."""

_INTERNAL_KEYS = ('_agents_tool_description', '_agents_tool_title')
_PROVIDER_DATA = 'provider_data'

_wrappers: ContextVar[tuple[str, str]] = ContextVar(
    'pydantic_ai_harness_handoff_wrappers', default=(DEFAULT_START_WRAPPER, DEFAULT_END_WRAPPER)
)


def set_conversation_history_wrappers(*, start: str | None = None, end: str | None = None) -> None:
    """Change the lines that wrap the records of a nested-history summary.

    The wrappers are used both to write summaries and to recognise earlier ones when a history is nested again,
    so a summary written under other wrappers is no longer flattened: it is summarized as an ordinary record.

    The change applies to the current context (a `contextvars.ContextVar`): to the code that runs
    after it in this task or thread, and to the tasks it starts. Set it once at start-up, before the event loop
    starts, for a process-wide change; set it inside a task to change the wrappers of that task's delegations only,
    without affecting delegations running concurrently in other tasks.

    Args:
        start: The new opening line, or `None` to keep the current one.
        end: The new closing line, or `None` to keep the current one.
    """
    current_start, current_end = _wrappers.get()
    _wrappers.set((current_start if start is None else start, current_end if end is None else end))


def reset_conversation_history_wrappers() -> None:
    """Restore the default wrappers, `<CONVERSATION HISTORY>` and `</CONVERSATION HISTORY>`, in the current context."""
    _wrappers.set((DEFAULT_START_WRAPPER, DEFAULT_END_WRAPPER))


def get_conversation_history_wrappers() -> tuple[str, str]:
    """Return the `(start, end)` wrappers in effect in the current context."""
    return _wrappers.get()


def _without_internal_keys(item: TranscriptItem) -> TranscriptItem:
    if '_agents_tool_description' in item or '_agents_tool_title' in item:
        return {key: value for key, value in item.items() if key not in _INTERNAL_KEYS}
    return item


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
_COMMON_PREFIX = 'For context, here is the conversation so far'


def dumps(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, default=str)`, with one shared encoder."""
    return _ENCODER.encode(value)


def _legacy_role_line(role: str, name: Any, content_text: str) -> str:
    if isinstance(name, str) and name:
        return f'{role} ({name}): {content_text}'
    return f'{role}: {content_text}'


def render_item(item: TranscriptItem) -> str:
    """Render one transcript item as a single summary record (without its number).

    A role message whose content is `None` or a one-line string is written as `role: content` (or
    `role (name): content`); everything else is written as compact-looking JSON on one line.

    Args:
        item: The transcript item.

    Returns:
        The record text.
    """
    item = _without_internal_keys(item)
    role = item.get('role')
    content = item.get('content')
    if isinstance(role, str) and (
        content is None or (isinstance(content, str) and '\n' not in content and '\r' not in content)
    ):
        return _legacy_role_line(role, item.get('name'), content or '')
    payload = {key: value for key, value in item.items() if key != _PROVIDER_DATA} if _PROVIDER_DATA in item else item
    try:
        return dumps(payload)
    except (TypeError, ValueError):
        return _render_fallback(item)


def _render_fallback(item: TranscriptItem) -> str:
    role = item.get('role')
    if isinstance(role, str):
        content = item.get('content')
        if isinstance(content, str):
            text = content
        else:
            try:
                text = dumps(content)
            except (TypeError, ValueError):
                text = str(content)
        return _legacy_role_line(role, item.get('name'), text)
    rest = {key: value for key, value in item.items() if key not in ('type', _PROVIDER_DATA)}
    try:
        rest_text = dumps(rest)
    except (TypeError, ValueError):
        rest_text = str(rest)
    return f'{item.get("type") or "item"}: {rest_text}'


def build_summary_text(items: Iterable[TranscriptItem], *, wrappers: tuple[str, str] | None = None) -> str:
    """Build the text of one summary message: preamble, start wrapper, numbered records, end wrapper.

    Args:
        items: The transcript, in chronological order.
        wrappers: The `(start, end)` wrappers to use; the ones in effect in the current context by default.

    Returns:
        The summary text, one line per entry, joined with newlines, no trailing newline.
    """
    return build_summary_from_records([render_item(item) for item in items], wrappers=wrappers)


def build_summary_from_records(records: Sequence[str], *, wrappers: tuple[str, str] | None = None) -> str:
    """`build_summary_text` from already rendered records, numbered from 1."""
    start, end = wrappers or _wrappers.get()
    lines = [SUMMARY_PREAMBLE, start]
    lines.extend(f'{number}. {record}' for number, record in enumerate(records, 1))
    if not records:
        lines.append(EMPTY_TRANSCRIPT_TEXT)
    lines.append(end)
    return '\n'.join(lines)


def _summary_body(text: str, wrappers: tuple[str, str]) -> str | None:
    first, newline, rest = text.partition('\n')
    if not newline or first not in (SUMMARY_PREAMBLE, LEGACY_SUMMARY_PREAMBLE):
        return None
    start, end = wrappers
    opening, closing = start + '\n', '\n' + end
    if not rest.startswith(opening) or not rest.endswith(closing):
        return None
    if len(rest) < len(opening) + len(closing):
        return ''  # the opening and closing share their newline: an empty body
    return rest[len(opening) : len(rest) - len(closing)]


def _is_numbered(line: str) -> bool:
    head, dot, _ = line.lstrip().partition('.')
    return bool(dot) and head.isdigit()


def _split_records(body: str) -> list[str]:
    # Each record collects its lines in a list joined once at the end: appending to a growing string would copy
    # the record again for every continuation line, quadratic in the record's length.
    records: list[list[str]] = []
    current_numbered = False
    for line in body.split('\n'):
        if not line.strip():
            continue
        numbered = _is_numbered(line)
        if records and not numbered and current_numbered:
            records[-1].append(line.rstrip())
            continue
        records.append([line.strip()])
        current_numbered = numbered
    return ['\n'.join(lines) for lines in records]


def _split_role_and_name(role_text: str) -> tuple[str, str | None]:
    if role_text.endswith(')') and '(' in role_text:
        opening = role_text.index('(')
        role = role_text[:opening].strip()
        name = role_text[opening + 1 : -1].strip()
        return role, (name or None)
    return role_text, None


def _role_item(role: str, name: str | None, content: str) -> TranscriptItem:
    item: TranscriptItem = {'role': role}
    if name is not None:
        item['name'] = name
    item['content'] = content
    return item


def _json_object(text: str) -> TranscriptItem | None:
    if not text.startswith('{'):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # `RecursionError`: arrays or objects nested deeper than the decoder goes
        return None
    return value if is_object(value) else None


def _parse_record(record: str) -> TranscriptItem | None:
    text = record.strip()
    if _is_numbered(text):
        text = text.lstrip().partition('.')[2].lstrip()
    parsed = _json_object(text)
    if parsed is not None:
        return {key: value for key, value in parsed.items() if key != _PROVIDER_DATA and key not in _INTERNAL_KEYS}
    role_text, colon, content = text.partition(':')
    role_text = role_text.strip()
    if not colon:
        role, name = _split_role_and_name(role_text)
        return _role_item(role, name, '') if role in KNOWN_ROLES else None
    if not role_text:
        return None
    role, name = _split_role_and_name(role_text)
    role = role or 'developer'
    content = content.strip()
    if content and role not in KNOWN_ROLES:
        typed = _json_object(content)
        if typed is not None:
            typed['type'] = role_text
            return typed
    return _role_item(role, name, content)


def parse_summary_text(text: str, *, wrappers: tuple[str, str] | None = None) -> list[TranscriptItem] | None:
    """Parse a summary written by `build_summary_text` (or by the OpenAI Agents SDK) back into its records.

    Lines are split on newline characters only (the OpenAI Agents SDK also splits on other Unicode line breaks).

    Args:
        text: The candidate summary text.
        wrappers: The `(start, end)` wrappers to recognise; the ones in effect in the current context by default.

    Returns:
        The records in order, or `None` when `text` is not a summary written with the given wrappers.
    """
    body = _summary_body(text, wrappers or _wrappers.get())
    if body is None:
        return None
    items: list[TranscriptItem] = []
    for record in _split_records(body):
        item = _parse_record(record)
        if item is not None:
            items.append(item)
    return items


def is_summary_candidate(text: str) -> bool:
    """A cheap first check: could `text` be a summary (does it start like a preamble)?"""
    return text.startswith(_COMMON_PREFIX)


def summary_records_of(item: TranscriptItem, wrappers: tuple[str, str]) -> list[TranscriptItem] | None:
    """Return the records of `item` when it is a generated summary (an assistant message), else `None`."""
    content = item.get('content')
    if item.get('role') != 'assistant' or not isinstance(content, str) or not content.startswith(_COMMON_PREFIX):
        return None
    return parse_summary_text(content, wrappers=wrappers)


def flatten_summaries(items: Sequence[TranscriptItem], wrappers: tuple[str, str]) -> list[TranscriptItem]:
    """Replace every generated summary in `items` by its records, in place; strip internal keys from the rest."""
    flattened: list[TranscriptItem] = []
    for item in items:
        records = summary_records_of(item, wrappers)
        if records is None:
            flattened.append(_without_internal_keys(item))
        else:
            flattened.extend(records)
    return flattened
