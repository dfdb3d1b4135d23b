"""Read and grep algorithms over a stored payload, O(window) whenever the store supports it.

A [`Payload`][] wraps whatever the store offers: range reads plus a line index (O(window) reads),
range reads alone (the index is built by streaming the payload once per call, bounded memory), or
just `read()` (the payload is loaded once per call). Everything model-facing lives in `_tools.py`;
this module returns plain data.
"""

from __future__ import annotations

import codecs
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar, cast

import anyio.lowlevel
import anyio.to_thread
from typing_extensions import Self

from .._gil import past
from ._literals import required_literals
from .stores._line_index import LineIndex, LineIndexBuilder, build_line_index, nth_newline
from .stores._protocol import LineIndexedStore, OpenableStore, OverflowStore, PayloadReader, RangeReadableStore

__all__ = (
    'ByteWindow',
    'GrepResult',
    'Hit',
    'Line',
    'Matcher',
    'PatternError',
    'Payload',
    'grep_bytes',
    'grep_lines',
    'grep_lines_backward',
    'hex_dump',
    'line_of_offset',
    'line_start',
    'open_payload',
    'read_byte_window',
    'read_lines',
    'read_lines_at',
    'sniff_type',
)

SCAN_BLOCK = 4 << 20
"""Bytes read per step while scanning (grep, streaming an index)."""

WINDOW_BLOCK = 256 << 10
"""Bytes read per step while collecting a window of lines."""


_T = TypeVar('_T')

Buffer = bytes | bytearray
"""A block being scanned: `bytes`, or a `bytearray` reused from block to block."""


_TOO_COMPLEX = (
    'the pattern is too complex to search quickly (counted repetitions such as {200} or \\pL{50} multiply its '
    'size); use smaller counts, or search for a literal part of it'
)


class PatternError(ValueError):
    """A pattern that cannot be used (invalid regular expression, too complex)."""


class _Regex(Protocol):
    def search(self, text: Buffer, pos: int = ..., endpos: int = ...) -> _RegexMatch | None: ...


class _RegexMatch(Protocol):
    def start(self) -> int: ...
    def end(self) -> int: ...


@dataclass(frozen=True)
class Matcher:
    """A literal or an RE2 regular expression, matched within one line (never across a newline)."""

    literal: bytes | None
    """The literal to find, or `None` for a regex."""

    regex: Any
    """The compiled RE2 object when `literal` is `None`."""

    program_size: int = 0
    """Instructions in the compiled RE2 program (0 for a literal): what bounds the cost of a search per byte."""

    required: tuple[bytes, ...] = ()
    """For a regex: literals one of which every match contains (see `_literals`); lines holding none of them are
    skipped without running RE2. Empty when the pattern has no such literals."""

    finders: tuple[LiteralSearch, ...] = ()
    """How to find the literal (or each of `required`), faster than `bytes.find`."""

    @classmethod
    def compile(cls, pattern: str, *, is_regex: bool) -> Matcher:
        """Build a matcher; `PatternError` for an invalid or too complex regex."""
        if not is_regex:
            literal = pattern.encode('utf-8', errors='surrogatepass')
            return cls(literal, None, finders=(LiteralSearch(literal),))
        import re2  # pyright: ignore[reportMissingTypeStubs]

        options: Any = re2.Options()
        options.log_errors = False
        # `never_nl` keeps every match inside one line; `(?m)` makes ^ and $ line anchors.
        options.never_nl = True
        # Only the span of the whole match is used: tracking groups would run RE2's slow NFA (~1,000x on
        # capture-heavy patterns such as `((.)*)` repeated).
        options.never_capture = True
        # A small memory budget bounds the compile itself (~20 ms); bigger programs fail fast and are refused.
        options.max_mem = 2 << 20
        try:
            compiled: Any = re2.compile(b'(?m)' + pattern.encode('utf-8', errors='surrogatepass'), options)  # pyright: ignore[reportUnknownMemberType]
        except Exception as exc:  # noqa: BLE001 - re2.error, and anything odd the binding raises
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode('utf-8', errors='replace')
            if 'too large' in str(detail):
                raise PatternError(_TOO_COMPLEX) from None
            raise PatternError(str(detail)) from None
        program_size = int(compiled.programsize)
        if program_size > MAX_PROGRAM_SIZE:
            raise PatternError(_TOO_COMPLEX)
        required = required_literals(pattern)
        if len(required) == 1 and pattern.encode('utf-8', 'surrogatepass').startswith(required[0]):
            required = ()  # RE2 finds a literal prefix itself, as fast as a prefilter would
        return cls(None, compiled, program_size, required, tuple(LiteralSearch(literal) for literal in required))

    def search(self, buffer: Buffer, start: int, end: int) -> tuple[int, int]:
        """The first match in `buffer[start:end]` as `(start, end)`, or `(-1, -1)`."""
        if self.literal is not None:
            found = self.finders[0].find(buffer, start, end) if self.finders else buffer.find(self.literal, start, end)
            return (found, found + len(self.literal)) if found != -1 else (-1, -1)
        match = cast(_Regex, self.regex).search(buffer, start, end)
        if match is None:
            return -1, -1
        return match.start(), match.end()


