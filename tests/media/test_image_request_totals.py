"""A request's images together within what every provider takes in one request (issue 35: never a 400 for size).

Each image is fitted when it arrives, but a session that keeps its screenshots adds up: 25 photos of 0.9 MB, each
within every per-image limit, are 30 MB of base64 in one request, over Gemini's 20 MB of inline data and
Anthropic's 32 MB request. The image band moves the oldest returns out, as aging does, each image under a handle,
with or without `Aging`.
"""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path

import pytest
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage, ModelRequest, ToolReturnPart

from pydantic_ai_harness.overflowing_tool_output import ImageBand, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import AGED_IMAGES_KEY
from pydantic_ai_harness.overflowing_tool_output._media._limits import DEFAULT_TARGET, PROVIDER_IMAGE_LIMITS
from pydantic_ai_harness.overflowing_tool_output._media._request_limits import (
    ImageEntry,
    over_request_limits,
    request_limits,
)

from ._images import assert_fits_every_provider, images_sent
from .test_image_band import Scripted

pytestmark = pytest.mark.anyio

PHOTOS = 25


@cache
def photo(number: int) -> bytes:
    """A 1100x1000 JPEG of noise, ~0.9 MB: within every provider's per-image limits, so it is sent as it is."""
    image = Image.effect_noise((1100, 1000), 90 + number % 5).convert('RGB')
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=90)
    return out.getvalue()


async def test_a_session_of_heavy_photos_never_sends_more_than_a_request_takes(tmp_path: Path) -> None:
    script = Scripted(*[[('photo', {'number': number})] for number in range(PHOTOS)])
    store = LocalFileStore(base_dir=tmp_path)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store, images=ImageBand())])

    @agent.tool_plain(name='photo')
    def take(number: int) -> BinaryImage:
        return BinaryImage(photo(number), media_type='image/jpeg')

    result = await agent.run('look', run_id='photos')
    sent = [images_sent(request) for request in script.requests]
    for images in sent:
        assert_fits_every_provider(images)  # count, bytes and sides of every request, against every row
    # Without the rule the last request would carry all 25 (30 MB of base64); the newest photo is always there.
    assert len(sent[-1]) < PHOTOS
    assert sent[-1][-1].data == photo(PHOTOS - 1)
    # Every photo that left names its original, byte for byte.
    moved = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and AGED_IMAGES_KEY in (part.metadata or {})
    ]
    assert len(moved) + len(sent[-1]) == PHOTOS
    for part in moved:
        [handle] = part.metadata[AGED_IMAGES_KEY]
        number = int(part.tool_call_id.removeprefix('c').split('_')[0])
        assert await store.read(handle) == photo(number)
        assert isinstance(part.content, str) and handle in part.content and 'view_tool_result_image' in part.content


def test_the_request_limits_of_the_default_target_are_the_tightest_of_every_provider() -> None:
    limits = request_limits(DEFAULT_TARGET)
    assert limits.max_images == min(row.max_images or 10**9 for row in PROVIDER_IMAGE_LIMITS.values())
    assert limits.max_bytes <= min(row.max_request_bytes or 10**12 for row in PROVIDER_IMAGE_LIMITS.values())
    assert (limits.many_images, limits.max_side_many) == (20, 2000)


def test_more_than_twenty_images_move_the_oversized_ones_oldest_first() -> None:
    limits = request_limits(DEFAULT_TARGET)
    small = ImageEntry(True, ((1000, 800, 100_000),))
    large = ImageEntry(True, ((3000, 1000, 100_000),))
    # 21 images, one 3000 px wide: the oldest returns go until no image over 2000 px is left or 20 remain.
    entries = [small] * 10 + [large] + [small] * 10
    assert over_request_limits(entries, limits) == [0]  # 20 images remain: the side rule no longer applies
    assert over_request_limits([small] * 20 + [large], limits) == [0]
    # A user's own images cannot move; returns holding images can, oldest first, until the count fits.
    users = ImageEntry(False, ((800, 600, 50_000),) * 100)
    assert over_request_limits([small, small, users], limits) == [0, 1]
    assert over_request_limits([small] * 20, limits) == []


def test_bytes_over_the_request_share_move_the_oldest() -> None:
    limits = request_limits(DEFAULT_TARGET)
    heavy = ImageEntry(True, ((1000, 1000, 900_000),))
    entries = [heavy] * 20  # 24 MB of base64 against 16 MB
    chosen = over_request_limits(entries, limits)
    assert chosen == list(range(len(chosen)))
    assert sum(entry.encoded for entry in entries[len(chosen) :]) <= limits.max_bytes
    assert sum(entry.encoded for entry in entries[len(chosen) - 1 :]) > limits.max_bytes


async def test_one_return_whose_images_alone_are_over_the_totals_leaves_whole_each_image_viewable(
    tmp_path: Path,
) -> None:
    """25 heavy photos in one return, over the request totals by themselves: the return leaves the context as one
    stub naming every image's handle (not image by image), the request sent fits, and each original reads back."""
    script = Scripted([('album', {})])
    store = LocalFileStore(base_dir=tmp_path)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store, images=ImageBand())])

    @agent.tool_plain(name='album')
    def album() -> list[BinaryImage]:
        return [BinaryImage(photo(number), media_type='image/jpeg') for number in range(PHOTOS)]

    result = await agent.run('look', run_id='album')
    assert images_sent(script.requests[-1]) == []  # the whole return left; nothing else held images
    (part,) = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    handles = part.metadata[AGED_IMAGES_KEY]
    assert len(handles) == PHOTOS
    assert [await store.read(handle) for handle in handles] == [photo(number) for number in range(PHOTOS)]
    assert isinstance(part.content, str) and all(handle in part.content for handle in handles)
