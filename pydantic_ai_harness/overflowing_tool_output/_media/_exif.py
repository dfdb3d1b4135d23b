"""An image's EXIF orientation read from its bytes without Pillow: what durable workflow code (which may not import
Pillow) knows of how a JPEG, WebP or PNG is displayed, so an image shown turned is not sent as stored.

It reads what Pillow's `getexif()` reads: tag 0x0112 of the first directory of the EXIF block (a JPEG's first
`Exif` APP1 segment, the `EXIF` chunk of a WebP with a `VP8X` header, a PNG's `eXIf` chunk before its pixels) and,
when that block has no such tag, `tiff:Orientation` in the image's XMP packet (a JPEG's XMP APP1 segment, a WebP's
`XMP ` chunk, a PNG's `XML:com.adobe.xmp` text chunk, read only beside an `eXIf` chunk). A value Pillow would not give as a number from 1 to 8 (a
list, another type) reads as 1, as stored. The work is bounded: each walk steps over segments, chunks or directory
entries by their declared sizes (fill bytes at C speed) and stops after a fixed count of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice

from ._sniff import FILL_BYTES, png_chunks_before_pixels, webp_chunks

__all__ = ('exif_orientation',)

_ORIENTATION_TAG = 0x0112
_MAX_SEGMENTS = 256
"""JPEG segments or WebP / PNG chunks walked at most (the EXIF block comes within the first few)."""

_MAX_ENTRIES = 1_024
"""Directory entries read at most (a camera writes a few dozen in the first directory)."""

_INTEGER_TYPES = {1: 1, 3: 2, 4: 4, 6: 1, 8: 2, 9: 4}
"""TIFF field types Pillow gives a single value of as a number: BYTE, SHORT, LONG, SBYTE, SSHORT, SLONG, with their
sizes in bytes."""

_KNOWN_TYPES = frozenset(range(1, 14)) | {16, 17, 18}
"""TIFF field types Pillow reads (BYTE to IFD, and the BigTIFF 64-bit ones); an entry of another type is dropped."""

_XMP_JPEG = b'http://ns.adobe.com/xap/1.0/\x00'
_XMP_PNG = b'XML:com.adobe.xmp\x00'
_XMP_ORIENTATION = re.compile(rb'tiff:Orientation(?:="|>)([0-9])')


@dataclass(frozen=True)
class _Blocks:
    """Where an image keeps its orientation: its EXIF block and its XMP packet, each when it has one."""

    exif: bytes | None = None
    xmp: bytes | None = None


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation of a JPEG, WebP or PNG (1 to 8), 1 when it has none, a bad one, or is another format."""
    if data.startswith(b'\xff\xd8\xff'):
        blocks = _jpeg_blocks(data)
    elif data[:4] == b'RIFF' and data[8:12] == b'WEBP':
        blocks = _webp_blocks(data)
    elif data.startswith(b'\x89PNG\r\n\x1a\n'):
        blocks = _png_blocks(data)
    else:
        return 1
    if blocks.exif:
        found = _tiff_orientation(blocks.exif.removeprefix(b'Exif\x00\x00'))
        if found is not None:
            return found
    if blocks.xmp:
        match = _XMP_ORIENTATION.search(blocks.xmp)
        value = int(match.group(1)) if match else 1
        return value if 1 <= value <= 8 else 1
    return 1


def _jpeg_blocks(data: bytes) -> _Blocks:
    """The first `Exif` APP1 segment and the first XMP APP1 segment, before the image's scans."""
    position, end = 2, len(data)
    exif: bytes | None = None
    xmp: bytes | None = None
    for _ in range(_MAX_SEGMENTS):
        if position < end and data[position] != 0xFF:  # junk between segments: skipped, as Pillow skips it
            position = data.find(b'\xff', position)
            if position == -1:
                break
        fill = FILL_BYTES.match(data, position)
        if fill is None:
            break
        position = fill.end() - 1  # the last 0xFF of the run, before the marker
        if position + 4 > end:
            break
        marker = data[position + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            position += 2
            continue
        if marker in (0xDA, 0xD9):  # the scans start (or the file ends): nothing after this point counts
            break
        length = int.from_bytes(data[position + 2 : position + 4], 'big')
        if length < 2:
            break
        if marker == 0xE1:
            segment = data[position + 4 : position + 2 + length]
            if exif is None and segment.startswith(b'Exif\x00\x00'):
                exif = segment
            elif xmp is None and segment.startswith(_XMP_JPEG):
                xmp = segment[len(_XMP_JPEG) :]
        position += 2 + length
    return _Blocks(exif, xmp)


def _webp_blocks(data: bytes) -> _Blocks:
    """A WebP's `EXIF` and `XMP ` chunks; only an extended WebP (`VP8X` first) has them (Pillow reads no other's)."""
    if data[12:16] != b'VP8X':
        return _Blocks()
    found: dict[bytes, bytes] = {}
    for kind, start, size in islice(webp_chunks(data), _MAX_SEGMENTS):
        if kind in (b'EXIF', b'XMP ') and kind not in found:
            found[kind] = data[start : start + size]
    return _Blocks(found.get(b'EXIF'), found.get(b'XMP '))


def _png_blocks(data: bytes) -> _Blocks:
    """A PNG's `eXIf` chunk and XMP `iTXt` chunk (uncompressed), before the image data (one after it is not read:
    see `_fit._orientation`).
    """
    exif: bytes | None = None
    xmp: bytes | None = None
    for kind, start, length in png_chunks_before_pixels(data, _MAX_SEGMENTS):
        body = data[start : start + length]
        if kind == b'eXIf' and exif is None:
            exif = body
        elif kind == b'iTXt' and xmp is None and body.startswith(_XMP_PNG + b'\x00'):  # (not compressed)
            xmp = body
    # Without an `eXIf` chunk the orientation is not read at all (`_fit._orientation`): nor is the XMP packet then.
    return _Blocks(exif, xmp) if exif is not None else _Blocks()


def _tiff_orientation(block: bytes) -> int | None:
    """Tag 0x0112 of a TIFF block's first directory: its value when it holds one number from 1 to 8, else 1; `None`
    when the directory has no such tag (Pillow then reads the XMP packet).
    """
    if block[:4] == b'II*\x00':
        order = 'little'
    elif block[:4] == b'MM\x00*':
        order = 'big'
    else:
        return None
    directory = int.from_bytes(block[4:8], order)
    if directory < 8 or directory + 2 > len(block):
        return None
    count = int.from_bytes(block[directory : directory + 2], order)
    value: int | None = None
    for index in range(min(count, _MAX_ENTRIES)):
        entry = directory + 2 + 12 * index
        if entry + 12 > len(block):
            break
        if int.from_bytes(block[entry : entry + 2], order) != _ORIENTATION_TAG:
            continue
        kind = int.from_bytes(block[entry + 2 : entry + 4], order)
        size = _INTEGER_TYPES.get(kind)
        number = int.from_bytes(block[entry + 4 : entry + 8], order)
        if kind not in _KNOWN_TYPES:
            continue  # a type Pillow does not know: it drops the entry (and reads the XMP packet when none is left)
        if size is None or number != 1:
            value = 1  # not one number: shown as stored (a later entry of the tag is read as Pillow reads it)
            continue
        value = int.from_bytes(block[entry + 8 : entry + 8 + size], order, signed=kind in (6, 8, 9))
    if value is None:
        return None
    return value if 1 <= value <= 8 else 1
