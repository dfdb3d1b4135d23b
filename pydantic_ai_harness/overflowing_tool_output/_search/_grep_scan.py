"""What a grep runs in a worker thread: the scan of one block of whole lines, and the search of one long line in
overlapping windows.

RE2 and `bytes.find` release the GIL; every regex search is paced (`Pacer`) so that none runs long, the deadline
is checked before each one, and the GIL is handed over every 2 ms. Offsets are those of the buffer searched; the
async side (`_grep.py`, `_grep_long.py`) turns them into lines of the payload.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..._gil import past
from ._matcher import Buffer, Matcher
from ._query import SCAN_BLOCK

__all__ = ('BlockScan', 'LineSearch', 'Pacer', 'scan_block', 'search_line')


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
        """Bytes one search inside a line may cover (about `LONG_LINE_SECONDS` at worst): a longer line is searched
        in overlapping windows of this size.
        """
        return self._bytes_for(LONG_LINE_SECONDS)

    def overlap(self) -> int:
        """Bytes the windows of a long line overlap by: a match up to this long is inside one of them."""
        return self.line_limit() // 4

    def _bytes_for(self, seconds: float) -> int:
        return max(MIN_SLICE_BYTES, min(SCAN_BLOCK, int(seconds / self.worst_seconds_per_byte)))


SECONDS_PER_INSTRUCTION = 10e-9
"""Worst measured cost of RE2's NFA per byte and per program instruction (on a loaded 2-core machine)."""

MIN_SLICE_BYTES = 1 << 10
"""The smallest window a regex search is given (so every search makes progress)."""

SLICE_SECONDS = 0.02
"""At most about how long one regex search over several lines may take."""

LONG_LINE_SECONDS = 0.2
"""At most about how long one regex search inside a long line may take."""


@dataclass(frozen=True)
class LineSearch:
    """What searching (part of) one line found."""

    found: int
    """Where the first match starts (-1: none)."""

    found_end: int
    """Just past that match (-1: none)."""

    resume: int
    """Without a match, where searching the line goes on: the end of the range when it was searched to the end;
    before it when the range ended inside the line (the rest of the line is not in the buffer yet), or when the
    deadline stopped it."""

    out_of_time: bool = False
    """The deadline stopped it at `resume`."""

    windowed: bool = False
    """Nothing was found, but the range was not searched in one window: a match longer than the overlap (crossing
    the edge of a window, or of the buffer) may be in it."""


def search_line(
    buffer: Buffer,
    start: int,
    end: int,
    matcher: Matcher,
    pacer: Pacer | None,
    *,
    final: bool,
    deadline: float,
    check_first: bool,
) -> LineSearch:
    r"""The first match in `buffer[start:end]`, part of one line, searched in windows that overlap.

    A regex is searched in windows of `pacer.line_limit()` bytes overlapping by `pacer.overlap()` (so none costs
    long), only around the literals its matches must contain when it has some; a literal in one search, the pieces
    overlapping by its length. `buffer` holds a byte on each side of the range where the line goes on, so RE2 judges
    `^`, `$` and `\b` at a window's edges on the real text. `final`: `end` is where the line ends; otherwise the
    search stops where a match could cross `end`, and `resume` says where the next buffer of the line must start.
    The deadline is checked before every window (but the first, unless `check_first`).
    """
    if pacer is None:
        found, found_end = matcher.search(buffer, start, end)
        if found != -1 or final:
            return LineSearch(found, found_end, end)
        return LineSearch(-1, -1, max(start + 1, end - len(matcher.literal or b'') + 1))
    span, overlap = pacer.line_limit(), pacer.overlap()
    longest_literal = max((len(literal) for literal in matcher.required), default=0)
    cursor = start
    first = True
    windows = 0
    whole = False  # one window was the whole range: nothing could be missed
    while True:
        # Once nothing is found, a match longer than the overlap may have been: unless one window held the range.
        windowed = not final or (windows > 0 and not whole)
        if (check_first or not first) and past(deadline):
            return LineSearch(-1, -1, cursor, out_of_time=True, windowed=windowed)
        first = False
        window_start = cursor
        if matcher.required:
            # A match contains one of the required literals: no window is searched before the next one's reach.
            candidate = min(
                (at for finder in matcher.finders if (at := finder.find(buffer, cursor, end)) != -1), default=-1
            )
            if candidate == -1:
                resume = end if final else max(cursor, end - overlap - longest_literal)
                return LineSearch(-1, -1, resume, windowed=windowed)
            window_start = max(cursor, candidate - overlap)
        window_end = min(end, window_start + span)
        found, found_end = matcher.search(buffer, window_start, window_end)
        windows += 1
        whole = windows == 1 and window_start == start and window_end == end
        if found != -1:
            if found_end == window_end and window_end < end:
                # The match may go on past the window: take it whole from where it starts.
                found, found_end = matcher.search(buffer, found, min(end, found + span))
            if found_end == end and not final and found > start:
                return LineSearch(-1, -1, found)  # it may go on past the buffer: the next one starts at it
            return LineSearch(found, found_end, found_end)
        if window_end >= end:
            resume = end if final else max(window_start + 1, end - overlap)
            return LineSearch(-1, -1, resume, windowed=not final or not whole)
        cursor = window_end - overlap


