"""Image blobs shown as images (issue 35, item 3), EXIF orientation, animations, and images whose bytes are text
under secret redaction. Real agent runs with `FunctionModel` over images made by the tests with Pillow."""

from __future__ import annotations

import base64
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from PIL import Image, ImageSequence
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, BinaryImage, ModelMessage
from pydantic_ai.models.function import FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Aging,
    Band,
    ImageBand,
    LocalFileStore,
    MemoryStore,
    OverflowingToolOutput,
    SecretRedaction,
    Spill,
)
from pydantic_ai_harness.overflowing_tool_output._media._fit import stored_region
from pydantic_ai_harness.overflowing_tool_output._media._sniff import MAX_FRAMES_COUNTED, count_frames

from ...media._images import assert_fits_every_provider, encode, images_sent, line_and_image
from ...media.test_image_aging import tool_returns
from ...media.test_image_band import Scripted, last_returns
from .._scripted_queries import RUN_ID
from ._script import RunScript as Script

pytestmark = pytest.mark.anyio

GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'


def _noise_png(width: int, height: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    return encode(Image.frombytes('RGB', (width, height), rng.randbytes(width * height * 3)))


def _data_url(data: bytes, media_type: str = 'image/png') -> str:
    return f'data:{media_type};base64,' + base64.b64encode(data).decode()


def _handles(text: str) -> list[str]:
    return re.findall(r"handle '([^']+)'", text)


async def _run(
    value: object,
    store: LocalFileStore | MemoryStore,
    *,
    images: ImageBand | None = None,
    redact_secrets: SecretRedaction | None = None,
    queries: Any = None,
) -> tuple[Script, list[Any]]:
    """One real run whose tool `fetch` returns `value`; the script (what the model was shown) and the messages."""
    script = Script([('fetch', {})], queries or (lambda handles: []))
    capability = OverflowingToolOutput[Any](
        store=store,
        bands=[Band(over=2_000, action=Spill())],
        images=images if images is not None else ImageBand(),
        redact_secrets=redact_secrets,
    )
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda: value)
    result = await agent.run('Fetch it', run_id=RUN_ID)
    return script, result.all_messages()


async def test_a_json_page_holding_a_3_mb_png_data_url_shows_the_image_fitted(tmp_path: Path) -> None:
    """The model reads the page with the marker and sees the screenshot, fitted to every provider at once; the
    stored original reads back byte for byte."""
    png = _noise_png(1030, 1000)
    page = json.dumps({'url': 'https://example.com/', 'screenshot': _data_url(png), 'status': 200})
    assert len(png) > 3_000_000
    store = LocalFileStore(base_dir=tmp_path)
    script, messages = await _run(page, store)
    (shown,) = script.shown
    assert shown == snapshot("""\
[`fetch` returned 4.1 MB holding a base64 blob (3.1 MB decoded), saved apart and marked below; the whole output, unchanged, is handle '7217zk37ff'.]
{"url": "https://example.com/", "screenshot": "[image/png data URL, 3.1 MB, saved as handle 'rn01cc9y9a'; image 1 below; view_tool_result_image zooms]", "status": 200}\
""")
    (image,) = script.files[0]
    assert_fits_every_provider(images_sent(messages))
    with Image.open(io.BytesIO(image.data)) as copy:
        assert (copy.format, max(copy.size) <= 1568, copy.width * copy.height <= 1_150_000) == ('JPEG', True, True)
    assert await store.read(_handles(shown)[1]) == png
    assert await store.read(_handles(shown)[0]) == page.encode()


async def test_a_small_image_blob_is_shown_as_it_is(tmp_path: Path) -> None:
    png = _noise_png(64, 48)
    script, _ = await _run(json.dumps({'icon': _data_url(png), 'pad': 'x' * 3_000}), LocalFileStore(base_dir=tmp_path))
    (image,) = script.files[0]
    assert (image.data, image.media_type) == (png, 'image/png')


