"""Read and grep algorithms over a stored payload, O(window) whenever the store supports it.

A [`Payload`][] wraps whatever the store offers: range reads plus a line index (O(window) reads),
range reads alone (the index is built by streaming the payload once per call, bounded memory), or
just `read()` (the payload is loaded once per call). Everything model-facing lives in `_tools.py`;
this module returns plain data.
"""

from __future__ import annotations

import codecs
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import anyio.lowlevel

from .stores._line_index import LineIndex, LineIndexBuilder, build_line_index, nth_newline
from .stores._protocol import LineIndexedStore, OverflowStore, RangeReadableStore

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

LONG_LINE_SEARCH_LIMIT = SCAN_BLOCK
"""A line longer than this is searched in its first `LONG_LINE_SEARCH_LIMIT` bytes only (literal patterns)."""

REGEX_SCAN_BLOCK = 256 * 1024
"""Regexes scan smaller blocks: RE2 is linear, but a pathological pattern costs microseconds per byte, and the
time budget is checked between blocks. A line longer than this is searched in its first block only."""


def scan_block(matcher: Matcher) -> int:
    """How many bytes one search covers for `matcher` (and so how far into a very long line it looks)."""
    return SCAN_BLOCK if matcher.literal is not None else REGEX_SCAN_BLOCK


class PatternError(ValueError):
    """A pattern that cannot be used (invalid regular expression, too complex)."""


class _Regex(Protocol):
    def search(self, text: bytes, pos: int = ..., endpos: int = ...) -> _RegexMatch | None: ...


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

    @classmethod
    def compile(cls, pattern: str, *, is_regex: bool) -> Matcher:
        """Build a matcher; `PatternError` for an invalid or too complex regex."""
        if not is_regex:
            return cls(pattern.encode('utf-8', errors='surrogatepass'), None)
        import re2  # pyright: ignore[reportMissingTypeStubs]

        options: Any = re2.Options()
        options.log_errors = False
        # `never_nl` keeps every match inside one line; `(?m)` makes ^ and $ line anchors.
        options.never_nl = True
        try:
            compiled: Any = re2.compile(b'(?m)' + pattern.encode('utf-8', errors='surrogatepass'), options)  # pyright: ignore[reportUnknownMemberType]
        except Exception as exc:  # noqa: BLE001 - re2.error, and anything odd the binding raises
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode('utf-8', errors='replace')
            raise PatternError(str(detail)) from None
        return cls(None, compiled)

    def search(self, buffer: bytes, start: int, end: int) -> tuple[int, int]:
        """The first match in `buffer[start:end]` as `(start, end)`, or `(-1, -1)`."""
        if self.literal is not None:
            found = buffer.find(self.literal, start, end)
            return (found, found + len(self.literal)) if found != -1 else (-1, -1)
        match = cast(_Regex, self.regex).search(buffer, start, end)
        if match is None:
            return -1, -1
        return match.start(), match.end()


@dataclass(frozen=True)
class Payload:
    """A stored payload opened for querying."""

    handle: str
    """The handle it was opened with."""

    index: LineIndex
    """Its line index (from the store, or built for this call)."""

    read_range: Callable[[int, int], Awaitable[bytes]]
    """Bytes `[start, end)`, clamped to the payload."""

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
        return Payload(handle, index, read_range)
    data = await store.read(handle)
    if not isinstance(data, bytes):  # pyright: ignore[reportUnnecessaryIsInstance] - custom stores may return bytearray
        data = bytes(data)
    whole = data

    async def read_slice(start: int, end: int) -> bytes:
        return whole[max(0, start) : max(0, end)]

    return Payload(handle, build_line_index(whole), read_slice)


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
    """Whether the scan reached the end (`False` when it stopped at its time budget)."""

    stopped_at_line: int
    """0-based line where scanning stopped (the payload's line count when complete)."""

    stopped_at_byte: int
    """Byte offset where scanning stopped."""

    long_lines: int = 0
    """Lines longer than `LONG_LINE_SEARCH_LIMIT`, searched in their first part only."""


