"""`grep_tool_result` without a handle: one search over every stored result of the conversation, newest first.

Only the handles the conversation's messages carry are searched (never a listing of the store), each match is
named by its handle and line, and the search stays within the caps of one call: its time budget, its output size
and a total of bytes scanned ([`QueryLimits.max_scan_bytes`][]). What it did not search comes first: which bound
stopped it and the call that continues; and each result's label says what of it was not searched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
from pydantic_ai import ModelRetry

from .._search._grep import GrepResult, grep_lines
from .._search._matcher import Matcher
from ..stores._protocol import OverflowStore
from ._answers import AROUND_LIMIT, FRAME_RESERVE, QueryLimits, counted, read_call, render_line, show
from ._grep_texts import hit_count, line_for_hit, window_caveat
from ._grep_tool import check_grep_arguments
from ._handles import KnownHandle, open_handle
from ._names import offered_names

__all__ = ('grep_all_tool_results',)

_LINES_BEFORE = 5
"""A suggested read starts this many lines above a match."""


@dataclass
class _Search:
    """What the search over the stored results found so far."""

    lines: list[str] = field(default_factory=list[str])
    """The rendered answer body: a label per result with matches, then its matching lines."""

    matches: int = 0
    """Hits counted in every result searched: matching lines, and each match in a line over `max_line_chars` bytes."""

    match_hits: int = 0
    """Of `matches`, the matches inside lines longer than `QueryLimits.max_line_chars` bytes."""

    shown: int = 0
    """Matching lines shown."""

    results_with_matches: int = 0
    """Results holding at least one match."""

    searched: int = 0
    """Results searched (whole or in part)."""

    tried: int = 0
    """Results tried: searched, or skipped as unreadable (a continuation starts after them)."""

    scanned_bytes: int = 0
    """Bytes of the results searched."""

    skipped: list[str] = field(default_factory=list[str])
    """Handles not searched: binary, cleaned up, or unreadable."""

    stopped: str = ''
    """Why and where the search stopped before the last result, with the calls that continue it."""

    windowed_lines: int = 0
    """Lines searched in overlapping windows without a match, in every result (see `GrepResult.windowed_lines`)."""

    window_overlap: int = 0
    """The smallest overlap of those windows."""

    first: tuple[str, int] | None = None
    """The handle and line of the first match shown, for the example calls."""


def _grep_call(pattern: str, is_regex: bool, handle: str = '', **arguments: object) -> str:
    """The `grep_tool_result` call that searches on: one result (`handle`) or, without one, every result."""
    named = {'handle': handle} if handle else {}
    named |= {'pattern': pattern, **({'is_regex': True} if is_regex else {}), **arguments}
    return f'{offered_names().grep}({", ".join(f"{name}={value!r}" for name, value in named.items())})'


async def grep_all_tool_results(
    known: Sequence[KnownHandle] | None,
    store_for: Callable[[str], OverflowStore],
    caps: QueryLimits,
    pattern: str,
    max_matches: int = 20,
    is_regex: bool = False,
    offset: int = 0,
) -> str:
    """The answer to `grep_tool_result` without a handle: `pattern` in each of `known`, newest first.

    `known` is `None` where the conversation's handles cannot be known (a durable unit's context without them).

    `offset` is the 1-based position (newest first) of the first result searched, so a search that stopped at a
    bound continues where it stopped.
    """
    if offset < 0:
        raise ModelRetry(
            f'offset must be 0 or more (without a handle: the stored result to start at, 1 = the newest), got {offset}. '
            'Leave it out to search from the newest.'
        )
    checked = check_grep_arguments(caps, pattern, 0, max_matches, is_regex, 0)
    if known is None:
        return (
            "A search without a handle cannot see this conversation's stored results here. Pass the handle a "
            f"stored result's preview shows: {offered_names().grep}(handle, pattern)."
        )
    if not known:
        return (
            'Nothing is stored yet, so there is nothing to search. First call the tool that produces the output you '
            'need; an output too large to show is stored then, and its preview names the handle.'
        )
    first = max(offset, 1)
    if first > len(known):
        return f'offset={offset} is past the end: this conversation has {counted(len(known), "stored result")}.'
    search = _Search()
    kind = 'regex' if is_regex else 'literal, case-sensitive'
    with anyio.move_on_after(caps.store_timeout) as scope:
        await _search_all(
            known, store_for, caps, checked.matcher, checked.max_matches, pattern, is_regex, first, search
        )
    if scope.cancelled_caught:
        search.stopped = (
            f'Incomplete: the storage did not answer within {caps.store_timeout:g} s; results after the first '
            f'{first - 1 + search.tried} were not searched. Continue: {_grep_call(pattern, is_regex, offset=first + search.tried)}.'
        )
    scope_text = (
        f'{counted(search.searched, "stored result")} searched of the {len(known)} this conversation holds, newest '
        f'first{f", from the {_ordinal(first)}" if first > 1 else ""}; {search.scanned_bytes} bytes'
    )
    notes = [*checked.notes]
    # What was not searched comes first: where the search stopped, and lines a match may hide in.
    caveats = [search.stopped] if search.stopped else []
    windows = window_caveat(
        GrepResult([], 0, True, 0, 0, windowed_lines=search.windowed_lines, window_overlap=search.window_overlap)
    )
    if windows:
        caveats.append(windows.replace('Caveat: ', 'Caveat (see the labels): ', 1))
    if not search.matches:
        # "No line matches" only for a search that reached its end; else what the part searched held.
        text = (
            f'No match for {show(pattern)} in the part searched ({kind}; {scope_text}).'
            if search.stopped
            else f'No line matches {show(pattern)} ({kind}; {scope_text}).'
        )
    else:
        shown = 'all' if search.shown == search.matches else f'the first {search.shown}'
        text = (
            f'{hit_count(GrepResult([], search.matches, True, 0, 0, match_hits=search.match_hits), caps.max_line_chars)} '
            f'for {show(pattern)} ({kind}) in '
            f'{counted(search.results_with_matches, "stored result")} ({scope_text}). Showing {shown}, under the '
            'handle of the result holding them:'
        )
    if notes:
        text += f' [{"; ".join(notes)}]'
    footer: list[str] = []
    if search.first is not None:
        handle, line = search.first
        footer.append(
            f'Read around a match with its handle and line: {read_call(handle, offset=max(1, line - _LINES_BEFORE), limit=AROUND_LIMIT)}; '
            f'one result with context: {_grep_call(pattern, is_regex, handle)}.'
        )
    if search.matches > search.shown:
        footer.append(
            f'{search.matches - search.shown} more not shown: grep the result holding them by its handle (each label '
            'gives its count).'
        )
    if search.skipped:
        footer.append(f'Not searched (binary, cleaned up, or unreadable): {", ".join(search.skipped[:10])}.')
    tail = [f'({" ".join(footer)})'] if footer else []
    return '\n'.join([*caveats, text, *search.lines, *tail])


async def _search_all(
    known: Sequence[KnownHandle],
    store_for: Callable[[str], OverflowStore],
    caps: QueryLimits,
    matcher: Matcher,
    max_matches: int,
    pattern: str,
    is_regex: bool,
    first: int,
    search: _Search,
) -> None:
    deadline = time.monotonic() + caps.time_budget
    budget = caps.max_output_chars - FRAME_RESERVE
    used = 0
    for position in range(first, len(known) + 1):
        item = known[position - 1]
        # The first result is always tried; an unreadable one counts as tried, so a run of them still ends in time.
        if position > first and time.monotonic() > deadline:
            search.stopped = (
                f'Incomplete: the time budget ({caps.time_budget:g} s) ran out before the {_ordinal(position)} result; '
                f'it and the older ones were not searched. Continue: {_grep_call(pattern, is_regex, offset=position)}.'
            )
            return
        search.tried += 1
        payload = await open_handle(store_for(item.handle), item.handle)
        if isinstance(payload, str):
            search.skipped.append(item.handle)
            continue
        if payload.index.is_binary:
            search.skipped.append(item.handle)
            continue
        if search.searched and search.scanned_bytes + payload.size > caps.max_scan_bytes:
            search.stopped = (
                f'Incomplete: stopped before the {_ordinal(position)} result ({item.handle!r}): one search without a '
                f'handle scans at most {caps.max_scan_bytes} bytes. Continue: {_grep_call(pattern, is_regex, offset=position)}.'
            )
            return
        room = max(max_matches - search.shown, 1)
        result = await grep_lines(
            payload, matcher, max_hits=room, deadline=deadline, each_match_over=caps.max_line_chars
        )
        search.searched += 1
        search.scanned_bytes += result.stopped_at_byte
        search.matches += result.total
        search.match_hits += result.match_hits
        if result.windowed_lines:
            search.windowed_lines += result.windowed_lines
            search.window_overlap = min(search.window_overlap or result.window_overlap, result.window_overlap)
        label = _result_note(result)
        if result.total or label:
            search.results_with_matches += bool(result.total)
            more = '' if result.complete else 'at least '
            count = f'{more}{hit_count(result, caps.max_line_chars)}' if result.total else 'no match'
            search.lines.append(
                f'-- {item.handle} ({item.tool_name}, {counted(payload.index.line_count, "line")}): {count}{label} --'
            )
            used += 80 + len(label)
            for hit in result.hits[: max(max_matches - search.shown, 0)]:
                line = await line_for_hit(payload, hit, caps)
                rendered = render_line(line, len(str(hit.line)))
                if used + len(rendered) + 1 > budget:
                    break
                used += len(rendered) + 1
                search.lines.append(rendered)
                search.shown += 1
                search.first = search.first or (item.handle, hit.line)
        if not result.complete:
            where = (
                f'inside line {result.stopped_at_line + 1} of {payload.index.line_count}, at byte '
                f'{result.stopped_at_byte}'
                if result.mid_line
                else f'at line {result.stopped_at_line + 1} of {payload.index.line_count}'
            )
            there = (
                _grep_call(pattern, is_regex, item.handle, start=result.stopped_at_byte)
                if result.mid_line
                else _grep_call(pattern, is_regex, item.handle, offset=result.stopped_at_line + 1)
            )
            search.stopped = (
                f'Incomplete: the time budget ({caps.time_budget:g} s) ran out in {item.handle!r} {where}; the rest of '
                f'it{" and the older results" if position < len(known) else ""} were not searched. Continue there: '
                f'{there}'
                + (
                    f', then the older results: {_grep_call(pattern, is_regex, offset=position + 1)}.'
                    if position < len(known)
                    else '.'
                )
            )
            return


def _result_note(result: GrepResult) -> str:
    """What of one result was not searched, for its label (`''` when all of it was)."""
    notes: list[str] = []
    if not result.complete:
        where = (
            f'before byte {result.stopped_at_byte} (inside line {result.stopped_at_line + 1})'
            if result.mid_line
            else f'before line {result.stopped_at_line + 1}'
        )
        notes.append(f'searched only {where}: the time budget ran out')
    if result.windowed_lines:
        notes.append(
            f'{counted(result.windowed_lines, "line")} searched in windows, a match over '
            f'{result.window_overlap} bytes may be missed'
        )
    return ''.join(f'; {note}' for note in notes)


def _ordinal(number: int) -> str:
    suffix = 'th' if 10 <= number % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th')
    return f'{number}{suffix}'
