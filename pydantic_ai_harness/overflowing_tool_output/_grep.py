"""The grep algorithms over a text [`Payload`][]: forward and backward line scans (binary ones: `_grep_bytes.py`).

Blocks are searched in a worker thread (RE2 and `bytes.find` release the GIL); a regex with required literals is
run only around the lines holding one of them; every regex search is paced (`Pacer`) so that none runs long, and
every scan stops at its deadline with where it got to. Plain data out: the answers are `_grep_tool.py`'s.
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

from .._gil import past
from ._matcher import Buffer, Matcher
from ._query import SCAN_BLOCK, BlockReader, Payload, line_of_offset, line_start
from .stores._line_index import LineIndex

__all__ = (
    'BACKWARD_BLOCK',
    'BlockScan',
    'GrepResult',
    'Hit',
    'Pacer',
    'grep_lines',
    'grep_lines_backward',
)

_T = TypeVar('_T')


@dataclass(frozen=True)
class Hit:
    """One matching line (text) or match (binary)."""

    line: int
    """1-based line number (0 for binary payloads)."""

    line_start: int
    """Byte offset where the matching line starts (the match offset for binary payloads)."""

    match_start: int
    """Byte offset of the first match on the line."""

    match_end: int
    """Byte offset just past that match."""

    starts_before: tuple[int, ...] = ()
    """Where the lines just above it start, the nearest first: as many as were asked for and the block it was found
    in held (so showing them with the match needs no lookup of where they start)."""


@dataclass
class GrepResult:
    """What a scan found."""

    hits: list[Hit]
    """The recorded hits: the first (or last) `max_hits`."""

    total: int
    """Matching lines (text) or matches (binary) counted in the scanned range."""

    complete: bool
    """Whether the scan covered its whole range (`False` when it stopped at its time budget or once full)."""

    stopped_at_line: int
    """0-based line where scanning stopped: the next line to scan forward, or for a backward scan the first line
    it scanned (the payload's line count, or 0 backward, when complete)."""

    stopped_at_byte: int
    """Byte offset where scanning stopped."""

    long_lines: int = 0
    """Lines longer than the search limit, searched in their first part only."""

    out_of_time: bool = False
    """The scan stopped because its time budget ran out (not because it was full)."""

    searched_bytes_of_long_lines: int = 0
    """How far into each long line the search looked (the smallest such limit, in bytes)."""


class Pacer:
    """Sizes each regex search so that one call into RE2 stays short, whatever the pattern and the text.

    RE2 is linear, but not cheap on every pattern: when its DFA keeps running out of memory it falls back to an
    NFA that costs up to about `SECONDS_PER_INSTRUCTION` per byte for each instruction of the compiled program
    (measured: `a[ab]{200}c`, 206 instructions, ~2 us per byte on a/b text; `a(?:[ab]?){990}c`, 1,986
    instructions, ~20 us per byte). RE2 cannot be interrupted, so the only bound is the size of what one
    search covers: the pacer derives it from the program size, which makes the windows (and so the answers)
    depend on the pattern alone, never on timing.
    """

    def __init__(self, matcher: Matcher) -> None:
        self.worst_seconds_per_byte = max(matcher.program_size, 1) * SECONDS_PER_INSTRUCTION

    def window(self) -> int:
        """Bytes one search over several whole lines may cover (about `SLICE_SECONDS` at worst)."""
        return self._bytes_for(SLICE_SECONDS)

    def line_limit(self) -> int:
        """How far into one line a search may look: all of it (up to a block) unless that could take long."""
        return self._bytes_for(LONG_LINE_SECONDS)

    def _bytes_for(self, seconds: float) -> int:
        return max(MIN_SLICE_BYTES, min(SCAN_BLOCK, int(seconds / self.worst_seconds_per_byte)))


SECONDS_PER_INSTRUCTION = 10e-9
"""Worst measured cost of RE2's NFA per byte and per program instruction (on a loaded 2-core machine)."""

MIN_SLICE_BYTES = 1 << 10
"""The smallest window a regex search is given (so every search makes progress)."""

SLICE_SECONDS = 0.02
"""At most about how long one regex search over several lines may take."""

LONG_LINE_SECONDS = 0.2
"""At most about how long the search of one long line may take; beyond that the line is searched in part (and
the answer says how far)."""


@dataclass
class BlockScan:
    """What scanning one block found; offsets are relative to the block."""

    hits: list[tuple[int, int, int, int]]
    """`(newlines before the line in the block, line start, match start, match end)` per recorded hit."""

    total: int
    """Matching lines counted."""

    resume: int
    """Where the next scan starts: the end of the searched range when it finished, else a line start."""

    finished: bool
    """The whole range was searched."""

    out_of_time: bool
    """It stopped at the deadline."""

    long_lines: int = 0
    """Lines searched in part only."""

    long_line_limit: int = 0
    """The smallest part searched of such a line."""


class _Candidates:
    """Where the next line holding one of a regex's required literals is, within one block (positions cached)."""

    _DENSE_AFTER = 32
    """Candidates found before judging whether finding them pays."""

    _DENSE_BYTES = 1024
    """Skipping fewer bytes than this per candidate found, on average, does not pay: RE2 alone is faster then
    (`request [0-9]+ in` on a log where every line holds `request `)."""

    def __init__(self, block: Buffer, matcher: Matcher, end: int) -> None:
        self._block = block
        self._literals = matcher.required
        self._finders = matcher.finders
        self._end = end
        self._next = [-2] * len(self._literals)  # -2: not searched yet; -1: none left in the block
        self._found = 0
        self._skipped = 0
        self.dense = False
        """Whether the candidates come so close together that the rest of the block is better searched without."""

    def first(self, cursor: int) -> int:
        """The first position at or after `cursor` where a required literal starts; -1 when there is none."""
        best = -1
        for number in range(len(self._finders)):
            at = self._next[number]
            if at != -1 and at < cursor:
                at = self._next[number] = self._finders[number].find(self._block, cursor, self._end)
            if at != -1 and (best == -1 or at < best):
                best = at
        if best != -1:
            self._found += 1
            self._skipped += best - cursor
            if self._found == self._DENSE_AFTER:
                self.dense = self._skipped < self._DENSE_AFTER * self._DENSE_BYTES
        return best

    def last_before(self, cursor: int, end: int) -> int:
        """The last position in `[cursor, end)` where a required literal starts; -1 when there is none."""
        return max(self._block.rfind(literal, cursor, end) for literal in self._literals)


def _scan_block(  # noqa: C901 - one loop whose bookkeeping reads best in one place
    block: Buffer,
    begin: int,
    search_end: int,
    matcher: Matcher,
    pacer: Pacer | None,
    *,
    room: int,
    keep_last: bool,
    stop_when_full: bool,
    deadline: float,
    count_newlines: bool = True,
) -> BlockScan:
    """Scan the whole lines in `block[begin:search_end]` for `matcher`; runs in a worker thread.

    Records up to `room` hits (the last `room` with `keep_last`, else the first, and with `stop_when_full`
    stops once they are recorded), counts every matching line, and checks `deadline` (a `time.monotonic()`
    value) before every regex search and every 64 literal matches, handing the GIL to the event loop every 2 ms.
    Without `count_newlines`, a hit's newlines before it are left at 0 (the caller numbers the lines).
    """
    hits: deque[tuple[int, int, int, int]] = deque(maxlen=room) if keep_last else deque()
    total = 0
    newlines = 0
    counted_to = begin
    cursor = begin
    checks = 0
    long_lines = 0
    long_limit = 0
    candidates = _Candidates(block, matcher, search_end) if matcher.required else None
    while cursor <= search_end:
        cut = False
        if pacer is None:
            window_end = search_end
        else:
            if past(deadline):
                return BlockScan(list(hits), total, cursor, False, True, long_lines, long_limit)
            if candidates is not None:
                # Lines without a required literal cannot match: go to the next line holding one, and let RE2
                # search only as far as the last line holding one in its window.
                candidate = candidates.first(cursor)
                if candidate == -1:
                    break
                cursor = max(cursor, block.rfind(b'\n', cursor, candidate) + 1)
                if candidates.dense:
                    candidates = (
                        None  # from here on RE2 alone: candidates on nearly every line cost more than they save
                    )
            window_end = min(search_end, cursor + pacer.window())
            if candidates is not None and window_end < search_end:
                last = candidates.last_before(cursor, window_end)
                line_end = block.find(b'\n', last, window_end) if last != -1 else -1
                if line_end != -1:
                    window_end = line_end
            if window_end < search_end:
                newline = block.rfind(b'\n', cursor, window_end + 1)
                if newline >= cursor:
                    window_end = newline
                else:
                    # The line at `cursor` is longer than the window: search it whole when that is affordable.
                    line_end = block.find(b'\n', cursor, search_end)
                    line_end = search_end if line_end == -1 else line_end
                    limit = pacer.line_limit()
                    if line_end - cursor > limit:
                        window_end, cut = cursor + limit, True
                        long_lines += 1
                        long_limit = limit if not long_limit else min(long_limit, limit)
                    else:
                        window_end = line_end
        found, found_end = matcher.search(block, cursor, window_end)
        if found != -1 and cut and found_end == window_end:
            found = -1  # a match touching the cut may only look like one (`$`, or a longer match cut short)
        if found == -1:
            if window_end >= search_end:
                break
            # Nothing in this window: go on after it (past the cut line's newline when the window was cut).
            if cut:
                next_line = block.find(b'\n', window_end, search_end)
                if next_line == -1:
                    break
                cursor = next_line + 1
            else:
                cursor = window_end + 1
            continue
        line_begin = max(block.rfind(b'\n', begin, found) + 1, begin)
        total += 1
        if keep_last or len(hits) < room:
            if count_newlines:
                newlines += block.count(b'\n', counted_to, line_begin)
                counted_to = line_begin
            hits.append((newlines, line_begin, found, found_end))
        newline = block.find(b'\n', found, search_end)
        if stop_when_full and len(hits) >= room:
            resume = search_end if newline == -1 else newline + 1
            return BlockScan(list(hits), total, resume, newline == -1, False, long_lines, long_limit)
        if newline == -1:
            break
        cursor = newline + 1
        checks += 1
        if pacer is None and checks % 64 == 0 and past(deadline):
            return BlockScan(list(hits), total, cursor, False, True, long_lines, long_limit)
    return BlockScan(list(hits), total, search_end, True, False, long_lines, long_limit)


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
    hit_numbers = [numbers.at(line_begin) for _, line_begin, _, _ in result.hits]
    above = [_starts_above(block, line_begin, context_before) for _, line_begin, _, _ in result.hits]
    return result, hit_numbers, above, len(block) if at_end else search_end + 1


def _starts_above(block: Buffer, line_begin: int, count: int) -> tuple[int, ...]:
    """Where the up to `count` lines above the one at `line_begin` start, the nearest first (the block starts a line)."""
    starts: list[int] = []
    while len(starts) < count and line_begin > 0:
        line_begin = block.rfind(b'\n', 0, line_begin - 1) + 1
        starts.append(line_begin)
    return tuple(starts)


async def grep_lines(
    payload: Payload,
    matcher: Matcher,
    *,
    first_line: int = 0,
    end_line: int | None = None,
    max_hits: int,
    keep_last: bool = False,
    stop_when_full: bool = False,
    deadline: float,
    context_before: int = 0,
) -> GrepResult:
    """Scan lines `[first_line, end_line)` for `matcher`, streaming `SCAN_BLOCK` bytes at a time.

    Counts every matching line, records the first `max_hits` (or the last, with `keep_last`), and stops
    early at `deadline` (a `time.monotonic()` value), or once `max_hits` are recorded with `stop_when_full`.
    Each hit knows where up to `context_before` lines above it start (`Hit.starts_before`), as far as its block
    shows them.
    The searching runs in a worker thread (RE2 and `bytes.find` release the GIL), regex searches are paced
    so that none runs long, and the deadline is checked inside a block, not only between blocks.
    """
    index = payload.index
    size = payload.size
    last_line = index.line_count if end_line is None else min(end_line, index.line_count)
    limit_byte = size if last_line >= index.line_count else await line_start(payload, last_line)
    position = await line_start(payload, first_line)
    hits: deque[Hit] = deque(maxlen=max_hits) if keep_last else deque()
    total = 0
    long = _LongLines()
    pacer = Pacer(matcher) if matcher.literal is None else None
    first_number: int | None = first_line  # the number of the line at `position`, while it is known for free

    async def stop(byte: int, *, out_of_time: bool) -> GrepResult:
        line = await line_of_offset(payload, byte)
        return GrepResult(list(hits), total, False, line, byte, long.count, out_of_time, long.limit)

    async with BlockReader(payload) as blocks:
        while position < limit_byte:
            if time.monotonic() > deadline:
                return await stop(position, out_of_time=True)
            search = partial(
                _scan_block,
                matcher=matcher,
                pacer=pacer,
                room=max_hits if keep_last else max_hits - len(hits),
                keep_last=keep_last,
                stop_when_full=stop_when_full,
                deadline=deadline,
                count_newlines=False,
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
                # One line longer than a block: search its head, then jump past it with the index.
                line_number = await line_of_offset(payload, position)
                begin = position
                found, found_end = await _search_long_line(block, matcher, pacer, long)
                position = await line_start(payload, line_number + 1)
                if found != -1:
                    total += 1
                    if keep_last or len(hits) < max_hits:
                        hits.append(Hit(line_number + 1, begin, begin + found, begin + found_end))
                    if stop_when_full and len(hits) >= max_hits and position < limit_byte:
                        return await stop(position, out_of_time=False)
                continue
            scan, hit_numbers, above, consumed = scanned
            if -1 in hit_numbers:  # a short block inside one index chunk: count from the block's first line
                first = await line_of_offset(payload, position)
                hit_numbers = [first + block.count(b'\n', 0, line_begin) for _, line_begin, _, _ in scan.hits]
            hits.extend(
                Hit(
                    line + 1,
                    position + line_begin,
                    position + found,
                    position + found_end,
                    tuple(position + start for start in starts),
                )
                for line, starts, (_, line_begin, found, found_end) in zip(hit_numbers, above, scan.hits)
            )
            total += scan.total
            long.add(scan.long_lines, scan.long_line_limit)
            if not scan.finished:
                return await stop(position + scan.resume, out_of_time=scan.out_of_time)
            if stop_when_full and len(hits) >= max_hits and position + consumed < limit_byte:
                return await stop(position + consumed, out_of_time=False)
            position += consumed
    return GrepResult(list(hits), total, True, last_line, limit_byte, long.count, False, long.limit)


BACKWARD_BLOCK = 1 << 20
"""Bytes read per step while scanning backward (a block cut short by the deadline is scanned again later)."""


async def grep_lines_backward(
    payload: Payload, matcher: Matcher, *, end_line: int, max_hits: int, deadline: float
) -> GrepResult:
    """The last `max_hits` lines matching `matcher` before line `end_line` (0-based, exclusive).

    Scans backward from `end_line` one block at a time, so the matches nearest the end come first whatever the
    payload size. The first block is always scanned whole, so every call makes progress; a later block the
    deadline cuts short is left for the next call. `stopped_at_line` is the first line scanned.
    """
    index = payload.index
    last_line = min(max(end_line, 0), index.line_count)
    position = index.size if last_line >= index.line_count else await line_start(payload, last_line)
    found: list[Hit] = []
    total = 0
    long = _LongLines()
    pacer = Pacer(matcher) if matcher.literal is None else None
    first = True
    while position > 0 and len(found) < max_hits:
        if not first and time.monotonic() > deadline:
            line = await line_of_offset(payload, position)
            return GrepResult(found, total, False, line, position, long.count, True, long.limit)
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
                # The block is the tail of one line longer than it: search that line's head.
                line_number = await line_of_offset(payload, position - 1)
                line_begin = await line_start(payload, line_number)
                head = await payload.read_range(line_begin, min(position, line_begin + SCAN_BLOCK))
                whole = line_begin + len(head) == position
                head = head[: len(head) - 1] if whole and head.endswith(b'\n') else head
                hit_at, hit_end = await _search_long_line(head, matcher, pacer, long, whole=whole)
                if hit_at != -1:
                    total += 1
                    found.insert(0, Hit(line_number + 1, line_begin, line_begin + hit_at, line_begin + hit_end))
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
        scan = await _in_worker(
            partial(
                _scan_block,
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
        if not scan.finished:  # cut short by the deadline: its matches would not be the last ones of the block
            line = await line_of_offset(payload, position)
            return GrepResult(found, total, False, line, position, long.count, True, long.limit)
        first_number = await line_of_offset(payload, low + begin)
        earlier = [
            Hit(first_number + newlines + 1, low + line_begin, low + hit_at, low + hit_end)
            for newlines, line_begin, hit_at, hit_end in scan.hits
        ]
        found = [*earlier, *found][-max_hits:]
        total += scan.total
        long.add(scan.long_lines, scan.long_line_limit)
        position = low + begin
        first = False
    line = await line_of_offset(payload, position) if position > 0 else 0
    return GrepResult(found, total, position == 0, line, position, long.count, False, long.limit)


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


@dataclass
class _LongLines:
    """Lines searched in part only, and the smallest part searched."""

    count: int = 0
    limit: int = 0

    def add(self, count: int, limit: int) -> None:
        self.count += count
        if limit:
            self.limit = limit if not self.limit else min(self.limit, limit)


async def _search_long_line(
    head: Buffer, matcher: Matcher, pacer: Pacer | None, long: _LongLines, *, whole: bool = False
) -> tuple[int, int]:
    """Search the start of a line too long to search in one block (`head` is as much of it as was read).

    `whole` says `head` is the entire line: then it is searched in part only if the pacer cuts it.
    """
    limit = len(head) if pacer is None else min(len(head), pacer.line_limit())
    cut = limit < len(head) or not whole
    if cut:
        long.add(1, limit)
    found, found_end = await _in_worker(partial(matcher.search, head, 0, limit))
    if cut and matcher.literal is None and found_end == limit:
        # The cut end of the line looks like its end to `$`: a match touching it is not trustworthy.
        return -1, -1
    return found, found_end
