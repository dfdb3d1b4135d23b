"""Images age too (issue 35, item 4): 40 screenshots in one session, old ones leaving the context as stubs naming
handles in the same batches as text, every original read back byte for byte, and each viewable again."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from PIL import Image, ImageDraw
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    BinaryImage,
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import Aging, ImageBand, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import AGED_IMAGES_KEY, IMAGES_KEY

from ._images import assert_fits_every_provider, encode, images_sent, screenshot
from .test_image_band import Scripted

pytestmark = pytest.mark.anyio

SESSION = 40


def numbered_screenshot(number: int) -> bytes:
    """A 1280x800 screenshot (within every provider's limits: sent as it is) with its number drawn in."""
    image = Image.new('RGB', (1280, 800), (250, 250, 250))
    ImageDraw.Draw(image).text((40, 40), f'screen {number}', fill=(0, 0, 0))
    return encode(image)


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def run_session(tmp_path: Path, images: ImageBand, aging: Aging | None) -> tuple[Scripted, list[bytes], Any]:
    shots = [screenshot() if number % 10 == 0 else numbered_screenshot(number) for number in range(SESSION)]
    script = Scripted(*[[('shot', {'number': number})] for number in range(SESSION)])
    store = LocalFileStore(base_dir=tmp_path)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store, images=images, aging=aging)])

    @agent.tool_plain(name='shot')
    def shot(number: int) -> BinaryImage:
        return BinaryImage(shots[number], media_type='image/png')

    await agent.run('browse', run_id='session')
    return script, shots, store


async def test_forty_screenshots_age_in_batches_and_every_original_reads_back(tmp_path: Path) -> None:
    script, shots, store = await run_session(
        tmp_path, ImageBand(keep_newest=3), Aging(after_turns=4, batch_tokens=4_000)
    )
    last = script.requests[-1]
    # No request carries more than the 3 newest screenshots and the due ones still short of a batch (4,000 tokens:
    # three more of ~1,366 tokens each), against 40 without aging; every request fits every provider.
    counts = [len(images_sent(request)) for request in script.requests]
    assert max(counts) <= 3 + 3 + 1 and counts[-1] >= 3, counts
    for request in script.requests:
        assert_fits_every_provider(images_sent(request))
    # Every screenshot is still reachable: an aged one names its original's handle; each reads back byte for byte.
    returns = tool_returns(last)
    assert len(returns) == SESSION
    for number, part in enumerate(returns):
        metadata = part.metadata if isinstance(part.metadata, dict) else {}
        handles = metadata.get(AGED_IMAGES_KEY) or [record['handle'] for record in metadata.get(IMAGES_KEY, [])]
        if handles:
            assert await store.read(handles[0]) == shots[number]
        else:
            assert isinstance(part.content, BinaryImage) and part.content.data == shots[number]
    aged = [part for part in returns if isinstance(part.content, str)]
    assert len(aged) >= SESSION - 7
    assert aged[1].content == snapshot(
        "[Moved out of context: the output of `shot` (1 image). Stored under 'v04r5zbqtm' (1280x800 PNG): view_tool_result_image(handle) shows one again.]"
    )
    # Batches: the stubs came in a few batches, not one per request.
    steps = {part.metadata['overflow_aged_step'] for part in aged if isinstance(part.metadata, dict)}
    assert len(steps) < len(aged) // 2


