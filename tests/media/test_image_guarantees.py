"""The same guarantees as text (issue 35, item 5), read as an adversary would: the event loop keeps serving while a
50-megapixel PNG is fitted, a missing Pillow or a failing store loses nothing, the step budget counts images, many
images cost bounded work, and a bad setting is refused at construction naming it."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage

from pydantic_ai_harness.overflowing_tool_output import (
    ImageBand,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    StepBudget,
)
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from ..reliability._loop_lag import watch_loop
from ._images import assert_fits_every_provider, encode, images_sent, line_and_image, screenshot, small_png
from .test_image_aging import numbered_screenshot
from .test_image_band import Scripted, last_returns

pytestmark = pytest.mark.anyio


class FailingStore:
    async def write(self, key: str, data: bytes) -> str:
        raise OSError(28, 'No space left on device')

    async def read(self, handle: str) -> bytes:
        raise KeyError(handle)


async def test_the_event_loop_keeps_serving_while_a_50_megapixel_png_is_fitted(tmp_path: Path) -> None:
    png = screenshot(10_000, 5_000)
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='shot')(lambda: BinaryImage(png, media_type='image/png'))
    async with watch_loop() as lag:
        await agent.run('look')
    assert_fits_every_provider(images_sent(script.requests[1]))
    # Decoding and encoding take seconds of CPU in a worker thread; the loop is never held for more than a blink.
    assert lag.ticks > 20 and lag.worst < 0.25, (lag.ticks, lag.worst)


async def test_without_pillow_an_image_over_the_limits_is_stored_and_named_and_one_within_them_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big, small = screenshot(), small_png()
    monkeypatch.setitem(sys.modules, 'PIL', None)  # `import PIL` raises ImportError, as on a plain install
    monkeypatch.setitem(sys.modules, 'PIL.Image', None)
    store = LocalFileStore(base_dir=tmp_path)
    script = Scripted([('big', {}), ('small', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='big')(lambda: BinaryImage(big, media_type='image/png'))
    agent.tool_plain(name='small')(lambda: BinaryImage(small, media_type='image/png'))
    with pytest.warns(OverflowingToolOutputWarning, match=r'Pillow, needed to make a smaller copy, is not installed'):
        await agent.run('look', run_id='run-1')
    big_part, small_part = last_returns(script.requests[1])
    assert big_part.content == snapshot(
        "[Image 4880x2560 PNG (394 KB) not shown: it is over the image limits (1568 px long edge, 1.0 MB) and Pillow, needed to make a smaller copy, is not installed (pip install 'pydantic-ai-harness-context[media]'). Stored as it is under handle '0n29rk9asg'.]"
    )
    assert isinstance(big_part.metadata, dict)
    assert await store.read(big_part.metadata[IMAGES_KEY][0]['handle']) == big
    assert isinstance(small_part.content, BinaryImage) and small_part.content.data == small


async def test_without_pillow_a_small_photo_shown_turned_passes_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No copy can be turned upright without Pillow: a phone photo within the limits is sent as it is (the orientation
    is read without Pillow only in durable workflow code, where a durable operation makes the copy)."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6
    photo = encode(Image.new('RGB', (400, 300), (20, 40, 200)), 'JPEG', exif=exif)
    monkeypatch.setitem(sys.modules, 'PIL', None)
    monkeypatch.setitem(sys.modules, 'PIL.Image', None)
    script = Scripted([('photo', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='photo')(lambda: BinaryImage(photo, media_type='image/jpeg'))
    await agent.run('look')
    (part,) = last_returns(script.requests[1])
    assert isinstance(part.content, BinaryImage) and part.content.data == photo


async def test_a_failing_store_still_sends_the_fitted_copy_and_says_the_original_is_not_kept() -> None:
    script = Scripted([('shot', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=FailingStore(), workspace=None)])
    agent.tool_plain(name='shot')(lambda: BinaryImage(screenshot(), media_type='image/png'))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('look')
    (part,) = last_returns(script.requests[1])
    line, _copy = line_and_image(part)
    assert line == snapshot(
        "[Image 4880x2560 PNG (394 KB), shown below as a 1480x776 PNG copy. The original could not be stored (the store failed: OSError(28, 'No space left on device')).]"
    )
    assert any('could not be stored' in str(w.message) for w in caught)
    assert_fits_every_provider(images_sent(script.requests[1]))


async def test_the_step_budget_counts_images(tmp_path: Path) -> None:
    # Eight screenshots (~1,366 tokens each, ~5,500 characters) and one 7,700-character log: under the budget alone,
    # the log is reduced once the images are counted.
    calls = [('shot', {'number': number}) for number in range(8)] + [('log', {})]
    script = Scripted(calls)
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path), step_budget=StepBudget(max_size=30_000))
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='shot')(lambda number: BinaryImage(numbered_screenshot(number), media_type='image/png'))
    agent.tool_plain(name='log')(lambda: '\n'.join(f'line {i} of the build log' for i in range(300)))
    await agent.run('look', run_id='run-1')
    log = last_returns(script.requests[1])[-1]
    assert str(log.content)[:240] == snapshot("""\
