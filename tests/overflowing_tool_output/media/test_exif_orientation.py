"""The EXIF orientation read without Pillow (`_media/_exif.py`), for durable workflow code: it agrees with Pillow
on every orientation of JPEG, WebP and PNG files Pillow writes and of hand-built big-endian blocks, and a hostile
file (truncated, mutated, directories that point anywhere) reads as 1 to 8 without raising."""

from __future__ import annotations

import io
import random
import struct

import pytest
from PIL import Image

from pydantic_ai_harness.overflowing_tool_output._media._exif import exif_orientation
from pydantic_ai_harness.overflowing_tool_output._media._fit import read_info

from ...media._images import encode


def _pillow_orientation(data: bytes) -> int:
    from pydantic_ai_harness.overflowing_tool_output._media._fit import _orientation

    with Image.open(io.BytesIO(data)) as image:
        return _orientation(image)


def _photo(orientation: int, image_format: str) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = 'Camera maker'  # another tag before or after it, as cameras write
    return encode(Image.new('RGB', (30, 20), (10, 200, 30)), image_format, exif=exif)


@pytest.mark.parametrize('image_format', ['JPEG', 'WEBP', 'PNG'])
@pytest.mark.parametrize('orientation', range(1, 9))
def test_it_reads_what_pillow_reads(image_format: str, orientation: int) -> None:
    data = _photo(orientation, image_format)
    assert exif_orientation(data) == _pillow_orientation(data) == orientation


def _big_endian_jpeg(orientation: int, *, kind: int = 3, count: int = 1) -> bytes:
    """A JPEG whose EXIF block is big-endian (`MM`, as many cameras write), tag 0x0112 of the given type and count."""
    value = struct.pack('>H', orientation) + b'\x00\x00' if kind in (3, 8) else struct.pack('>I', orientation)
    entries = struct.pack('>HHI', 0x0112, kind, count) + value
    tiff = b'MM\x00*' + struct.pack('>I', 8) + struct.pack('>H', 1) + entries + b'\x00\x00\x00\x00'
    block = b'Exif\x00\x00' + tiff
    app1 = b'\xff\xe1' + struct.pack('>H', len(block) + 2) + block
    plain = encode(Image.new('RGB', (30, 20)), 'JPEG')
    return plain[:2] + app1 + plain[2:]


@pytest.mark.parametrize('orientation', range(1, 9))
def test_a_big_endian_block_reads_as_pillow_reads_it(orientation: int) -> None:
    for kind in (3, 4):
        data = _big_endian_jpeg(orientation, kind=kind)
        assert exif_orientation(data) == _pillow_orientation(data) == orientation


def test_a_value_pillow_gives_as_a_list_or_out_of_range_reads_as_stored() -> None:
    assert exif_orientation(_big_endian_jpeg(6, count=2)) == 1  # two values: not one number
    assert exif_orientation(_big_endian_jpeg(9)) == _pillow_orientation(_big_endian_jpeg(9)) == 1
    assert exif_orientation(_big_endian_jpeg(0)) == 1


def test_without_pillow_the_header_read_gives_the_displayed_size_and_orientation() -> None:
    """`read_info(use_pillow=False)`, as durable workflow code calls it, answers as the read with Pillow does."""
    for image_format in ('JPEG', 'WEBP', 'PNG'):
        for orientation in range(1, 9):
            data = _photo(orientation, image_format)
            assert read_info(data, 10**8, use_pillow=False) == read_info(data, 10**8)


def test_a_hostile_file_reads_as_a_valid_orientation_and_never_raises() -> None:
    rng = random.Random(11)
    seeds = [_photo(6, image_format) for image_format in ('JPEG', 'WEBP', 'PNG')] + [_big_endian_jpeg(8)]
    hostile = [
        b'\xff\xd8\xff',
        b'\xff\xd8' + b'\xff' * 100_000,  # a megabyte of fill bytes is one step each, bounded by the walk
        b'\xff\xd8\xff\xe1\xff\xffExif\x00\x00MM\x00*\xff\xff\xff\xff',  # a directory past the end
        b'\xff\xd8\xff\xe1\x00\x20Exif\x00\x00II*\x00\x08\x00\x00\x00\xff\xff',  # 65,535 entries declared
        b'RIFF\x00\x00\x00\x00WEBPEXIF\xff\xff\xff\xff',
        b'\x89PNG\r\n\x1a\n' + b'\xff\xff\xff\xffeXIf',
    ]
    for seed in seeds:
        for _ in range(500):
            data = bytearray(seed)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            hostile.append(bytes(data[: rng.randint(2, len(data))]) if rng.random() < 0.3 else bytes(data))
    for data in hostile:
        assert 1 <= exif_orientation(data) <= 8


