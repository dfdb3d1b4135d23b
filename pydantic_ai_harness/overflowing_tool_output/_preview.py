"""What the model sees in place of a spilled payload: a header, how to read the rest, and a preview."""

from __future__ import annotations

import functools
import importlib
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

import re2  # pyright: ignore[reportMissingTypeStubs]

from .._gil import hand_over
from ._markers import PREVIEW_FOLLOWS, SpillSummary, spill_header, spill_how_to_read
from .stores._line_index import LineIndex

__all__ = (
    'ImportantLinesScan',
    'binary_preview',
    'detect_binary_type',
    'important_lines',
    'shape_sketch',
    'text_preview',
    'workspace_file_line',
)


class _Match(Protocol):
    def start(self) -> int: ...
    def group(self, index: int) -> bytes | None: ...


class _Pattern(Protocol):
    def finditer(self, text: bytes, pos: int = ..., endpos: int = ...) -> Iterator[_Match]: ...


# RE2: one linear-time pass over a payload of any size (Python's `re` takes ~50x longer on this alternation).
_IMPORTANT = cast(
    _Pattern,
    re2.compile(  # pyright: ignore[reportUnknownMemberType]
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

_LINE_CHARS = 160
"""Preview lines longer than this are cut; the full line is in the store."""

_EXCERPT_BYTES = 140
"""The bytes of a long line shown around an important match (with `[...]` on each cut side, within `_LINE_CHARS`)."""

_EXCERPT_BEFORE = 40
"""How much of an excerpt comes before the match."""


def _clip(line: str) -> str:
    return line if len(line) <= _LINE_CHARS else f'{line[:_LINE_CHARS]}[... line cut, {len(line)} chars]'


def _numbered(lines: list[tuple[int, str]]) -> str:
    return ''.join(f'{number}| {_clip(line)}\n' for number, line in lines)


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
        options: Any = re2.Options()
        options.never_capture = True
        alternation = b'|'.join(_IMPORTANT_LITERALS)  # plain words and spaces: nothing to escape
        self._regex: Any = re2.compile(alternation, options)  # pyright: ignore[reportUnknownMemberType]

    def first(self, data: bytes, start: int, end: int) -> int:
        found = self._regex.search(data, start, end)
        return -1 if found is None else int(found.start())


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
                long_line = end - start > _LINE_CHARS
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


_WINDOW_BYTES = 64 * 1024
"""The first and last lines of a preview come from this much of each end of the stored text."""

_SHOWN_BYTES = 160
"""Preview lines longer than this (in bytes) are cut, with the byte offset to read the rest from."""


@dataclass(frozen=True)
class _Shown:
    """A line of the stored text, as the preview shows it."""

    number: int
    text: str
    start: int
    """The byte where the line starts."""

    whole: bool
    """Whether `text` is the whole line (else the line goes on past the window it was read from)."""

    cut: bool = False
    """Whether only the start of the line is shown (with a marker saying where to read on)."""


def _windows(text: str | None, pieces: Sequence[bytes] | None, nbytes: int) -> tuple[bytes, bytes, int]:
    """The first and last `_WINDOW_BYTES` or so of the stored text (UTF-8), and the byte where the last ones start."""
    if pieces is not None:
        head = _first_bytes(pieces, _WINDOW_BYTES)
        tail = _last_bytes(pieces, _WINDOW_BYTES)
    else:
        source = text or ''
        head = source[:_WINDOW_BYTES].encode('utf-8', 'surrogatepass')
        tail = source[-_WINDOW_BYTES:].encode('utf-8', 'surrogatepass') if source else b''
    if len(head) >= nbytes:
        return head, head, 0
    return head, tail, nbytes - len(tail)


def _first_bytes(pieces: Sequence[bytes], limit: int) -> bytes:
    taken: list[bytes] = []
    size = 0
    for piece in pieces:
        taken.append(piece[: limit - size])
        size += len(taken[-1])
        if size >= limit:
            break
    return b''.join(taken)


def _last_bytes(pieces: Sequence[bytes], limit: int) -> bytes:
    taken: list[bytes] = []
    size = 0
    for piece in reversed(pieces):
        need = limit - size
        taken.append(piece[-need:] if len(piece) > need else piece)
        size += len(taken[-1])
        if size >= limit:
            break
    return b''.join(reversed(taken))


def _line_text(line: bytes) -> tuple[str, int]:
    """The shown part of a line and how many of its bytes that is (cut at `_SHOWN_BYTES`, on a character boundary)."""
    if len(line) <= _SHOWN_BYTES:
        return line.decode('utf-8', 'replace'), len(line)
    cut = _SHOWN_BYTES
    while cut > _SHOWN_BYTES - 3 and (line[cut] & 0xC0) == 0x80:
        cut -= 1  # not inside a UTF-8 sequence
    return line[:cut].decode('utf-8', 'replace'), cut


def _render_shown(line: _Shown) -> str:
    return f'{line.number}| {line.text}\n'


def _shown(number: int, line: bytes, start: int, whole: bool) -> _Shown:
    text, shown_bytes = _line_text(line)
    cut = shown_bytes < len(line) or not whole
    if cut:
        text += f"[... line cut: read on with unit='bytes', offset={start + shown_bytes}]"
    return _Shown(number, text, start, whole, cut)


_BRACKETS = frozenset({b'[', b']', b'{', b'}', b'],', b'},'})
"""Lines of a JSON layout that hold only a bracket: a preview leaves them out (the shape sketch says as much)."""

_WORD = re.compile(rb'[\w\x80-\xff]+')
"""A word of a line shape: letters, digits, underscores, and any non-ASCII UTF-8 (so `é` does not split a word)."""

_JSON_MEMBER = re.compile(rb'\s*"(?:[^"\\]|\\.)*"\s*:')
"""An object member on its own line of a JSON layout (`"next_cursor":null,`): each says something of its own."""

HEAD_REPEATS = 3
"""The first lines of a preview stop before a line of a shape they have shown this many times already."""

TAIL_REPEATS = 2
"""The last lines of a preview stop before a line of a shape they have shown this many times already."""


def line_shape(line: bytes, *, json: bool = False) -> bytes | None:
    """A line with every word (`_WORD`) replaced by one `w`: rows of one record layout (`SKU-16698: bolt costs
    723.21 EUR`, a CSV row, a compact JSON record) share a shape, prose rarely does. `None` for a line that is no
    row: a blank one, or a member of an object in a JSON layout (`json`).

    More rows of a shape already shown tell a model nothing it can use, and a preview is paid for again on every
    later request: the head and the tail stop at the first row past `HEAD_REPEATS` / `TAIL_REPEATS` of one shape.
    A trailing comma is left out, so the last element of an array has the shape of the others.
    """
    line = line[:_SHOWN_BYTES].rstrip().removesuffix(b',')
    if not line or (json and _JSON_MEMBER.match(line)):
        return None
    return _WORD.sub(b'w', line)


def _head_tail_lines(
    windows: tuple[bytes, bytes, int], total_lines: int, budget: int, shown: set[int], *, json: bool = False
) -> tuple[list[_Shown], list[_Shown]]:
    """As many lines from the start (about 60% of `budget`) and then the end as fit, except `shown` ones, each
    stopping where it would repeat a line shape too often (`line_shape`).

    `json`: the text is a JSON layout, whose bracket-only lines are left out.
    """
    head_window, tail_window, tail_base = windows
    whole_text = tail_base == 0 and head_window is tail_window
    head: list[_Shown] = []
    shapes: Counter[bytes] = Counter()
    used = 0
    position = 0
    number = 1
    while number <= total_lines and position < len(head_window):
        end = head_window.find(b'\n', position)
        whole = end != -1 or whole_text
        if end == -1:
            end = len(head_window)
        if number not in shown and not (json and head_window[position:end].strip() in _BRACKETS):
            shape = line_shape(head_window[position:end], json=json)
            if shape is not None and shapes[shape] >= HEAD_REPEATS:
                break
            line = _shown(number, head_window[position:end], position, whole)
            cost = len(_render_shown(line))
            if used + cost > budget * 3 // 5:
                break
            if shape is not None:
                shapes[shape] += 1
            head.append(line)
            used += cost
        if not whole:
            break
        position = end + 1
        number += 1
    tail: list[_Shown] = []
    shapes.clear()
    end = len(tail_window) - 1 if tail_window.endswith(b'\n') else len(tail_window)
    number = total_lines
    while number > (head[-1].number if head else 0) and end >= 0:
        start = tail_window.rfind(b'\n', 0, end) + 1
        if start == 0 and tail_base > 0:
            break  # the line begins before the window: too long to show from the end
        if number not in shown and not (json and tail_window[start:end].strip() in _BRACKETS):
            shape = line_shape(tail_window[start:end], json=json)
            if shape is not None and shapes[shape] >= TAIL_REPEATS:
                break
            line = _shown(number, tail_window[start:end], tail_base + start, True)
            cost = len(_render_shown(line))
            if used + cost > budget:
                break
            if shape is not None:
                shapes[shape] += 1
            tail.append(line)
            used += cost
        number -= 1
        end = start - 1
    return head, tail[::-1]


def _label(which: str, lines: list[_Shown]) -> str:
    """`First lines (2-4)`, or `First line (2)` for one."""
    first, last = lines[0].number, lines[-1].number
    return f'{which} line ({first})' if first == last else f'{which} lines ({first}-{last})'


def count_lines(text: str) -> int:
    """Lines as an editor counts them: a trailing newline does not start a new line."""
    if not text:
        return 0
    return text.count('\n') + (0 if text.endswith('\n') else 1)


def _important_block(found: list[ImportantLine], noisy: bool) -> str:
    block = 'Lines that look important (errors, failures, exit status):\n'
    block += _numbered([(line.number, line.text) for line in sorted(found)])
    return block + ('(many more lines match; grep for what you need)\n' if noisy else '')


def text_preview(
    summary: SpillSummary,
    text: str | None,
    budget: int,
    *,
    shape: str | None = None,
    data: bytes | None = None,
    important: tuple[list[ImportantLine], bool] | None = None,
    pieces: Sequence[bytes] | None = None,
) -> str:
    """The model-visible replacement for a spilled text or structured payload.

    The stored text is `text`, or the UTF-8 `pieces` it was written in (a structured value's layout); `data` is its
    UTF-8, if at hand; `important` the result of `important_lines` when the caller scanned already (beside the
    store write, say).
    """
    one_line = summary.lines <= 1 and not summary.json
    parts = [spill_header(summary), spill_how_to_read(one_line=one_line)]
    if summary.path is not None:
        # Without the query tools the file line replaces the paging hint, and closes the header's bracket.
        file_line = workspace_file_line()
        parts[1:] = [parts[1], file_line] if summary.query_tools else [file_line[1:]]
    used = sum(len(p) for p in parts)
    previewless = len(parts)
    if shape:
        sketch = f'Shape: {shape}\n'
        if used + len(sketch) <= budget:
            parts.append(sketch)
            used += len(sketch)
    if important is None:
        important = important_lines(data if data is not None else b''.join(pieces or ()) if text is None else text)
    found, noisy = important
    found = list(found)
    shown: set[int] = set()
    # Important lines may take up to two thirds of what is left; the least important go first when short.
    allowance = max(0, (budget - used) * 2 // 3)
    while found:
        block = _important_block(found, noisy)
        if len(block) <= allowance:
            parts.append(block)
            used += len(block)
            shown = {line.number for line in found}
            break
        found.remove(max(found, key=lambda line: (line.rank, -line.number)))
    windows = _windows(text, pieces, summary.nbytes)
    head, tail = _head_tail_lines(windows, summary.lines, max(0, budget - used - 60), shown, json=summary.json)
    if head and one_line:
        # One line has no line numbers worth showing: its start, with the byte offset to read on from (or all of it).
        parts.append(f'{"Start of the one line" if head[0].cut else "The one line"}:\n{head[0].text}')
    elif head:
        parts.append(f'{_label("First", head)[:-1]} of {summary.lines}):\n' + ''.join(map(_render_shown, head)))
    if tail:
        parts.append(f'{_label("Last", tail)}:\n' + ''.join(map(_render_shown, tail)))
    if len(parts) == previewless:
        # `preview_chars` left no room for any line: the header must not promise a preview.
        parts[0] = parts[0].replace(f'; {PREVIEW_FOLLOWS}.', '.')
    return ''.join(parts).rstrip('\n')


_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b'\x89PNG\r\n\x1a\n', 'PNG image', 'image/png'),
    (b'\xff\xd8\xff', 'JPEG image', 'image/jpeg'),
    (b'GIF87a', 'GIF image', 'image/gif'),
    (b'GIF89a', 'GIF image', 'image/gif'),
    (b'%PDF-', 'PDF document', 'application/pdf'),
    (b'PK\x03\x04', 'ZIP archive (or docx/xlsx/jar)', 'application/zip'),
    (b'\x1f\x8b', 'gzip-compressed data', 'application/gzip'),
    (b'BZh', 'bzip2-compressed data', 'application/x-bzip2'),
    (b'\xfd7zXZ\x00', 'xz-compressed data', 'application/x-xz'),
    (b'(\xb5/\xfd', 'zstd-compressed data', 'application/zstd'),
    (b'\x7fELF', 'ELF executable', 'application/x-executable'),
    (b'SQLite format 3\x00', 'SQLite database', 'application/vnd.sqlite3'),
    (b'OggS', 'Ogg media', 'audio/ogg'),
    (b'ID3', 'MP3 audio', 'audio/mpeg'),
    (b'\x00asm', 'WebAssembly module', 'application/wasm'),
)


def detect_binary_type(data: bytes, declared: str | None = None) -> str:
    """A short description of what the bytes are, from their magic number (and the declared media type)."""
    head = data[:16]
    for magic, description, media_type in _MAGIC:
        if head.startswith(magic):
            return f'{description}, {media_type}'
    if head[:4] == b'RIFF' and data[8:12] == b'WEBP':
        return 'WebP image, image/webp'
    if head[:4] == b'RIFF' and data[8:12] == b'WAVE':
        return 'WAV audio, audio/wav'
    if declared:
        return f'declared as {declared}'
    return 'unknown binary data'


def binary_preview(
    tool_name: str, handle: str, data: bytes, declared: str | None, *, path: str | None = None, query_tools: bool = True
) -> str:
    """The model-visible replacement for a spilled binary payload (`path`: its file in the workspace, if any)."""
    kind = detect_binary_type(data, declared)
    sample = data[:32].hex(' ')
    how = (
        "read_tool_result(handle, unit='bytes', offset=0, limit=512) shows a hex dump of a byte range; "
        'grep_tool_result(handle, pattern) searches it for text.'
    )
    if path is not None:
        where = workspace_file_line()[1:-2] + '.'
        how = f'{how} {where}' if query_tools else where
    return (
        f'[`{tool_name}` returned binary data ({len(data)} bytes, {kind}), which cannot be shown as text. '
        f"Saved verbatim under handle '{handle}'.\n"
        f'{how}]\n'
        f'First bytes: {sample}'
    )


def workspace_file_line() -> str:
    """The preview line saying that the handle is also a file the agent's own tools can open.

    The handle is the file's path, so the path is not repeated: it is stated once, in the header.
    """
    return (
        "[That handle is also the file's path, relative to your workspace's working directory: your own file and "
        'shell tools work on it (grep -n, sed -n, head; jq for JSON).]\n'
    )


def shape_sketch(value: Any, depth: int = 2, plain: Callable[[Any], Any] | None = None) -> str:
    """Keys and types, array lengths, two levels deep: enough to know what to grep for.

    An array is sketched from a sample of its elements spread over all of it (`_SAMPLE`), their keys and types
    merged: a key missing from some is marked `?`, differing types are joined with `|`, and nested array lengths
    are given as a range. `plain` turns an object (a model, a dataclass) into its JSON-compatible form.
    """
    return _merged([value], depth, plain or (lambda item: item))


_MAX_KEYS = 12

_SAMPLE = 50
"""How many elements of an array, evenly spread over it (first and last included), its sketch merges."""

_MAX_ALTERNATIVES = 3
"""Past this many different types, a sketch says `mixed`."""

_SCALARS: dict[type, str] = {bool: 'bool', int: 'int', float: 'float', str: 'str', type(None): 'null'}


def _sample(items: Sequence[Any]) -> list[Any]:
    if len(items) <= _SAMPLE:
        return list(items)
    step = (len(items) - 1) / (_SAMPLE - 1)
    return [items[round(i * step)] for i in range(_SAMPLE)]


def _merged(values: list[Any], depth: int, plain: Callable[[Any], Any]) -> str:
    """One sketch for all of `values` (elements of the same place in a document)."""
    values = [
        value if type(value) in _SCALARS or type(value) in (dict, list, tuple) else plain(value) for value in values
    ]
    dicts = [cast('dict[Any, Any]', value) for value in values if isinstance(value, dict)]
    arrays = [cast('Sequence[Any]', value) for value in values if isinstance(value, (list, tuple))]
    alternatives: list[str] = []
    if dicts:
        alternatives.append(_merged_objects(dicts, depth, plain))
    if arrays:
        alternatives.append(_merged_arrays(arrays, depth, plain))
    for value in values:
        kind = cast('type[Any]', type(value))
        name = _SCALARS.get(kind, kind.__name__)
        if not isinstance(value, (dict, list, tuple)) and name not in alternatives:
            alternatives.append(name)
    if len(alternatives) > _MAX_ALTERNATIVES:
        return 'mixed'
    return ' | '.join(alternatives)


def _count_range(counts: Sequence[int]) -> str:
    low, high = min(counts), max(counts)
    return str(low) if low == high else f'{low}-{high}'


def _merged_objects(dicts: list[dict[Any, Any]], depth: int, plain: Callable[[Any], Any]) -> str:
    if depth <= 0:
        return f'object({_count_range([len(d) for d in dicts])} keys)'
    keys: dict[Any, None] = {}
    for mapping in dicts:
        for key in mapping:
            keys.setdefault(key, None)
            if len(keys) > _MAX_KEYS:
                break
    shown: list[str] = []
    for key in list(keys)[:_MAX_KEYS]:
        present = [mapping[key] for mapping in dicts if key in mapping]
        optional = '?' if len(present) < len(dicts) else ''
        shown.append(f'{key}{optional}: {_merged(present, depth - 1, plain)}')
    most = max(len(mapping) for mapping in dicts)
    more = f', ... {most - _MAX_KEYS} more keys' if most > _MAX_KEYS else ''
    return f'{{{", ".join(shown)}{more}}}'


def _merged_arrays(arrays: list[Sequence[Any]], depth: int, plain: Callable[[Any], Any]) -> str:
    length = _count_range([len(array) for array in arrays])
    elements = [element for array in _sample(arrays) for element in _sample(array)]
    if not elements:
        return f'array[{length}]'
    if depth <= 0:
        return f'array[{length}]'
    return f'array[{length}] of {_merged(_sample(elements), depth, plain)}'  # elements sit at the array's own level
