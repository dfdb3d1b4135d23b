"""The important-lines scan of a spill preview: lines that look like failures, from anywhere in a payload.

One linear pass (a literal prefilter, then RE2 on the blocks of lines that can match), fed piece by piece beside
the store write, so a 100 MB log is scanned in about the time it takes to write it.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..._gil import hand_over
from ..._re2 import compile_re2
from ..stores._line_index import LineIndex

__all__ = ('LINE_CHARS', 'ImportantLine', 'ImportantLinesScan', 'important_lines', 'load_literal_finder')


# RE2: one linear-time pass over a payload of any size (Python's `re` takes ~50x longer on this alternation).
_IMPORTANT = compile_re2(
    (
        # verdicts: a failed test, a crash, a non-zero exit, a compiler error
        rb'(?P<verdict>\bFAILED\b|\bFAIL:|\bpanic:|\bFATAL\b|Segmentation fault|\b[1-9]\d* (?:failed|errors?)\b'
        rb'|\b(?:exit|return) (?:status|code)\b[:= ]*[1-9]\d*|\berror(?:\[\w+\])?:)'
        # the exception itself
        rb'|(?P<exception>\b[A-Z][A-Za-z]*(?:Error|Exception)\b|\bERROR\b)'
        # context: where a traceback starts, softer words, a zero exit status
        rb'|(?P<context>Traceback \(most recent call last\)|\b[Ee]rror\b|\b[Ff]ailed\b|\b[Ff]ailure\b'
        rb'|\b(?:exit|return) (?:status|code)\b)'
    ),
)
"""Lines worth showing even from the middle of a payload, in three ranks: verdicts, exceptions, context."""

_L = TypeVar('_L')

_RANKS = ('verdict', 'exception', 'context')
"""The pattern's groups, in order: group 1 is a verdict, 2 an exception, 3 context."""

_MAX_IMPORTANT = 6
_MAX_MATCHES_SCANNED = 20_000
"""A noisy log can match on most lines; past this many matches the scan stops (the preview says so)."""

LINE_CHARS = 160
"""Preview lines longer than this are cut; the full line is in the store."""

_EXCERPT_BYTES = 140
"""The bytes of a long line shown around an important match (with `[...]` on each cut side, within `LINE_CHARS`)."""

_EXCERPT_BEFORE = 40
"""How much of an excerpt comes before the match."""


@dataclass(frozen=True, order=True)
class ImportantLine:
    """A line worth showing from anywhere in a payload."""

    number: int
    """Its 1-based line number."""

    column: int
    """The byte where the shown text starts in the line: 0, or where an excerpt of a long line starts."""

    text: str
    """The line, or for a long line an excerpt around the match (`[...]` marking what is left out)."""

    rank: int
    """0 for a verdict (FAILED, exit status 1), 1 for an exception, 2 for context: lower matters more."""


_IMPORTANT_LITERALS = (
    b'FAIL',
    b'panic:',
    b'FATAL',
    b'Segmentation fault',
    b'ailed',
    b'ailure',
    b'rror',
    b'RROR',
    b'Exception',
    b'Traceback',
    b'exit status',
    b'exit code',
    b'return status',
    b'return code',
)
"""Every match of `_IMPORTANT` contains one of these (each alternative of the pattern names one), and no match
spans a newline: a block of lines without any of them holds no match, so the scan skips it unread by RE2."""

_PREFILTER_BLOCK = 64 * 1024
"""A region of lines `_IMPORTANT` scans runs from a line holding a literal to about this many bytes further (cut
at a line end); the lines between regions hold no literal, so no match: the matches and their order are exactly
those of one scan of the whole payload."""

_FIND_WINDOW = 1 << 20
"""The literal finder looks at most about this many bytes (cut at a line end) per call, handing the GIL over
between calls."""


class _LiteralFinder(Protocol):
    def first(self, data: bytes, start: int, end: int) -> int:
        """A position of some literal in `data[start:end]`, in its first line holding one; -1 when there is none."""
        ...


class _Re2Finder:
    """The literal prefilter on RE2 (always available)."""

    def __init__(self) -> None:
        alternation = b'|'.join(_IMPORTANT_LITERALS)  # plain words and spaces: nothing to escape
        self._regex = compile_re2(alternation, never_capture=True)

    def first(self, data: bytes, start: int, end: int) -> int:
        found = self._regex.search(data, start, end)
        return -1 if found is None else found.start()


class _HyperscanFinder:
    """The literal prefilter on Hyperscan (the optional `hyperscan` extra): a few times faster than RE2 here."""

    def __init__(self, hyperscan: Any) -> None:
        self._hyperscan = hyperscan
        self._database: Any = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._database.compile(expressions=list(_IMPORTANT_LITERALS))
        self._scratch = threading.local()

    def first(self, data: bytes, start: int, end: int) -> int:
        scratch = getattr(self._scratch, 'value', None)
        if scratch is None:
            scratch = self._scratch.value = self._hyperscan.Scratch(self._database)
        found: list[int] = []

        def on_match(_id: int, _from: int, to: int, _flags: int, _context: object) -> bool:
            found.append(to)
            return True  # the first literal is enough: the block gets scanned by `_IMPORTANT`

        try:
            self._database.scan(memoryview(data)[start:end], match_event_handler=on_match, scratch=scratch)
        except self._hyperscan.ScanTerminated:
            pass
        # Matches come in order of their end; a literal never spans a newline, so this one is in the first line
        # that holds any.
        return start + found[0] - 1 if found else -1