_COMMON_BYTES = frozenset(b' etaoinsrhldcumfpgwybvk')
_USUAL_BYTES = frozenset(b'jqxz0123456789.,:;-/_=()[]{}"\'\t')


def _rarity(byte: int) -> int:
    """How rare `byte` is in typical text and logs, roughly: 0 (a space, common letters) to 3 (symbols, non-ASCII)."""
    if byte in _COMMON_BYTES:
        return 0
    if byte in _USUAL_BYTES:
        return 1
    return 2 if 0x41 <= byte <= 0x5A else 3


class LiteralSearch:
    """Finds a literal (leftmost first) by letting RE2 skip to its rarest byte with `memchr`.

    RE2 accelerates the first byte of a literal pattern; starting the pattern at the literal's rarest byte (and
    checking the bytes before it) makes the skips long, several times faster than `bytes.find` on typical text.
    After a few false candidates in one call, `bytes.find` takes over, so text full of that byte costs no more.
    """

    _FALSE_CANDIDATES = 8

    def __init__(self, literal: bytes) -> None:
        self.literal = literal
        self._skip = 0
        self._regex: Any = None
        if not literal or b'\n' in literal:
            return  # RE2's line-bound options would never match a newline: `bytes.find` serves
        self._skip = max(range(len(literal)), key=lambda offset: (_rarity(literal[offset]), -offset))
        import re2  # pyright: ignore[reportMissingTypeStubs]

        options: Any = re2.Options()
        options.log_errors = False
        options.never_capture = True
        options.encoding = cast(Any, re2.Options).Encoding.LATIN1  # byte for byte: invalid UTF-8 is literal too
        escaped = cast(bytes, re2.escape(literal[self._skip :]))  # pyright: ignore[reportUnknownMemberType]
        try:
            self._regex = re2.compile(escaped, options)  # pyright: ignore[reportUnknownMemberType]
        except Exception:  # noqa: BLE001 - re2.error, or anything odd the binding raises: `bytes.find` serves
            self._regex = None

    def find(self, buffer: Buffer, start: int, end: int) -> int:
        """The first position of the literal in `buffer[start:end]`, or -1."""
        regex = cast('_Regex | None', self._regex)
        if regex is None:
            return buffer.find(self.literal, start, end)
        skip = self._skip
        prefix = self.literal[:skip]
        position = start + skip
        for _ in range(self._FALSE_CANDIDATES):
            if position >= end:
                return -1
            found = regex.search(buffer, position, end)
            if found is None:
                return -1
            at = found.start() - skip
            if not skip or buffer.startswith(prefix, at):
                return at
            position = found.start() + 1
        return buffer.find(self.literal, position - skip, end)


@dataclass(frozen=True)
class Payload:
    """A stored payload opened for querying."""

    handle: str
    """The handle it was opened with."""

    index: LineIndex
    """Its line index (from the store, or built for this call)."""

    read_range: Callable[[int, int], Awaitable[bytes]]
    """Bytes `[start, end)`, clamped to the payload."""

    open_reader: Callable[[], Awaitable[PayloadReader]] | None = None
    """Opens the payload once for the block reads of one scan, when the store can (else `read_range` serves)."""

    @property
    def size(self) -> int:
        """The payload size in bytes."""
        return self.index.size


async def open_payload(store: OverflowStore, handle: str) -> Payload:
    """Open `handle` with the cheapest access the store supports. Store errors propagate unchanged."""
    if isinstance(store, RangeReadableStore):
        range_store = store

        async def read_range(start: int, end: int) -> bytes:
            return await range_store.read_range(handle, max(0, start), max(0, end))

        if isinstance(store, LineIndexedStore):
            index = await store.line_index(handle)
        else:
            index = await _stream_index(read_range, await range_store.size(handle))
        opener = partial(store.open_reader, handle) if isinstance(store, OpenableStore) else None
        return Payload(handle, index, read_range, opener)
    data = await store.read(handle)
    if not isinstance(data, bytes):  # pyright: ignore[reportUnnecessaryIsInstance] - custom stores may return bytearray
        data = bytes(data)
    whole = data

    async def read_slice(start: int, end: int) -> bytes:
        return whole[max(0, start) : max(0, end)]

    return Payload(handle, build_line_index(whole), read_slice)