def _xmp_packet(orientation: int, attribute: bool = True) -> bytes:
    value = f'tiff:Orientation="{orientation}"' if attribute else f'><tiff:Orientation>{orientation}</tiff:Orientation'
    return (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        f'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" {value}></rdf:Description></rdf:RDF></x:xmpmeta>'
    ).encode()


def _with_jpeg_segment(data: bytes, body: bytes) -> bytes:
    return data[:2] + b'\xff\xe1' + struct.pack('>H', len(body) + 2) + body + data[2:]


def _xmp_files(orientation: int) -> dict[str, bytes]:
    """Images whose orientation is in their XMP packet, as phone and editor exports write it."""
    plain = encode(Image.new('RGB', (30, 20), (10, 200, 30)), 'JPEG')
    xmp_segment = b'http://ns.adobe.com/xap/1.0/\x00' + _xmp_packet(orientation)
    no_tag = Image.Exif()
    no_tag[0x010F] = 'Camera maker'
    exif_without_tag = encode(Image.new('RGB', (30, 20)), 'JPEG', exif=no_tag)
    png_info = __import__('PIL.PngImagePlugin', fromlist=['PngInfo']).PngInfo()
    png_info.add_itxt('XML:com.adobe.xmp', _xmp_packet(orientation, attribute=False).decode())
    return {
        'jpeg xmp only': _with_jpeg_segment(plain, xmp_segment),
        'jpeg exif without the tag, then xmp': _with_jpeg_segment(exif_without_tag, xmp_segment),
        'jpeg xmp as an element': _with_jpeg_segment(
            plain, b'http://ns.adobe.com/xap/1.0/\x00' + _xmp_packet(orientation, attribute=False)
        ),
        'webp xmp only': encode(Image.new('RGB', (30, 20)), 'WEBP', xmp=_xmp_packet(orientation)),
        'png exif without the tag, and xmp': encode(Image.new('RGB', (30, 20)), 'PNG', exif=no_tag, pnginfo=png_info),
        'png xmp without exif': encode(Image.new('RGB', (30, 20)), 'PNG', pnginfo=png_info),
    }


@pytest.mark.parametrize('orientation', [3, 6, 8])
def test_an_orientation_in_the_xmp_packet_reads_as_pillow_reads_it(orientation: int) -> None:
    files = _xmp_files(orientation)
    for name, data in files.items():
        assert exif_orientation(data) == _pillow_orientation(data), name
    read = {name: exif_orientation(data) for name, data in files.items()}
    assert read == {**dict.fromkeys(files, orientation), 'png xmp without exif': 1}


def test_a_simple_webp_with_an_exif_chunk_reads_as_stored_as_pillow_reads_it() -> None:
    """Only an extended WebP (`VP8X`) carries metadata chunks; one appended to a simple WebP is not read."""
    simple = encode(Image.new('RGB', (30, 20)), 'WEBP')
    assert simple[12:16] != b'VP8X'
    exif = _photo(6, 'WEBP')
    start = exif.index(b'EXIF')
    chunk = exif[start : start + 8 + int.from_bytes(exif[start + 4 : start + 8], 'little')]
    chunk += b'\x00' * (len(chunk) & 1)
    body = simple[12:] + chunk
    data = b'RIFF' + struct.pack('<I', len(body) + 4) + b'WEBP' + body
    assert exif_orientation(data) == _pillow_orientation(data) == 1


def test_ten_megabytes_of_fill_bytes_read_as_stored() -> None:
    """A JPEG of 10 MB of fill bytes before its first segment (skipped at C speed, as the header sniffer skips them)."""
    data = b'\xff\xd8' + b'\xff' * 10_000_000 + b'\xe1\x00\x10Exif\x00\x00MM\x00*\x00\x00\x00\x08'
    assert exif_orientation(data) == 1


def test_junk_between_jpeg_segments_and_an_entry_of_an_unknown_type_read_as_pillow_reads_them() -> None:
    """Pillow skips bytes that are no marker between segments, and drops a directory entry of a type it does not
    know (then reads the XMP packet): so does this reader."""
    photo = _photo(6, 'JPEG')
    first_segment_end = 4 + int.from_bytes(photo[4:6], 'big')
    junk = photo[:first_segment_end] + b'\x00\x13\x37' + photo[first_segment_end:]
    assert exif_orientation(junk) == _pillow_orientation(junk) == 6
    xmp = b'http://ns.adobe.com/xap/1.0/\x00' + _xmp_packet(8)
    unknown_type = _with_jpeg_segment(_big_endian_jpeg(6, kind=99), xmp)
    assert exif_orientation(unknown_type) == _pillow_orientation(unknown_type) == 8
