"""A hostile read of the image band: the model picks every argument of the view tool, tools return what they like
(images in `ToolReturn.content`, lists mixing text and images, bytes that only claim to be images), and a soak of
many runs keeps threads and descriptors flat."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage, ModelMessage, ModelRequest, ToolReturn, UserPromptPart

from pydantic_ai_harness.overflowing_tool_output import ImageBand, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from ._images import assert_fits_every_provider, bomb_png, encode, images_sent, line_and_image, screenshot
from .test_image_band import Scripted, handle_in, last_returns

pytestmark = pytest.mark.anyio


async def test_images_in_tool_return_content_take_the_same_path(tmp_path: Path) -> None:
    png = screenshot()
    store = LocalFileStore(base_dir=tmp_path)
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='shot')(
        lambda: ToolReturn('screenshot taken', content=['Here it is:', BinaryImage(png, media_type='image/png')])
    )
    await agent.run('look', run_id='run-1')
    request = script.requests[1][-1]
    assert isinstance(request, ModelRequest)
    users = [part.content for part in request.parts if isinstance(part, UserPromptPart)]
    assert any(isinstance(content, list) and content[0] == 'Here it is:' for content in users), users
    assert_fits_every_provider(images_sent(script.requests[1]))
    (part,) = last_returns(script.requests[1])
    assert part.content == 'screenshot taken'
    assert isinstance(part.metadata, dict)
    (record,) = part.metadata[IMAGES_KEY]
    assert record['key'] == 'run-1/c0_0/0/content/image1'
    assert await store.read(record['handle']) == png


def _view(handle_args: dict[str, Any] | None = None) -> Any:
    def calls(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
        args = {'handle': handle_in(messages)} | (handle_args or {})
        if args['handle'] == 'QUOTED':  # the handle wrapped in quotes and spaces, as models sometimes pass it
            args['handle'] = f"  '{handle_in(messages)}'  "
        return [('view_tool_result_image', args)]

    return calls


@pytest.mark.parametrize(
    ('args', 'expected'),
    [
        (
            {'x': -5},
            snapshot('x, y, width and height must be 0 or more (pixels of the original; width=0: to the right edge).'),
        ),
        ({'x': 10_000}, snapshot('x=10000, y=0 is outside the image, which is 4880x2560 px.')),
        (
            {'handle': 'no-such-handle'},
            snapshot(
                "No stored image under 'no-such-handle'. The newest images and PDFs stored in this conversation: '0n29rk9asg'."
            ),
        ),
        (
            {'handle': 'QUOTED', 'width': 100, 'height': 100},
            snapshot("Region x=0..100, y=0..100 of the 4880x2560 image '0n29rk9asg' (full detail):"),
        ),
    ],
)
async def test_the_view_tool_answers_bad_arguments_with_guidance(
    tmp_path: Path, args: dict[str, Any], expected: str
) -> None:
    png = screenshot()
    script = Scripted([('shot', {})], _view(args))
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
    await agent.run('look', run_id='run-1')
    (answer,) = last_returns(script.requests[2])
    content = answer.content if isinstance(answer.content, str) else line_and_image(answer)[0]
    assert content == expected


async def test_the_view_tool_refuses_a_stored_bomb_without_decoding_it(tmp_path: Path) -> None:
    script = Scripted([('shot', {})], _view())
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='shot')(lambda: BinaryImage(bomb_png(), media_type='image/png'))
    await agent.run('look', run_id='run-1')
    (answer,) = last_returns(script.requests[2])
    assert answer.content == snapshot(
        "The payload '0n29rk9asg' cannot be shown as an image: its header declares 100000x100000 px (10,000,000,000 pixels), over the 89,000,000 decoded here (a decompression bomb, or too large to process), so it was not decoded."
    )


@pytest.mark.reliability
async def test_a_soak_of_many_runs_keeps_threads_and_descriptors_flat(tmp_path: Path) -> None:
    from PIL import Image

    png = encode(Image.effect_noise((96, 96), 50).convert('RGB'))
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path), images=ImageBand(max_long_edge=48))

    async def one(run: int) -> None:
        script = Scripted([('shot', {})], _view({'width': 40, 'height': 40}))
        agent = Agent(script.model(), capabilities=[capability])
        agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
        await agent.run('look', run_id=f'soak-{run}')

    for run in range(50):  # warm up the worker-thread pool and the caches
        await one(run)
    gc.collect()
    threads, fds = threading.active_count(), len(os.listdir('/proc/self/fd'))
    for run in range(50, 1_050):
        await one(run)
    gc.collect()
    assert threading.active_count() <= threads
    assert len(os.listdir('/proc/self/fd')) <= fds + 2