class _Blocks:
    """The block reads of one scan: through one handle opened for the whole scan when the store offers one (into
    one buffer reused from block to block, sparing the page faults of a fresh 4 MiB block each time), else through
    `read_range`. A block returned by `read` is valid until the next `read`.
    """

    def __init__(self, payload: Payload) -> None:
        self._payload = payload
        self._reader: PayloadReader | None = None
        self._buffer = bytearray()

    async def __aenter__(self) -> Self:
        if self._payload.open_reader is not None:
            self._reader = await self._payload.open_reader()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    async def read(self, start: int, end: int) -> Buffer:
        """Bytes `[start, end)`, clamped to the payload."""
        reader = self._reader
        if reader is None:
            return await self._payload.read_range(start, end)
        await anyio.to_thread.run_sync(reader.read_into, self._buffer, start, end)
        return self._buffer


async def _stream_index(read_range: Callable[[int, int], Awaitable[bytes]], size: int) -> LineIndex:
    builder = LineIndexBuilder()
    position = 0
    while position < size:
        block = await read_range(position, min(size, position + SCAN_BLOCK))
        if not block:
            break
        builder.feed(block)
        position += len(block)
    return builder.finish()


async def line_start(payload: Payload, line: int) -> int:
    """The byte where 0-based `line` starts (`payload.size` past the last line)."""
    index = payload.index
    if line <= 0:
        return 0
    if line > index.newline_count:
        return index.size
    chunk_start, rank = index.chunk_of_newline(line)
    chunk = await payload.read_range(chunk_start, chunk_start + index.chunk_size)
    position = nth_newline(chunk, rank)
    if position == -1:  # pragma: no cover - only with an index that does not match its payload
        raise ValueError('line index does not match the payload')
    return chunk_start + position + 1


async def line_of_offset(payload: Payload, offset: int) -> int:
    """The 0-based line holding byte `offset`."""
    offset = max(0, min(offset, payload.size))
    chunk_start, before = payload.index.chunk_of_offset(offset)
    if offset <= chunk_start:
        return before
    head = await payload.read_range(chunk_start, offset)
    return before + head.count(b'\n')


@dataclass(frozen=True)
class Line:
    """One line as shown: decoded, and cut when it is too long."""

    number: int
    """1-based line number."""

    text: str
    """The decoded text (without the newline, and without a trailing `\\r`)."""

    start: int
    """Byte offset of the line start."""

    length: int
    """Length of the whole line in bytes, without its newline."""

    shown_bytes: int
    """How many of those bytes `text` shows (less than `length` when the line was cut)."""

    @property
    def cut(self) -> bool:
        """Whether the line was cut."""
        return self.shown_bytes < self.length


_ESCAPED_TO_REPLACEMENT = {code: '\ufffd' for code in range(0xDC80, 0xDD00)}
"""`str.translate` table: the lone surrogates `surrogateescape` decodes invalid bytes to, shown as U+FFFD."""


def _decode_line(number: int, start: int, raw: bytes, length: int, max_chars: int) -> Line:
    # `surrogateescape` maps each invalid byte to one character, so a cut's byte count is exact: it re-encodes
    # to the very bytes shown. A character cut at the end of a partial read is left out, not shown broken.
    partial = length > len(raw)
    text, _ = codecs.utf_8_decode(raw, 'surrogateescape', not partial)
    if partial or len(text) > max_chars:
        text = text[:max_chars]
        shown = len(text.encode('utf-8', 'surrogateescape'))
        return Line(number, text.translate(_ESCAPED_TO_REPLACEMENT), start, length, shown)
    return Line(number, text.translate(_ESCAPED_TO_REPLACEMENT).removesuffix('\r'), start, length, length)


