"""An image's EXIF orientation read from its bytes without Pillow: what durable workflow code (which may not import
Pillow) knows of how a JPEG, WebP or PNG is displayed, so an image shown turned is not sent as stored.

It finds the block where Pillow finds it (a JPEG's first `Exif` APP1 segment, a WebP's `EXIF` chunk, a PNG's
`eXIf` chunk before its pixels) and reads tag 0x0112 of its first directory; a value Pillow would not give as a
number from 1 to 8 (a list, another type) reads as 1, as stored. The work is bounded: each walk steps over
segments, chunks or directory entries by their declared sizes and stops after a fixed count of them.
"""

from __future__ import annotations

__all__ = ('exif_orientation',)

_ORIENTATION_TAG = 0x0112
_MAX_SEGMENTS = 256
"""JPEG segments or WebP / PNG chunks walked at most (the EXIF block comes within the first few)."""

_MAX_ENTRIES = 1_024
"""Directory entries read at most (a camera writes a few dozen in the first directory)."""

_INTEGER_TYPES = {1: 1, 3: 2, 4: 4, 6: 1, 8: 2, 9: 4}
"""TIFF field types Pillow gives a single value of as a number: BYTE, SHORT, LONG, SBYTE, SSHORT, SLONG, with their
sizes in bytes."""


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation of a JPEG, WebP or PNG (1 to 8), 1 when it has none, a bad one, or is another format."""
    if data.startswith(b'\xff\xd8\xff'):
        block = _jpeg_exif(data)
    elif data[:4] == b'RIFF' and data[8:12] == b'WEBP':
        block = _riff_chunk(data, b'EXIF')
    elif data.startswith(b'\x89PNG\r\n\x1a\n'):
        block = _png_exif(data)
    else:
        return 1
    return _tiff_orientation(block.removeprefix(b'Exif\x00\x00')) if block else 1


def _jpeg_exif(data: bytes) -> bytes | None:
    """The first APP1 segment's block that starts `Exif`, before the image's scans."""
    position, end = 2, len(data)
    for _ in range(_MAX_SEGMENTS):
        while position < end and data[position] == 0xFF and position + 1 < end and data[position + 1] == 0xFF:
            position += 1  # fill bytes before a marker
        if position + 4 > end or data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            position += 2
            continue
        if marker in (0xDA, 0xD9):  # the scans start (or the file ends): no EXIF after this point counts
            return None
        length = int.from_bytes(data[position + 2 : position + 4], 'big')
        if length < 2:
            return None
        if marker == 0xE1 and data.startswith(b'Exif\x00\x00', position + 4):
            return data[position + 4 : position + 2 + length]
        position += 2 + length
    return None


def _riff_chunk(data: bytes, kind: bytes) -> bytes | None:
    """The payload of a WebP's first chunk of `kind`."""
    position = 12
    for _ in range(_MAX_SEGMENTS):
        if position + 8 > len(data):
            return None
        size = int.from_bytes(data[position + 4 : position + 8], 'little')
        if data[position : position + 4] == kind:
            return data[position + 8 : position + 8 + size]
        position += 8 + size + (size & 1)
    return None


def _png_exif(data: bytes) -> bytes | None:
    """A PNG's `eXIf` chunk, when it comes before the image data (one after it is not read: see `_fit._orientation`)."""
    position = 8
    for _ in range(_MAX_SEGMENTS):
        if position + 8 > len(data):
            return None
        length = int.from_bytes(data[position : position + 4], 'big')
        kind = data[position + 4 : position + 8]
        if kind == b'eXIf':
            return data[position + 8 : position + 8 + length]
        if kind in (b'IDAT', b'IEND'):
            return None
        position += 12 + length
    return None


def _tiff_orientation(block: bytes) -> int:
    """Tag 0x0112 of a TIFF block's first directory, when it holds one number from 1 to 8; else 1."""
    if block[:4] == b'II*\x00':
        order = 'little'
    elif block[:4] == b'MM\x00*':
        order = 'big'
    else:
        return 1
    directory = int.from_bytes(block[4:8], order)
    if directory < 8 or directory + 2 > len(block):
        return 1
    count = int.from_bytes(block[directory : directory + 2], order)
    value = 1
    for index in range(min(count, _MAX_ENTRIES)):
        entry = directory + 2 + 12 * index
        if entry + 12 > len(block):
            break
        if int.from_bytes(block[entry : entry + 2], order) != _ORIENTATION_TAG:
            continue
        kind = int.from_bytes(block[entry + 2 : entry + 4], order)
        size = _INTEGER_TYPES.get(kind)
        number = int.from_bytes(block[entry + 4 : entry + 8], order)
        if size is None or number != 1:
            value = 1  # not one number: shown as stored (a later entry of the tag is read as Pillow reads it)
            continue
        value = int.from_bytes(block[entry + 8 : entry + 8 + size], order, signed=kind in (6, 8, 9))
    return value if 1 <= value <= 8 else 1
