"""An image's type and pixel size from its first bytes, without decoding it (and without Pillow).

Read before anything is decoded, so a decompression bomb (a few KB declaring billions of pixels) is refused from its
header. PNG, GIF, WebP and JPEG: the formats every provider takes. Work is bounded: the JPEG walk visits each marker
once and stops at the first frame header; `count_frames` walks an animation's blocks, never decoding one, and stops
after `MAX_FRAMES_COUNTED` frames or `_MAX_BLOCKS` blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = (
    'FILL_BYTES',
    'MAX_FRAMES_COUNTED',
    'ImageInfo',
    'count_frames',
    'png_chunks_before_pixels',
    'sniff_image',
    'webp_chunks',
)


@dataclass(frozen=True)
class ImageInfo:
    """What an image's header says."""

    media_type: str
    """`image/png`, `image/jpeg`, ... as read from the bytes (not as declared)."""

    width: int
    """Pixels."""

    height: int
    """Pixels."""

    nbytes: int
    """The encoded image's size."""

    orientation: int = 1
    """Its EXIF orientation (1: as stored; 2-8: flipped or turned when displayed). `width` and `height` are the
    displayed ones, as the model is shown it. Read by Pillow (`read_info`); 1 where it was not read."""

    frames: int = 1
    """Frames of an animated GIF, PNG (APNG) or WebP (`count_frames`); 1 for a still image, or where not counted."""

    frames_exact: bool = True
    """False when counting stopped at its bound: the image has at least `frames` frames."""

    @property
    def pixels(self) -> int:
        """Width times height."""
        return self.width * self.height


def sniff_image(data: bytes) -> ImageInfo | None:
    """The type and size `data`'s header declares, or `None` when it is not a PNG, GIF, WebP or JPEG this can read."""
    size: tuple[str, int, int] | None
    if data.startswith(b'\x89PNG\r\n\x1a\n'):
        size = _png(data)
    elif data[:6] in (b'GIF87a', b'GIF89a'):
        size = ('image/gif', int.from_bytes(data[6:8], 'little'), int.from_bytes(data[8:10], 'little'))
    elif data[:4] == b'RIFF' and data[8:12] == b'WEBP':
        size = _webp(data)
    elif data[:3] == b'\xff\xd8\xff':
        size = _jpeg(data)
    else:
        size = None
    if size is None or size[1] <= 0 or size[2] <= 0:
        return None
    return ImageInfo(size[0], size[1], size[2], len(data))


def _png(data: bytes) -> tuple[str, int, int] | None:
    if data[12:16] != b'IHDR' or len(data) < 24:
        return None
    return 'image/png', int.from_bytes(data[16:20], 'big'), int.from_bytes(data[20:24], 'big')


def _webp(data: bytes) -> tuple[str, int, int] | None:
    chunk = data[12:16]
    if chunk == b'VP8X' and len(data) >= 30:
        return 'image/webp', int.from_bytes(data[24:27], 'little') + 1, int.from_bytes(data[27:30], 'little') + 1
    if chunk == b'VP8L' and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], 'little')
        return 'image/webp', (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b'VP8 ' and len(data) >= 30:
        return (
            'image/webp',
            int.from_bytes(data[26:28], 'little') & 0x3FFF,
            int.from_bytes(data[28:30], 'little') & 0x3FFF,
        )
    return None


_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
"""JPEG start-of-frame markers: the frame header holds the image's size."""


FILL_BYTES = re.compile(rb'\xff+')
"""Fill bytes before a marker: skipped at C speed (a megabyte of them is no loop of a million steps)."""

_MAX_SEGMENTS = 256
"""Segments walked before the frame header; a real file reaches it within a few dozen (EXIF, ICC profile, tables)."""


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    position = 2
    end = len(data)
    for _ in range(_MAX_SEGMENTS):
        if position + 4 > end:
            return None
        fill = FILL_BYTES.match(data, position)
        if fill is None:
            return None
        position = fill.end() - 1  # the last 0xFF of the run, before the marker
        if position + 4 > end:
            return None
        marker = data[position + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            position += 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], 'big')
        if length < 2:
            return None
        if marker in _SOF:
            if position + 9 > end:
                return None
            height = int.from_bytes(data[position + 5 : position + 7], 'big')
            width = int.from_bytes(data[position + 7 : position + 9], 'big')
            return 'image/jpeg', width, height
        position += 2 + length
    return None  # no frame header within `_MAX_SEGMENTS` segments: Pillow's header read decides


