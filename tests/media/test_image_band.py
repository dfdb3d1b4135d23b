"""The image band (issue 35, item 1) through real agent runs: images within the limits reach the model as they are,
larger ones as a copy that fits every provider, their originals stored byte for byte and viewable region by region."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from ._images import (
    CHECKER_BOX,
    assert_fits_every_provider,
    bomb_png,
    checker_contrast,
    images_sent,
    line_and_image,
    screenshot,
    small_png,
)

pytestmark = pytest.mark.anyio


Calls = list[tuple[str, dict[str, Any]]]


class Scripted:
    """A model that calls `calls` one step after another (each a list of calls), recording every request."""

    def __init__(self, *steps: Calls | Callable[[list[ModelMessage]], Calls]) -> None:
        self.steps = list(steps)
        self.requests: list[list[ModelMessage]] = []
        self.tools: list[list[str]] = []

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.requests.append(list(messages))
            self.tools.append([tool.name for tool in info.function_tools])
            step = len(self.requests) - 1
            if step >= len(self.steps):
                return ModelResponse(parts=[TextPart('done')])
            planned = self.steps[step]
            calls = planned(messages) if callable(planned) else planned
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f'c{step}_{i}') for i, (name, args) in enumerate(calls)]
            )

        return FunctionModel(respond)


def last_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    return [part for part in request.parts if isinstance(part, ToolReturnPart)]


async def test_a_small_png_reaches_the_model_as_it_is_not_as_a_hex_dump(tmp_path: Path) -> None:
    png = small_png()
    assert len(png) > 10_000  # over the default text band, which measured it in bytes and spilled it as a hex dump
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
    await agent.run('look')
    (part,) = last_returns(script.requests[1])
    assert isinstance(part.content, BinaryContent) and part.content.data == png
    assert part.metadata is None
    assert 'view_tool_result_image' not in script.tools[1]  # nothing stored: the view tool is not offered


async def test_a_retina_screenshot_is_sent_as_a_copy_that_fits_and_its_original_is_kept(tmp_path: Path) -> None:
    png = screenshot()
    store = LocalFileStore(base_dir=tmp_path)
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
    await agent.run('look', run_id='run-1')
    (part,) = last_returns(script.requests[1])
    marker, _copy = line_and_image(part)
    assert_fits_every_provider(images_sent(script.requests[1]))
    (record,) = part.metadata[IMAGES_KEY]
    assert marker == snapshot(
        "[Image 4880x2560 PNG (394 KB), shown below as a 1480x776 PNG copy. Original stored under handle '0n29rk9asg': view_tool_result_image(handle, x, y, width, height) shows any region of it in full detail.]"
    )
    assert await store.read(record['handle']) == png
    assert 'view_tool_result_image' in script.tools[1]


def handle_in(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and isinstance(part.metadata, dict) and IMAGES_KEY in part.metadata:
                    return part.metadata[IMAGES_KEY][0]['handle']
    raise AssertionError('no stored image')


async def test_a_crop_of_the_stored_original_shows_detail_the_copy_lost(tmp_path: Path) -> None:
    left, top, right, bottom = CHECKER_BOX
    box = {'x': left, 'y': top, 'width': right - left, 'height': bottom - top}
    script = Scripted(
        [('shot', {})], lambda messages: [('view_tool_result_image', {'handle': handle_in(messages), **box})]
    )
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='shot')(lambda: BinaryImage(screenshot(), media_type='image/png'))
    await agent.run('look', run_id='run-1')
    (shot,) = last_returns(script.requests[1])
    _, copy = line_and_image(shot)
    with Image.open(io.BytesIO(copy.data)) as sent:
        scale = sent.width / 4880
        left_, top_, right_, bottom_ = (int(edge * scale) for edge in CHECKER_BOX)
        region = sent.crop((left_, top_, right_, bottom_))
        lost = checker_contrast(region)
    (view,) = last_returns(script.requests[2])
    line, crop = line_and_image(view)
    assert line == snapshot("Region x=4000..4400, y=2000..2300 of the 4880x2560 image '0n29rk9asg' (full detail):")
    with Image.open(io.BytesIO(crop.data)) as shown:
        assert shown.size == (right - left, bottom - top)  # full detail: one pixel of the original per pixel
        kept = checker_contrast(shown)
    assert kept > 120 and lost < 40, (kept, lost)
    assert_fits_every_provider(images_sent(script.requests[2]))


async def test_a_decompression_bomb_is_refused_undecoded_and_stored_as_it_is(tmp_path: Path) -> None:
    bomb = bomb_png()
    store = LocalFileStore(base_dir=tmp_path)
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='shot')(lambda: BinaryImage(bomb, media_type='image/png'))
    await agent.run('look', run_id='run-1')
    (part,) = last_returns(script.requests[1])
    assert part.content == snapshot(
        "[Image declared image/png (84 bytes) not shown: its header declares 100000x100000 px (10,000,000,000 pixels), over the 89,000,000 decoded here (a decompression bomb, or too large to process), so it was not decoded. Stored as it is under handle '0n29rk9asg'.]"
    )
    assert images_sent(script.requests[1]) == []
    assert await store.read(part.metadata[IMAGES_KEY][0]['handle']) == bomb


async def test_a_50_megapixel_png_is_fitted_and_kept(tmp_path: Path) -> None:
    png = screenshot(10_000, 5_000)
    store = LocalFileStore(base_dir=tmp_path)
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
    await agent.run('look', run_id='run-1')
    (part,) = last_returns(script.requests[1])
    assert_fits_every_provider(images_sent(script.requests[1]))
    assert await store.read(part.metadata[IMAGES_KEY][0]['handle']) == png