async def read_lines(
    payload: Payload, first: int, count: int, max_line_chars: int, *, known_start: int | None = None
) -> list[Line]:
    """Lines `[first, first + count)` (0-based), each cut to `max_line_chars` characters.

    `known_start` is the byte where line `first` starts, when the caller already knows it.
    """
    index = payload.index
    size = payload.size
    max_line_bytes = 4 * max_line_chars + 4
    block_size = max(min(WINDOW_BLOCK, count * 512), max_line_bytes + 1)
    lines: list[Line] = []
    number = max(first, 0)
    position = known_start if known_start is not None else await line_start(payload, number)
    while len(lines) < count and number < index.line_count and position < size:
        block = await payload.read_range(position, position + block_size)
        if not block:
            break
        cursor = 0
        jumped_to: int | None = None
        at_eof = position + len(block) >= size
        while len(lines) < count and cursor < len(block):
            newline = block.find(b'\n', cursor)
            if newline == -1 and not at_eof:
                if cursor > 0 and len(block) - cursor <= max_line_bytes:
                    break  # Re-read from this line's start so it is seen whole.
                # A line longer than the block: show its head, then jump to the next line with the index.
                begin = position + cursor
                next_start = await line_start(payload, number + 1)
                length = _line_length(next_start, begin, index, number)
                lines.append(
                    _decode_line(number + 1, begin, block[cursor : cursor + max_line_bytes], length, max_line_chars)
                )
                number += 1
                jumped_to = next_start
                break
            line_end = len(block) if newline == -1 else newline
            length = line_end - cursor
            raw = block[cursor : cursor + min(length, max_line_bytes)]
            lines.append(_decode_line(number + 1, position + cursor, raw, length, max_line_chars))
            number += 1
            cursor = line_end + 1
        position = jumped_to if jumped_to is not None else position + cursor
        await anyio.lowlevel.checkpoint()
    return lines


async def read_lines_at(payload: Payload, starts: list[tuple[int, int]], max_line_chars: int) -> list[Line]:
    """The lines with the given `(1-based number, start byte)`, in order, reading shared blocks once.

    Used to show many scattered matching lines without one store round trip per line.
    """
    max_line_bytes = 4 * max_line_chars + 4
    block = b''
    block_start = -1
    lines: list[Line] = []
    for number, start in starts:
        offset = start - block_start
        end = block.find(b'\n', offset) if 0 <= offset <= len(block) else -1
        if end == -1 and not (0 <= offset and block_start + len(block) >= payload.size):
            block_start = start
            block = await payload.read_range(start, start + max(WINDOW_BLOCK, max_line_bytes + 1))
            offset = 0
            end = block.find(b'\n')
        if end == -1 and block_start + len(block) < payload.size:
            # Longer than a block: let the general reader cut it and find where it ends.
            lines.extend(await read_lines(payload, number - 1, 1, max_line_chars, known_start=start))
            continue
        end = len(block) if end == -1 else end
        length = end - offset
        lines.append(
            _decode_line(number, start, block[offset : offset + min(length, max_line_bytes)], length, max_line_chars)
        )
    return lines


def _line_length(next_start: int, start: int, index: LineIndex, number: int) -> int:
    # `next_start` is just past this line's newline, or the payload end for a final unterminated line.
    if number + 1 <= index.newline_count:
        return next_start - 1 - start
    return next_start - start


@dataclass(frozen=True)
class ByteWindow:
    """A byte range, its edges moved to UTF-8 character boundaries for text payloads."""

    start: int
    """First byte shown."""

    end: int
    """One past the last byte shown."""

    data: bytes
    """The bytes `[start, end)`."""


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte <= 0xBF


async def read_byte_window(payload: Payload, start: int, length: int, *, utf8_edges: bool) -> ByteWindow:
    """Bytes `[start, start + length)` clamped to the payload; edges nudged off UTF-8 continuation bytes."""
    size = payload.size
    start = max(0, min(start, size))
    end = max(start, min(size, start + max(length, 0)))
    if not utf8_edges:
        return ByteWindow(start, end, await payload.read_range(start, end))
    raw = await payload.read_range(start, min(size, end + 8))
    # Move the start forward past at most 3 continuation bytes, and the end back the same way.
    skip = 0
    while skip < 3 and skip < len(raw) and _is_continuation(raw[skip]):
        skip += 1
    stop = end - start
    back = 0
    while back < 3 and stop - back > skip and stop - back < len(raw) and _is_continuation(raw[stop - back]):
        back += 1
    stop -= back
    if stop <= skip and end > start:
        # A window inside a single character: widen it to the whole character instead of showing nothing.
        stop = skip + 1
        while stop < len(raw) and _is_continuation(raw[stop]):
            stop += 1
    return ByteWindow(start + skip, start + stop, raw[skip:stop])


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

