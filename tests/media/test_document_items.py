"""A PDF inside a list return or `ToolReturn.content` (issue 35, item 2) is reduced as a lone PDF return is: stored
unchanged, the model reads its header and its text reduced by the band's action, and each page is viewable as an
image; images and text beside it stay where they are."""

from __future__ import annotations

import io
import re
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
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai_harness.overflowing_tool_output import Band, LocalFileStore, OverflowingToolOutput, Spill
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from ..overflowing_tool_output.media._pdf_files import pdf_with_pages
from ._images import small_png
from .test_image_band import Scripted

pytestmark = pytest.mark.anyio


def report(pages: int, title: str) -> bytes:
    return pdf_with_pages(
        [
            [f'{title}, page {page}', *(f'row {page}.{row}: revenue {page * row}' for row in range(30))]
            for page in range(1, pages + 1)
        ]
    )


def handle_of(text: str) -> str:
    found = re.search(r"saved unchanged as handle '([^']+)'", text)
    assert found is not None, text[:400]
    return found.group(1)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def viewed(part: ToolReturnPart) -> tuple[str, tuple[int, int]]:
    assert isinstance(part.content, list), part.content
    line, image = part.content
    assert isinstance(image, BinaryImage)
    with Image.open(io.BytesIO(image.data)) as shown:
        return line, shown.size


