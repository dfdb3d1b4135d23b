"""Images delivered in `ToolReturn.content` age with their return (issue 35, item 4): pydantic-ai sends them as a
prompt part of their own, which aging now moves out with the return they came with, in the same batches, each image
a stub naming its handle; a user's own prompt image never ages."""

from __future__ import annotations

import io
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
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai_harness.overflowing_tool_output import Aging, ImageBand, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import AGED_IMAGES_KEY, IMAGES_KEY
from pydantic_ai_harness.overflowing_tool_output._media._content_images import (
    CONTENT_IMAGES_KEY,
    content_image_records,
    prompt_stub,
)

from ._images import assert_fits_every_provider, images_sent, screenshot, small_png
from .test_image_aging import SESSION, numbered_screenshot, tool_returns
from .test_image_band import Scripted
from .test_image_request_totals import PHOTOS, photo

pytestmark = pytest.mark.anyio


def prompt_parts(messages: list[ModelMessage]) -> list[UserPromptPart]:
    """The prompt parts holding a list (the user's prompt, each `ToolReturn.content`), not pydantic-ai's text notes."""
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and not isinstance(p.content, str)
    ]


def images_of(part: UserPromptPart) -> list[BinaryContent]:
    content = [part.content] if isinstance(part.content, str) else list(part.content)
    return [item for item in content if isinstance(item, BinaryContent) and item.is_image]


def capability(tmp_path: Path, keep_newest: int, **aging: Any) -> tuple[OverflowingToolOutput[Any], LocalFileStore]:
    store = LocalFileStore(base_dir=tmp_path)
    images = ImageBand(keep_newest=keep_newest)
    return OverflowingToolOutput(store=store, images=images, aging=Aging(**aging)), store


async def test_forty_screenshots_in_tool_return_content_age_and_read_back(tmp_path: Path) -> None:
    shots = [screenshot() if number % 10 == 0 else numbered_screenshot(number) for number in range(SESSION)]
    own = small_png()
    script = Scripted(*[[('shot', {'number': number})] for number in range(SESSION)])
    overflow, store = capability(tmp_path, 3, after_turns=4, batch_tokens=4_000)
    agent = Agent(script.model(), capabilities=[overflow])

    @agent.tool_plain(name='shot')
    def shot(number: int) -> ToolReturn[str]:
        return ToolReturn(f'screen {number} taken', content=[BinaryImage(shots[number], media_type='image/png')])

    await agent.run(['browse', BinaryImage(own, media_type='image/png')], run_id='session')
    counts = [len(images_sent(request)) for request in script.requests]
    # The user's image, the 3 newest screenshots and the due ones still short of a batch; 41 without aging.
    assert max(counts) <= 1 + 3 + 3 + 1 and counts[-1] >= 1 + 3, counts
    for request in script.requests:
        assert_fits_every_provider(images_sent(request))
    last = script.requests[-1]
    # The user's own prompt image is never aged, however old.
    user, *from_tools = prompt_parts(last)
    assert [image.data for image in images_of(user)] == [own]
    assert len(from_tools) == SESSION
    returns = tool_returns(last)
    aged = [index for index, part in enumerate(returns) if AGED_IMAGES_KEY in (part.metadata or {})]
    assert len(aged) >= SESSION - 7 and set(range(SESSION - 3, SESSION)).isdisjoint(aged)
    for number, (part, prompt) in enumerate(zip(returns, from_tools, strict=True)):
        metadata: dict[str, Any] = part.metadata if isinstance(part.metadata, dict) else {}
        if number in aged:
            assert images_of(prompt) == []  # only stubs are left of its images
            (handle,) = metadata[AGED_IMAGES_KEY]
            assert await store.read(handle) == shots[number]  # byte for byte, fitted or sent as it was
            continue
        (image,) = images_of(prompt)
        stored = metadata.get(IMAGES_KEY)
        if stored:  # a Retina screenshot: a fitted copy was sent, its original kept
            assert await store.read(stored[0]['handle']) == shots[number]
        else:
            assert image.data == shots[number]
    assert returns[1].content == snapshot('screen 1 taken')
    assert from_tools[1].content == snapshot(
        [
            "[Image from `shot` moved out of context, stored under '6w0z9wqpdt': view_tool_result_image(handle) shows it.]"
        ]
    )
    assert from_tools[0].content == snapshot(
        [
            "[Image from `shot` moved out of context, stored under 'e5gb8mbqb0': view_tool_result_image(handle) shows it.]"
        ]
    )
    steps = {returns[index].metadata['overflow_aged_step'] for index in aged}
    assert len(steps) < len(aged) // 2  # a few batches, not one per request