MAX_PROGRAM_SIZE = 20_000
"""Patterns compiling to more RE2 instructions are refused: at the worst cost, 1 KiB would take 0.2 s."""

MIN_SLICE_BYTES = 1 << 10
"""The smallest window a regex search is given (so every search makes progress)."""

SLICE_SECONDS = 0.02
"""At most about how long one regex search over several lines may take."""

LONG_LINE_SECONDS = 0.2
"""At most about how long the search of one long line may take; beyond that the line is searched in part (and
the answer says how far)."""


@dataclass
class _BlockScan:
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

    def __init__(self, block: Buffer, matcher: Matcher, end: int) -> None:
        self._block = block
        self._literals = matcher.required
        self._finders = matcher.finders
        self._end = end
        self._next = [-2] * len(self._literals)  # -2: not searched yet; -1: none left in the block

    def first(self, cursor: int) -> int:
        """The first position at or after `cursor` where a required literal starts; -1 when there is none."""
        best = -1
        for number in range(len(self._finders)):
            at = self._next[number]
            if at != -1 and at < cursor:
                at = self._next[number] = self._finders[number].find(self._block, cursor, self._end)
            if at != -1 and (best == -1 or at < best):
                best = at
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
) -> _BlockScan:
    """Scan the whole lines in `block[begin:search_end]` for `matcher`; runs in a worker thread.

    Records up to `room` hits (the last `room` with `keep_last`, else the first, and with `stop_when_full`
    stops once they are recorded), counts every matching line, and checks `deadline` (a `time.monotonic()`
    value) before every regex search and every 64 literal matches, handing the GIL to the event loop every 2 ms.
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
                return _BlockScan(list(hits), total, cursor, False, True, long_lines, long_limit)
            if candidates is not None:
                # Lines without a required literal cannot match: go to the next line holding one, and let RE2
                # search only as far as the last line holding one in its window.
                candidate = candidates.first(cursor)
                if candidate == -1:
                    break
                cursor = max(cursor, block.rfind(b'\n', cursor, candidate) + 1)
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
            newlines += block.count(b'\n', counted_to, line_begin)
            counted_to = line_begin
            hits.append((newlines, line_begin, found, found_end))
        newline = block.find(b'\n', found, search_end)
        if stop_when_full and len(hits) >= room:
            resume = search_end if newline == -1 else newline + 1
            return _BlockScan(list(hits), total, resume, newline == -1, False, long_lines, long_limit)
        if newline == -1:
            break
        cursor = newline + 1
        checks += 1
        if pacer is None and checks % 64 == 0 and past(deadline):
            return _BlockScan(list(hits), total, cursor, False, True, long_lines, long_limit)
    return _BlockScan(list(hits), total, search_end, True, False, long_lines, long_limit)


async def _in_worker(function: Callable[[], _T]) -> _T:
    return await anyio.to_thread.run_sync(function)


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
) -> GrepResult:
    """Scan lines `[first_line, end_line)` for `matcher`, streaming `SCAN_BLOCK` bytes at a time.

    Counts every matching line, records the first `max_hits` (or the last, with `keep_last`), and stops
    early at `deadline` (a `time.monotonic()` value), or once `max_hits` are recorded with `stop_when_full`.
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

    async def stop(byte: int, *, out_of_time: bool) -> GrepResult:
        line = await line_of_offset(payload, byte)
        return GrepResult(list(hits), total, False, line, byte, long.count, out_of_time, long.limit)

    async with _Blocks(payload) as blocks:
        while position < limit_byte:
            if time.monotonic() > deadline:
                return await stop(position, out_of_time=True)
            block = await blocks.read(position, min(limit_byte, position + SCAN_BLOCK))
            if not block:
                break
            at_end = position + len(block) >= limit_byte
            if at_end:
                search_end = len(block) - (1 if block.endswith(b'\n') else 0)
            else:
                search_end = block.rfind(b'\n')
                if search_end == -1:
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
            room = max_hits if keep_last else max_hits - len(hits)
            search = partial(
                _scan_block,
                block,
                0,
                search_end,
                matcher,
                pacer,
                room=room,
                keep_last=keep_last,
                stop_when_full=stop_when_full,
                deadline=deadline,
            )
            scan = await _in_worker(search)
            if scan.hits:
                first_number = await line_of_offset(payload, position)
                hits.extend(
                    Hit(first_number + newlines + 1, position + line_begin, position + found, position + found_end)
                    for newlines, line_begin, found, found_end in scan.hits
                )
            total += scan.total
            long.add(scan.long_lines, scan.long_line_limit)
            consumed = len(block) if at_end else search_end + 1
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


