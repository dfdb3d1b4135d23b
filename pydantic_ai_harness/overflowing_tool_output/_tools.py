"""The tools the model pages through stored results with: `read_tool_result` and `grep_tool_result`.

Argument mistakes raise `ModelRetry` with a precise message; an unknown or expired handle, or a store
that fails, returns guidance text instead (no retry burned). Every scan has a time budget, regexes
run on RE2 (linear time), and every output is capped in lines and characters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import anyio
from pydantic_ai import FunctionToolset, ModelRetry, RunContext
from pydantic_ai.exceptions import UserError

from ._handles import KnownHandle, known_handles, near_misses, unknown_handle_answer
from ._json_query_tool import PATH_QUERY_SECONDS, build_path_query
from ._query import (
    GrepResult,
    Hit,
    Line,
    Matcher,
    PatternError,
    Payload,
    grep_bytes,
    grep_lines,
    grep_lines_backward,
    hex_dump,
    line_of_offset,
    open_payload,
    read_byte_window,
    read_lines,
    read_lines_at,
    sniff_type,
)
from .stores._paths import is_short_handle
from .stores._protocol import HandleNotFoundError, OverflowStore, RangeReadableStore

__all__ = ('QUERY_TOOLSET_ID', 'QUERY_TOOL_NAMES', 'QueryLimits', 'build_query_toolset')

QUERY_TOOLSET_ID = 'overflowing_tool_output_query'
"""The id of the query toolset (durable execution engines need one)."""

QUERY_TOOL_NAMES = frozenset({'read_tool_result', 'grep_tool_result'})
"""The names of the query tools, which the capability exempts from reduction."""

_HEX_ROW_CHARS = 80
_FRAME_RESERVE = 600
"""Characters kept free for the header and footer when fitting lines into the output cap."""


_DEFAULT_LIMIT = 200
"""`read_tool_result`'s default `limit`: a paging hint repeats any other limit the model chose."""


@dataclass(frozen=True)
class QueryLimits:
    """Caps that keep every query tool answer small and fast, whatever the arguments."""

    max_lines: int = 1000
    """Most lines one `read_tool_result` call returns (`limit` is clamped to it)."""

    max_line_chars: int = 1000
    """Longer lines are cut, with a marker saying how to read the rest."""

    max_output_chars: int = 20_000
    """Most characters in one answer."""

    max_bytes: int = 16_000
    """Most bytes one `unit='bytes'` read returns."""

    max_matches: int = 100
    """Most matching lines one `grep_tool_result` call shows."""

    max_context_lines: int = 10
    """Most context lines around each grep match."""

    max_pattern_chars: int = 1000
    """Longest accepted pattern."""

    time_budget: float = 0.5
    """Seconds a scan may run before it stops and reports how far it got."""

    store_timeout: float = 10.0
    """Seconds one tool call may wait on the store in all; past it the model is told to try again later."""


_READ_DOC = (
    "Read a stored tool output. offset: first line shown, from 1 (from_end: counted back; unit='bytes': first byte); "
    "pattern keeps lines containing it; path queries JSON ($.data[?@.status=='stuck'].id)."
)
"""The clamps (`QueryLimits`) are left out: an answer that was clamped says so, which costs nothing until then."""

_GREP_DOC = (
    'Find lines in a stored tool output, with context and their total. '
    "Literal unless is_regex (RE2: '(?i)error|fail'); offset: first line searched."
)


