"""`grep_tool_result`: the matching lines of a stored result, grouped with their context, or the matches in a
binary one with the hex row holding each.

Argument mistakes raise `ModelRetry` with a precise message; the answer counts every match it saw, is capped in
characters, and ends with the call that continues the search.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pydantic_ai import ModelRetry

from ._answers import FRAME_RESERVE, QueryLimits, check_pattern, counted, read_call, render_line, show, storage_error
from ._grep import GrepResult, Hit, grep_lines
from ._grep_bytes import grep_bytes
from ._handles import open_handle
from ._matcher import Matcher, PatternError
from ._names import GREP_TOOL_NAME
from ._query import Line, Payload, hex_dump, read_byte_window, read_lines
from .stores._protocol import OverflowStore

__all__ = ('CheckedGrep', 'check_grep_arguments', 'grep_tool_result', 'line_for_hit', 'searched_in_part')

_GROUP_LABEL_RESERVE = 120
"""Characters kept for a group's label line (`-- matches at lines ... --`), which `_group_label` stays within."""


_LINES_BEFORE = 5
"""A suggested read starts this many lines above a match, so the context leading to it comes in the same call."""


async def grep_tool_result(
    store: OverflowStore,
    caps: QueryLimits,
    handle: str,
    pattern: str,
    context_lines: int = 2,
    max_matches: int = 20,
    is_regex: bool = False,
    offset: int = 0,
) -> str:
    """The answer to `grep_tool_result` for the result `handle` holds in `store`."""
    checked = check_grep_arguments(caps, pattern, context_lines, max_matches, is_regex, offset)
    matcher, context_lines, max_matches, notes = (
        checked.matcher,
        checked.context_lines,
        checked.max_matches,
        checked.notes,
    )
    payload = await open_handle(store, handle)
    if isinstance(payload, str):
        return payload
    try:
        if payload.size == 0:
            return f'The stored result {show(payload.handle)} is empty (0 bytes): nothing to search.'
        deadline = time.monotonic() + caps.time_budget
        search = _GrepCall(payload.handle, pattern, is_regex, context_lines, max_matches)
        if payload.index.is_binary:
            if offset >= payload.size:
                return f'offset={offset} is past the end: the binary stored result {show(payload.handle)} has {payload.size} bytes.'
            result = await grep_bytes(payload, matcher, max_hits=max_matches, deadline=deadline, start=offset)
            return await _render_binary_grep(payload, search, result, notes, offset)
        total_lines = payload.index.line_count
        skip = max(offset - 1, 0)
        if skip >= total_lines:
            return (
                f'offset={offset} is past the end: the stored result {show(payload.handle)} has {total_lines} lines, '
                'so there is nothing more to search.'
            )
        result = await grep_lines(
            payload, matcher, first_line=skip, max_hits=max_matches, deadline=deadline, context_before=context_lines
        )
        return await _render_grep(payload, search, result, notes, caps, skip)
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return storage_error(payload.handle, exc)


@dataclass(frozen=True)
class CheckedGrep:
    """A `grep_tool_result` call's arguments once checked: the compiled pattern and the clamped counts."""

    matcher: Matcher
    """The compiled pattern."""

    context_lines: int
    """Context lines around each match, within the cap."""

    max_matches: int
    """Most matches shown, within the cap."""

    notes: list[str]
    """What was clamped, for the answer's header."""


