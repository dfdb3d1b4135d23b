"""Payload access: a stored payload opened for reading, and its lines and byte windows, O(window) when it can be.

A [`Payload`][] wraps whatever the store offers: range reads plus a line index (O(window) reads),
range reads alone (the index is built by streaming the payload once per call, bounded memory), or
just `read()` (the payload is loaded once per call). The grep algorithms over it live in `_grep.py`, the
model-facing answers in the `_*_tool.py` modules; this module returns plain data.
"""

from __future__ import annotations

import codecs
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Self, TypeVar

import anyio.lowlevel
import anyio.to_thread

from .._rendering._visible import INVALID_TO_REPLACEMENT, visible_prefix
from ..stores._line_index import LineIndex, LineIndexBuilder, build_line_index, nth_newline
from ..stores._protocol import LineIndexedStore, OpenableStore, OverflowStore, PayloadReader, RangeReadableStore
from ..stores._sniff import binary_format
from ._matcher import Buffer

_T = TypeVar('_T')

__all__ = (
    'SCAN_BLOCK',
    'WINDOW_BLOCK',
    'BlockReader',
    'ByteWindow',
    'Line',
    'Payload',
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
    # Custom stores may return a bytearray: `bytes()` copies that, and returns `bytes` itself as it is.
    whole = bytes(await store.read(handle))

    async def read_slice(start: int, end: int) -> bytes:
        return whole[max(0, start) : max(0, end)]

    return Payload(handle, build_line_index(whole), read_slice)


class BlockReader:
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

    async def read_then(self, start: int, end: int, work: Callable[[Buffer], _T]) -> tuple[Buffer, _T]:
        """Bytes `[start, end)` (as `read` returns them) and `work` run on them in a worker thread.

        Through an open handle, the read and the work are one worker-thread call, not two.
        """
        reader = self._reader
        if reader is None:
            block = await self._payload.read_range(start, end)
            return block, await anyio.to_thread.run_sync(work, block)
        buffer = self._buffer

        def read_and_work() -> _T:
            reader.read_into(buffer, start, end)
            return work(buffer)

        return buffer, await anyio.to_thread.run_sync(read_and_work)


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


def _decode_line(number: int, start: int, raw: bytes, length: int, max_chars: int) -> Line:
    # `surrogateescape` maps each invalid byte to one character, so a cut's byte count is exact: it re-encodes
    # to the very bytes shown. A character cut at the end of a partial read is left out, not shown broken. The
    # cut counts characters as they are shown, control characters escaped (`_visible.py`).
    partial = length > len(raw)
    text, _ = codecs.utf_8_decode(raw, 'surrogateescape', not partial)
    if not partial:
        text = text.removesuffix('\r')
    keep = visible_prefix(text, max_chars)
    if partial or keep < len(text):
        text = text[:keep]
        shown = len(text.encode('utf-8', 'surrogateescape'))
        return Line(number, text.translate(INVALID_TO_REPLACEMENT), start, length, shown)
    return Line(number, text.translate(INVALID_TO_REPLACEMENT), start, length, length)


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


def sniff_type(head: bytes) -> str | None:
    """A short description of well-known binary formats from their first bytes."""
    known = binary_format(head)
    return known[0] if known is not None else None