[Step budget: the 9 tool results of this step came to 51401 characters, over the budget of 30000; this one (7689 characters, one of the largest) was stored in full, with a preview here.]
[`log` returned too much to show (~1923 tokens). Save\
""")


async def test_many_images_in_one_return_each_fit_and_the_request_stays_within_every_provider(tmp_path: Path) -> None:
    shots = [BinaryImage(screenshot(), media_type='image/png') for _ in range(30)]
    script = Scripted([('gallery', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='gallery')(lambda: shots)
    await agent.run('look')
    sent = images_sent(script.requests[1])
    assert len(sent) == 30
    assert_fits_every_provider(sent)  # more than 20 images in one request: Anthropic's 2000-px rule holds too


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'max_long_edge': 0}, 'ImageBand.max_long_edge must be a positive int or None, got 0'),
        ({'max_bytes': 1.5}, 'ImageBand.max_bytes must be a positive int or None, got 1.5'),
        ({'keep_newest': -1}, 'ImageBand.keep_newest must be a positive int or None, got -1'),
        (
            {'max_decode_pixels': True},
            (
                'ImageBand.max_decode_pixels must be an int from 1 to 178,956,970 (Pillow refuses larger images '
                'whatever is set here), got True'
            ),
        ),
        (
            {'max_decode_pixels': 250_000_000},
            (
                'ImageBand.max_decode_pixels must be an int from 1 to 178,956,970 (Pillow refuses larger images '
                'whatever is set here), got 250000000'
            ),
        ),
        ({'timeout': float('nan')}, 'ImageBand.timeout must be a positive number of seconds, got nan'),
    ],
)
def test_a_bad_setting_is_refused_at_construction_naming_it(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ImageBand(**options)  # pyright: ignore[reportArgumentType]


def test_images_must_be_an_image_band() -> None:
    with pytest.raises(TypeError, match='images must be an ImageBand or None, got dict'):
        OverflowingToolOutput(images={'max_long_edge': 800})  # pyright: ignore[reportArgumentType]


async def test_an_image_url_passes_as_it_is_and_is_never_fetched(tmp_path: Path) -> None:
    """A tool's output names a URL on a loopback server: the capability sends it on as it is and never requests it
    (fetching the addresses attacker text names would reach hosts the model cannot)."""
    import http.server
    import threading

    from pydantic_ai.messages import DocumentUrl, ImageUrl

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f'http://127.0.0.1:{server.server_address[1]}'
        urls = [ImageUrl(f'{base}/huge.png'), DocumentUrl(f'{base}/report.pdf')]
        script = Scripted([('links', {})])
        agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
        agent.tool_plain(name='links')(lambda: urls)
        await agent.run('look')
    finally:
        server.shutdown()
        server.server_close()
    (part,) = last_returns(script.requests[1])
    assert part.content == urls
    assert hits == []