async def test_at_most_show_blob_images_are_shown_per_return(tmp_path: Path) -> None:
    """20 screenshots in one return: the first 4 are shown, the other 16 stay markers the view tool opens; all 20
    are stored byte for byte."""
    pngs = [_noise_png(40, 30, seed=seed) for seed in range(20)]
    store = LocalFileStore(base_dir=tmp_path)
    script, messages = await _run([_data_url(png) for png in pngs], store)
    body = script.shown[0].split('\n', 1)[1]
    markers = json.loads(body)
    assert len(script.files[0]) == 4 and [image.data for image in script.files[0]] == pngs[:4]
    assert markers[3] == snapshot(
        "[image/png data URL, 3.7 KB, saved as handle 'xxxea693j1'; image 4 below; view_tool_result_image zooms]"
    )
    assert markers[4] == snapshot(
        "[image/png data URL, 3.7 KB, saved as handle '5e9qsj7wbc'; view_tool_result_image shows it]"
    )
    assert [await store.read(_handles(marker)[0]) for marker in markers] == pngs
    assert_fits_every_provider(images_sent(messages))


async def test_show_blob_images_0_keeps_markers_alone(tmp_path: Path) -> None:
    png = _noise_png(64, 48)
    script, _ = await _run(
        json.dumps({'icon': _data_url(png), 'pad': 'x' * 3_000}),
        LocalFileStore(base_dir=tmp_path),
        images=ImageBand(show_blob_images=0),
    )
    assert script.files[0] == []
    assert 'view_tool_result_image shows it]' in script.shown[0]


@pytest.mark.parametrize('bad', [-1, 2.0, True, '4'])
def test_a_bad_show_blob_images_is_refused_at_construction(bad: object) -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(f'ImageBand.show_blob_images must be an int of 0 or more (0: none shown), got {bad!r}'),
    ):
        ImageBand(show_blob_images=bad)  # pyright: ignore[reportArgumentType]


async def test_a_shown_blob_image_ages_like_any_image(tmp_path: Path) -> None:
    """The copy a blob was shown as is recorded as the copy of its stored original: aging names that handle."""
    png = _noise_png(300, 200)
    script = Scripted(*[[('fetch', {})] for _ in range(4)])
    store = LocalFileStore(base_dir=tmp_path)
    capability = OverflowingToolOutput[Any](
        store=store,
        bands=[Band(over=2_000, action=Spill())],
        images=ImageBand(keep_newest=1),
        aging=Aging(after_turns=2, batch_tokens=100),
    )
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda: json.dumps({'shot': _data_url(png), 'pad': 'x' * 100}))
    await agent.run('Fetch it', run_id=RUN_ID)
    first, *_, newest = tool_returns(script.requests[-1])
    assert isinstance(first.content, str)
    (blob,) = re.findall(r"'([^']+)' \(300x200 PNG\)", first.content)
    assert await store.read(blob) == png
    content: object = newest.content
    assert isinstance(content, list) and [item.data for item in content if isinstance(item, BinaryContent)] == [png]


def _upright_test_image() -> Image.Image:
    """200 wide, 400 tall as displayed: red on top, blue below, a green square top left."""
    image = Image.new('RGB', (200, 400), (220, 0, 0))
    image.paste((0, 0, 220), (0, 200, 200, 400))
    image.paste((0, 200, 0), (0, 0, 40, 40))
    return image


