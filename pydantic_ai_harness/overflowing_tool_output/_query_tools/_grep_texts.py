"""What a search's answer says about itself: what it searched, what it did not (first, with the call that goes on
there), how many hits it counted, and a match shown with the bytes around it when its line is too long to show.

Shared by `grep_tool_result` (with and without a handle) and `read_tool_result(pattern=...)`, so they say it the
same way. Every position named is a byte offset of the stored result, as `read_tool_result(unit='bytes')` takes it.
"""

from __future__ import annotations

from .._rendering._visible import INVALID_TO_REPLACEMENT
from .._search._grep import GrepResult, Hit
from .._search._query import Line, Payload, read_byte_window, read_lines
from ._answers import QueryLimits, counted

__all__ = ('hit_count', 'incomplete', 'line_for_hit', 'searched_scope', 'window_caveat')


def hit_count(result: GrepResult, each_match_over: int) -> str:
    """`3 matching lines`, `2 matches inside lines longer than 16000 bytes`, or both: what `result.total` counts."""
    lines = result.total - result.match_hits
    matches = f'{counted(result.match_hits, "match")} inside lines longer than {each_match_over} bytes'
    if not result.match_hits:
        return counted(lines, 'matching line')
    return f'{counted(lines, "matching line")} and {matches}' if lines else matches


def searched_scope(payload: Payload, result: GrepResult, first_line: int, first_byte: int | None) -> str:
    """What a forward scan searched: `3000 lines`, `lines 5-100 of 100`, `lines 1-2 of 3, line 2 only before byte N`.

    `first_line` is the 0-based line it started at; `first_byte` the byte, when that was inside the line.
    """
    total = payload.index.line_count
    if result.complete:
        last, before = total, None
    elif result.mid_line:
        last, before = result.stopped_at_line + 1, result.stopped_at_byte
    else:
        last, before = result.stopped_at_line, None
    first = first_line + 1
    if first == 1 and first_byte is None and before is None and last == total:
        return f'{counted(total, "line")} searched'
    if last < first:
        return 'nothing searched'
    if first == last:
        span = f'line {first} of {total} searched'
        if first_byte is not None and before is not None:
            return f'{span}, only bytes {first_byte}-{before - 1}'
        if first_byte is not None:
            return f'{span}, only from byte {first_byte}'
        return f'{span}, only before byte {before}' if before is not None else span
    parts = [f'lines {first}-{last} of {total} searched']
    if first_byte is not None:
        parts.append(f'line {first} only from byte {first_byte}')
    if before is not None:
        parts.append(f'line {last} only before byte {before}')
    return ', '.join(parts)


def incomplete(payload: Payload, result: GrepResult, budget: float, continue_at: str) -> str:
    """The caveat that opens the answer of a forward scan the time budget stopped: where, what was left, the call
    that goes on there (`continue_at`, made for `result.stopped_at_byte` or the line starting there).
    """
    total = payload.index.line_count
    where = result.stopped_at_line + 1
    if result.mid_line:
        left = f'inside line {where} of {total}; nothing from byte {result.stopped_at_byte} on was searched'
    else:
        rest = f'line {where}' if where == total else f'lines {where}-{total}'
        left = f'at line {where} of {total}; {rest} {"was" if where == total else "were"} not searched'
    return f'Incomplete: the time budget ({budget:g} s) ran out {left}. Continue there: {continue_at}.'


def window_caveat(result: GrepResult) -> str | None:
    """The caveat on lines too long for one regex search, searched in overlapping windows, where nothing was found."""
    if not result.windowed_lines:
        return None
    overlap = (
        f'{result.window_overlap // 1024} KiB' if result.window_overlap >= 1024 else f'{result.window_overlap} bytes'
    )
    lines = 'line was' if result.windowed_lines == 1 else 'lines were'
    return (
        f'Caveat: {result.windowed_lines} {lines} too long for one regex search and searched in windows overlapping '
        f'by {overlap}: a match longer than that in {"it" if result.windowed_lines == 1 else "them"} may be missed.'
    )


async def line_for_hit(payload: Payload, hit: Hit, caps: QueryLimits, *, read: Line | None = None) -> Line:
    """The line of a hit as shown: the line itself, or the bytes around the match when the line is too long to show
    the match (a match beyond its cut, or any match in a line where each match is a hit).

    `read`: the line as already read with the lines around it (it is not read again).
    """
    if read is not None and read.start == hit.line_start:
        line = read
    else:
        (line,) = await read_lines(payload, hit.line - 1, 1, caps.max_line_chars, known_start=hit.line_start)
    if not hit.in_long_line and (not line.cut or hit.match_end <= line.start + line.shown_bytes):
        return line
    side = caps.max_line_chars // 4
    length = min(caps.max_line_chars, 2 * side + hit.match_end - hit.match_start)
    window = await read_byte_window(payload, hit.match_start - side, length, utf8_edges=True)
    line_end = line.start + line.length
    shown_end = min(window.end, line_end)
    text = window.data[: shown_end - window.start].decode('utf-8', 'surrogateescape').translate(INVALID_TO_REPLACEMENT)
    before = '...' if window.start > line.start else ''
    after = '...' if shown_end < line_end else ''
    where = (
        f' [bytes {window.start}-{shown_end - 1} of the result, in line {line.number} (bytes {line.start}-'
        f'{line_end - 1}); the match starts at byte {hit.match_start}]'
    )
    return Line(line.number, f'{before}{text}{after}{where}', line.start, line.length, line.length)
