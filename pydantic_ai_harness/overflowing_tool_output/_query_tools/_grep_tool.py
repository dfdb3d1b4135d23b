"""`grep_tool_result`: the matching lines of a stored result, grouped with their context, or the matches in a
binary one with the hex row holding each.

Argument mistakes raise `ModelRetry` with a precise message; the answer counts every match it saw and is capped in
characters; what it did not search comes first, with the call that continues the search there.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pydantic_ai import ModelRetry

from .._search._grep import GrepResult, Hit, grep_lines
from .._search._grep_bytes import grep_bytes
from .._search._matcher import Matcher, PatternError
from .._search._query import Payload, hex_dump, line_of_offset, line_start, read_lines
from ..stores._protocol import OverflowStore
from ._answers import (
    AROUND_LIMIT,
    FRAME_RESERVE,
    QueryLimits,
    check_pattern,
    counted,
    read_call,
    render_line,
    show,
    storage_error,
)
from ._grep_texts import hit_count, incomplete, line_for_hit, searched_scope, window_caveat
from ._handles import open_handle
from ._names import offered_names

__all__ = ('CheckedGrep', 'check_grep_arguments', 'grep_tool_result')

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
    start: int = 0,
) -> str:
    """The answer to `grep_tool_result` for the result `handle` holds in `store`.

    `offset` is the line to start at (1-based; a byte for a binary result), `start` the byte (inside a line too).
    """
    checked = check_grep_arguments(caps, pattern, context_lines, max_matches, is_regex, offset, start)
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
            offset = start or offset
            if offset >= payload.size:
                return f'offset={offset} is past the end: the binary stored result {show(payload.handle)} has {payload.size} bytes.'
            result = await grep_bytes(payload, matcher, max_hits=max_matches, deadline=deadline, start=offset)
            return await _render_binary_grep(payload, search, result, notes, offset, caps)
        total_lines = payload.index.line_count
        if start >= payload.size:
            return (
                f'start={start} is past the end: the stored result {show(payload.handle)} has {payload.size} bytes, '
                'so there is nothing more to search.'
            )
        skip = max(offset - 1, 0)
        if skip >= total_lines:
            return (
                f'offset={offset} is past the end: the stored result {show(payload.handle)} has {total_lines} lines, '
                'so there is nothing more to search.'
            )
        result = await grep_lines(
            payload,
            matcher,
            first_line=skip,
            first_byte=start or None,
            max_hits=max_matches,
            deadline=deadline,
            context_before=context_lines,
            each_match_over=caps.max_line_chars,
        )
        first_byte: int | None = None
        if start:
            skip = await line_of_offset(payload, start)
            first_byte = start if start > await line_start(payload, skip) else None
        return await _render_grep(payload, search, result, notes, caps, skip, first_byte)
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
    caps: QueryLimits, pattern: str, context_lines: int, max_matches: int, is_regex: bool, offset: int, start: int = 0
) -> CheckedGrep:
    """The checked arguments, or `ModelRetry` with a precise message for the first wrong one."""
    if offset < 0:
        raise ModelRetry(
            f'offset must be 0 or more (the line to start searching at, 1-based), got {offset}. '
            'Leave it out to search from the first line.'
        )
    if start < 0:
        raise ModelRetry(
            f'start must be 0 or more (the byte to start searching at), got {start}. Leave it out to search from the start.'
        )
    if start and offset:
        raise ModelRetry(
            f'Pass offset (the line to start at) or start (the byte to start at), not both: got offset={offset}, '
            f'start={start}. To read lines, call {offered_names().read}(handle, offset={offset}, limit={AROUND_LIMIT}).'
        )
    if not pattern:
        raise ModelRetry('pattern must not be empty: pass the text (or regex, with is_regex=True) to search for.')
    check_pattern(pattern, caps)
    if context_lines < 0:
        raise ModelRetry(f'context_lines must be 0 or more, got {context_lines}. Pass 0 for the matching lines alone.')
    if max_matches < 1:
        raise ModelRetry(f'max_matches must be 1 or more, got {max_matches}. Leave it out for 20.')
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
    """The handle searched."""

    pattern: str
    """The pattern, as the model passed it."""

    is_regex: bool
    """Whether it is a regex."""

    context_lines: int
    """Context lines around each match."""

    max_matches: int
    """Most matches shown."""

    def resume(self, result: GrepResult) -> str:
        """The call that goes on where `result` stopped: from the line starting there, or the byte inside a line."""
        if result.mid_line:
            return self.again(start=result.stopped_at_byte)
        return self.again(result.stopped_at_line + 1)

    def after(self, hit: Hit) -> str:
        """The call that goes on after `hit`: on the next line, or after the match in a long line."""
        if hit.in_long_line:
            return self.again(start=max(hit.match_end, hit.match_start + 1))
        return self.again(hit.line + 1)

    def again(self, offset: int = 0, *, start: int = 0) -> str:
        """The same search, from line `offset` (1-based; from byte `offset` for a binary result), or from byte `start`
        (inside a line).
        """
        arguments: dict[str, object] = {'pattern': self.pattern}
        if self.is_regex:
            arguments['is_regex'] = True
        if self.context_lines != 2:
            arguments['context_lines'] = self.context_lines
        if self.max_matches != 20:
            arguments['max_matches'] = self.max_matches
        if start:
            arguments['start'] = start
        else:
            arguments['offset'] = offset
        rendered = ', '.join(f'{name}={value!r}' for name, value in arguments.items())
        return f'{offered_names().grep}(handle={self.handle!r}, {rendered})'


async def _render_grep(  # noqa: C901 - groups, their rows and the output cap read best in one place
    payload: Payload,
    search: _GrepCall,
    result: GrepResult,
    notes: list[str],
    caps: QueryLimits,
    offset: int,
    first_byte: int | None,
) -> str:
    pattern = search.pattern
    context_lines = search.context_lines
    total_lines = payload.index.line_count
    kind = 'regex' if search.is_regex else 'literal, case-sensitive'
    scope = searched_scope(payload, result, offset, first_byte)
    # What was not searched comes first, with the call that searches it.
    caveats: list[str] = []
    if not result.complete:
        caveats.append(incomplete(payload, result, caps.time_budget, search.resume(result)))
    windows = window_caveat(result)
    if windows:
        caveats.append(windows)
    if not result.hits:
        # "No line matches" only for a search that reached the end; else what the part searched held.
        text = (
            f'No line matches {show(pattern)} ({kind}; {scope}).'
            if result.complete
            else f'No match for {show(pattern)} in the part searched ({kind}; {scope}).'
        )
        if not search.is_regex and result.complete and not caveats:
            text += f' Any case: is_regex=True, pattern={show("(?i)" + re.escape(pattern))}.'
        return '\n'.join([*caveats, text])
    # Merge the context windows of nearby matches into groups of consecutive lines.
    groups: list[tuple[int, int, list[Hit]]] = []
    for hit in result.hits:
        low, high = max(offset + 1, hit.line - context_lines), min(total_lines, hit.line + context_lines)
        if groups and low <= groups[-1][1] + 1:
            groups[-1] = (groups[-1][0], max(groups[-1][1], high), [*groups[-1][2], hit])
        else:
            groups.append((low, high, [hit]))
    width = len(str(min(total_lines, result.hits[-1].line + context_lines)))
    budget = caps.max_output_chars - FRAME_RESERVE - sum(len(text) + 1 for text in caveats)
    body: list[str] = []
    used = 0
    shown_hits = 0
    for low, high, hits in groups:
        # A rendered line takes at least its mark, number and `| ` and a newline: read no more lines than can fit,
        # but always up to the group's first match.
        fits = (budget - used) // (width + 4)
        count = min(high - low + 1, max(fits, hits[0].line - low + 1))
        lines = await read_lines(payload, low - 1, count, caps.max_line_chars, known_start=_start_of(hits[0], low))
        by_number: dict[int, list[Hit]] = {}
        for hit in hits:
            by_number.setdefault(hit.line, []).append(hit)
        rendered: list[str] = []
        group_used = _GROUP_LABEL_RESERVE
        shown: list[Hit] = []
        capped = count < high - low + 1
        for line in lines:
            rows = [
                (render_line(await line_for_hit(payload, hit, caps, read=line), width, '>'), hit)
                for hit in by_number.get(line.number, [])
            ] or [(render_line(line, width, ' '), None)]
            for text, hit in rows:
                # A group of adjacent matches can be long: stop at the cap inside it, but always show a first match.
                if used + group_used + len(text) + 1 > budget and (shown_hits or shown):
                    capped = True
                    break
                rendered.append(text)
                group_used += len(text) + 1
                if hit is not None:
                    shown.append(hit)
            if capped:
                break
        if shown:
            block = [_group_label(shown, search.handle if not body else None), *rendered]
            body.extend(block)
            used += sum(len(text) + 1 for text in block)
            shown_hits += len(shown)
        if capped:
            notes.append(f'output capped at {caps.max_output_chars} characters')
            break
    shown_scope = f'the first {shown_hits}' if shown_hits < result.total else f'all {shown_hits}'
    header = (
        f'{"" if result.complete else "At least "}{hit_count(result, caps.max_line_chars)} for {show(pattern)} ({kind}; '
        f'{scope}). Showing {shown_scope}, marked ">", with {counted(context_lines, "line")} of context'
    )
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: list[str] = []
    hidden = result.total - shown_hits
    if hidden > 0:
        more = f'raise max_matches (up to {caps.max_matches}), or ' if search.max_matches < caps.max_matches else ''
        footer.append(
            f'{hidden} more not shown: {more}continue after the last one shown: '
            f'{search.after(result.hits[shown_hits - 1])}.'
        )
    tail = [f'({" ".join(footer)})'] if footer else []
    return '\n'.join([*caveats, header, *body, *tail])


async def _render_binary_grep(
    payload: Payload, search: _GrepCall, result: GrepResult, notes: list[str], offset: int, caps: QueryLimits
) -> str:
    handle = payload.handle
    pattern = search.pattern
    where = f' from byte {offset}' if offset else ''
    caveats: list[str] = []
    if not result.complete:
        caveats.append(
            f'Incomplete: the time budget ({caps.time_budget:g} s) ran out at byte {result.stopped_at_byte} of '
            f'{payload.size}; nothing from there on was searched. Continue there: '
            f'{search.again(result.stopped_at_byte)}.'
        )
        where = f'{where or " from byte 0"} to byte {result.stopped_at_byte - 1}'
    if not result.hits:
        return '\n'.join(
            [
                *caveats,
                f'No matches for {show(pattern)} in the binary stored result {show(handle)} ({payload.size} bytes){where}.',
            ]
        )
    body: list[str] = []
    for hit in result.hits:
        row_start = hit.match_start - hit.match_start % 16
        row = await payload.read_range(row_start, row_start + 16)
        body.append(f'byte {hit.match_start}: {hex_dump(row, row_start)[0]}')
    qualifier = 'at least ' if not result.complete else ''
    header = (
        f'{qualifier}{counted(result.total, "match")} for {show(pattern)} in the binary '
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
    if result.complete and result.total > len(result.hits):
        footer.append(f'More matches: {search.again(result.hits[-1].match_start + 1)}.')
    return '\n'.join([*caveats, header, *body, f'({" ".join(footer)})'])


def _start_of(hit: Hit, line: int) -> int | None:
    """Where `line` (1-based, at or above the hit's) starts, when the hit knows; else `None`."""
    above = hit.line - line
    if above == 0:
        return hit.line_start
    return hit.starts_before[above - 1] if above <= len(hit.starts_before) else None


def _group_label(hits: list[Hit], handle: str | None) -> str:
    """The line above a group of matches: where they are, and the read that shows the lines around the first.

    The first group names the whole call, handle included (`handle`), so a model copies it rather than putting the
    numbers into another search; the groups after it only their numbers. A line where each match is a hit (a long
    one) is named once, with its count of matches, and no line offset to read it by.
    """
    per_line: dict[int, int] = {}
    for hit in hits:
        per_line[hit.line] = per_line.get(hit.line, 0) + 1
    lines = list(per_line)
    if len(lines) == 1:
        where = f'{counted(len(hits), "match")} in line {lines[0]}' if len(hits) > 1 else f'match at line {lines[0]}'
    elif len(lines) <= 5:
        named = ', '.join(str(line) if count == 1 else f'{line} ({count} matches)' for line, count in per_line.items())
        where = f'matches at lines {named}'
    else:
        where = f'{len(hits)} matches at lines {lines[0]}-{lines[-1]}'
    if hits[0].in_long_line:
        return f'-- {where} --'  # its rows say which bytes of the result they show: lines are no unit to read it by
    around = f'offset={max(1, hits[0].line - _LINES_BEFORE)}, limit={AROUND_LIMIT}'
    if handle is not None:
        label = f'-- {where} (read around it: {offered_names().read}(handle={handle!r}, {around})) --'
        if len(label) <= _GROUP_LABEL_RESERVE:
            return label
    return f'-- {where} (read around it: {around}) --'