def _rotated_jpeg(orientation: int = 6, image_format: str = 'JPEG') -> bytes:
    """`_upright_test_image` stored turned, with the EXIF orientation that shows it upright."""
    inverse = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270, 3: Image.Transpose.ROTATE_180}
    stored = _upright_test_image().transpose(inverse[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    options: dict[str, Any] = {'quality': 95} if image_format in ('JPEG', 'WEBP') else {}
    return encode(stored, image_format, exif=exif, **options)


def _pixel(data: bytes, x: int, y: int) -> tuple[int, ...]:
    with Image.open(io.BytesIO(data)) as image:
        return image.convert('RGB').getpixel((x, y))  # pyright: ignore[reportReturnType]


def _close(pixel: tuple[int, ...], expected: tuple[int, int, int]) -> bool:
    return all(abs(a - b) < 40 for a, b in zip(pixel, expected, strict=True))


@pytest.mark.parametrize(
    ('image_format', 'orientation'), [('JPEG', 3), ('JPEG', 6), ('JPEG', 8), ('WEBP', 6), ('TIFF', 6), ('TIFF', 8)]
)
async def test_an_exif_rotated_image_is_sent_and_cropped_upright(
    image_format: str, orientation: int, tmp_path: Path
) -> None:
    """Returned as an image: the copy is upright (pixels checked), sized as displayed; the view tool crops in
    displayed coordinates; the stored original is the file as returned."""
    jpeg = _rotated_jpeg(orientation, image_format)
    store = LocalFileStore(base_dir=tmp_path)

    def view(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
        handle = _handles(str(last_returns(messages)[0].content))[0]
        return [('view_tool_result_image', {'handle': handle, 'x': 0, 'y': 300, 'width': 200, 'height': 100})]

    script = Scripted([('fetch', {})], view)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='fetch')(lambda: BinaryImage(jpeg, media_type=f'image/{image_format.lower()}'))
    await agent.run('Look', run_id=RUN_ID)
    marker, copy = line_and_image(last_returns(script.requests[1])[0])
    viewed, region = line_and_image(last_returns(script.requests[2])[0])
    assert marker.startswith(f'[Image 200x400 {image_format}')
    with Image.open(io.BytesIO(copy.data)) as sent:
        assert sent.size == (200, 400)
    assert _close(_pixel(copy.data, 10, 10), (0, 200, 0))
    assert _close(_pixel(copy.data, 150, 100), (220, 0, 0))
    assert _close(_pixel(copy.data, 100, 300), (0, 0, 220))
    assert viewed == snapshot("Region x=0..200, y=300..400 of the 200x400 image 'vn12gd1j0k' (full detail):")
    with Image.open(io.BytesIO(region.data)) as cropped:
        assert cropped.size == (200, 100)
    assert _close(_pixel(region.data, 100, 50), (0, 0, 220))
    assert await store.read(_handles(marker)[0]) == jpeg


async def test_an_exif_rotated_jpeg_blob_is_shown_upright(tmp_path: Path) -> None:
    jpeg = _rotated_jpeg(6)
    script, _ = await _run(json.dumps({'photo': _data_url(jpeg, 'image/jpeg'), 'pad': 'x' * 3_000}), MemoryStore())
    (copy,) = script.files[0]
    assert _close(_pixel(copy.data, 10, 10), (0, 200, 0))
    assert _close(_pixel(copy.data, 100, 300), (0, 0, 220))


def test_a_displayed_region_maps_to_the_stored_pixels_for_every_orientation() -> None:
    """`stored_region` against Pillow's own `ImageOps.exif_transpose`, over random regions of all 8 orientations."""
    from PIL import ImageOps

    from pydantic_ai_harness.overflowing_tool_output._media._fit import _upright

    rng = random.Random(5)
    stored = Image.frombytes('RGB', (7, 5), rng.randbytes(105))
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        with Image.open(io.BytesIO(encode(stored, exif=exif))) as opened:
            displayed = ImageOps.exif_transpose(opened)
        assert _upright(stored, orientation).tobytes() == displayed.tobytes()
        for _ in range(40):
            left, top = rng.randrange(displayed.width), rng.randrange(displayed.height)
            box = (
                left,
                top,
                rng.randrange(left + 1, displayed.width + 1),
                rng.randrange(top + 1, displayed.height + 1),
            )
            region = _upright(stored.crop(stored_region(box, displayed.size, orientation)), orientation)
            assert region.tobytes() == displayed.crop(box).tobytes(), (orientation, box)


def _colour(frame: int) -> tuple[int, int, int]:
    return (frame * 7 % 256, frame * 13 % 256, 255 - frame % 256)


def _animated_gif(frames: int = 500, size: int = 64) -> bytes:
    images = [Image.new('RGB', (size, size), _colour(frame)) for frame in range(frames)]
    return encode(images[0], 'GIF', save_all=True, append_images=images[1:], duration=20, loop=0)


def _with_undecodable_later_frames(gif: bytes) -> bytes:
    """`gif` with the image data of every frame after the first replaced by bytes that are no LZW stream (the
    sub-block structure kept): decoding all frames fails, decoding the first and walking the blocks does not."""
    out = bytearray(gif)
    position = 13 + (3 << ((gif[10] & 7) + 1) if gif[10] & 0x80 else 0)
    frame = 0
    rng = random.Random(9)
    while out[position] != 0x3B:
        if out[position] == 0x21:
            position += 2
        else:
            local = out[position + 9]
            position += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)
            frame += 1
            if frame > 1:
                out[position] = 12  # an LZW minimum code size over the 8 a GIF may have
            position += 1
        while (length := out[position]) != 0:
            if frame > 1:
                out[position + 1 : position + 1 + length] = rng.randbytes(length)
            position += 1 + length
        position += 1
    return bytes(out)


async def test_a_500_frame_animated_gif_is_sent_as_its_first_frame(tmp_path: Path) -> None:
    """Only the first frame is decoded (the others are undecodable here), sent as PNG; the marker says it was an
    animation and how many frames it had; the stored original is the file returned."""
    gif = _with_undecodable_later_frames(_animated_gif())
    with Image.open(io.BytesIO(gif)) as check, pytest.raises(Exception):  # noqa: B017
        for frame in ImageSequence.Iterator(check):
            frame.load()  # a decoder that went through every frame would fail
    store = LocalFileStore(base_dir=tmp_path)
    script, _ = await _run(BinaryImage(gif, media_type='image/gif'), store)
    assert script.shown[0] == snapshot(
        "[Image 64x64 GIF (69 KB, animated, 500 frames), shown below as its first frame, a 64x64 PNG copy. Original stored under handle '4th2mf6zb1': view_tool_result_image(handle, x, y, width, height) shows any region of it in full detail.]"
    )
    (copy,) = script.files[0]
    assert copy.media_type == 'image/png'
    assert _pixel(copy.data, 32, 32) == _colour(0)
    assert await store.read(_handles(script.shown[0])[0]) == gif


async def test_an_animated_gif_blob_says_so_in_its_marker(tmp_path: Path) -> None:
    gif = _animated_gif(30)
    script, _ = await _run(
        json.dumps({'clip': _data_url(gif, 'image/gif'), 'pad': 'x' * 100}), LocalFileStore(base_dir=tmp_path)
    )
    marker = json.loads(script.shown[0].split('\n', 1)[1])['clip']
    assert marker == snapshot(
        "[image/gif data URL, 4.2 KB, saved as handle 'rn01cc9y9a'; animated, 30 frames, first frame as image 1 below; view_tool_result_image zooms]"
    )
    (copy,) = script.files[0]
    assert (copy.media_type, _pixel(copy.data, 5, 5)) == ('image/png', _colour(0))


async def test_an_animated_gif_passes_as_it_is_to_a_model_that_takes_animations(tmp_path: Path) -> None:
    """Served by Anthropic (which takes GIFs and is not OpenAI), a GIF within its limits is sent whole."""
    gif = _animated_gif(30)
    script = Scripted([('fetch', {})])
    respond = script.model().function
    assert respond is not None
    model = FunctionModel(respond, model_name='claude-sonnet-4-5')
    agent = Agent(model, capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='fetch')(lambda: BinaryImage(gif, media_type='image/gif'))
    await agent.run('Look')
    (part,) = last_returns(script.requests[1])
    assert isinstance(part.content, BinaryContent) and part.content.data == gif


@pytest.mark.parametrize('image_format', ['PNG', 'WEBP'])
async def test_an_animated_png_or_webp_is_sent_as_its_first_frame(image_format: str, tmp_path: Path) -> None:
    frames = [Image.new('RGB', (48, 48), _colour(frame)) for frame in range(12)]
    data = encode(frames[0], image_format, save_all=True, append_images=frames[1:], duration=50, lossless=True)
    assert count_frames(data) == (12, True)
    script, _ = await _run(BinaryImage(data, media_type=f'image/{image_format.lower()}'), MemoryStore())
    assert 'animated, 12 frames), shown below as its first frame, a 48x48 PNG copy' in script.shown[0]
    (copy,) = script.files[0]
    assert (copy.media_type, _pixel(copy.data, 5, 5)) == ('image/png', _colour(0))


def test_frame_counting_is_bounded_on_a_hostile_gif() -> None:
    """A GIF of more frames than are counted, and one of endless one-byte sub-blocks: a bounded walk each."""
    header = b'GIF89a' + (1).to_bytes(2, 'little') * 2 + b'\x00\x00\x00'
    frame = b'\x2c' + b'\x00' * 8 + b'\x00' + b'\x02' + b'\x01\x00' + b'\x00'
    assert count_frames(header + frame * (MAX_FRAMES_COUNTED + 50) + b'\x3b') == (MAX_FRAMES_COUNTED, False)
    endless = header + b'\x2c' + b'\x00' * 9 + b'\x02' + b'\x01\x00' * 400_000
    assert count_frames(endless)[1] is False
    assert count_frames(header + frame * 3 + b'\x3b') == (3, True)
    # 50 MB of frames, each of 5,000 one-byte sub-blocks: the walk's budget is for the whole file, not per frame.
    many = header + (b'\x2c' + b'\x00' * 9 + b'\x02' + b'\x01\x00' * 5_000 + b'\x00') * 5_000
    assert count_frames(many) == (40, False)


_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80"><!-- deploy key '
    + GITHUB
    + ' --><rect width="120" height="80" fill="teal"/>'
    + '<circle r="3"/>' * 200
    + '</svg>'
).encode()