def _show(text: str, limit: int = 120) -> str:
    """A quoted, escaped, bounded rendering of a model-supplied string."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + '...'


def _count(number: int, noun: str) -> str:
    return f'{number} {noun}' if number == 1 else f'{number} {noun}s'


def _conversation_handles(ctx: RunContext[Any]) -> list[KnownHandle]:
    """The handles the run's messages carry; none where the context holds no messages (a Temporal activity's)."""
    try:
        messages = ctx.messages
    except UserError:
        return []
    return known_handles(messages)


def _clean_handle(handle: str) -> str:
    # Models sometimes wrap a handle in quotes or backticks; no valid handle starts or ends with them.
    return handle.strip().strip('`\'"').strip()


def _unknown_handle(handle: str) -> str:
    return unknown_handle_answer(_show(handle), [])


@dataclass(frozen=True)
class _Resolution:
    """Which handle a tool call reads: `handle` (with a `note` when it was a near miss), or `answer` instead."""

    handle: str = ''
    note: str = ''
    answer: str = ''


async def _exists(store: OverflowStore, handle: str) -> bool:
    """Whether `store` holds `handle`; a storage error counts as yes (the read that follows reports it)."""
    try:
        if isinstance(store, RangeReadableStore):
            await store.size(handle)
        else:
            await store.read(handle)
    except (HandleNotFoundError, KeyError, FileNotFoundError):
        return False
    except Exception:  # noqa: BLE001 - reported by the read itself
        return True
    return True


async def _resolve(store: OverflowStore, raw_handle: str, known: list[KnownHandle]) -> _Resolution:
    """The handle the model meant, from the handles its conversation was shown (never a listing of the store).

    A handle the conversation was shown is read as it is. Else the store is asked; when it has nothing, an
    unambiguous near miss (wrapping, letter case, a dropped or added prefix, the full form of a short handle or
    the other way round) is read with a one-line note, and anything else gets the list of the handles that exist.
    """
    handle = _clean_handle(raw_handle)
    if any(item.handle == raw_handle for item in known):
        return _Resolution(raw_handle)  # the common case: no store call before the read itself
    by_key = [item for item in known if item.key is not None and handle == item.key]
    if len(by_key) > 1:  # one key, several payloads (a reused tool call id): only the short handles tell them apart
        return _Resolution(answer=unknown_handle_answer(_show(handle), by_key, ambiguous=True))
    if by_key:
        return _Resolution(by_key[0].handle, _resolved_note(raw_handle, by_key[0].handle))
    if handle and await _exists(store, handle):
        return _Resolution(handle, _resolved_note(raw_handle, handle) if handle != raw_handle else '')
    if handle and is_short_handle(handle.lower()) and await _exists(store, handle.lower()):
        return _Resolution(handle.lower(), _resolved_note(raw_handle, handle.lower()))
    matches = near_misses(raw_handle, known)
    if len(matches) == 1:
        return _Resolution(matches[0].handle, _resolved_note(raw_handle, matches[0].handle))
    shown = _show(handle or raw_handle)
    return _Resolution(answer=unknown_handle_answer(shown, matches or known, ambiguous=len(matches) > 1))


def _resolved_note(given: str, meant: str) -> str:
    return f'(Read {_show(given)} as the handle {meant!r}.)\n'


async def _resolved_answer(
    store: OverflowStore, raw_handle: str, known: list[KnownHandle], answer: Callable[[str], Awaitable[str]]
) -> str:
    resolution = await _resolve(store, raw_handle, known)
    if resolution.answer:
        return resolution.answer
    return resolution.note + await answer(resolution.handle)


async def _guarded(answer: Awaitable[str], handle: str) -> str:
    """`answer`, or the storage-error guidance when the store fails underneath it (a retry prompt passes through)."""
    try:
        return await answer
    except ModelRetry:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return _storage_error(handle, exc)


def _storage_error(handle: str, exc: BaseException) -> str:
    # The exception type only: a message could contain paths or other details the model must not see.
    return (
        f'The stored result {_show(handle)} could not be read right now (storage error: {type(exc).__name__}). '
        'Try again later, or call the original tool again.'
    )


async def _within_store_timeout(answer: Awaitable[str], handle: str, seconds: float) -> str:
    """Await a tool's answer, or tell the model the store did not answer in time."""
    deadline: anyio.CancelScope | None = None
    try:
        with anyio.fail_after(seconds) as deadline:
            return await answer
    except TimeoutError as exc:
        if deadline is None or not deadline.cancel_called:
            return _storage_error(_clean_handle(handle), exc)  # the store's own timeout, not ours
        return (
            f'The stored result {_show(handle)} could not be read right now (the storage did not answer within '
            f'{seconds:g} s). Try again later, or call the original tool again.'
        )


def _check_pattern(pattern: str, limits: QueryLimits) -> None:
    if '\n' in pattern:
        raise ModelRetry(
            'pattern must not contain a newline: lines are matched one at a time. Search for one line of the text.'
        )
    if len(pattern) > limits.max_pattern_chars:
        raise ModelRetry(f'pattern is {len(pattern)} characters long; the limit is {limits.max_pattern_chars}.')


def _number_width(lines: list[Line]) -> int:
    return len(str(lines[-1].number)) if lines else 1


def _render_line(line: Line, width: int, mark: str = '') -> str:
    text = f'{mark}{line.number:>{width}}| {line.text}'
    if line.cut:
        remaining = line.length - line.shown_bytes
        text += (
            f"... [line cut: {remaining} more bytes; read them with unit='bytes', "
            f'offset={line.start + line.shown_bytes}]'
        )
    return text


_GROUP_LABEL_RESERVE = 120
"""Characters kept for a group's label line (`-- matches at lines ... --`), which `_group_label` stays within."""


_LINES_BEFORE = 5
"""A suggested read starts this many lines above a match, so the context leading to it comes in the same call."""


def _group_label(hits: list[Hit]) -> str:
    """The line above a group of matches: where they are, and the offset to read on from the first."""
    if len(hits) == 1:
        where = f'match at line {hits[0].line}'
    elif len(hits) <= 5:
        where = f'matches at lines {", ".join(str(hit.line) for hit in hits)}'
    else:
        where = f'{len(hits)} matches at lines {hits[0].line}-{hits[-1].line}'
    return f'-- {where} (read around it: offset={max(1, hits[0].line - _LINES_BEFORE)}) --'


def _fit(rendered: list[str], budget: int, *, keep_tail: bool) -> int:
    """How many of `rendered` fit in `budget` characters (from the head, or from the tail)."""
    used = 0
    count = 0
    for text in reversed(rendered) if keep_tail else rendered:
        used += len(text) + 1
        if used > budget and count:
            break
        count += 1
    return count


