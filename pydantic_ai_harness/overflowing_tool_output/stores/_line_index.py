"""A compact line index: how many newlines precede each fixed-size chunk of a payload.

With it, the byte where line N starts is found by reading one chunk (a bisect over the per-chunk counts,
then a count inside the chunk), so a window anywhere in a huge payload costs O(chunk + window) instead
of a scan from the start. For 100 MB in 64 KiB chunks the index is ~1,600 integers (12.5 KiB).
"""

from __future__ import annotations

import bisect
import functools
import importlib
import itertools
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ._sniff import SNIFF_BYTES, TextSniffer

__all__ = (
    'DEFAULT_CHUNK_SIZE',
    'INLINE_INDEX_BYTES',
    'LineIndex',
    'LineIndexBuilder',
    'build_line_index',
    'nth_newline',
)

DEFAULT_CHUNK_SIZE = 64 * 1024
"""Bytes per indexed chunk: the most a line lookup reads to find where a line starts."""

INLINE_INDEX_BYTES = 1 << 20
"""Payloads up to this size are line-indexed where they are written; the stores index larger ones off the loop."""

_MAGIC = b'PAILIDX2'
"""Version 2: `is_binary` is the decision of `_sniff.looks_binary` (version 1 took any NUL byte for binary)."""
_HEADER = struct.Struct('<8sIQQB')
_FLAG_BINARY = 1