@pytest.mark.parametrize(
    'value',
    [
        pytest.param(lambda: BinaryContent(_SVG, media_type='image/svg+xml'), id='an SVG image'),
        pytest.param(lambda: ['the logo', BinaryContent(_SVG, media_type='image/svg+xml')], id='in a list'),
        pytest.param(lambda: BinaryContent(_SVG, media_type='image/png'), id='text labelled PNG'),
    ],
)
async def test_an_svg_holding_a_secret_never_reaches_the_store_under_redaction(value: Any, tmp_path: Path) -> None:
    kept = MemoryStore()
    store = LocalFileStore(base_dir=tmp_path)
    script, _ = await _run(value(), store, redact_secrets=SecretRedaction(keep_original_in=kept))
    assert 'its text holds a secret (GitHub Token). The original was not stored.]' in (script.shown[0])
    assert script.files[0] == []
    for payload in tmp_path.rglob('*'):
        if payload.is_file():
            assert GITHUB[:12].encode() not in payload.read_bytes()
    assert list(kept.payloads.values()) == [_SVG]


async def test_an_svg_without_a_secret_is_stored_as_before(tmp_path: Path) -> None:
    clean = _SVG.replace(GITHUB.encode(), b'nothing here')
    store = LocalFileStore(base_dir=tmp_path)
    script, _ = await _run(BinaryContent(clean, media_type='image/svg+xml'), store, redact_secrets=SecretRedaction())
    assert await store.read(_handles(script.shown[0])[0]) == clean


