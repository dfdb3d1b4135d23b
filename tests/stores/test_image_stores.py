"""Every store keeps an image's original byte for byte, and the view tool reads it back (issue 35, item 5)."""

from __future__ import annotations

import io

import pytest
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage

from pydantic_ai_harness.overflowing_tool_output import MemoryStore, OverflowingToolOutput, OverflowStore
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from ..media._images import assert_fits_every_provider, images_sent, line_and_image, screenshot
from ..media.test_image_band import Scripted, handle_in, last_returns

pytestmark = pytest.mark.anyio


async def _fit_and_view(store: OverflowStore) -> None:
    png = screenshot()
    script = Scripted(
        [('shot', {})],
        lambda messages: [
            ('view_tool_result_image', {'handle': handle_in(messages), 'x': 100, 'width': 640, 'height': 480})
        ],
    )
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store, workspace=None)])
    agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
    await agent.run('look')
    (part,) = last_returns(script.requests[1])
    assert isinstance(part.metadata, dict)
    assert await store.read(part.metadata[IMAGES_KEY][0]['handle']) == png
    (view,) = last_returns(script.requests[2])
    _, crop = line_and_image(view)
    with Image.open(io.BytesIO(crop.data)) as shown:
        assert shown.size == (640, 480)
    assert_fits_every_provider(images_sent(script.requests[2]))


async def test_every_store_keeps_the_original_and_serves_the_view(store: OverflowStore) -> None:
    await _fit_and_view(store)


async def test_the_memory_store_keeps_the_original_and_serves_the_view() -> None:
    await _fit_and_view(MemoryStore())
