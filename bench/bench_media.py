"""Images: the time to fit a screenshot through a whole agent step against Pillow's own `thumbnail` + `save` in the
same run, and the tokens of a 40-screenshot session with and without the image band and aging.

Run it alone with `PYTHONPATH=$PWD .venv/bin/python -m bench media`.
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._report import Entry
from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import Aging, ImageBand, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import PROVIDER_IMAGE_LIMITS, sniff_image
from tests.media._images import images_sent, screenshot
from tests.media.test_image_aging import numbered_screenshot

TITLE = 'Images'
METHOD = """
Fit: one agent step (`Agent.run` with a scripted model) whose tool returns a screenshot, with `OverflowingToolOutput`
(the copy fitted in a worker thread, the original written to a `LocalFileStore`), against Pillow's own
`Image.thumbnail((1568, 1568))` + `save(PNG)` of the same bytes, medians of 5, in the same run. Session: 40 tool
calls each returning a screenshot (1280x800 PNGs, every tenth a 4880x2560 Retina one), the model's input summed over
the 40 requests (what a session pays): cl100k tokens of the text, and each image priced by Anthropic's rule after
its own downscaling (`PROVIDER_IMAGE_LIMITS['anthropic'].tokens`); without the capability, and with its defaults
plus `Aging(after_turns=4, batch_tokens=4_000)` and `ImageBand(keep_newest=3)`. The same session again with each
screenshot in `ToolReturn.content` beside a one-line caption (pydantic-ai sends it as a prompt part of its own).
"""

SECTION = 'media'
RUNS = 5
SESSION = 40


def _thumbnail(data: bytes) -> float:
    started = time.perf_counter()
    with Image.open(io.BytesIO(data)) as image:
        image.thumbnail((1568, 1568))
        out = io.BytesIO()
        image.save(out, 'PNG')
    return time.perf_counter() - started


async def _step(data: bytes, capability: OverflowingToolOutput[Any] | None) -> float:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('shot', {})])
        return ModelResponse(parts=[TextPart('ok')])

    agent = Agent(FunctionModel(model), capabilities=[capability] if capability else [])
    agent.tool_plain(name='shot')(lambda: BinaryImage(data, media_type='image/png'))
    started = time.perf_counter()
    await agent.run('look')
    return time.perf_counter() - started


async def _fit_ratio(name: str, data: bytes, root: Path) -> Entry:
    steps, thumbs, plain = [], [], []
    for n in range(RUNS):
        steps.append(await _step(data, OverflowingToolOutput(store=LocalFileStore(base_dir=root / f'{name}{n}'))))
        thumbs.append(_thumbnail(data))
        plain.append(await _step(data, None))
    step, thumb, bare = statistics.median(steps), statistics.median(thumbs), statistics.median(plain)
    ratio = (step - bare) / thumb
    return Entry(
        SECTION,
        f'fit a {name} in an agent step / Pillow thumbnail + save',
        ratio,
        'x',
        '<= 2.0x',
        ratio <= 2.0,
        f'step {step * 1e3:.0f} ms (without the capability {bare * 1e3:.0f} ms), thumbnail + save {thumb * 1e3:.0f} ms',
    )


def _request_tokens(messages: list[ModelMessage], count: Any) -> tuple[int, int]:
    """Tokens of one request's input (text by cl100k, images by Anthropic's rule) and its image bytes."""
    price = PROVIDER_IMAGE_LIMITS['anthropic'].tokens
    text = 0
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                content = getattr(part, 'content', '')
                if isinstance(content, str):
                    text += count(content)
                elif isinstance(content, list):
                    text += sum(count(item) for item in content if isinstance(item, str))
    images = images_sent(messages)
    pixels = [sniff_image(image.data) for image in images]
    return text + sum(price(info.width, info.height) for info in pixels if info is not None), sum(
        len(image.data) for image in images
    )


async def _session(capability: OverflowingToolOutput[Any] | None, *, in_content: bool = False) -> tuple[int, int, int]:
    """The session's input tokens, its last request's, and its largest request's image bytes; with `in_content`, each
    screenshot comes in `ToolReturn.content` (sent as a prompt part of its own) beside a one-line caption.
    """
    shots = [screenshot() if number % 10 == 9 else numbered_screenshot(number) for number in range(SESSION)]
    count = cl100k_counter()
    totals = [0, 0, 0]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tokens, nbytes = _request_tokens(messages, count)
        totals[0] += tokens
        totals[1], totals[2] = tokens, max(totals[2], nbytes)
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < SESSION:
            return ModelResponse(parts=[ToolCallPart('shot', {'number': step})])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=[capability] if capability else [])
    if in_content:
        agent.tool_plain(name='shot')(
            lambda number: ToolReturn(f'screen {number}', content=[BinaryImage(shots[number], media_type='image/png')])
        )
    else:
        agent.tool_plain(name='shot')(lambda number: BinaryImage(shots[number], media_type='image/png'))
    await agent.run('browse')
    return totals[0], totals[1], totals[2]


async def _run() -> list[Entry]:
    root = Path(tempfile.mkdtemp(prefix='bench-media-'))
    entries = [
        await _fit_ratio('4880x2560 screenshot', screenshot(), root),
        await _fit_ratio('10000x5000 (50 MP) PNG', screenshot(10_000, 5_000), root),
    ]
    without = await _session(None)
    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=root / 'session'),
        images=ImageBand(keep_newest=3),
        aging=Aging(after_turns=4, batch_tokens=4_000),
    )
    with_band = await _session(capability)
    ratio = with_band[0] / without[0]
    entries.append(
        Entry(
            SECTION,
            f'{SESSION}-screenshot session: input tokens with / without',
            ratio,
            'x',
            '<= 0.3x',
            ratio <= 0.3,
            f'{with_band[0]:,} vs {without[0]:,} tokens over {SESSION} requests; last request {with_band[1]:,} vs '
            f'{without[1]:,}; largest request image bytes {with_band[2]:,} vs {without[2]:,}',
        )
    )
    without = await _session(None, in_content=True)
    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=root / 'content-session'),
        images=ImageBand(keep_newest=3),
        aging=Aging(after_turns=4, batch_tokens=4_000),
    )
    with_band = await _session(capability, in_content=True)
    ratio = with_band[0] / without[0]
    entries.append(
        Entry(
            SECTION,
            f'{SESSION}-screenshot session in ToolReturn.content: input tokens with / without',
            ratio,
            'x',
            '<= 0.3x',
            ratio <= 0.3,
            f'{with_band[0]:,} vs {without[0]:,} tokens over {SESSION} requests; last request {with_band[1]:,} vs '
            f'{without[1]:,}; largest request image bytes {with_band[2]:,} vs {without[2]:,}',
        )
    )
    return entries


def run() -> list[Entry]:
    return anyio.run(_run)


if __name__ == '__main__':
    for entry in run():
        print(f'{entry.name}: {entry.value:.3g} {entry.unit} ({entry.detail})')