async def test_an_aged_content_image_can_be_viewed_again(tmp_path: Path) -> None:
    shots = [numbered_screenshot(number) for number in range(6)]

    def view_first(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
        first = tool_returns(messages)[0]
        assert isinstance(first.metadata, dict), first
        return [('view_tool_result_image', {'handle': first.metadata[AGED_IMAGES_KEY][0]})]

    script = Scripted(*[[('shot', {'number': number})] for number in range(6)], view_first)
    overflow, _ = capability(tmp_path, 1, after_turns=2, batch_tokens=1_000)
    agent = Agent(script.model(), capabilities=[overflow])

    @agent.tool_plain(name='shot')
    def shot(number: int) -> ToolReturn[str]:
        return ToolReturn('taken', content=['the screen:', BinaryImage(shots[number], media_type='image/png')])

    await agent.run('browse', run_id='session')
    view = tool_returns(script.requests[-1])[-1]
    assert isinstance(view.content, list)
    line, image = view.content
    assert line == snapshot("Region x=0..1280, y=0..800 of the 1280x800 image 'a94t8hwrgx' (full detail):")
    assert isinstance(image, BinaryImage)
    with Image.open(io.BytesIO(image.data)) as shown:
        assert shown.size == (1280, 800)
    assert image.data == shots[0]  # within the limits: the original itself


async def test_a_users_own_image_in_the_request_of_a_tool_return_never_ages(tmp_path: Path) -> None:
    """A run resumed from a history whose last request holds a tool's content and then the user's own prompt with the
    very same image (pydantic-ai merges consecutive requests): only the tool's copy ages."""
    same = numbered_screenshot(0)
    image = BinaryImage(same, media_type='image/png')
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('go')]),
        ModelResponse(parts=[ToolCallPart('shot', {'number': 0}, tool_call_id='c0')]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'shot', 'taken', tool_call_id='c0', metadata={CONTENT_IMAGES_KEY: content_image_records([image])}
                ),
                UserPromptPart([image]),
                UserPromptPart(['my own copy of it:', image]),
            ]
        ),
    ]
    shots = [numbered_screenshot(number) for number in range(1, 6)]
    script = Scripted(*[[('shot', {'number': number})] for number in range(5)])
    overflow, store = capability(tmp_path, 1, after_turns=2, batch_tokens=1_000)
    agent = Agent(script.model(), capabilities=[overflow])
    agent.tool_plain(name='shot')(
        lambda number: ToolReturn('taken', content=[BinaryImage(shots[number], media_type='image/png')])
    )
    await agent.run(message_history=history, run_id='resumed')
    request = script.requests[-1][2]
    assert isinstance(request, ModelRequest)
    returned, tools_copy, users_copy = request.parts
    assert isinstance(returned, ToolReturnPart) and isinstance(tools_copy, UserPromptPart)
    assert isinstance(users_copy, UserPromptPart) and users_copy.content == ['my own copy of it:', image]
    (handle,) = (returned.metadata or {})[AGED_IMAGES_KEY]
    assert tools_copy.content == [prompt_stub('shot', handle)]
    assert await store.read(handle) == same