async def test_the_model_facing_texts_of_blob_images_with_default_ids(tmp_path: Path) -> None:
    """The lines a model reads cold, with real handles, and what they cost."""
    from examples._scripted import cl100k_counter

    svg_run, _ = await _run(
        BinaryContent(_SVG, media_type='image/svg+xml'), MemoryStore(), redact_secrets=SecretRedaction()
    )
    rotated, _ = await _run(BinaryImage(_rotated_jpeg(6), media_type='image/jpeg'), LocalFileStore(base_dir=tmp_path))
    count = cl100k_counter()
    texts = (svg_run.shown[0], rotated.shown[0])
    assert texts == snapshot(
        (
            '[Image declared image/svg+xml (3 KB) not shown: its text holds a secret (GitHub Token). The original was not stored.]',
            "[Image 200x400 JPEG (3 KB), shown below as a 200x400 JPEG copy. Original stored under handle '4th2mf6zb1': view_tool_result_image(handle, x, y, width, height) shows any region of it in full detail.]",
        )
    )
    assert [count(text) for text in texts] == snapshot([28, 58])


async def test_an_image_blob_holding_a_secret_is_not_shown_under_redaction(tmp_path: Path) -> None:
    """A PNG carrying a token in a text chunk may not be stored where the model reads, so it is not shown either: it
    is withheld, as any blob holding a secret is."""
    from PIL import PngImagePlugin

    chunk = PngImagePlugin.PngInfo()
    chunk.add_text('Comment', f'deploy with {GITHUB}')
    png = encode(Image.effect_noise((64, 64), 40).convert('RGB'), pnginfo=chunk)
    script, _ = await _run(
        json.dumps({'shot': _data_url(png), 'pad': 'x' * 100}),
        LocalFileStore(base_dir=tmp_path),
        redact_secrets=SecretRedaction(),
    )
    assert script.files[0] == []
    assert json.loads(script.shown[0].split('\n', 1)[1])['shot'] == snapshot(
        '[image/png data URL, 11.6 KB, withheld: it may hold a secret (GitHub Token)]'
    )