@dataclass(frozen=True)
class LineIndex:
    r"""Newline counts per chunk of one payload, plus whether it is text at all.

    Lines are separated by `\\n`; a final line without a trailing newline still counts, so `b'a\\nb'`
    and `b'a\\nb\\n'` both have two lines and `b''` has none.
    """

    size: int
    """The payload size in bytes."""

    newline_count: int
    """How many `\\n` bytes the payload contains."""

    chunk_size: int
    """Bytes per chunk."""

    newlines_before: Sequence[int]
    """For chunk `i` (bytes `[i * chunk_size, (i + 1) * chunk_size)`), the newlines in all earlier bytes."""

    is_binary: bool
    """Whether the payload is binary (shown as a hex dump, not as text): the decision `looks_binary` makes from its
    first 64 KiB, the same one its spill preview made.

    Binary means: more than one byte in ten of the first 64 KiB is not text (NUL and other control bytes text does
    not hold, or bytes not valid UTF-8). Text with a few such bytes (a stray NUL, a Latin-1 file name, a lone
    surrogate) stays text, shown with the control bytes escaped and U+FFFD for the invalid ones.
    """

    ends_with_newline: bool
    """Whether the last byte is `\\n`."""

    @property
    def line_count(self) -> int:
        """The number of lines."""
        return self.newline_count + (1 if self.size and not self.ends_with_newline else 0)

    def chunk_of_newline(self, rank: int) -> tuple[int, int]:
        """Where the `rank`-th newline (1-based) lies: `(chunk start byte, its rank inside that chunk)`."""
        chunk = bisect.bisect_left(self.newlines_before, rank) - 1
        return chunk * self.chunk_size, rank - self.newlines_before[chunk]

    def chunk_of_offset(self, offset: int) -> tuple[int, int]:
        """The chunk holding byte `offset`: `(chunk start byte, newlines before it)`."""
        chunk = min(offset // self.chunk_size, max(len(self.newlines_before) - 1, 0))
        if not self.newlines_before:
            return 0, 0
        return chunk * self.chunk_size, self.newlines_before[chunk]

    def to_bytes(self) -> bytes:
        """A compact binary form, for stores that persist the index next to the payload."""
        counts = array('Q', self.newlines_before)
        if sys.byteorder != 'little':
            counts.byteswap()  # pragma: no cover
        flags = _FLAG_BINARY if self.is_binary else 0
        flags |= 2 if self.ends_with_newline else 0
        return _HEADER.pack(_MAGIC, self.chunk_size, self.size, self.newline_count, flags) + counts.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> LineIndex:
        """Parse `to_bytes` output, checking it is consistent; `ValueError` when it is not."""
        if len(data) < _HEADER.size:
            raise ValueError('line index too short')
        magic, chunk_size, size, newline_count, flags = _HEADER.unpack_from(data)
        if magic != _MAGIC or chunk_size <= 0 or newline_count > size:
            raise ValueError('not a line index')
        counts = array('Q')
        counts.frombytes(data[_HEADER.size :])
        if sys.byteorder != 'little':
            counts.byteswap()  # pragma: no cover
        expected_chunks = -(-size // chunk_size)
        if len(counts) != expected_chunks or (counts and counts[0] != 0):
            raise ValueError('line index does not match its payload size')
        if any(later < earlier for earlier, later in itertools.pairwise(counts)) or (
            counts and counts[-1] > newline_count
        ):
            raise ValueError('line index counts are not monotonic')
        return cls(
            size=size,
            newline_count=newline_count,
            chunk_size=chunk_size,
            newlines_before=counts,
            is_binary=bool(flags & _FLAG_BINARY),
            ends_with_newline=bool(flags & 2),
        )


class LineIndexBuilder:
    """Build a [`LineIndex`][pydantic_ai_harness.overflowing_tool_output.LineIndex] from pieces fed in order.

    Used at write time over the whole payload, or while streaming a payload through range reads.
    """

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self._chunk_size = chunk_size
        self._position = 0
        self._newlines = 0
        self._before = array('Q')
        self._sniffer = TextSniffer()
        self._last_byte = -1

    def feed(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        """Account for `data[start:end]` (slicing bounds avoid copying a big buffer)."""
        end = len(data) if end is None else end
        if end <= start:
            return
        if not self._sniffer.done:
            self._sniffer.feed(data, start, end)
        count = _newline_counter(data)
        position = start
        while position < end:
            offset_in_chunk = self._position % self._chunk_size
            if offset_in_chunk == 0:
                self._before.append(self._newlines)
            take = min(end - position, self._chunk_size - offset_in_chunk)
            self._newlines += count(position, position + take)
            position += take
            self._position += take
        self._last_byte = data[end - 1]

    def finish(self) -> LineIndex:
        """The index of everything fed so far."""
        # A payload that fits the sniffed start is seen whole: a character cut at its very end is invalid too.
        binary = self._sniffer.finish(whole=self._position <= SNIFF_BYTES)
        return LineIndex(
            size=self._position,
            newline_count=self._newlines,
            chunk_size=self._chunk_size,
            newlines_before=self._before,
            is_binary=binary,
            ends_with_newline=self._last_byte == 0x0A,
        )


def _newline_counter(data: bytes) -> Callable[[int, int], int]:
    """`count(start, end)`: the newlines in `data[start:end]`; with numpy when it is installed.

    `bytes.count` walks a single-byte needle one byte at a time, holding the GIL; numpy compares in SIMD and
    releases the GIL, so the count of a streamed spill runs beside the encoding and the preview scan.
    """
    if len(data) < _NUMPY_FROM:
        return partial(data.count, b'\n')  # small payloads never even import numpy
    numpy = _numpy()
    if numpy is None:
        return partial(data.count, b'\n')
    array = numpy.frombuffer(data, dtype=numpy.uint8)
    count_nonzero = numpy.count_nonzero

    def count(start: int, end: int) -> int:
        return int(count_nonzero(array[start:end] == 10))

    return count


_NUMPY_FROM = 256 * 1024
"""Pieces smaller than this are counted with `bytes.count` (numpy's fixed cost per call outweighs its speed)."""


@functools.cache
def _numpy() -> Any:
    try:
        return importlib.import_module('numpy')
    except ImportError:
        return None


def build_line_index(data: bytes, chunk_size: int = DEFAULT_CHUNK_SIZE) -> LineIndex:
    """Index a payload held in memory (one pass of `bytes.count`, no copies)."""
    builder = LineIndexBuilder(chunk_size)
    builder.feed(data)
    return builder.finish()


def nth_newline(buffer: bytes, rank: int, start: int = 0, end: int | None = None) -> int:
    r"""The position of the `rank`-th (1-based) `\\n` in `buffer[start:end]`, or -1 if there are fewer."""
    end = len(buffer) if end is None else end
    if rank <= 0:
        return -1
    if rank <= 16:
        position = start - 1
        for _ in range(rank):
            position = buffer.find(b'\n', position + 1, end)
            if position == -1:
                return -1
        return position
    if buffer.count(b'\n', start, end) < rank:
        return -1
    # Bisect on the count: O(log n) C-speed counts instead of `rank` Python-level finds.
    low, high = start, end - 1
    while low < high:
        middle = (low + high) // 2
        if buffer.count(b'\n', start, middle + 1) >= rank:
            high = middle
        else:
            low = middle + 1
    return low