async def grep_bytes(
    payload: Payload, matcher: Matcher, *, max_hits: int, deadline: float, start: int = 0
) -> GrepResult:
    """Scan a binary payload for `matcher`; hits are byte offsets (overlapping windows catch matches on edges).

    Like `grep_lines`, the searching runs in a worker thread and regex searches are paced by a `Pacer`.
    """
    size = payload.size
    pacer: Pacer | None = None
    if matcher.literal is not None:
        overlap = len(matcher.literal) - 1
    else:
        # A regex match longer than the overlap can be missed where windows meet; the overlap never outweighs the
        # window itself, so a costly pattern's searches stay short.
        pacer = Pacer(matcher)
        overlap = min(4096, pacer.window())
    hits: list[Hit] = []
    total = 0
    position = max(0, start)
    async with _Blocks(payload) as blocks:
        while position < size:
            if time.monotonic() > deadline:
                return GrepResult(hits, total, False, 0, position, out_of_time=True)
            block = await blocks.read(position, min(size, position + SCAN_BLOCK + overlap))
            if not block:
                break
            # Matches starting in the overlap belong to the next block (unless this is the last one).
            last = position + len(block) >= size
            owned = len(block) if last else SCAN_BLOCK
            search = partial(
                _scan_binary_block, block, owned, overlap, matcher, pacer, room=max_hits - len(hits), deadline=deadline
            )
            scan = await _in_worker(search)
            hits.extend(Hit(0, position + start, position + start, position + end) for _, _, start, end in scan.hits)
            total += scan.total
            if not scan.finished:
                return GrepResult(hits, total, False, 0, position + scan.resume, out_of_time=True)
            if last:
                break
            position += SCAN_BLOCK
    return GrepResult(hits, total, True, 0, size)


def _scan_binary_block(
    block: Buffer, owned: int, overlap: int, matcher: Matcher, pacer: Pacer | None, *, room: int, deadline: float
) -> _BlockScan:
    """Every match starting in `block[:owned]`, searched in paced windows that overlap by `overlap` bytes."""
    hits: list[tuple[int, int, int, int]] = []
    total = 0
    cursor = 0
    while cursor < owned:
        if past(deadline):
            return _BlockScan(hits, total, cursor, False, True)
        window_start = cursor
        window_end = len(block) if pacer is None else min(len(block), cursor + pacer.window() + overlap)
        found, found_end = matcher.search(block, cursor, window_end)
        if found == -1 or found >= owned:
            if window_end >= len(block) or found >= owned:
                break
            cursor = max(window_end - overlap, window_start + 1)  # the next window re-reads the overlap
            continue
        total += 1
        if len(hits) < room:
            hits.append((0, found, found, found_end))
        cursor = max(found_end, found + 1)
        if total % 64 == 0 and past(deadline):
            return _BlockScan(hits, total, cursor, False, True)
    return _BlockScan(hits, total, owned, True, False)


def hex_dump(data: bytes, base: int) -> list[str]:
    """Classic hex dump rows: 16 bytes each, with the absolute offset and a printable-ASCII column."""
    rows: list[str] = []
    for offset in range(0, len(data), 16):
        row = data[offset : offset + 16]
        left = ' '.join(f'{byte:02x}' for byte in row[:8])
        right = ' '.join(f'{byte:02x}' for byte in row[8:])
        text = ''.join(chr(byte) if 32 <= byte < 127 else '.' for byte in row)
        rows.append(f'{base + offset:08x}  {left:<23}  {right:<23}  |{text}|')
    return rows


_MAGIC_TYPES: tuple[tuple[bytes, str], ...] = (
    (b'\x89PNG\r\n\x1a\n', 'PNG image'),
    (b'\xff\xd8\xff', 'JPEG image'),
    (b'GIF87a', 'GIF image'),
    (b'GIF89a', 'GIF image'),
    (b'%PDF-', 'PDF document'),
    (b'PK\x03\x04', 'ZIP archive'),
    (b'\x1f\x8b', 'gzip data'),
    (b'\x7fELF', 'ELF executable'),
    (b'SQLite format 3\x00', 'SQLite database'),
)


def sniff_type(head: bytes) -> str | None:
    """A short description of well-known binary formats from their first bytes."""
    for magic, description in _MAGIC_TYPES:
        if head.startswith(magic):
            return description
    if head.startswith(b'RIFF') and head[8:12] == b'WEBP':
        return 'WebP image'
    return None