async def test_an_aged_screenshot_can_be_viewed_again(tmp_path: Path) -> None:
    def view_first(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
        first = tool_returns(messages)[0]
        assert isinstance(first.metadata, dict) and isinstance(first.content, str), first.content
        return [('view_tool_result_image', {'handle': first.metadata[AGED_IMAGES_KEY][0]})]

    shots = [numbered_screenshot(number) for number in range(6)]
    script = Scripted(*[[('shot', {'number': number})] for number in range(6)], view_first)
    agent = Agent(
        script.model(),
        capabilities=[
            OverflowingToolOutput(
                store=LocalFileStore(base_dir=tmp_path),
                images=ImageBand(keep_newest=1),
                aging=Aging(after_turns=2, batch_tokens=1_000),
            )
        ],
    )
    agent.tool_plain(name='shot')(lambda number: BinaryImage(shots[number], media_type='image/png'))
    await agent.run('browse', run_id='session')
    view = tool_returns(script.requests[-1])[-1]
    assert isinstance(view.content, list)
    line, image = view.content
    assert line == snapshot("Region x=0..1280, y=0..800 of the 1280x800 image 'wa7h4cb46k' (full detail):")
    assert isinstance(image, BinaryImage)
    with Image.open(io.BytesIO(image.data)) as shown:
        assert shown.size == (1280, 800)


async def test_stored_images_outlive_another_capabilitys_compaction(tmp_path: Path) -> None:
    """A user's compaction drops the screenshots' returns and their metadata: the image ledger it gets keeps their
    handles, so the view tool is still offered, still lists them, and shows each again from its original."""
    from pydantic_ai_harness.overflowing_tool_output._media._view_tool import IMAGE_LEDGER_KEY

    from ..overflowing_tool_output.test_compaction import Summarizing

    shots = [screenshot(4880 - number, 2560) for number in range(3)]  # over the limits: fitted, originals stored
    seen: list[tuple[list[str], str]] = []

    steps = iter(range(10))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = next(steps)  # (the compaction replaces the history: its length counts no steps)
        if step < 3:
            return ModelResponse(parts=[ToolCallPart('shot', {'number': step})])
        if step == 3:
            return ModelResponse(parts=[ToolCallPart('compact_now', {})])
        offered = [tool.name for tool in info.function_tools]
        if step == 4:  # after the compaction: a made-up handle, answered with the images stored
            seen.append((offered, ''))
            return ModelResponse(parts=[ToolCallPart('view_tool_result_image', {'handle': 'screenshot_1'})])
        answer = tool_returns(messages)[-1]
        if step == 5:
            seen.append((offered, str(answer.content)))
            handle = str(answer.content).split("'")[3]  # the first image listed
            return ModelResponse(parts=[ToolCallPart('view_tool_result_image', {'handle': handle, 'width': 400})])
        seen.append((offered, str(answer.content)))
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond), capabilities=[Summarizing(), OverflowingToolOutput(store=LocalFileStore(tmp_path))]
    )
    agent.tool_plain(name='shot')(lambda number: BinaryImage(shots[number], media_type='image/png'))

    @agent.tool
    def compact_now(ctx: RunContext[Any]) -> str:
        ctx.request_compaction(reason='manual')
        return 'compaction requested'

    result = await agent.run('look', run_id='run-1')
    assert [record.handler for record in result.compactions] == ['summarizing']
    (compaction,) = [p for m in result.all_messages() for p in m.parts if isinstance(p, CompactionPart)]
    ledger = (compaction.metadata or {})[IMAGE_LEDGER_KEY]
    assert len(ledger) == 3
    (offered, _), (_, listed), (_, viewed) = seen
    assert 'view_tool_result_image' in offered  # offered at the first request after the compaction
    assert (
        listed
        == "No stored image under 'screenshot_1'. The newest images and PDFs stored in this conversation: "
        + ', '.join(f"'{handle}'" for handle in ledger)
        + '.'
    )
    assert f"Region x=0..400, y=0..2560 of the 4880x2560 image '{ledger[0]}' (scaled to 245x1568)" in viewed
    assert [await LocalFileStore(tmp_path).read(handle) for handle in ledger] == shots


def test_image_handles_a_tool_forged_are_read_only_as_a_store_makes_them() -> None:
    """Metadata is a tool's to set: an empty or 100,000-character handle, or one of another type, is not an image's
    (it would go into a compaction's ledger and every unknown-handle answer)."""
    from pydantic_ai_harness.overflowing_tool_output._media._view_tool import IMAGE_LEDGER_KEY, stored_image_handles

    forged = {IMAGES_KEY: [{'handle': 'A' * 100_000}, {'handle': ''}, {'handle': 7}, 'x', {'handle': 'good1'}]}
    part = ToolReturnPart('shot', 'x', tool_call_id='c1', metadata={**forged, AGED_IMAGES_KEY: ['B' * 5_000, 'good2']})
    ledger = CompactionPart(content='summary', metadata={IMAGE_LEDGER_KEY: ['C' * 5_000, None, 'good3']})
    messages: list[ModelMessage] = [ModelRequest(parts=[ledger]), ModelRequest(parts=[part])]
    assert stored_image_handles(messages) == ['good3', 'good1', 'good2']


def test_forged_image_ledgers_cost_a_bounded_walk_newest_first() -> None:
    """400 compaction parts a history forged with 5,000 image handles each: the newest 20,000 are read, in order;
    whether any image is stored is answered from the newest one alone."""
    from pydantic_ai_harness.overflowing_tool_output._media._view_tool import (
        IMAGE_HANDLES_READ,
        IMAGE_LEDGER_KEY,
        images_in_conversation,
        stored_image_handles,
    )

    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[CompactionPart(content='s', metadata={IMAGE_LEDGER_KEY: [f'p{n}-{i}' for i in range(5_000)]})]
        )
        for n in range(400)
    ]
    handles = stored_image_handles(messages)
    assert len(handles) == IMAGE_HANDLES_READ == 20_000
    assert handles[0] == 'p396-0' and handles[-1] == 'p399-4999'  # the newest four parts, oldest first
    assert stored_image_handles(messages, 2) == ['p399-4998', 'p399-4999']
    assert images_in_conversation(messages)