async def test_a_tool_cannot_make_a_users_image_age_by_forging_the_record(tmp_path: Path) -> None:
    """A tool that writes the band's record itself, naming the user's image, sent no image: the record is dropped, its
    return ages as text, and the user's image stays."""
    own = numbered_screenshot(7)
    forged = content_image_records([BinaryImage(own, media_type='image/png')])
    script = Scripted(*[[('fetch', {})] for _ in range(6)])
    overflow, _ = capability(tmp_path, 1, after_turns=2, batch_tokens=1, min_tokens=1)
    agent = Agent(script.model(), capabilities=[overflow])
    agent.tool_plain(name='fetch')(lambda: ToolReturn('x' * 400, metadata={CONTENT_IMAGES_KEY: forged}))
    await agent.run(['look at this', BinaryImage(own, media_type='image/png')], run_id='forged')
    last = script.requests[-1]
    (user,) = prompt_parts(last)
    assert [image.data for image in images_of(user)] == [own]
    first = tool_returns(last)[0]
    assert CONTENT_IMAGES_KEY not in (first.metadata or {})
    assert isinstance(first.content, str) and first.content.startswith(
        '[Moved out of context: the output of `fetch` (~'
    )


async def test_heavy_photos_in_tool_return_content_never_add_up_past_what_a_request_takes(tmp_path: Path) -> None:
    """Without `Aging`: 25 photos of ~0.9 MB in `ToolReturn.content` are 30 MB of base64 together; the image band
    moves the oldest returns out with their content images until each request fits every provider."""
    script = Scripted(*[[('photo', {'number': number})] for number in range(PHOTOS)])
    store = LocalFileStore(base_dir=tmp_path)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store, images=ImageBand())])
    agent.tool_plain(name='photo')(
        lambda number: ToolReturn(f'photo {number}', content=[BinaryImage(photo(number), media_type='image/jpeg')])
    )
    await agent.run('look', run_id='photos')
    sent = [images_sent(request) for request in script.requests]
    for images in sent:
        assert_fits_every_provider(images)
    assert len(sent[-1]) < PHOTOS and sent[-1][-1].data == photo(PHOTOS - 1)
    returns = tool_returns(script.requests[-1])
    moved = [part for part in returns if AGED_IMAGES_KEY in (part.metadata or {})]
    assert len(moved) + len(sent[-1]) == PHOTOS
    for number, part in enumerate(returns):
        if part in moved:
            (handle,) = (part.metadata or {})[AGED_IMAGES_KEY]
            assert await store.read(handle) == photo(number)


async def test_a_long_text_beside_content_images_ages_with_them(tmp_path: Path) -> None:
    """A return whose own text is more than a caption: its stub names its content's image and where its text is."""
    shots = [numbered_screenshot(number) for number in range(4)]
    page = '\n'.join(f'link {n}: https://example.com/{n}' for n in range(20))
    script = Scripted(*[[('shot', {'number': number})] for number in range(4)])
    overflow, store = capability(tmp_path, 1, after_turns=2, batch_tokens=1_000)
    agent = Agent(script.model(), capabilities=[overflow])
    agent.tool_plain(name='shot')(
        lambda number: ToolReturn(page, content=[BinaryImage(shots[number], media_type='image/png')])
    )
    await agent.run('browse', run_id='session')
    first = tool_returns(script.requests[-1])[0]
    metadata: dict[str, Any] = first.metadata or {}
    (handle,) = metadata[AGED_IMAGES_KEY]
    assert first.content == snapshot(
        "[Moved out of context: the output of `shot` (1 image). Stored under 'a94t8hwrgx' (1280x800 PNG): view_tool_result_image(handle) shows one again; its text is saved under handle '27s7z91x1b': read_tool_result gets it back.]"
    )
    assert await store.read(handle) == shots[0]
    assert (await store.read(metadata['overflow_aged_handle'])).decode() == page
    assert prompt_parts(script.requests[-1])[0].content == [prompt_stub('shot', handle)]