@dataclass
class BlockScan:
    """What scanning one block found; offsets are relative to the block."""

    hits: list[tuple[int, int, int, int, bool]]
    """`(newlines before the line in the block, line start, match start, match end, in a long line)` per recorded
    hit."""

    total: int
    """Hits counted: matching lines, and each match in a line longer than `each_match_over`."""

    resume: int
    """Where the next scan starts: the end of the searched range when it finished, else a line start (or a point
    inside a line, `mid_line`)."""

    finished: bool
    """The whole range was searched."""

    out_of_time: bool
    """It stopped at the deadline."""

    windowed_lines: int = 0
    """Lines searched in overlapping windows where nothing was found, and a longer match than the overlap could
    hide."""

    match_hits: int = 0
    """Of `total`, the matches in lines longer than `each_match_over`."""

    mid_line: bool = False
    """`resume` lies inside a line."""


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


class _Tally:
    """The hits of one block scan, as they are found."""

    def __init__(self, room: int, *, keep_last: bool, begin: int, count_newlines: bool) -> None:
        self.hits: deque[tuple[int, int, int, int, bool]] = deque(maxlen=room) if keep_last else deque()
        self.room = room
        self.keep_last = keep_last
        self.total = 0
        self.match_hits = 0
        self.windowed = 0
        self._count_newlines = count_newlines
        self._newlines = 0
        self._counted_to = begin

    def add(self, block: Buffer, line_begin: int, found: int, found_end: int, in_long: bool) -> None:
        self.total += 1
        self.match_hits += in_long
        if self.keep_last or len(self.hits) < self.room:
            if self._count_newlines:
                self._newlines += block.count(b'\n', self._counted_to, line_begin)
                self._counted_to = line_begin
            self.hits.append((self._newlines, line_begin, found, found_end, in_long))

    def result(self, resume: int, *, finished: bool, out_of_time: bool = False, mid_line: bool = False) -> BlockScan:
        return BlockScan(
            list(self.hits), self.total, resume, finished, out_of_time, self.windowed, self.match_hits, mid_line
        )


def scan_block(  # noqa: C901 - one loop whose bookkeeping reads best in one place
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
    each_match_over: int | None = None,
    check_first: bool = True,
) -> BlockScan:
    """Scan the whole lines in `block[begin:search_end]` for `matcher`; runs in a worker thread.

    Records up to `room` hits (the last `room` with `keep_last`, else the first, and with `stop_when_full`
    stops once they are recorded), counts every hit, and checks `deadline` (a `time.monotonic()` value) before
    every regex search (but the first, unless `check_first`) and every 64 literal matches, handing the GIL to the
    event loop every 2 ms. A hit is a matching line, or in a line longer than `each_match_over` bytes each match.
    A line too long for one regex search is searched in overlapping windows (`search_line`). Without
    `count_newlines`, a hit's newlines before it are left at 0 (the caller numbers the lines).
    """
    tally = _Tally(room, keep_last=keep_last, begin=begin, count_newlines=count_newlines)
    cursor = begin
    checks = 0
    first = True
    candidates = _Candidates(block, matcher, search_end) if matcher.required else None
    while cursor <= search_end:
        if pacer is None:
            window_end = search_end
            found, found_end = matcher.search(block, cursor, window_end)
        else:
            if (check_first or not first) and past(deadline):
                mid = cursor > begin and block[cursor - 1] != 0x0A
                return tally.result(cursor, finished=False, out_of_time=True, mid_line=mid)
            first = False
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
            long_line = False
            if window_end < search_end:
                newline = block.rfind(b'\n', cursor, window_end + 1)
                if newline >= cursor:
                    window_end = newline
                else:
                    # The line at `cursor` is longer than the window: searched whole if that is affordable, else in
                    # overlapping windows.
                    line_end = block.find(b'\n', cursor, search_end)
                    window_end = search_end if line_end == -1 else line_end
                    long_line = window_end - cursor > pacer.line_limit()
            if long_line:
                searched = search_line(
                    block, cursor, window_end, matcher, pacer, final=True, deadline=deadline, check_first=False
                )
                if searched.out_of_time:
                    return tally.result(searched.resume, finished=False, out_of_time=True, mid_line=True)
                # Only a line where nothing was found may be reported wrongly (once it matched, it is found).
                whole_line = cursor == begin or block[cursor - 1] == 0x0A
                if (
                    searched.windowed
                    and whole_line
                    and (matcher.max_width is None or matcher.max_width > pacer.overlap())
                ):
                    tally.windowed += 1
                found, found_end = searched.found, searched.found_end
            else:
                found, found_end = matcher.search(block, cursor, window_end)
        if found == -1:
            if window_end >= search_end:
                break
            cursor = window_end + 1  # past the newline that ended the window
            continue
        line_begin = max(block.rfind(b'\n', begin, found) + 1, begin)
        newline = block.find(b'\n', found, search_end)
        line_end = search_end if newline == -1 else newline
        in_long = each_match_over is not None and line_end - line_begin > each_match_over
        tally.add(block, line_begin, found, found_end, in_long)
        # In a long line each match is a hit: go on after this one; otherwise on the next line.
        cursor = max(found_end, found + 1) if in_long and max(found_end, found + 1) <= line_end else line_end + 1
        literal = matcher.literal
        if cursor <= line_end and literal is not None and not (keep_last or stop_when_full) and len(tally.hits) >= room:
            # Nothing more to record in this line: its other matches are counted at C speed (`bytes.count` counts
            # the same non-overlapping matches, left to right, as finding them one by one).
            rest = block.count(literal, cursor, line_end)
            tally.total += rest
            tally.match_hits += rest
            cursor = line_end + 1
        if stop_when_full and len(tally.hits) >= room:
            if cursor > search_end:
                return tally.result(search_end, finished=True)
            return tally.result(cursor, finished=False, mid_line=cursor <= line_end)
        checks += 1
        if pacer is None and checks % 64 == 0 and past(deadline):
            return tally.result(cursor, finished=False, out_of_time=True, mid_line=cursor <= line_end)
    return tally.result(search_end, finished=True)