def load_literal_finder() -> None:
    """Import and compile the scan's literal prefilter now (once per process), not at the first spill.

    A durable engine's sandbox (Temporal's) refuses a module imported while workflow code runs: loaded with the
    capability, where the agent is defined, the prefilter is already there when a spill in workflow code needs it.
    """
    _literal_finder()


@functools.cache
def _literal_finder() -> _LiteralFinder:
    """Hyperscan when it is installed and works on this CPU, else RE2: both find the same candidate blocks."""
    try:
        hyperscan = importlib.import_module('hyperscan')
    except ImportError:
        return _Re2Finder()
    try:
        return _HyperscanFinder(hyperscan)
    except Exception:  # noqa: BLE001 - a broken or unsupported install (no SSSE3, say): RE2 does the job
        return _Re2Finder()


def _candidate_regions(data: bytes, finder: _LiteralFinder) -> Iterator[tuple[int, int]]:
    """The `[start, end)` byte ranges (whole lines) that may hold a match of `_IMPORTANT`, in order.

    The finder looks for the next literal as far as it takes (in windows of `_FIND_WINDOW` bytes cut at line ends,
    so that no call runs long); each region runs from the line holding it to about `_PREFILTER_BLOCK` bytes on.
    """
    position = 0
    size = len(data)
    while position < size:
        window_end = _line_end_after(data, position + _FIND_WINDOW)
        hand_over()
        hit = finder.first(data, position, window_end)
        if hit == -1:
            position = window_end
            continue
        start = max(position, data.rfind(b'\n', position, hit) + 1)
        end = _line_end_after(data, max(hit + 1, start + _PREFILTER_BLOCK))
        yield start, end
        position = end


def _line_end_after(data: bytes, cut: int) -> int:
    """Just past the first newline at or after `cut - 1` (the data's end when there is none, or `cut` is past it)."""
    if cut >= len(data):
        return len(data)
    newline = data.find(b'\n', cut - 1)
    return len(data) if newline == -1 else newline + 1


@dataclass
class _Pending:
    """An important line found by a scan, before its line number is known (a streamed scan resolves it later)."""

    line_start: int
    """The absolute byte where its line starts."""

    number: int
    """Its 1-based line number, or 0 while unknown."""

    column: int
    text: str
    rank: int

    anchor: int = 0
    """Unnumbered scans: the byte its newlines are counted from (a multiple of `_ANCHOR_BYTES`, or a piece start)."""

    newlines_since_anchor: int = 0
    """Unnumbered scans: the newlines between `anchor` and `line_start`."""


_ANCHOR_BYTES = 64 * 1024
"""An unnumbered scan counts newlines only from the last multiple of this before each line it keeps: the store's
line index (64 KiB chunks by default) knows the newlines before every such offset."""


