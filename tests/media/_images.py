"""Real images made with Pillow for the image band's tests, and the check that what a model was sent fits each
provider's published limits (`PROVIDER_IMAGE_LIMITS`)."""

from __future__ import annotations

import base64
import io
import zlib
from collections.abc import Iterable
from functools import cache

from PIL import Image, ImageDraw, ImageStat
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart

from pydantic_ai_harness.overflowing_tool_output._media import PROVIDER_IMAGE_LIMITS

CHECKER_BOX = (4000, 2000, 4400, 2300)
"""Where the screenshot holds a one-pixel checkerboard: detail any downscaled copy averages away to grey."""


def encode(image: Image.Image, image_format: str = 'PNG', **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, image_format, **options)
    return out.getvalue()


@cache
def screenshot(width: int = 4880, height: int = 2560) -> bytes:
    """A Retina-sized screenshot as PNG: rows of text, coloured panels, and a one-pixel checkerboard."""
    image = Image.new('RGB', (width, height), (246, 246, 246))
    draw = ImageDraw.Draw(image)
    for row, y in enumerate(range(8, height, 22)):
        draw.text((12, y), f'{row:04d} INFO request handled in {row % 97} ms, user {row * 7 % 1000}', fill=(20, 20, 20))
    draw.rectangle((width // 2, 100, width - 100, 900), fill=(30, 90, 200))
    left, top, right, bottom = CHECKER_BOX
    if right <= width and bottom <= height:
        checker = Image.new('1', (right - left, bottom - top))
        checker.putdata([(x + y) % 2 * 255 for y in range(bottom - top) for x in range(right - left)])
        image.paste(checker.convert('RGB'), (left, top))
    return encode(image, compress_level=1)


def small_png() -> bytes:
    """A 25 KB-ish PNG well within every provider's limits."""
    image = Image.effect_noise((160, 120), 60).convert('RGB')
    return encode(image)


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header declares `width` x `height` pixels (10 gigapixels by default)."""
    data = encode(Image.new('L', (64, 64)))
    ihdr = data[12:16] + width.to_bytes(4, 'big') + height.to_bytes(4, 'big') + data[24:29]
    return data[:12] + ihdr + zlib.crc32(ihdr).to_bytes(4, 'big') + data[33:]


def images_sent(messages: Iterable[ModelMessage]) -> list[BinaryContent]:
    """Every image a request of `messages` carries (tool returns, and user content from `ToolReturn.content`)."""
    found: list[BinaryContent] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            items: list[object] = []
            if isinstance(part, ToolReturnPart):
                items = list(part.content) if isinstance(part.content, list) else [part.content]
            elif isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                items = list(part.content)
            found.extend(item for item in items if isinstance(item, BinaryContent) and item.is_image)
    return found


def assert_fits_every_provider(images: list[BinaryContent]) -> None:
    """Each image, and the request holding them all, is within every provider's limits in the table."""
    total = 0
    for image in images:
        with Image.open(io.BytesIO(image.data)) as decoded:
            width, height = decoded.size
            assert f'image/{decoded.format.lower()}' == image.media_type  # pyright: ignore[reportOptionalMemberAccess]
        total += len(image.data)
        for row in PROVIDER_IMAGE_LIMITS.values():
            sides = [row.max_side]
            if row.many_images is not None and len(images) > row.many_images:
                sides.append(row.max_side_many_images)
            for side in sides:
                assert side is None or max(width, height) <= side, (row.provider, width, height)
            size = len(base64.b64encode(image.data)) if row.base64_limit else len(image.data)
            assert size <= row.max_image_bytes, (row.provider, size)
            assert image.media_type in row.media_types, (row.provider, image.media_type)
            assert max(width, height) <= row.scaled_long_edge, (row.provider, width, height)
    for row in PROVIDER_IMAGE_LIMITS.values():
        assert row.max_images is None or len(images) <= row.max_images
        assert row.max_request_bytes is None or total * 4 // 3 <= row.max_request_bytes, (row.provider, total)


def line_and_image(part: ToolReturnPart) -> tuple[str, BinaryContent]:
    """The marker line and the image of a return the band replaced by a fitted copy (or the view tool's answer)."""
    content = part.content
    assert isinstance(content, list) and len(content) == 2, content
    line, image = content
    assert isinstance(line, str) and isinstance(image, BinaryContent)
    return line, image


def checker_contrast(image: Image.Image) -> float:
    """The standard deviation of an image's grey levels: ~127 for a sharp checkerboard, near 0 once averaged away."""
    return ImageStat.Stat(image.convert('L')).stddev[0]