async def test_image_blobs_that_cannot_be_shown_use_up_the_attempts(tmp_path: Path) -> None:
    """Blobs that fail to decode count against `show_blob_images` like shown ones: a return of 10 broken PNGs costs
    at most 4 decodes, and a good image after them stays a marker."""
    broken = _noise_png(1700, 20)[:-400]  # over the long edge, so decoded to be fitted; cut short, so it fails
    good = _noise_png(30, 20)
    store = LocalFileStore(base_dir=tmp_path)
    script, _ = await _run([_data_url(broken)] * 10 + [_data_url(good)], store)
    markers = json.loads(script.shown[0].split('\n', 1)[1])
    assert script.files[0] == []
    assert all(marker.endswith('view_tool_result_image shows it]') for marker in markers)
    assert await store.read(_handles(markers[-1])[0]) == good


def test_an_apng_declaring_billions_of_frames_is_said_to_have_10000_plus() -> None:
    frames = [Image.new('RGB', (8, 8), _colour(frame)) for frame in range(3)]
    apng = bytearray(encode(frames[0], 'PNG', save_all=True, append_images=frames[1:]))
    actl = apng.index(b'acTL')
    apng[actl + 4 : actl + 8] = (4_000_000_000).to_bytes(4, 'big')  # (its CRC is not checked by the count)
    assert count_frames(bytes(apng)) == (MAX_FRAMES_COUNTED, False)


async def test_an_image_blob_in_tool_return_content_is_shown_there(tmp_path: Path) -> None:
    """A blob in `ToolReturn.content` (sent as a user message): its image follows the content's text there."""
    from pydantic_ai.messages import ToolReturn, UserPromptPart

    png = _noise_png(64, 48)
    value = ToolReturn('saved', content=json.dumps({'shot': _data_url(png), 'pad': 'x' * 100}))
    script = Scripted([('fetch', {})])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='fetch')(lambda: value)
    await agent.run('Look')
    request = script.requests[1][-1]
    users = [part for part in getattr(request, 'parts', []) if isinstance(part, UserPromptPart)]
    items = [item for part in users for item in part.content if not isinstance(part.content, str)]
    assert [item.data for item in items if isinstance(item, BinaryContent)] == [png]
    assert any(isinstance(item, str) and 'image 1 below' in item for item in items)


async def test_an_svg_data_url_holding_a_secret_never_reaches_the_store_under_redaction(tmp_path: Path) -> None:
    """The same SVG as a data URL in a JSON page: withheld, neither decoded nor encoded in the store the model reads;
    the whole output goes to `keep_original_in` only."""
    encoded = base64.b64encode(_SVG).decode()
    page = json.dumps({'logo': 'data:image/svg+xml;base64,' + encoded, 'pad': 'x' * 3_000})
    kept = MemoryStore()
    script, _ = await _run(
        page, LocalFileStore(base_dir=tmp_path), redact_secrets=SecretRedaction(keep_original_in=kept)
    )
    assert script.shown[0].split('\n', 1)[0] == snapshot(
        '[`fetch` returned 7.3 KB holding a base64 blob (3.2 KB decoded), marked below; it may hold a secret, so the whole output is not kept.]'
    )
    assert script.files[0] == []
    for payload in tmp_path.rglob('*'):
        if payload.is_file():
            assert GITHUB[:12].encode() not in payload.read_bytes()
            assert encoded[:40].encode() not in payload.read_bytes()
    assert list(kept.payloads.values()) == [page.encode()]


def _png_with_text_chunk(width: int, height: int) -> bytes:
    from PIL.PngImagePlugin import PngInfo

    chunk = PngInfo()
    chunk.add_text('Comment', f'deploy key {GITHUB}')
    out = io.BytesIO()
    Image.new('RGB', (width, height), (0, 128, 128)).save(out, 'PNG', pnginfo=chunk)
    return out.getvalue()