def build_query_toolset(
    store: OverflowStore,
    *,
    limits: QueryLimits | None = None,
    route: Callable[[RunContext[Any], str], OverflowStore] | None = None,
) -> FunctionToolset[Any]:
    """The `read_tool_result` / `grep_tool_result` toolset over `store`.

    Works with any [`OverflowStore`][pydantic_ai_harness.overflowing_tool_output.OverflowStore]; stores
    that also implement the range and line-index extensions answer in O(window).

    Args:
        store: Where the stored results live.
        limits: Output and time caps (defaults: [`QueryLimits()`][pydantic_ai_harness.overflowing_tool_output.QueryLimits]).
        route: Picks the store for a handle in a run (e.g. the run's workspace for its own handles); default: `store`.
    """
    caps = limits or QueryLimits()
    if route is not None:
        return _routed_toolset(route, caps)

    # Without a run context the tools know no conversation: an unknown handle is resolved against the store only.
    query_one = build_path_query(partial(_open, store), caps.store_timeout)

    async def read_tool_result(
        handle: str,
        offset: int = 0,
        limit: int = _DEFAULT_LIMIT,
        from_end: bool = False,
        pattern: str = '',
        unit: Literal['lines', 'bytes'] = 'lines',
        path: str = '',
    ) -> str:
        matches = _path_matches(path, offset, limit, from_end, pattern, unit)

        def read(meant: str) -> Awaitable[str]:
            if matches:
                return _guarded(query_one(meant, path, matches), meant)
            return _read_tool_result(store, caps, meant, offset, limit, from_end, pattern, unit)

        seconds = _read_seconds(caps, matches)
        return await _within_store_timeout(_resolved_answer(store, handle, [], read), handle, seconds)

    async def grep_tool_result(
        handle: str,
        pattern: str,
        context_lines: int = 2,
        max_matches: int = 20,
        is_regex: bool = False,
        offset: int = 0,
    ) -> str:
        def grep(meant: str) -> Awaitable[str]:
            return _grep_tool_result(store, caps, meant, pattern, context_lines, max_matches, is_regex, offset)

        return await _within_store_timeout(_resolved_answer(store, handle, [], grep), handle, caps.store_timeout)

    read_tool_result.__doc__ = _READ_DOC
    grep_tool_result.__doc__ = _GREP_DOC
    # Generous retries: a model that keeps passing a bad argument gets the precise error several times
    # before the run gives up.
    return FunctionToolset([read_tool_result, grep_tool_result], id=QUERY_TOOLSET_ID, max_retries=5)


def _read_seconds(caps: QueryLimits, path_matches: int) -> float:
    """How long one read may take in all: the store's timeout, plus, for a path query, the query's own time budget
    (a query that runs out of it answers with what it found; the store timeout alone would lose that answer).
    """
    return caps.store_timeout + (PATH_QUERY_SECONDS if path_matches else 0.0)


_DEFAULT_PATH_MATCHES = 20
"""Matches a path query lists when `limit` is left at its default (the line default would flood the answer)."""


def _path_matches(path: str, offset: int, limit: int, from_end: bool, pattern: str, unit: str) -> int:
    """How many matches a `path` query lists; 0 when there is no path (a plain read).

    Raises `ModelRetry` for arguments that only apply to reading lines or bytes.
    """
    if not path.strip():
        return 0
    if offset < 0:
        raise ModelRetry(f'offset must be 0 or more, got {offset}; with path, leave it out.')
    ignored = [
        name
        for name, given in (
            ('offset', offset not in (0, 1)),
            ('from_end', from_end),
            ('pattern', pattern != ''),
            ('unit', unit != 'lines'),
        )
        if given
    ]
    if ignored:
        raise ModelRetry(
            f'path selects JSON values, so {", ".join(ignored)} cannot be combined with it: pass path (and limit, '
            'the most matches to list) alone.'
        )
    if limit < 1:
        raise ModelRetry(f'limit must be 1 or more, got {limit}.')
    return _DEFAULT_PATH_MATCHES if limit == _DEFAULT_LIMIT else limit


