"""The hostile review of the image band (issue 35), each finding held by a test through an agent run: headers that
lie about the size, a type label that lies, 16-bit images, progressive JPEGs of thousands of scans, a megabyte of JPEG
fill bytes, and Pillow's errors in what the model reads."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, BinaryImage

from pydantic_ai_harness.overflowing_tool_output import ImageBand, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media._fit import MAX_JPEG_SCANS
from pydantic_ai_harness.overflowing_tool_output._media._sniff import sniff_image

from ._images import encode
from .test_image_band import Scripted, last_returns

pytestmark = pytest.mark.anyio


async def sent_for(tmp_path: Path, image: BinaryContent, **band: Any) -> list[Any]:
    """What the model is sent for a tool that returns `image`."""
    script = Scripted([('shot', {})])
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path), images=ImageBand(**band))
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='shot')(lambda: image)
    await agent.run('look')
    (part,) = last_returns(script.requests[1])
    return part.content if isinstance(part.content, list) else [part.content]


async def test_a_gif_whose_logical_screen_says_1x1_is_checked_at_its_frame_size(tmp_path: Path) -> None:
    frame = Image.new('P', (3000, 3000), 0)
    frame.putpalette([255, 0, 0] * 256)
    data = bytearray(encode(frame, 'GIF'))
    data[6:10] = struct.pack('<HH', 1, 1)  # the logical screen: 1x1; the frame inside is 3000x3000
    (line,) = await sent_for(tmp_path, BinaryImage(bytes(data), media_type='image/gif'), max_decode_pixels=1_000_000)
    assert isinstance(line, str)
    assert 'declares 3000x3000 px (9,000,000 pixels), over the 1,000,000 decoded here' in line


async def test_a_jpeg_labelled_png_is_sent_with_the_type_of_its_bytes(tmp_path: Path) -> None:
    jpeg = encode(Image.new('RGB', (400, 300), (10, 120, 200)), 'JPEG')
    (sent,) = await sent_for(tmp_path, BinaryImage(jpeg, media_type='image/png'))
    assert isinstance(sent, BinaryContent) and sent.data == jpeg and sent.media_type == 'image/jpeg'


async def test_a_16_bit_image_keeps_its_range_in_the_copy(tmp_path: Path) -> None:
    gradient = np.linspace(0, 65535, 2000 * 1200).reshape(1200, 2000).astype(np.uint16)
    png = encode(Image.fromarray(gradient))
    _line, copy = await sent_for(tmp_path, BinaryImage(png, media_type='image/png'))
    with Image.open(io.BytesIO(copy.data)) as sent:
        grey = sent.convert('L')
        extrema = grey.getextrema()
        white = grey.histogram()[255] / (grey.width * grey.height)
    assert extrema == (0, 255)  # the whole range, from black to white
    assert white < 0.01  # a plain convert clipped nearly every pixel to 255


async def test_a_progressive_jpeg_of_thousands_of_scans_is_refused_undecoded(tmp_path: Path) -> None:
    out = io.BytesIO()
    Image.new('RGB', (1000, 1000), 'white').save(out, 'JPEG', progressive=True, quality=90)
    base = out.getvalue()
    last_scan = base[base.rfind(b'\xff\xda') : -2]
    data = base[:-2] + last_scan * 2_000 + b'\xff\xd9'  # each repeated scan is another pass over every block
    (line,) = await sent_for(tmp_path, BinaryImage(data, media_type='image/jpeg'), max_bytes=10_000)
    assert isinstance(line, str)
    assert 'it is a JPEG of 2,010 scans' in line and f'more than {MAX_JPEG_SCANS} are not decoded here' in line


def test_a_megabyte_of_jpeg_fill_bytes_is_skipped_and_a_long_walk_stops() -> None:
    jpeg = encode(Image.new('RGB', (16, 16)), 'JPEG')
    filled = jpeg[:2] + b'\xff' * 1_000_000 + jpeg[2:]  # fill before the first marker
    info = sniff_image(filled)
    assert info is not None and (info.width, info.height) == (16, 16)
    comments = b''.join(b'\xff\xfe\x00\x04ab' for _ in range(300))  # 300 segments before the frame header
    assert sniff_image(jpeg[:2] + comments + jpeg[2:]) is None  # not read here: Pillow's header read decides


async def test_bytes_that_are_no_image_are_named_plainly(tmp_path: Path) -> None:
    (line,) = await sent_for(tmp_path, BinaryImage(b'<html>not an image</html>' * 100, media_type='image/png'))
    assert isinstance(line, str)
    assert 'not an image: its bytes are in no format Pillow reads' in line and ' at 0x' not in line