def _jpeg_with_comment(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new('RGB', (width, height), (200, 40, 40)).save(out, 'JPEG', comment=f'key {GITHUB}'.encode())
    return out.getvalue()


def _png_with_trailer(width: int, height: int) -> bytes:
    return encode(Image.new('RGB', (width, height), (10, 10, 200))) + f'\nAWS={GITHUB}\n'.encode()


@pytest.mark.parametrize(
    'make',
    [
        pytest.param(lambda: _png_with_text_chunk(64, 48), id='a small PNG with a text chunk'),
        pytest.param(lambda: _png_with_text_chunk(3_000, 2_000), id='a large PNG with a text chunk'),
        pytest.param(lambda: _jpeg_with_comment(4_880, 2_560), id='a JPEG with a comment'),
        pytest.param(lambda: _png_with_trailer(64, 48), id='bytes after a PNG ends'),
    ],
)
async def test_a_binary_image_whose_bytes_hold_a_secret_is_sent_as_its_pixels_alone(make: Any, tmp_path: Path) -> None:
    """The model still sees the picture, as a new file of its pixels; the original, whose bytes hold the secret, goes
    only to `keep_original_in`: not to the store the query tools and the view tool read, now or when it ages."""
    data = make()
    assert GITHUB.encode() in data
    kept = MemoryStore()
    store = LocalFileStore(base_dir=tmp_path)
    script, messages = await _run(
        BinaryImage(data, media_type=Image.open(io.BytesIO(data)).get_format_mimetype() or 'image/png'),
        store,
        redact_secrets=SecretRedaction(keep_original_in=kept),
    )
    (marker,) = [line for line in script.shown[0].splitlines() if line.startswith('[Image ')]
    assert marker.endswith('The original could not be stored (withheld: its bytes hold a secret (GitHub Token)).]')
    (sent,) = images_sent(messages)
    assert GITHUB[:12].encode() not in sent.data
    assert (
        Image.open(io.BytesIO(sent.data)).getpixel((0, 0))
        == Image.open(io.BytesIO(data)).convert('RGB').getpixel((0, 0))
        or sent.media_type == 'image/jpeg'
    )  # a JPEG copy's pixels are near, not equal
    assert list(kept.payloads.values()) == [data]
    for payload in tmp_path.rglob('*'):
        if payload.is_file():
            assert GITHUB[:12].encode() not in payload.read_bytes()


async def test_random_image_bytes_are_not_taken_for_a_secret(tmp_path: Path) -> None:
    """The scan of a binary image's bytes finds no secret in 12 MB of noise: a photo is stored and viewable as before."""
    data = _noise_png(2_000, 2_000, seed=11)
    store = LocalFileStore(base_dir=tmp_path)
    script, _ = await _run(BinaryImage(data, media_type='image/png'), store, redact_secrets=SecretRedaction())
    assert await store.read(_handles(script.shown[0])[0]) == data


async def test_a_shown_image_is_named_when_its_marker_is_left_out_of_a_spill_preview(tmp_path: Path) -> None:
    """A long log with screenshots in its middle: the text with markers is spilled and its preview shows the head
    and tail only, so the markers of the images shown follow the header; the images are still sent."""
    pngs = [_noise_png(40, 30, seed=seed) for seed in range(2)]
    lines = [f'{n:05d} INFO step {n} done' for n in range(4_000)]
    lines[2_000:2_000] = [f'screenshot {_data_url(png)}' for png in pngs]
    store = LocalFileStore(base_dir=tmp_path)
    script, _ = await _run('\n'.join(lines), store)
    (shown,) = script.shown
    header, first, second, preview = shown.split('\n', 3)
    assert header.startswith('[`fetch` returned ') and 'holding 2 base64 blobs' in header
    assert first == snapshot(
        "[image/png data URL, 3.7 KB, saved as handle 'rn01cc9y9a'; image 1 below; view_tool_result_image zooms]"
    )
    assert second.endswith('; image 2 below; view_tool_result_image zooms]')
    assert 'data URL' not in preview and 'image 1 below' not in preview
    assert [image.data for image in script.files[0]] == pngs
    assert [await store.read(_handles(line)[0]) for line in (first, second)] == pngs