def _routed_toolset(route: Callable[[RunContext[Any], str], OverflowStore], caps: QueryLimits) -> FunctionToolset[Any]:
    """The same tools (names, arguments, descriptions), reading each handle from the store `route` picks in the run."""

    async def read_tool_result(
        ctx: RunContext[Any],
        handle: str,
        offset: int = 0,
        limit: int = _DEFAULT_LIMIT,
        from_end: bool = False,
        pattern: str = '',
        unit: Literal['lines', 'bytes'] = 'lines',
        path: str = '',
    ) -> str:
        matches = _path_matches(path, offset, limit, from_end, pattern, unit)
        store = route(ctx, _clean_handle(handle))

        def read(meant: str) -> Awaitable[str]:
            if matches:
                query = build_path_query(partial(_open, route(ctx, meant)), caps.store_timeout)
                return _guarded(query(meant, path, matches), meant)
            return _read_tool_result(route(ctx, meant), caps, meant, offset, limit, from_end, pattern, unit)

        answer = _resolved_answer(store, handle, _conversation_handles(ctx), read)
        return await _within_store_timeout(answer, handle, _read_seconds(caps, matches))

    async def grep_tool_result(
        ctx: RunContext[Any],
        handle: str,
        pattern: str,
        context_lines: int = 2,
        max_matches: int = 20,
        is_regex: bool = False,
        offset: int = 0,
    ) -> str:
        store = route(ctx, _clean_handle(handle))

        def grep(meant: str) -> Awaitable[str]:
            store = route(ctx, meant)
            return _grep_tool_result(store, caps, meant, pattern, context_lines, max_matches, is_regex, offset)

        answer = _resolved_answer(store, handle, _conversation_handles(ctx), grep)
        return await _within_store_timeout(answer, handle, caps.store_timeout)

    read_tool_result.__doc__ = _READ_DOC
    grep_tool_result.__doc__ = _GREP_DOC
    return FunctionToolset([read_tool_result, grep_tool_result], id=QUERY_TOOLSET_ID, max_retries=5)


async def _read_tool_result(
    store: OverflowStore,
    caps: QueryLimits,
    handle: str,
    offset: int = 0,
    limit: int = _DEFAULT_LIMIT,
    from_end: bool = False,
    pattern: str | None = None,
    unit: Literal['lines', 'bytes'] = 'lines',
) -> str:
    if offset < 0:
        raise ModelRetry(
            f'offset must be 0 or more (the line to start at, 1-based; use from_end=True to count from the end), '
            f'got {offset}.'
        )
    if limit < 1:
        raise ModelRetry(f'limit must be 1 or more, got {limit}.')
    if pattern == '':
        pattern = None
    if pattern is not None:
        if unit == 'bytes':
            raise ModelRetry("pattern filters lines, so it cannot be combined with unit='bytes'.")
        _check_pattern(pattern, caps)
    payload = await _open(store, handle)
    if isinstance(payload, str):
        return payload
    try:
        if payload.size == 0:
            return f'The stored result {_show(payload.handle)} is empty (0 bytes).'
        if payload.index.is_binary:
            if pattern is not None:
                raise ModelRetry(
                    f'The stored result {_show(payload.handle)} is binary, so it has no lines to filter. '
                    'Use grep_tool_result to find bytes in it, or read it without pattern (a hex dump).'
                )
            return await _read_hex(payload, offset, limit, from_end, unit, caps)
        if unit == 'bytes':
            return await _read_text_bytes(payload, offset, limit, from_end, caps)
        # Lines are numbered from 1 and `offset` is the number of the first line shown, so any number the model
        # was shown can be passed back as it is (0 and 1 both mean the start). From the end it counts lines back.
        skip = offset if from_end else max(offset - 1, 0)
        if pattern is not None:
            return await _read_matching(payload, pattern, skip, limit, from_end, caps)
        return await _read_window(payload, skip, limit, from_end, caps)
    except ModelRetry:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return _storage_error(payload.handle, exc)


async def _grep_tool_result(
    store: OverflowStore,
    caps: QueryLimits,
    handle: str,
    pattern: str,
    context_lines: int = 2,
    max_matches: int = 20,
    is_regex: bool = False,
    offset: int = 0,
) -> str:
    if offset < 0:
        raise ModelRetry(f'offset must be 0 or more (the line to start searching at, 1-based), got {offset}.')
    if not pattern:
        raise ModelRetry('pattern must not be empty: pass the text (or regex, with is_regex=True) to search for.')
    _check_pattern(pattern, caps)
    if context_lines < 0:
        raise ModelRetry(f'context_lines must be 0 or more, got {context_lines}.')
    if max_matches < 1:
        raise ModelRetry(f'max_matches must be 1 or more, got {max_matches}.')
    notes: list[str] = []
    if context_lines > caps.max_context_lines:
        notes.append(f'context_lines capped at {caps.max_context_lines}')
        context_lines = caps.max_context_lines
    if max_matches > caps.max_matches:
        notes.append(f'max_matches capped at {caps.max_matches}')
        max_matches = caps.max_matches
    try:
        matcher = Matcher.compile(pattern, is_regex=is_regex)
    except PatternError as exc:
        raise ModelRetry(
            f'pattern {_show(pattern)} is not a valid regular expression: {exc}. The syntax is RE2 (Python re '
            'without lookaround or backreferences); or pass is_regex=False to search for the text literally.'
        ) from None
    payload = await _open(store, handle)
    if isinstance(payload, str):
        return payload
    try:
        if payload.size == 0:
            return f'The stored result {_show(payload.handle)} is empty (0 bytes): nothing to search.'
        deadline = time.monotonic() + caps.time_budget
        search = _GrepCall(payload.handle, pattern, is_regex, context_lines, max_matches)
        if payload.index.is_binary:
            if offset >= payload.size:
                return f'offset={offset} is past the end: the binary stored result {_show(payload.handle)} has {payload.size} bytes.'
            result = await grep_bytes(payload, matcher, max_hits=max_matches, deadline=deadline, start=offset)
            return await _render_binary_grep(payload, search, result, notes, offset)
        total_lines = payload.index.line_count
        skip = max(offset - 1, 0)
        if skip >= total_lines:
            return (
                f'offset={offset} is past the end: the stored result {_show(payload.handle)} has {total_lines} lines, '
                'so there is nothing more to search.'
            )
        result = await grep_lines(payload, matcher, first_line=skip, max_hits=max_matches, deadline=deadline)
        return await _render_grep(payload, search, result, notes, caps, skip)
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return _storage_error(payload.handle, exc)