def check_grep_arguments(
    caps: QueryLimits, pattern: str, context_lines: int, max_matches: int, is_regex: bool, offset: int
) -> CheckedGrep:
    """The checked arguments, or `ModelRetry` with a precise message for the first wrong one."""
    if offset < 0:
        raise ModelRetry(f'offset must be 0 or more (the line to start searching at, 1-based), got {offset}.')
    if not pattern:
        raise ModelRetry('pattern must not be empty: pass the text (or regex, with is_regex=True) to search for.')
    check_pattern(pattern, caps)
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
            f'pattern {show(pattern)} is not a valid regular expression: {exc}. The syntax is RE2 (Python re '
            'without lookaround or backreferences); or pass is_regex=False to search for the text literally.'
        ) from None
    return CheckedGrep(matcher, context_lines, max_matches, notes)


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
        return f'{GREP_TOOL_NAME}(handle={self.handle!r}, {rendered})'


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
    scope_lines = f'lines {offset + 1}-{total_lines} of {total_lines}' if offset else counted(total_lines, 'line')
    extra: list[str] = []
    in_part = searched_in_part(result)
    if in_part:
        extra.append(in_part)
    if not result.complete:
        extra.append(
            f'The search used its time budget and stopped at line {result.stopped_at_line} of {total_lines}, so '
            f'there are at least {result.total} matching lines. Continue: {search.again(result.stopped_at_line + 1)}.'
        )
    if not result.hits:
        text = f'No line matches {show(pattern)} ({kind}; {scope_lines} searched).'
        if not search.is_regex and result.complete:
            text += f' Any case: is_regex=True, pattern={show("(?i)" + re.escape(pattern))}.'
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
    budget = caps.max_output_chars - FRAME_RESERVE
    body: list[str] = []
    used = 0
    shown_hits = 0
    for low, high, hits in groups:
        # A rendered line takes at least its mark, number and `| ` and a newline: read no more lines than can fit,
        # but always up to the group's first match.
        fits = (budget - used) // (width + 4)
        count = min(high - low + 1, max(fits, hits[0].line - low + 1))
        lines = await read_lines(payload, low - 1, count, caps.max_line_chars, known_start=_start_of(hits[0], low))
        by_number = {hit.line: hit for hit in hits}
        rendered: list[str] = []
        group_used = _GROUP_LABEL_RESERVE
        shown: list[Hit] = []
        capped = count < high - low + 1
        for line in lines:
            hit = by_number.get(line.number)
            text = (
                render_line(await line_for_hit(payload, hit, caps, read=line), width, '>')
                if hit
                else render_line(line, width, ' ')
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
        f'{"" if result.complete else "At least "}{counted(result.total, "matching line")} for {show(pattern)} ({kind}; '
        f'{scope_lines} searched). Showing {scope}, marked ">", with {counted(context_lines, "line")} of context'
    )
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: list[str] = []
    hidden = result.total - shown_hits
    if hidden > 0:
        more = f'raise max_matches (up to {caps.max_matches}), or ' if search.max_matches < caps.max_matches else ''
        footer.append(
            f'{counted(hidden, "more matching line")} not shown: {more}'
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
        text = (
            f'No matches for {show(pattern)} in the binary stored result {show(handle)} ({payload.size} bytes){where}.'
        )
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
        f'{qualifier}{counted(result.total, "match").replace("matchs", "matches")} for {show(pattern)} in the binary '
        f'stored result {show(handle)} ({payload.size} bytes){where}; showing {len(result.hits)}, each with the '
        '16-byte row holding it (hex offsets).'
    )
    if notes:
        header += f' [{"; ".join(notes)}]'
    footer = [
        f'Read around a match: {read_call(handle, unit="bytes", offset="<byte>", limit=256)}.'.replace(
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


def _start_of(hit: Hit, line: int) -> int | None:
    """Where `line` (1-based, at or above the hit's) starts, when the hit knows; else `None`."""
    above = hit.line - line
    if above == 0:
        return hit.line_start
    return hit.starts_before[above - 1] if above <= len(hit.starts_before) else None


def _group_label(hits: list[Hit]) -> str:
    """The line above a group of matches: where they are, and the offset to read on from the first."""
    if len(hits) == 1:
        where = f'match at line {hits[0].line}'
    elif len(hits) <= 5:
        where = f'matches at lines {", ".join(str(hit.line) for hit in hits)}'
    else:
        where = f'{len(hits)} matches at lines {hits[0].line}-{hits[-1].line}'
    return f'-- {where} (read around it: offset={max(1, hits[0].line - _LINES_BEFORE)}) --'


async def line_for_hit(payload: Payload, hit: Hit, caps: QueryLimits, *, read: Line | None = None) -> Line:
    """The matching line, showing the match even when it sits beyond the cut of a long line.

    `read`: the line as already read with the lines around it (it is not read again).
    """
    if read is not None and read.start == hit.line_start:
        line = read
    else:
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


def searched_in_part(result: GrepResult) -> str | None:
    """The note on lines searched in their first part only, if any were."""
    if not result.long_lines:
        return None
    limit = _kib(result.searched_bytes_of_long_lines)
    if result.long_lines == 1:
        return f'1 line longer than {limit} was searched in its first {limit} only.'
    return f'{result.long_lines} lines longer than {limit} were searched in their first {limit} only.'


def _kib(nbytes: int) -> str:
    return f'{nbytes // 1024} KiB' if nbytes >= 1024 else f'{nbytes} bytes'
