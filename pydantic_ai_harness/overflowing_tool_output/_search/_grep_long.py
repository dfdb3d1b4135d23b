"""The search of a line longer than a scan block (or of the rest of one, from a byte inside it), piece by piece.

A line of 100 MB holds no newline to cut it at, so it is read `SCAN_BLOCK` bytes at a time, each piece with a byte
of the line on either side so that anchors are judged on the real text, and searched in a worker thread by
`search_line` (overlapping windows, paced); the pieces overlap as far as a match may cross their edge. The deadline
is checked between pieces and windows, and a search it stops says where it got to, so the next call goes on there.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..._gil import past
from ._grep_scan import Pacer, search_line
from ._matcher import Buffer, Matcher
from ._query import SCAN_BLOCK

__all__ = ('LongLineScan', 'scan_long_line')

_T = TypeVar('_T')

ReadThen = Callable[[int, int, Callable[[Buffer], _T]], Awaitable[tuple[Buffer, _T]]]
"""Reads bytes `[start, end)` and runs a function on them in a worker thread (`BlockReader.read_then`)."""


@dataclass
class LongLineScan:
    """What searching one long line (from some byte of it to its end) found; offsets are the payload's."""

    hits: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """`(match start, match end)` of each match recorded: the first, or with `each_match` up to `room` of them."""

    total: int = 0
    """Matches counted (at most 1 without `each_match`)."""

    resume: int = 0
    """Where the search stopped: the line's end when it got there (or found its one match), else inside the line."""

    out_of_time: bool = False
    """The deadline stopped it at `resume`."""

    windowed: bool = False
    """Nothing was found in the line, which was searched in more than one window (or piece): a match longer than
    the overlap could be in it."""


@dataclass
class _Piece:
    """What one piece of the line held, as the worker thread found it (offsets relative to the piece)."""

    hits: list[tuple[int, int]]
    """The matches recorded."""

    total: int
    """The matches counted."""

    resume: int
    """Where the search of the line goes on (see `LineSearch.resume`)."""

    out_of_time: bool
    """The deadline stopped it at `resume`."""

    done: bool
    """The line needs no more searching: its end was reached, or its one match was found."""

    windowed: bool
    """A stretch of it was searched in more than one window without a match."""


def _search_piece(
    buffer: Buffer,
    start: int,
    end: int,
    matcher: Matcher,
    pacer: Pacer | None,
    *,
    final: bool,
    room: int,
    each_match: bool,
    deadline: float,
    check_first: bool,
) -> _Piece:
    hits: list[tuple[int, int]] = []
    total = 0
    cursor = start
    while True:
        searched = search_line(
            buffer, cursor, end, matcher, pacer, final=final, deadline=deadline, check_first=check_first
        )
        if searched.found == -1:
            done = final and not searched.out_of_time and searched.resume >= end
            return _Piece(hits, total, searched.resume, searched.out_of_time, done, searched.windowed)
        total += 1
        if len(hits) < room:
            hits.append((searched.found, searched.found_end))
        if not each_match:
            return _Piece(hits, total, searched.found_end, False, True, False)
        cursor = max(searched.found_end, searched.found + 1)
        check_first = True
        literal = matcher.literal
        if literal is not None and len(hits) >= room and cursor < end and (final or not _self_overlapping(literal)):
            # Nothing more to record: the other matches of the piece are counted at C speed (`bytes.count` counts
            # the same non-overlapping matches as finding them one by one); a literal that cannot overlap itself
            # goes on where a match could still cross the end of the piece.
            total += buffer.count(literal, cursor, end)
            if final:
                return _Piece(hits, total, end, False, True, False)
            return _Piece(hits, total, max(cursor, end - len(literal) + 1), False, False, False)
        if cursor >= end or (total % 64 == 0 and past(deadline)):
            out = cursor < end
            return _Piece(hits, total, cursor, out, final and not out, False)


def _self_overlapping(literal: bytes) -> bool:
    """Whether two occurrences of `literal` can overlap (`aa` in `aaa`): it starts with a proper end of itself."""
    return any(literal[:size] == literal[-size:] for size in range(1, len(literal)))


async def scan_long_line(
    read_then: ReadThen[_Piece],
    size: int,
    matcher: Matcher,
    pacer: Pacer | None,
    *,
    start: int,
    line_end: int,
    room: int,
    each_match: bool,
    deadline: float,
    check_first: bool,
) -> LongLineScan:
    """Search the line ending at `line_end` from byte `start` (a line start, or a byte inside the line).

    Records the first match (with `each_match`, each match: up to `room`, counting the rest); the deadline is
    checked before every piece and window but the first, unless `check_first`.
    """
    scan = LongLineScan(resume=start)
    cursor = start
    while True:
        if check_first and time.monotonic() > deadline:
            scan.out_of_time, scan.resume = True, cursor
            return scan
        piece_end = min(line_end, cursor + SCAN_BLOCK)
        base = max(0, cursor - 1)  # a byte of context before the piece (its line's, or the newline before it)
        search = _piece_search(
            matcher,
            pacer,
            start=cursor - base,
            end=piece_end - base,
            final=piece_end == line_end,
            room=room - len(scan.hits),
            each_match=each_match,
            deadline=deadline,
            check_first=check_first,
        )
        _, piece = await read_then(base, min(size, piece_end + 1), search)
        scan.hits += [(base + found, base + found_end) for found, found_end in piece.hits]
        scan.total += piece.total
        scan.resume = base + piece.resume
        # A line where nothing was found may hold a match longer than the overlap (once it matched, it is found).
        scan.windowed = (scan.windowed or piece.windowed) and not scan.total
        if piece.out_of_time:
            scan.out_of_time = True
            return scan
        if piece.done:
            scan.resume = line_end
            return scan
        cursor = scan.resume
        check_first = True


def _piece_search(
    matcher: Matcher,
    pacer: Pacer | None,
    *,
    start: int,
    end: int,
    final: bool,
    room: int,
    each_match: bool,
    deadline: float,
    check_first: bool,
) -> Callable[[Buffer], _Piece]:
    def search(buffer: Buffer) -> _Piece:
        return _search_piece(
            buffer,
            start,
            end,
            matcher,
            pacer,
            final=final,
            room=room,
            each_match=each_match,
            deadline=deadline,
            check_first=check_first,
        )

    return search