async def _open(store: OverflowStore, raw_handle: str) -> Payload | str:
    handle = _clean_handle(raw_handle)
    if not handle:
        return _unknown_handle(raw_handle)
    try:
        return await open_payload(store, handle)
    except (HandleNotFoundError, KeyError, FileNotFoundError):
        return _unknown_handle(handle)
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return _storage_error(handle, exc)


def _call(handle: str, **arguments: object) -> str:
    rendered = ', '.join(f'{name}={value!r}' for name, value in arguments.items())
    return f'read_tool_result(handle={handle!r}, {rendered})'


def _same_limit(limit: int) -> dict[str, int]:
    """The `limit` argument a paging hint carries so the next page is as long as this one asked for."""
    return {} if limit == _DEFAULT_LIMIT else {'limit': limit}


async def _read_window(payload: Payload, offset: int, limit: int, from_end: bool, caps: QueryLimits) -> str:
    handle = payload.handle
    total = payload.index.line_count
    notes: list[str] = []
    if limit > caps.max_lines:
        notes.append(f'limit capped at {caps.max_lines} lines')
        limit = caps.max_lines
    if offset >= total:
        side = 'from the end ' if from_end else ''
        return (
            f'offset={offset if from_end else offset + 1} {side}is past the end: the stored result {_show(handle)} has '
            f'{total} lines. '
            + (f'Use an offset from 0 to {total - 1}.' if from_end else 'Use from_end=True to read the last lines.')
        )
    if from_end:
        end = total - offset
        first = max(0, end - limit)
    else:
        first = offset
        end = min(total, offset + limit)
    lines = await read_lines(payload, first, end - first, caps.max_line_chars)
    if not lines:  # pragma: no cover - only with an index that does not match its payload
        return f'The stored result {_show(handle)} could not be read at offset {offset}.'
    width = _number_width(lines)
    rendered = [_render_line(line, width) for line in lines]
    fitted = _fit(rendered, caps.max_output_chars - _FRAME_RESERVE, keep_tail=from_end)
    if fitted < len(lines):
        notes.append(f'output capped at {caps.max_output_chars} characters')
        if from_end:
            lines, rendered = lines[-fitted:], rendered[-fitted:]
        else:
            lines, rendered = lines[:fitted], rendered[:fitted]
    first_shown, last_shown = lines[0].number, lines[-1].number
    which = 'last lines' if from_end and last_shown == total else 'lines'
    header = f'Stored result {_show(handle)}: {which} {first_shown}-{last_shown} of {total} ({payload.size} bytes)'
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: list[str] = []
    if from_end:
        if first_shown > 1:
            footer.append(
                f'{first_shown - 1} earlier lines. Previous page: '
                f'{_call(handle, offset=total - first_shown + 1, from_end=True, **_same_limit(limit))}.'
            )
        else:
            footer.append('This is the start of the result.')
        if last_shown < total:
            footer.append(
                f'{total - last_shown} later lines: {_call(handle, offset=last_shown + 1, **_same_limit(limit))}.'
            )
    elif last_shown < total:
        footer.append(
            f'{total - last_shown} more lines. Next page: {_call(handle, offset=last_shown + 1, **_same_limit(limit))}.'
        )
    else:
        footer.append(f'End of the result: line {total} is the last line.')
    return '\n'.join([header, *rendered, f'({" ".join(footer)})'])