MAX_FRAMES_COUNTED = 10_000
"""Frames counted at most: past this an animation is said to have "10,000+" (an animation's frame count only tells
the model it was one)."""

_MAX_BLOCKS = 200_000
"""GIF sub-blocks or RIFF chunks walked at most: a hostile file of one-byte blocks costs a bounded walk."""


def count_frames(data: bytes) -> tuple[int, bool]:
    """The frames of an animated GIF, APNG or animated WebP, read from their block structure (nothing is decoded),
    and whether the count is exact (it stops after `MAX_FRAMES_COUNTED` frames or `_MAX_BLOCKS` blocks). `(1, True)`
    for any other image.
    """
    if data[:6] in (b'GIF87a', b'GIF89a'):
        return _gif_frames(data)
    if data.startswith(b'\x89PNG\r\n\x1a\n'):
        frames = _apng_frames(data)  # as declared: a hostile file may declare billions
        return min(frames, MAX_FRAMES_COUNTED), frames <= MAX_FRAMES_COUNTED
    if data[:4] == b'RIFF' and data[8:12] == b'WEBP' and data[12:16] == b'VP8X' and len(data) > 20 and data[20] & 0x02:
        return _webp_frames(data)
    return 1, True


def _gif_frames(data: bytes) -> tuple[int, bool]:
    end = len(data)
    if end < 13:
        return 1, True
    packed = data[10]
    position = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    frames = 0
    budget = _MAX_BLOCKS  # blocks and sub-blocks together, over the whole file
    while position < end and frames < MAX_FRAMES_COUNTED:
        introducer = data[position]
        if introducer == 0x2C:  # an image descriptor: 10 bytes, a local colour table, the LZW code size, the data
            if position + 10 > end:
                break
            local = data[position + 9]
            position += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1
            frames += 1
        elif introducer == 0x21:  # an extension: its label, then its sub-blocks
            position += 2
        else:  # the trailer, or bytes that are not GIF blocks
            return max(frames, 1), True
        # Past the data sub-blocks (each a length byte and that many bytes, ended by a zero length).
        while position < end:
            budget -= 1
            if budget < 0:
                return max(frames, 1), False
            length = data[position]
            position += 1 + length
            if length == 0:
                break
    return max(frames, 1), frames < MAX_FRAMES_COUNTED


def png_chunks_before_pixels(data: bytes, limit: int) -> Iterator[tuple[bytes, int, int]]:
    """A PNG's chunks before its image data, at most `limit` of them: `(type, where its data starts, its length)`,
    walked by their declared lengths (the data may run past the end of a truncated file).
    """
    position = 8
    for _ in range(limit):
        if position + 8 > len(data):
            return
        length = int.from_bytes(data[position : position + 4], 'big')
        kind = data[position + 4 : position + 8]
        if kind in (b'IDAT', b'IEND'):
            return
        yield kind, position + 8, length
        position += 12 + length


def _apng_frames(data: bytes) -> int:
    """`num_frames` of the `acTL` chunk, which an APNG has before its first image data; 1 without one."""
    for kind, start, _ in png_chunks_before_pixels(data, 1_000):
        if kind == b'acTL' and start + 4 <= len(data):
            return max(1, int.from_bytes(data[start : start + 4], 'big'))
    return 1


def webp_chunks(data: bytes) -> Iterator[tuple[bytes, int, int]]:
    """A WebP's chunks after its RIFF header: `(type, where its data starts, its size)`, walked by their declared
    sizes (padded to even); the caller bounds how many it takes.
    """
    position = 12
    while position + 8 <= len(data):
        size = int.from_bytes(data[position + 4 : position + 8], 'little')
        yield data[position : position + 4], position + 8, size
        position += 8 + size + (size & 1)


def _webp_frames(data: bytes) -> tuple[int, bool]:
    """`ANMF` chunks of an animated WebP, walked by their sizes."""
    chunks = webp_chunks(data)
    frames = 0
    for _ in range(_MAX_BLOCKS):
        chunk = next(chunks, None)
        if chunk is None or frames >= MAX_FRAMES_COUNTED:
            return max(frames, 1), frames < MAX_FRAMES_COUNTED
        frames += chunk[0] == b'ANMF'
    return max(frames, 1), False