async def grep_lines(  # noqa: C901 - one streaming loop; its invariants read best in one place
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
    """
    index = payload.index
    size = payload.size
    last_line = index.line_count if end_line is None else min(end_line, index.line_count)
    limit_byte = size if last_line >= index.line_count else await line_start(payload, last_line)
    position = await line_start(payload, first_line)
    hits: deque[Hit] = deque(maxlen=max_hits) if keep_last else deque()
    total = 0
    long_lines = 0
    block_size = scan_block(matcher)
    while position < limit_byte:
        if time.monotonic() > deadline:
            stopped = await line_of_offset(payload, position)
            return GrepResult(list(hits), total, False, stopped, position, long_lines)
        block = await payload.read_range(position, min(limit_byte, position + block_size))
        if not block:
            break
        at_end = position + len(block) >= limit_byte
        if at_end:
            search_end = len(block) - (1 if block.endswith(b'\n') else 0)
            consumed = len(block)
        else:
            last_newline = block.rfind(b'\n')
            if last_newline == -1:
                # One line longer than a block: search its head, then jump past it with the index.
                long_lines += 1
                line_number = await line_of_offset(payload, position)
                found, found_end = matcher.search(block, 0, len(block))
                if matcher.literal is None and found_end == len(block):
                    # The cut end of the line looks like its end to `$`: a match touching it is not trustworthy.
                    found = -1
                begin = position
                position = await line_start(payload, line_number + 1)
                if found != -1:
                    total += 1
                    if keep_last or len(hits) < max_hits:
                        hits.append(Hit(line_number + 1, begin, begin + found, begin + found_end))
                    if stop_when_full and len(hits) >= max_hits:
                        return GrepResult(list(hits), total, False, line_number + 1, position, long_lines)
                continue
            search_end = last_newline
            consumed = last_newline + 1
        block_line: int | None = None
        counted_to = 0
        cursor = 0
        checks = 0
        while cursor <= search_end:
            found, found_end = matcher.search(block, cursor, search_end)
            if found == -1:
                break
            line_begin = max(block.rfind(b'\n', cursor, found) + 1, cursor)
            total += 1
            if keep_last or len(hits) < max_hits:
                if block_line is None:
                    block_line = await line_of_offset(payload, position)
                block_line += block.count(b'\n', counted_to, line_begin)
                counted_to = line_begin
                hits.append(Hit(block_line + 1, position + line_begin, position + found, position + found_end))
            newline = block.find(b'\n', found, search_end)
            if stop_when_full and len(hits) >= max_hits:
                stopped_byte = position + (consumed if newline == -1 else newline + 1)
                return GrepResult(list(hits), total, False, hits[-1].line, stopped_byte, long_lines)
            if newline == -1:
                break
            cursor = newline + 1
            checks += 1
            if checks % 4096 == 0 and time.monotonic() > deadline:
                stopped_byte = position + cursor
                stopped = await line_of_offset(payload, stopped_byte)
                return GrepResult(list(hits), total, False, stopped, stopped_byte, long_lines)
        position += consumed
        await anyio.lowlevel.checkpoint()
    return GrepResult(list(hits), total, True, last_line, limit_byte, long_lines)


async def grep_bytes(payload: Payload, matcher: Matcher, *, max_hits: int, deadline: float) -> GrepResult:
    """Scan a binary payload for `matcher`; hits are byte offsets (overlapping blocks catch matches on edges)."""
    size = payload.size
    overlap = len(matcher.literal) - 1 if matcher.literal is not None else 4096
    hits: list[Hit] = []
    total = 0
    position = 0
    while position < size:
        if time.monotonic() > deadline:
            return GrepResult(hits, total, False, 0, position)
        block = await payload.read_range(position, position + SCAN_BLOCK + overlap)
        if not block:
            break
        # Matches starting in the overlap belong to the next block (unless this is the last one).
        last = position + len(block) >= size
        owned = len(block) if last else SCAN_BLOCK
        cursor = 0
        while cursor < owned:
            found, found_end = matcher.search(block, cursor, len(block))
            if found == -1 or found >= owned:
                break
            total += 1
            if len(hits) < max_hits:
                hits.append(Hit(0, position + found, position + found, position + found_end))
            cursor = max(found_end, found + 1)
            if total % 4096 == 0 and time.monotonic() > deadline:
                return GrepResult(hits, total, False, 0, position + cursor)
        if last:
            break
        position += SCAN_BLOCK
        await anyio.lowlevel.checkpoint()
    return GrepResult(hits, total, True, 0, size)


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