async def _read_matching(
    payload: Payload, pattern: str, offset: int, limit: int, from_end: bool, caps: QueryLimits
) -> str:
    handle = payload.handle
    total = payload.index.line_count
    notes: list[str] = []
    if limit > caps.max_lines:
        notes.append(f'limit capped at {caps.max_lines} lines')
        limit = caps.max_lines
    if offset >= total:
        shown_offset = offset if from_end else offset + 1
        return f'offset={shown_offset} is past the end: the stored result {_show(handle)} has {total} lines.'
    matcher = Matcher.compile(pattern, is_regex=False)
    deadline = time.monotonic() + caps.time_budget
    if from_end:
        end_line = total - offset
        result = await grep_lines_backward(payload, matcher, end_line=end_line, max_hits=limit, deadline=deadline)
        scanned = f'lines {result.stopped_at_line + 1}-{end_line}'
    else:
        result = await grep_lines(
            payload, matcher, first_line=offset, max_hits=limit, stop_when_full=True, deadline=deadline
        )
        scanned = f'lines {offset + 1}-{result.stopped_at_line}'
    described = f'containing {_show(pattern)} (literal, case-sensitive)'
    in_part = _searched_in_part(result)
    if in_part:
        notes.append(in_part.removesuffix('.'))
    if not result.hits:
        text = f'No line {described} in {scanned} of the stored result {_show(handle)} ({total} lines).'
        if notes:
            text += f' [{"; ".join(notes)}]'
        if result.complete:
            text += " For a case-insensitive or regex search use grep_tool_result with is_regex=True, e.g. '(?i)error'."
        elif from_end:
            more = _call(
                handle, offset=total - result.stopped_at_line, from_end=True, pattern=pattern, **_same_limit(limit)
            )
            text += f' The scan used its time budget. Continue further back: {more}.'
        else:
            more = _call(handle, offset=result.stopped_at_line + 1, pattern=pattern, **_same_limit(limit))
            text += f' The scan used its time budget. Continue: {more}.'
        return text
    hits = result.hits
    # Only as many lines as can fit are rendered (the tail of them when reading from the end).
    most = max(1, (caps.max_output_chars - _FRAME_RESERVE) // 8)
    hits = hits[-most:] if from_end else hits[:most]
    plain = await read_lines_at(payload, [(hit.line, hit.line_start) for hit in hits], caps.max_line_chars)
    lines = [
        await _line_for_hit(payload, hit, caps) if line.cut else line for hit, line in zip(hits, plain, strict=True)
    ]
    width = _number_width(lines) if not from_end else len(str(max(line.number for line in lines)))
    rendered = [_render_line(line, width) for line in lines]
    fitted = _fit(rendered, caps.max_output_chars - _FRAME_RESERVE, keep_tail=from_end)
    if fitted < len(lines):
        notes.append(f'output capped at {caps.max_output_chars} characters')
        lines, rendered = (lines[-fitted:], rendered[-fitted:]) if from_end else (lines[:fitted], rendered[:fitted])
    which = 'the last ' if from_end else ''
    header = (
        f'Stored result {_show(handle)}: {which}{_count(len(lines), "line")} {described}, from {scanned} of {total}'
    )
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: str
    if from_end:
        # Earlier matches may sit just before the first line shown when some were left out; otherwise everything
        # from where the scan reached back to is shown.
        full = len(lines) < len(result.hits) or len(result.hits) >= limit
        earlier = lines[0].number - 1 if full else result.stopped_at_line
        footer = (
            f'Earlier matches, if any: '
            f'{_call(handle, offset=total - earlier, from_end=True, pattern=pattern, **_same_limit(limit))}.'
            if earlier
            else 'This reaches the start of the result.'
        )
        if result.out_of_time:
            footer = (
                f'The scan used its time budget after reaching back to line {result.stopped_at_line + 1}. ' + footer
            )
    elif len(lines) < len(result.hits) or not result.complete:  # More hits than shown, or the scan was cut short.
        next_offset = lines[-1].number + 1 if len(lines) < len(result.hits) else result.stopped_at_line + 1
        footer = (
            f'More may follow. Next page: {_call(handle, offset=next_offset, pattern=pattern, **_same_limit(limit))}.'
        )
    else:
        footer = 'No more matching lines: the scan reached the end.'
    return '\n'.join([header, *rendered, f'({footer})'])


async def _line_for_hit(payload: Payload, hit: Hit, caps: QueryLimits) -> Line:
    """The matching line, showing the match even when it sits beyond the cut of a long line."""
    (line,) = await read_lines(payload, hit.line - 1, 1, caps.max_line_chars, known_start=hit.line_start)
    if not line.cut or hit.match_end <= line.start + line.shown_bytes:
        return line
    half = caps.max_line_chars // 2
    window = await read_byte_window(
        payload,
        hit.match_start - half,
        min(caps.max_line_chars, half + (hit.match_end - hit.match_start) + half),
        utf8_edges=True,
    )
    end_of_line = line.start + line.length
    window_end = min(window.end, end_of_line)
    text = window.data[: window_end - window.start].decode('utf-8', errors='replace').replace('\n', ' ')
    prefix = '...' if window.start > line.start else ''
    return Line(
        number=line.number,
        text=f'{prefix}{text} [match at byte {hit.match_start} of a {line.length}-byte line]',
        start=line.start,
        length=line.length,
        shown_bytes=line.length,
    )


async def _read_text_bytes(payload: Payload, offset: int, limit: int, from_end: bool, caps: QueryLimits) -> str:
    handle = payload.handle
    size = payload.size
    note = ''
    if limit > caps.max_bytes:
        note = f' [limit capped at {caps.max_bytes} bytes]'
        limit = caps.max_bytes
    if offset >= size:
        return f'offset={offset} is past the end: the stored result {_show(handle)} has {size} bytes.'
    start = max(0, size - offset - limit) if from_end else offset
    length = (size - offset - start) if from_end else limit
    window = await read_byte_window(payload, start, length, utf8_edges=True)
    line = await line_of_offset(payload, window.start) + 1
    header = (
        f'Stored result {_show(handle)}: bytes {window.start}-{window.end - 1} of {size}, starting in line {line}'
        f' (edges moved to whole UTF-8 characters){note}:'
    )
    text = window.data.decode('utf-8', errors='replace')
    footer: list[str] = []
    if window.end < size:
        footer.append(f'{size - window.end} more bytes: {_call(handle, unit="bytes", offset=window.end, limit=limit)}.')
    else:
        footer.append('End of the result.')
    if from_end and window.start > 0:
        footer.append(
            f'Earlier bytes: {_call(handle, unit="bytes", offset=size - window.start, limit=limit, from_end=True)}.'
        )
    return '\n'.join([header, text, f'({" ".join(footer)})'])


async def _read_hex(payload: Payload, offset: int, limit: int, from_end: bool, unit: str, caps: QueryLimits) -> str:
    handle = payload.handle
    size = payload.size
    max_rows = max(1, (caps.max_output_chars - _FRAME_RESERVE) // _HEX_ROW_CHARS)
    rows_unit = unit == 'lines'
    scale = 16 if rows_unit else 1
    requested = limit
    limit = min(limit, max_rows if rows_unit else max_rows * 16)
    total_units = -(-size // 16) if rows_unit else size
    if offset >= total_units:
        what = f'{total_units} rows of 16 bytes' if rows_unit else f'{size} bytes'
        return f'offset={offset} is past the end: the binary stored result {_show(handle)} has {what}.'
    first_unit = max(0, total_units - offset - limit) if from_end else offset
    last_unit = (total_units - offset) if from_end else min(total_units, offset + limit)
    start, end = first_unit * scale, min(size, last_unit * scale)
    data = await payload.read_range(start, end)
    head = data[:16] if start == 0 else await payload.read_range(0, 16)
    kind = sniff_type(head)
    described = f'{size} bytes' + (f', looks like a {kind}' if kind else '')
    units = 'offset and limit count 16-byte rows' if rows_unit else 'offset and limit count bytes'
    capped = f' [limit capped at {limit}]' if limit < requested else ''
    header = (
        f'Stored result {_show(handle)} is binary ({described}). Hex dump of bytes {start}-{end - 1}; '
        f'offsets on the left are hexadecimal; {units}{capped}:'
    )
    footer: list[str] = []
    if last_unit < total_units:
        footer.append(f'{size - end} more bytes. Next: {_call(handle, offset=last_unit, limit=limit, unit=unit)}.')
    else:
        footer.append('End of the result.')
    if from_end and first_unit > 0:
        footer.append(
            f'Earlier: {_call(handle, offset=total_units - first_unit, limit=limit, from_end=True, unit=unit)}.'
        )
    return '\n'.join([header, *hex_dump(data, start), f'({" ".join(footer)})'])


@dataclass(frozen=True)
class _GrepCall:
    """The arguments of one `grep_tool_result` call, to write the call that continues it."""

    handle: str
    pattern: str
    is_regex: bool
    context_lines: int
    max_matches: int

    def again(self, offset: int) -> str:
        """The same search, from line `offset` (1-based; from byte `offset` for a binary result)."""
        arguments: dict[str, object] = {'pattern': self.pattern}
        if self.is_regex:
            arguments['is_regex'] = True
        if self.context_lines != 2:
            arguments['context_lines'] = self.context_lines
        if self.max_matches != 20:
            arguments['max_matches'] = self.max_matches
        arguments['offset'] = offset
        rendered = ', '.join(f'{name}={value!r}' for name, value in arguments.items())
        return f'grep_tool_result(handle={self.handle!r}, {rendered})'


def _searched_in_part(result: GrepResult) -> str | None:
    if not result.long_lines:
        return None
    limit = _kib(result.searched_bytes_of_long_lines)
    if result.long_lines == 1:
        return f'1 line longer than {limit} was searched in its first {limit} only.'
    return f'{result.long_lines} lines longer than {limit} were searched in their first {limit} only.'


def _kib(nbytes: int) -> str:
    return f'{nbytes // 1024} KiB' if nbytes >= 1024 else f'{nbytes} bytes'


async def _render_grep(
    payload: Payload,
    search: _GrepCall,
    result: GrepResult,
    notes: list[str],
    caps: QueryLimits,
    offset: int,
) -> str:
    pattern = search.pattern
    context_lines = search.context_lines
    total_lines = payload.index.line_count
    kind = 'regex' if search.is_regex else 'literal, case-sensitive'
    scope_lines = f'lines {offset + 1}-{total_lines} of {total_lines}' if offset else _count(total_lines, 'line')
    extra: list[str] = []
    in_part = _searched_in_part(result)
    if in_part:
        extra.append(in_part)
    if not result.complete:
        extra.append(
            f'The search used its time budget and stopped at line {result.stopped_at_line} of {total_lines}, so '
            f'there are at least {result.total} matching lines. Continue: {search.again(result.stopped_at_line + 1)}.'
        )
    if not result.hits:
        text = f'No line matches {_show(pattern)} ({kind}; {scope_lines} searched).'
        if not search.is_regex and result.complete:
            text += f' Any case: is_regex=True, pattern={_show("(?i)" + re.escape(pattern))}.'
        return ' '.join([text, *extra])
    # Merge the context windows of nearby matches into groups of consecutive lines.
    groups: list[tuple[int, int, list[Hit]]] = []
    for hit in result.hits:
        low, high = max(offset + 1, hit.line - context_lines), min(total_lines, hit.line + context_lines)
        if groups and low <= groups[-1][1] + 1:
            groups[-1] = (groups[-1][0], max(groups[-1][1], high), [*groups[-1][2], hit])
        else:
            groups.append((low, high, [hit]))
    width = len(str(min(total_lines, result.hits[-1].line + context_lines)))
    budget = caps.max_output_chars - _FRAME_RESERVE
    body: list[str] = []
    used = 0
    shown_hits = 0
    for low, high, hits in groups:
        # A rendered line takes at least its mark, number and `| ` and a newline: read no more lines than can fit,
        # but always up to the group's first match.
        fits = (budget - used) // (width + 4)
        count = min(high - low + 1, max(fits, hits[0].line - low + 1))
        lines = await read_lines(payload, low - 1, count, caps.max_line_chars)
        by_number = {hit.line: hit for hit in hits}
        rendered: list[str] = []
        group_used = _GROUP_LABEL_RESERVE
        shown: list[Hit] = []
        capped = count < high - low + 1
        for line in lines:
            hit = by_number.get(line.number)
            text = (
                _render_line(await _line_for_hit(payload, hit, caps), width, '>')
                if hit
                else _render_line(line, width, ' ')
            )
            # A group of adjacent matches can be long: stop at the cap inside it, but always show a first match.
            if used + group_used + len(text) + 1 > budget and (shown_hits or shown):
                capped = True
                break
            rendered.append(text)
            group_used += len(text) + 1
            if hit is not None:
                shown.append(hit)
        if shown:
            block = [_group_label(shown), *rendered]
            body.extend(block)
            used += sum(len(text) + 1 for text in block)
            shown_hits += len(shown)
        if capped:
            notes.append(f'output capped at {caps.max_output_chars} characters')
            break
    scope = f'the first {shown_hits}' if shown_hits < result.total else f'all {shown_hits}'
    header = (
        f'{"" if result.complete else "At least "}{_count(result.total, "matching line")} for {_show(pattern)} ({kind}; '
        f'{scope_lines} searched). Showing {scope}, marked ">", with {_count(context_lines, "line")} of context'
    )
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: list[str] = []
    hidden = result.total - shown_hits
    if hidden > 0:
        more = f'raise max_matches (up to {caps.max_matches}), or ' if search.max_matches < caps.max_matches else ''
        footer.append(
            f'{_count(hidden, "more matching line")} not shown: {more}'
            f'continue after the last one shown: {search.again(result.hits[shown_hits - 1].line + 1)}.'
        )
    footer.extend(extra)
    tail = [f'({" ".join(footer)})'] if footer else []
    return '\n'.join([header, *body, *tail])


async def _render_binary_grep(
    payload: Payload, search: _GrepCall, result: GrepResult, notes: list[str], offset: int
) -> str:
    handle = payload.handle
    pattern = search.pattern
    where = f' from byte {offset}' if offset else ''
    if not result.hits:
        text = f'No matches for {_show(pattern)} in the binary stored result {_show(handle)} ({payload.size} bytes){where}.'
        if not result.complete:
            text += (
                f' The search used its time budget and stopped at byte {result.stopped_at_byte}. '
                f'Continue: {search.again(result.stopped_at_byte)}.'
            )
        return text
    body: list[str] = []
    for hit in result.hits:
        row_start = hit.match_start - hit.match_start % 16
        row = await payload.read_range(row_start, row_start + 16)
        body.append(f'byte {hit.match_start}: {hex_dump(row, row_start)[0]}')
    qualifier = 'at least ' if not result.complete else ''
    header = (
        f'{qualifier}{_count(result.total, "match").replace("matchs", "matches")} for {_show(pattern)} in the binary '
        f'stored result {_show(handle)} ({payload.size} bytes){where}; showing {len(result.hits)}, each with the '
        '16-byte row holding it (hex offsets).'
    )
    if notes:
        header += f' [{"; ".join(notes)}]'
    footer = [
        f'Read around a match: {_call(handle, unit="bytes", offset="<byte>", limit=256)}.'.replace(
            "offset='<byte>'", 'offset=<byte>'
        )
    ]
    if not result.complete:
        footer.append(
            f'The search used its time budget and stopped at byte {result.stopped_at_byte}. '
            f'Continue: {search.again(result.stopped_at_byte)}.'
        )
    elif result.total > len(result.hits):
        footer.append(f'More matches: {search.again(result.hits[-1].match_start + 1)}.')
    return '\n'.join([header, *body, f'({" ".join(footer)})'])