async def test_a_pdf_in_a_list_return_is_reduced_and_its_pages_read_back(tmp_path: Path) -> None:
    first, annex, second = report(40, 'Quarterly report'), report(30, 'Annex'), report(2, 'Invoice')
    png = small_png()

    def view_and_read(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
        (part,) = returns(messages)
        assert isinstance(part.content, list)
        found = re.search(r"Saved in full under handle '([^']+)'", part.content[2])
        assert found is not None
        return [
            ('view_tool_result_image', {'handle': handle_of(part.content[1]), 'page': 12}),
            ('read_tool_result', {'handle': found.group(1), 'offset': 353, 'limit': 3}),
        ]

    script = Scripted([('files', {})], view_and_read)
    store = LocalFileStore(base_dir=tmp_path)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    files = [
        'three files and a chart:',
        BinaryContent(first, media_type='application/pdf'),
        BinaryContent(annex, media_type='application/octet-stream'),  # a PDF by its signature alone
        BinaryContent(second, media_type='application/pdf'),
        BinaryImage(png, media_type='image/png'),
    ]
    agent.tool_plain(name='files')(lambda: files)
    await agent.run('read them', run_id='run-1')
    (part,) = returns(script.requests[1])
    assert isinstance(part.content, list)
    caption, big, big_annex, small, image = part.content
    assert caption == 'three files and a chart:'
    assert isinstance(image, BinaryImage) and image.data == png  # the image band's, as it was
    # The 40-page report is over the default band: its header, then its text spilled with a preview.
    assert big == snapshot("""\
[`files` returned a PDF (19.8 KB), saved unchanged as handle 'cy4pwv0xrm': 40 pages. Its text follows, each page starting with the line `=== page N/40 ===`; view_tool_result_image(handle='cy4pwv0xrm', page=N) shows page N as an image.]
[`files` returned too much to show (~7079 tokens). Saved in full under handle '2qc6t3715e': 1280 lines, 28315 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-5 of 1280):
1| === page 1/40 ===
2| Quarterly report, page 1
3| row 1.0: revenue 0
4| row 1.1: revenue 1
5| row 1.2: revenue 2
Last lines (1279-1280):
1279| row 40.28: revenue 1120
1280| row 40.29: revenue 1160\
""")
    # The 2-page invoice is under it: it stays as it was, a file the model reads natively.
    assert isinstance(small, BinaryContent) and small.data == second
    # Each file stored apart, byte for byte, and viewable page by page.
    assert isinstance(big_annex, str) and handle_of(big_annex) != handle_of(big)
    assert await store.read(handle_of(big)) == first
    assert await store.read(handle_of(big_annex)) == annex
    metadata: dict[str, Any] = part.metadata or {}
    assert [record['handle'] for record in metadata[IMAGES_KEY]] == [handle_of(big), handle_of(big_annex)]
    view, read = returns(script.requests[2])[-2:]
    assert viewed(view) == snapshot(
        ("Region x=0..2424, y=0..3136 of the 2424x3136 image 'cy4pwv0xrm' (scaled to 942x1219):", (942, 1219))
    )
    assert read.content == snapshot("""\
Stored result '9bmxd5b9ab': lines 353-355 of 960 (20761 bytes):
353| === page 12/30 ===
354| Annex, page 12
355| row 12.0: revenue 0
(605 more lines. Next page: read_tool_result(handle='9bmxd5b9ab', offset=356, limit=3).)\
""")


async def test_a_pdf_in_tool_return_content_is_reduced_and_its_pages_read_back(tmp_path: Path) -> None:
    pdf = report(3, 'Contract')

    def view(messages: list[ModelMessage]) -> list[tuple[str, dict[str, Any]]]:
        prompt = [p for p in messages[-1].parts if isinstance(p, UserPromptPart) and not isinstance(p.content, str)]
        assert isinstance(prompt[0].content, list)
        return [('view_tool_result_image', {'handle': handle_of(str(prompt[0].content[0])), 'page': 2})]

    script = Scripted([('fetch', {})], view)
    store = LocalFileStore(base_dir=tmp_path)
    capability = OverflowingToolOutput[Any](store=store, bands=[Band(over=500, action=Spill())])
    agent = Agent(script.model(), capabilities=[capability])
    content = [BinaryContent(pdf, media_type='application/pdf'), 'the signed copy']
    agent.tool_plain(name='fetch')(lambda: ToolReturn('fetched the contract', content=content))
    await agent.run('read it', run_id='run-1')
    request = script.requests[1][-1]
    assert isinstance(request, ModelRequest)
    (prompt,) = [p for p in request.parts if isinstance(p, UserPromptPart) and not isinstance(p.content, str)]
    assert isinstance(prompt.content, list)
    text, note = prompt.content
    assert note == 'the signed copy'
    assert text == snapshot("""\
[`fetch` returned a PDF (1.7 KB), saved unchanged as handle 'wnhytzv16g': 3 pages. Its text follows, each page starting with the line `=== page N/3 ===`; view_tool_result_image(handle='wnhytzv16g', page=N) shows page N as an image.]
[`fetch` returned too much to show (~486 tokens). Saved in full under handle 'dhegdps9ae': 96 lines, 1943 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-5 of 96):
1| === page 1/3 ===
2| Contract, page 1
3| row 1.0: revenue 0
4| row 1.1: revenue 1
5| row 1.2: revenue 2
Last lines (95-96):
95| row 3.28: revenue 84
96| row 3.29: revenue 87\
""")
    assert await store.read(handle_of(str(text))) == pdf
    assert viewed(returns(script.requests[2])[-1]) == snapshot(
        ("Region x=0..2424, y=0..3136 of the 2424x3136 image 'wnhytzv16g' (scaled to 942x1219):", (942, 1219))
    )


async def test_another_document_in_a_list_is_reduced_as_a_lone_one_is(tmp_path: Path) -> None:
    """A 54 KB CSV given as bytes beside a caption: spilled with a preview, exactly as the same file returned alone."""
    table = ('id,name,amount\n' + ''.join(f'{row},name{row},{row * 3}\n' for row in range(3000))).encode()
    shown: list[object] = []
    for value in (
        BinaryContent(table, media_type='text/csv'),
        ['a table:', BinaryContent(table, media_type='text/csv')],
    ):
        script = Scripted([('table', {})])
        store = LocalFileStore(base_dir=tmp_path / str(len(shown)))
        agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
        agent.tool_plain(name='table')(lambda value=value: value)
        await agent.run('sum it', run_id='run-1')
        (part,) = returns(script.requests[1])
        found = re.search(r"Saved in full under handle '([^']+)'", str(part.content))
        assert found is not None and await store.read(found.group(1)) == table
        shown.append(part.content)
    alone, listed = shown
    assert isinstance(listed, list) and listed[0] == 'a table:'
    # The same preview; only the handle differs (the file's key names its place in the list: `file1`).
    assert re.sub(r"'\w+'", 'H', str(alone)) == re.sub(r"'\w+'", 'H', listed[1])
