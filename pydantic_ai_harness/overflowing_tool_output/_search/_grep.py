"""The grep algorithms over a text [`Payload`][]: forward and backward line scans (binary ones: `_grep_bytes.py`).

Blocks are searched in a worker thread (`_grep_scan.py`: RE2 and `bytes.find` release the GIL); a regex with
required literals is run only around the lines holding one of them; every regex search is paced (`Pacer`) so that
none runs long, and every scan stops at its deadline with where it got to, a point inside a line included. A line
longer than a block is searched whole, piece by piece (`_grep_long.py`). Plain data out: the answers are
`_grep_tool.py`'s.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import anyio.to_thread

from ..stores._line_index import LineIndex
from ._grep_long import LongLineScan, scan_long_line
from ._grep_scan import BlockScan, Pacer, scan_block
from ._matcher import Buffer, Matcher
from ._query import SCAN_BLOCK, BlockReader, Payload, line_of_offset, line_start

__all__ = (
    'BACKWARD_BLOCK',
    'GrepResult',
    'Hit',
    'grep_lines',
    'grep_lines_backward',
)

_T = TypeVar('_T')


@dataclass(frozen=True)
class Hit:
    """One matching line, or one match in a long line (text), or one match (binary)."""

    line: int
    """1-based line number (0 for binary payloads)."""

    line_start: int
    """Byte offset where the matching line starts (the match offset for binary payloads)."""

    match_start: int
    """Byte offset of the match (the first on the line, unless `in_long_line`)."""

    match_end: int
    """Byte offset just past that match."""

    starts_before: tuple[int, ...] = ()
    """Where the lines just above it start, the nearest first: as many as were asked for and the block it was found
    in held (so showing them with the match needs no lookup of where they start)."""

    in_long_line: bool = False
    """The line is longer than the scan's `each_match_over`: each match in it is a hit of its own (shown as the bytes
    around it)."""


@dataclass
class GrepResult:
    """What a scan found."""

    hits: list[Hit]
    """The recorded hits: the first (or last) `max_hits`."""

    total: int
    """Hits counted in the scanned range: matching lines, and each match in a line longer than `each_match_over`
    (binary: matches)."""

    complete: bool
    """Whether the scan covered its whole range (`False` when it stopped at its time budget or once full)."""

    stopped_at_line: int
    """0-based line where scanning stopped: the line holding `stopped_at_byte` (the next line to scan forward, or
    for a backward scan the first line it scanned; the payload's line count, or 0 backward, when complete)."""

    stopped_at_byte: int
    """Byte offset where scanning stopped (forward: the next byte to search)."""

    out_of_time: bool = False
    """The scan stopped because its time budget ran out (not because it was full)."""

    mid_line: bool = False
    """`stopped_at_byte` lies inside line `stopped_at_line`, not at its start."""

    match_hits: int = 0
    """Of `total`, the matches in lines longer than `each_match_over`."""

    windowed_lines: int = 0
    """Lines searched in overlapping windows (a regex, lines longer than one search may cover) where nothing was
    found, and a match longer than `window_overlap` could have been missed."""

    window_overlap: int = 0
    """How much those windows overlapped, in bytes (the smallest, when patterns differ)."""


async def _in_worker(function: Callable[[], _T]) -> _T:
    return await anyio.to_thread.run_sync(function)


class _LineNumbers:
    """The 0-based numbers of lines in a block, each counted from the nearest point whose number is known.

    The line index knows the newlines before every chunk start and the payload's end; a line is counted from the
    nearest of those inside the block, or from the line numbered last, so a few matches in a 4 MiB block cost a
    count over at most half a chunk each, not over the block up to them.
    """

    def __init__(self, block: Buffer, base: int, index: LineIndex, first_number: int | None) -> None:
        self._block = block
        self._base = base
        self._index = index
        self._at = -1 if first_number is None else 0
        """A line start in the block whose number is known (-1: none yet)."""
        self._number = first_number or 0

    def at(self, line_begin: int) -> int:
        """The number of the line starting at `line_begin` (at or after the last one numbered).

        -1 when no point whose number is known lies in the block.
        """
        index, block, base = self._index, self._block, self._base
        chunk_start, before = index.chunk_of_offset(base + line_begin)
        if chunk_start - base > self._at:
            self._at, self._number = chunk_start - base, before
        chunk_end = chunk_start + index.chunk_size
        if chunk_end >= index.size:
            chunk_end, after = index.size, index.newline_count
        else:
            after = index.newlines_before[chunk_end // index.chunk_size]
        back = chunk_end - base
        if back <= len(block) and (self._at == -1 or back - line_begin < line_begin - self._at):
            number = after - block.count(b'\n', line_begin, back)
        elif self._at != -1:
            number = self._number + block.count(b'\n', self._at, line_begin)
        else:
            return -1
        self._at, self._number = line_begin, number
        return number


def _scan_read_block(
    block: Buffer,
    *,
    position: int,
    limit_byte: int,
    index: LineIndex,
    first_number: int | None,
    scan: Callable[[Buffer, int, int], BlockScan],
    context_before: int,
) -> tuple[BlockScan, list[int], list[tuple[int, ...]], int] | None:
    """Scan the whole lines of a block just read (at byte `position`), in the worker thread that read it.

    Returns the scan, the 0-based line number of each hit it recorded (-1 where the index cannot tell), where the
    `context_before` lines above each start (block offsets), and the bytes it consumed; `None` for an empty block or
    a line longer than the block (left to the caller).
    """
    if not block:
        return None
    at_end = position + len(block) >= limit_byte
    if at_end:
        search_end = len(block) - (1 if block.endswith(b'\n') else 0)
    else:
        search_end = block.rfind(b'\n')
        if search_end == -1:
            return None
    result = scan(block, 0, search_end)
    numbers = _LineNumbers(block, position, index, first_number)
    hit_numbers = [numbers.at(hit[1]) for hit in result.hits]
    above = [_starts_above(block, hit[1], context_before) for hit in result.hits]
    return result, hit_numbers, above, len(block) if at_end else search_end + 1


def _starts_above(block: Buffer, line_begin: int, count: int) -> tuple[int, ...]:
    """Where the up to `count` lines above the one at `line_begin` start, the nearest first (the block starts a line)."""
    starts: list[int] = []
    while len(starts) < count and line_begin > 0:
        line_begin = block.rfind(b'\n', 0, line_begin - 1) + 1
        starts.append(line_begin)
    return tuple(starts)


@dataclass
class _Found:
    """The hits of one scan so far (see `GrepResult` for each count)."""

    hits: deque[Hit]
    """The recorded hits."""

    total: int = 0
    """Hits counted."""

    match_hits: int = 0
    """Of `total`, the matches in long lines."""

    windowed_lines: int = 0
    """Lines searched in windows where nothing was found, and a longer match could hide."""

    window_overlap: int = 0
    """The overlap of those windows."""

    def add_windowed(self, lines: int, pacer: Pacer | None) -> None:
        """Count `lines` more such lines, searched in `pacer`'s windows."""
        if lines and pacer is not None:
            self.windowed_lines += lines
            self.window_overlap = pacer.overlap()

    def result(
        self, *, complete: bool, line: int, byte: int, out_of_time: bool = False, mid: bool = False
    ) -> GrepResult:
        return GrepResult(
            list(self.hits),
            self.total,
            complete,
            line,
            byte,
            out_of_time=out_of_time,
            mid_line=mid,
            match_hits=self.match_hits,
            windowed_lines=self.windowed_lines,
            window_overlap=self.window_overlap,
        )


def _line_end(index: LineIndex, number: int, next_start: int) -> int:
    """Where 0-based line `number` ends (its newline, or the payload end), from where the next one starts."""
    return next_start - 1 if number + 1 <= index.newline_count else next_start


async def grep_lines(  # noqa: C901 - the block loop and its two kinds of long line read best in one place
    payload: Payload,
    matcher: Matcher,
    *,
    first_line: int = 0,
    first_byte: int | None = None,
    end_line: int | None = None,
    max_hits: int,
    keep_last: bool = False,
    stop_when_full: bool = False,
    deadline: float,
    context_before: int = 0,
    each_match_over: int | None = None,
) -> GrepResult:
    """Scan lines `[first_line, end_line)` (or from byte `first_byte` on) for `matcher`, `SCAN_BLOCK` bytes at a time.

    Counts every hit (a matching line; in a line longer than `each_match_over` bytes, each match), records the
    first `max_hits` (or the last, with `keep_last`), and stops early at `deadline` (a `time.monotonic()` value),
    or once `max_hits` are recorded with `stop_when_full`. The first search of a call is made whatever the
    deadline, so a call that is continued where it stopped always gets further. Each hit knows where up to
    `context_before` lines above it start (`Hit.starts_before`), as far as its block shows them. The searching runs
    in a worker thread, regex searches are paced so that none runs long, and the deadline is checked inside a block
    and inside a long line, not only between blocks. A line longer than a block is searched whole, piece by piece.
    """
    index = payload.index
    size = payload.size
    last_line = index.line_count if end_line is None else min(end_line, index.line_count)
    limit_byte = size if last_line >= index.line_count else await line_start(payload, last_line)
    found = _Found(deque(maxlen=max_hits) if keep_last else deque())
    hits = found.hits
    pacer = Pacer(matcher) if matcher.literal is None else None
    fresh = True  # nothing searched yet: the first search is made whatever the deadline

    async def stop(byte: int, *, out_of_time: bool, mid: bool = False) -> GrepResult:
        line = await line_of_offset(payload, byte)
        return found.result(complete=False, line=line, byte=byte, out_of_time=out_of_time, mid=mid)

    async def long_line(blocks: BlockReader, number: int, begin: int, start: int, *, check: bool) -> LongLineScan:
        """Search line `number` (0-based, starting at `begin`) from byte `start` to its end; record what it holds."""
        line_end = _line_end(index, number, await line_start(payload, number + 1))
        in_long = each_match_over is not None and line_end - begin > each_match_over
        room = max_hits if keep_last else max_hits - len(hits)
        scan = await scan_long_line(
            blocks.read_then,
            size,
            matcher,
            pacer,
            start=start,
            line_end=line_end,
            room=room,
            each_match=in_long,
            deadline=deadline,
            check_first=check,
        )
        hits.extend(Hit(number + 1, begin, at, end, in_long_line=in_long) for at, end in scan.hits)
        found.total += scan.total
        found.match_hits += scan.total if in_long else 0
        # Searched from inside the line (a search continued there): a long match across `start` was not seen either.
        windowed = scan.windowed or (start > begin and not scan.total)
        found.add_windowed(int(windowed and _may_hide(matcher, pacer)), pacer)
        return scan

    if first_byte is None:
        position = await line_start(payload, first_line)
        first_number: int | None = first_line  # the number of the line at `position`, while it is known for free
    else:
        position = max(0, min(first_byte, limit_byte))
        first_number = None
    async with BlockReader(payload) as blocks:
        number = await line_of_offset(payload, position) if first_byte is not None else first_line
        begin = await line_start(payload, number) if first_byte is not None else position
        if begin < position < limit_byte:
            # A start inside a line (a search continued there): the rest of that line first.
            scan = await long_line(blocks, number, begin, position, check=False)
            fresh = False
            if scan.out_of_time:
                return await stop(scan.resume, out_of_time=True, mid=True)
            position = await line_start(payload, number + 1)
            if stop_when_full and len(hits) >= max_hits and position < limit_byte:
                return await stop(position, out_of_time=False)
        while position < limit_byte:
            if not fresh and time.monotonic() > deadline:
                return await stop(position, out_of_time=True)
            search = partial(
                scan_block,
                matcher=matcher,
                pacer=pacer,
                room=max_hits if keep_last else max_hits - len(hits),
                keep_last=keep_last,
                stop_when_full=stop_when_full,
                deadline=deadline,
                count_newlines=False,
                each_match_over=each_match_over,
                check_first=not fresh,
            )
            work = partial(
                _scan_read_block,
                position=position,
                limit_byte=limit_byte,
                index=index,
                first_number=first_number,
                scan=search,
                context_before=context_before,
            )
            first_number = None
            block, scanned = await blocks.read_then(position, min(limit_byte, position + SCAN_BLOCK), work)
            if not block:
                break
            if scanned is None:
                # One line longer than a block: searched whole, piece by piece; then on after it.
                number = await line_of_offset(payload, position)
                scan = await long_line(blocks, number, position, position, check=not fresh)
                fresh = False
                if scan.out_of_time:
                    return await stop(scan.resume, out_of_time=True, mid=True)
                position = await line_start(payload, number + 1)
                if stop_when_full and len(hits) >= max_hits and position < limit_byte:
                    return await stop(position, out_of_time=False)
                continue
            fresh = False
            block_scan, hit_numbers, above, consumed = scanned
            if -1 in hit_numbers:  # a short block inside one index chunk: count from the block's first line
                first = await line_of_offset(payload, position)
                hit_numbers = [first + block.count(b'\n', 0, hit[1]) for hit in block_scan.hits]
            hits.extend(
                Hit(
                    line + 1,
                    position + line_begin,
                    position + at,
                    position + end,
                    tuple(position + start for start in starts),
                    in_long,
                )
                for line, starts, (_, line_begin, at, end, in_long) in zip(hit_numbers, above, block_scan.hits)
            )
            found.total += block_scan.total
            found.match_hits += block_scan.match_hits
            found.add_windowed(block_scan.windowed_lines, pacer)
            if not block_scan.finished:
                byte = position + block_scan.resume
                return await stop(byte, out_of_time=block_scan.out_of_time, mid=block_scan.mid_line)
            if stop_when_full and len(hits) >= max_hits and position + consumed < limit_byte:
                return await stop(position + consumed, out_of_time=False)
            position += consumed
    return found.result(complete=True, line=last_line, byte=limit_byte)


def _may_hide(matcher: Matcher, pacer: Pacer | None) -> bool:
    """Whether a match may be longer than the overlap of the windows a long line is searched in."""
    return pacer is not None and (matcher.max_width is None or matcher.max_width > pacer.overlap())


BACKWARD_BLOCK = 1 << 20
"""Bytes read per step while scanning backward (a block cut short by the deadline is scanned again later)."""


async def grep_lines_backward(
    payload: Payload, matcher: Matcher, *, end_line: int, max_hits: int, deadline: float
) -> GrepResult:
    """The last `max_hits` lines matching `matcher` before line `end_line` (0-based, exclusive).

    Scans backward from `end_line` one block at a time, so the matches nearest the end come first whatever the
    payload size. The first block is always scanned whole, and so is a line longer than a block met first (piece by
    piece, forward), so every call makes progress; a later block or long line the deadline cuts short is left for
    the next call. `stopped_at_line` is the first line scanned.
    """
    index = payload.index
    last_line = min(max(end_line, 0), index.line_count)
    position = index.size if last_line >= index.line_count else await line_start(payload, last_line)
    found: list[Hit] = []
    total = 0
    windowed = _Found(deque())
    pacer = Pacer(matcher) if matcher.literal is None else None
    first = True

    def result(line: int, *, complete: bool, out_of_time: bool) -> GrepResult:
        windowed.hits, windowed.total = deque(found), total
        return windowed.result(complete=complete, line=line, byte=position, out_of_time=out_of_time)

    async def stop() -> GrepResult:
        return result(await line_of_offset(payload, position), complete=False, out_of_time=True)

    async with BlockReader(payload) as blocks:
        while position > 0 and len(found) < max_hits:
            if not first and time.monotonic() > deadline:
                return await stop()
            low = max(0, position - BACKWARD_BLOCK)
            block = await payload.read_range(low, position)
            if not block:
                break
            search_end = len(block) - 1 if block.endswith(b'\n') else len(block)
            begin = 0
            if low > 0:
                newline = block.find(b'\n')
                begin = newline + 1
                if newline == -1 or begin > search_end:
                    # The block is the tail of one line longer than it: search the line whole, from its start.
                    number = await line_of_offset(payload, position - 1)
                    line_begin = await line_start(payload, number)
                    scan = await scan_long_line(
                        blocks.read_then,
                        index.size,
                        matcher,
                        pacer,
                        start=line_begin,
                        line_end=low + search_end,
                        room=1,
                        each_match=False,
                        deadline=math.inf if first else deadline,
                        check_first=not first,
                    )
                    if scan.out_of_time:
                        return await stop()  # the line is left whole for the next call, which starts with it
                    if scan.hits:
                        total += 1
                        found.insert(0, Hit(number + 1, line_begin, *scan.hits[0]))
                    windowed.add_windowed(int(scan.windowed and _may_hide(matcher, pacer)), pacer)
                    position = line_begin
                    first = False
                    continue
            if matcher.literal is not None:
                # A literal is found from the end of the block backward, so only the matches that will be shown are
                # visited: a block where every line matches costs no more than the lines asked for.
                tail = await _in_worker(
                    partial(_scan_literal_backward, block, begin, search_end, matcher.literal, max_hits - len(found))
                )
                if tail:
                    last_number = await line_of_offset(payload, low + tail[0][1])
                    latest = [
                        Hit(
                            last_number - newlines_after + 1,
                            low + line_begin,
                            low + hit_at,
                            low + hit_at + len(matcher.literal),
                        )
                        for newlines_after, line_begin, hit_at in tail
                    ][::-1]
                    found = [*latest, *found]
                    total += len(tail)
                first = False
                if len(found) >= max_hits:
                    position = low + tail[-1][1]  # the earliest line shown: everything after it was scanned
                    break
                position = low + begin
                continue
            scan_result = await _in_worker(
                partial(
                    scan_block,
                    block,
                    begin,
                    search_end,
                    matcher,
                    pacer,
                    room=max_hits - len(found),
                    keep_last=True,
                    stop_when_full=False,
                    deadline=math.inf if first else deadline,
                )
            )
            if not scan_result.finished:  # cut short by the deadline: its matches would not be the last of the block
                return await stop()
            first_number = await line_of_offset(payload, low + begin)
            earlier = [
                Hit(first_number + newlines + 1, low + line_begin, low + hit_at, low + hit_end)
                for newlines, line_begin, hit_at, hit_end, _ in scan_result.hits
            ]
            found = [*earlier, *found][-max_hits:]
            total += scan_result.total
            windowed.add_windowed(scan_result.windowed_lines, pacer)
            position = low + begin
            first = False
    line = await line_of_offset(payload, position) if position > 0 else 0
    return result(line, complete=position == 0, out_of_time=False)


def _scan_literal_backward(
    block: bytes, begin: int, search_end: int, literal: bytes, room: int
) -> list[tuple[int, int, int]]:
    """The last `room` lines of `block[begin:search_end]` holding `literal`, latest first.

    Each entry is `(newlines between the latest line found and this one, line start, first match in the line)`.
    """
    found: list[tuple[int, int, int]] = []
    end = search_end
    newlines_after = 0
    later_start = -1
    while len(found) < room and end >= begin:
        at = block.rfind(literal, begin, end)
        if at == -1:
            break
        line_begin = max(block.rfind(b'\n', begin, at) + 1, begin)
        if later_start != -1:
            newlines_after += block.count(b'\n', line_begin, later_start)
        found.append((newlines_after, line_begin, block.find(literal, line_begin, at + len(literal))))
        later_start = line_begin
        end = line_begin - 1  # before this line's start, so one line counts once
    return found