class ImportantLinesScan:
    """The important-lines scan, fed a payload in pieces that end at line ends (or whole, in one piece).

    Selects exactly what one `_IMPORTANT` pass over the whole payload selects; lines are numbered as it goes
    (`count_lines=True`) or left for the caller to resolve from their byte offsets (a streamed spill asks the
    store's line index instead of counting every newline twice).
    """

    def __init__(self, *, count_lines: bool = True) -> None:
        self._count = count_lines
        self._by_rank: list[list[_Pending]] = [[] for _ in _RANKS]
        self._scanned = 0
        self._line_number = 1
        self._finder = _literal_finder()
        self._tails: dict[int, int] = {}
        """Unnumbered scans: for each piece start not on an anchor, the newlines from the anchor before it."""

    @property
    def stopped(self) -> bool:
        """Whether the scan stopped at `_MAX_MATCHES_SCANNED` (a very noisy payload)."""
        return self._scanned > _MAX_MATCHES_SCANNED

    def feed(self, data: bytes, base: int = 0) -> None:
        """Scan `data`, the next piece of the payload, starting at byte `base` and ending at a line end (or the end)."""
        if self.stopped:
            return
        line_number = self._line_number
        counted_to = 0
        # The line of the previous match, `[start, end)`: later matches in it reuse it, so a long line with many
        # matches is walked once, not once per match (which made a 48 MB one-line payload take 48 s).
        start, end = -1, -1
        shown_until = -1
        anchor = 0
        since_anchor = 0
        for region_start, region_end in _candidate_regions(data, self._finder):
            for match in _IMPORTANT.finditer(data, region_start, region_end):
                self._scanned += 1
                if self._scanned > _MAX_MATCHES_SCANNED:
                    return
                if self._scanned % 64 == 0:
                    hand_over()
                at = match.start()
                same_line = start <= at < end
                if not same_line:
                    # Both searches are bounded: back to the previous line's end, forward to this line's end (once).
                    start = data.rfind(b'\n', max(end, 0), at) + 1
                    found = data.find(b'\n', at)
                    end = found if found != -1 else len(data)
                long_line = end - start > LINE_CHARS
                # One entry per line, ranked by its first (leftmost) match; a long line (a log inside one JSON
                # string, say) gets an excerpt around each match not already shown, so a match deep in it is seen.
                if same_line and (not long_line or at < shown_until):
                    continue
                if not same_line and self._count:
                    line_number += data.count(b'\n', counted_to, start)
                    counted_to = start
                number = line_number if self._count else 0
                if not same_line and not self._count:
                    # Count from the last anchor before the line (or the piece start): bounded by `_ANCHOR_BYTES`.
                    line_anchor = max(0, (base + start) // _ANCHOR_BYTES * _ANCHOR_BYTES - base)
                    if line_anchor > anchor or counted_to < anchor:
                        anchor = counted_to = line_anchor
                        since_anchor = 0
                    since_anchor += data.count(b'\n', counted_to, start)
                    counted_to = start
                rank = next(rank for rank in range(len(_RANKS)) if match.group(rank + 1) is not None)
                if long_line:
                    low = max(start, at - _EXCERPT_BEFORE)
                    high = min(end, low + _EXCERPT_BYTES)
                    shown_until = high
                    excerpt = data[low:high].decode('utf-8', 'replace').strip('\ufffd')
                    excerpt = ('[...]' if low > start else '') + excerpt + ('[...]' if high < end else '')
                    column = low - start
                else:
                    excerpt, column = data[start:end].decode('utf-8', 'replace'), 0
                self._by_rank[rank].append(
                    _Pending(base + start, number, column, excerpt, rank, base + anchor, since_anchor)
                )
        if self._count:
            self._line_number = line_number + data.count(b'\n', counted_to)
        else:
            self._record_tail(data, base)

    def _record_tail(self, data: bytes, base: int) -> None:
        """Remember the newlines from the last anchor to the end of this piece, for the piece that follows."""
        end = base + len(data)
        last_anchor = end // _ANCHOR_BYTES * _ANCHOR_BYTES
        if end % _ANCHOR_BYTES == 0:
            return
        if last_anchor >= base:
            self._tails[end] = data.count(b'\n', last_anchor - base)
        else:
            self._tails[end] = data.count(b'\n') + self._tails.get(base, 0)

    def numbers_from_index(self, chosen: Sequence[_Pending], index: LineIndex) -> list[int]:
        """The line numbers of `chosen` (from an unnumbered scan), from the payload's line index.

        `ValueError` when the index's chunks do not fall on anchors (a custom store's unusual chunk size).
        """
        if _ANCHOR_BYTES % index.chunk_size:
            raise ValueError('the line index chunk size does not divide the anchor spacing')
        numbers: list[int] = []
        for line in chosen:
            anchor = line.anchor
            aligned = anchor // _ANCHOR_BYTES * _ANCHOR_BYTES
            chunk = aligned // index.chunk_size
            before = index.newlines_before[chunk] if chunk < len(index.newlines_before) else index.newline_count
            if aligned != anchor:
                before += self._tails.get(anchor, 0)
            numbers.append(before + line.newlines_since_anchor + 1)
        return numbers

    def chosen(self) -> list[_Pending]:
        """Up to `_MAX_IMPORTANT` lines, most important first (verdicts, exceptions, context)."""
        chosen: list[_Pending] = []
        for found in self._by_rank:
            chosen += _spread(found, _MAX_IMPORTANT - len(chosen))
        return chosen

    def result(self, numbers: Sequence[int] | None = None) -> tuple[list[ImportantLine], bool]:
        """The chosen lines and whether the scan stopped early; `numbers` are their line numbers when not counted."""
        chosen = self.chosen()
        if numbers is None:
            numbers = [line.number for line in chosen]
        lines = [ImportantLine(n, line.column, line.text, line.rank) for n, line in zip(numbers, chosen)]
        return lines, self.stopped


def important_lines(text: str | bytes) -> tuple[list[ImportantLine], bool]:
    """Up to a handful of lines that look like failures, most important first (verdicts, exceptions, context).

    Scans the UTF-8 bytes (pass them when you have them): RE2 is linear in time on bytes, and bytes take lone
    surrogates and invalid UTF-8 in their stride. A literal prefilter leaves RE2 only the blocks of lines that can
    match. Returns the lines and whether the scan stopped early on a very noisy payload.
    """
    data = text if isinstance(text, bytes) else text.encode('utf-8', 'surrogatepass')
    scan = ImportantLinesScan()
    scan.feed(data)
    return scan.result()


def _spread(found: list[_L], limit: int) -> list[_L]:
    """The first few and the last one: the first failure and the final verdict matter most."""
    if len(found) <= limit:
        return found
    if limit <= 1:
        return found[:limit]
    return [*found[: limit - 1], found[-1]]
