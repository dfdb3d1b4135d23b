"""A PDF over budget (issue 35, item 2): stored unchanged, its page count and per-page text shown, its pages read
and searched by handle like the lines of a log. Real agent runs over real PDFs written by the tests."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from PIL import Image
from pydantic_ai import Agent, BinaryContent
from pypdf import PdfReader, PdfWriter

from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import Band, LocalFileStore, OverflowingToolOutput, Spill
from pydantic_ai_harness.overflowing_tool_output._media._pdf import read_pdf
from pydantic_ai_harness.overflowing_tool_output._media._steps import pdf_header

from .._scripted_queries import RUN_ID, Call
from ._pdf_files import decompression_bomb_pdf, giant_page_pdf, looping_tree_pdf, pdf_with_pages
from ._script import RunScript as Script

pytestmark = pytest.mark.anyio


def _report(pages: int = 300) -> bytes:
    return pdf_with_pages(
        [
            [f'Quarterly report, page {page}', *(f'row {page}.{row}: revenue {page * row}' for row in range(30))]
            for page in range(1, pages + 1)
        ]
    )


def _original_handle(preview: str) -> str:
    found = re.search(r"saved unchanged as handle '([^']+)'", preview)
    assert found is not None, preview[:400]
    return found.group(1)


async def test_a_300_page_pdf_is_paged_like_a_log_and_kept_byte_identical(tmp_path: Path) -> None:
    pdf = _report()
    store = LocalFileStore(base_dir=tmp_path)

    def queries(handles: dict[str, str]) -> list[Call]:
        text = handles['report']
        return [
            ('grep_tool_result', {'handle': text, 'pattern': '=== page 150/300 ===', 'context_lines': 0}),
            ('read_tool_result', {'handle': text, 'offset': 4769, 'limit': 4}),
        ]

    script = Script([('report', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='report')(lambda: BinaryContent(pdf, media_type='application/pdf'))
    await agent.run('What was revenue on page 150?', run_id=RUN_ID)
    preview, grep, read = script.shown
    assert preview == snapshot("""\
[`report` returned a PDF (152.5 KB), saved unchanged as handle '7217zk37ff': 300 pages. Its text follows, each page starting with the line `=== page N/300 ===`; view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]
[`report` returned too much to show (~57158 tokens). Saved in full under handle '7ewszaymfa': 9600 lines, 228631 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-5 of 9600):
1| === page 1/300 ===
2| Quarterly report, page 1
3| row 1.0: revenue 0
4| row 1.1: revenue 1
5| row 1.2: revenue 2
Last lines (9599-9600):
9599| row 300.28: revenue 8400
9600| row 300.29: revenue 8700\
""")
    assert grep == snapshot("""\
1 matching line for '=== page 150/300 ===' (literal, case-sensitive; 9600 lines searched). Showing all 1, marked ">", with 0 lines of context:
-- match at line 4769 (read around it: read_tool_result(handle='7ewszaymfa', offset=4764, limit=12)) --
>4769| === page 150/300 ===\
""")
    assert read == snapshot("""\
Stored result '7ewszaymfa': lines 4769-4772 of 9600 (228631 bytes):
4769| === page 150/300 ===
4770| Quarterly report, page 150
4771| row 150.0: revenue 0
4772| row 150.1: revenue 150
(4828 more lines. Next page: read_tool_result(handle='7ewszaymfa', offset=4773, limit=4).)\
""")
    assert await store.read(_original_handle(preview)) == pdf


async def _shown(value: object, tmp_path: Path) -> tuple[str, LocalFileStore]:
    store = LocalFileStore(base_dir=tmp_path)
    script = Script([('report', {})], lambda handles: [])
    capability = OverflowingToolOutput[Any](store=store, bands=[Band(over=500, action=Spill())])
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='report')(lambda: value)
    await agent.run('Read the report', run_id=RUN_ID)
    (shown,) = script.shown
    return shown, store


async def test_a_short_pdf_is_shown_whole_as_text(tmp_path: Path) -> None:
    """Bytes that start like a PDF (no media type declared) and whose text is short: the text, with the header."""
    pdf = pdf_with_pages([['Invoice 2026-114', 'Total: 1,250.00 EUR'], ['Paid on 2026-05-02']])
    shown, store = await _shown(pdf, tmp_path)
    assert shown == snapshot("""\
[`report` returned a PDF (993 bytes), saved unchanged as handle '7217zk37ff': 2 pages. Its text follows, each page starting with the line `=== page N/2 ===`; view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]
=== page 1/2 ===
Invoice 2026-114
Total: 1,250.00 EUR
=== page 2/2 ===
Paid on 2026-05-02
""")
    assert await store.read(_original_handle(shown)) == pdf


def _encrypted(pdf: bytes) -> bytes:
    reader = PdfReader(io.BytesIO(pdf))
    writer = PdfWriter(clone_from=reader)
    writer.encrypt(user_password='s3cret', algorithm='AES-128')
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


_HOSTILE_PDFS = {
    'a page tree that loops, declaring a billion pages': looping_tree_pdf,
    'a content stream that inflates to 200 MB': decompression_bomb_pdf,
    'a page 14,400 inches wide': giant_page_pdf,
    'garbage declared as a PDF': lambda: b'%PDF-1.7\n' + bytes(range(256)) * 60,
    'a PDF encrypted with a password': lambda: _encrypted(_report(3)),
}


@pytest.mark.parametrize('name', list(_HOSTILE_PDFS))
async def test_a_hostile_pdf_is_stored_unchanged_and_explained(name: str, tmp_path: Path) -> None:
    """Whatever the file holds, the run goes on: it is stored byte for byte and the header says what was read."""
    pdf = _HOSTILE_PDFS[name]()
    shown, store = await _shown(BinaryContent(pdf, media_type='application/pdf'), tmp_path)
    assert await store.read(_original_handle(shown)) == pdf
    assert (
        shown.split('\n', 1)[0]
        == snapshot(
            {
                'a content stream that inflates to 200 MB': "[`report` returned a PDF (204.4 KB), saved unchanged as handle '7217zk37ff': 1 page, no text read (scanned images?); view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]",
                'a page 14,400 inches wide': "[`report` returned a PDF (685 bytes), saved unchanged as handle '7217zk37ff': 1 page, no text read (scanned images?); view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]",
                'garbage declared as a PDF': "[`report` returned a PDF (15.4 KB), saved unchanged as handle '7217zk37ff'; its pages cannot be read: it could not be parsed (PdfStreamError: Stream has ended unexpectedly).]",
                'a PDF encrypted with a password': "[`report` returned a PDF (2.3 KB), saved unchanged as handle '7217zk37ff'; its pages cannot be read: it is encrypted with a password.]",
                'a page tree that loops, declaring a billion pages': "[`report` returned a PDF (2.4 KB), saved unchanged as handle '7217zk37ff'; its pages cannot be read: it could not be parsed (PdfReadError: Detected cyclic page references.).]",
            }
        )[name]
    )


def _viewed(script: Script, answer: int) -> tuple[str, tuple[int, int]]:
    """The line of a view tool answer and the size of the image it sent."""
    (image,) = script.files[answer]
    return script.shown[answer], Image.open(io.BytesIO(image.data)).size


async def test_a_page_is_viewed_as_an_image_through_the_view_tool(tmp_path: Path) -> None:
    """Page 150 of the stored PDF, rendered, then a region of it at more detail; hostile page numbers answered."""
    pdf = _report()
    store = LocalFileStore(base_dir=tmp_path)

    def queries(handles: dict[str, str]) -> list[Call]:
        pdf_handle = _original_handle(script.shown[0])  # the first answer names the file's handle
        return [
            ('view_tool_result_image', {'handle': pdf_handle, 'page': 150}),
            (
                'view_tool_result_image',
                {'handle': pdf_handle, 'page': 150, 'x': 0, 'y': 0, 'width': 800, 'height': 300},
            ),
            ('view_tool_result_image', {'handle': pdf_handle, 'page': 301}),
            ('view_tool_result_image', {'handle': handles['report'], 'page': 2}),
        ]

    script = Script([('report', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])

    @agent.tool_plain(name='report')
    def report() -> BinaryContent:
        return BinaryContent(pdf, media_type='application/pdf')

    await agent.run('Show me page 150', run_id=RUN_ID)
    _, _, _, past_end, not_pdf = script.shown
    assert _viewed(script, 1) == snapshot(
        ("Region x=0..2424, y=0..3136 of the 2424x3136 image '7217zk37ff' (scaled to 942x1219):", (942, 1219))
    )
    assert _viewed(script, 2) == snapshot(
        ("Region x=0..800, y=0..300 of the 2424x3136 image '7217zk37ff' (full detail):", (800, 300))
    )
    assert past_end == snapshot(
        "The PDF '7217zk37ff' cannot be shown: page 301 does not exist: the PDF has 300 pages (1 to 300)."
    )
    assert not_pdf == snapshot("'7ewszaymfa' is not a PDF, so it has no pages: leave page out.")


_WITHOUT_PDF_LIBRARIES = """
import asyncio, sys, tempfile
for name in sys.argv[1:]:
    sys.modules[name] = None  # not installed, as far as any import can tell
from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from tests.overflowing_tool_output.media._pdf_files import pdf_with_pages

pdf = pdf_with_pages([[f'line {i}' for i in range(40)] for _ in range(100)])

def respond(messages, info):
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart('report', {}, tool_call_id='call_0')])
    if len(returns) == 1 and 'view_tool_result_image' in returns[0].content:
        handle = returns[0].content.split("handle '")[1].split("'")[0]
        return ModelResponse(parts=[ToolCallPart('view_tool_result_image', {'handle': handle, 'page': 1})])
    return ModelResponse(parts=[TextPart('\\n'.join(str(r.content).split('\\n')[0] for r in returns))])

store = LocalFileStore(base_dir=tempfile.mkdtemp())
agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=store)])
agent.tool_plain(name='report')(lambda: BinaryContent(pdf, media_type='application/pdf'))
output = agent.run_sync('Read it', run_id='019adc3e-8f21-7c4b-9a6e-5d0f2b7c8e13').output
handle = output.split("handle '")[1].split("'")[0]
assert asyncio.run(store.read(handle)) == pdf
print(output)
"""


@pytest.mark.parametrize('missing', [('pypdf', 'pypdfium2'), ('pypdfium2',)], ids=['no PDF library', 'no renderer'])
def test_without_the_media_extra_a_pdf_is_stored_and_the_model_told_what_is_missing(missing: tuple[str, ...]) -> None:
    """A child interpreter where the PDF libraries cannot be imported: the file is kept byte for byte, the marker
    names the package and the install command; without the renderer a page view says why it cannot be shown."""
    root = Path(__file__).resolve().parents[3]
    child = subprocess.run(
        [sys.executable, '-c', _WITHOUT_PDF_LIBRARIES, *missing],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert (
        child.stdout.strip()
        == snapshot(
            {
                (
                    'pypdf',
                    'pypdfium2',
                ): "[`report` returned a PDF (39.6 KB), saved unchanged as handle 'wkgg9gwwhf'; install 'pydantic-ai-harness-context[media]' to read its pages (pypdf is not installed).]",
                (
                    'pypdfium2',
                ): "[`report` returned a PDF (39.6 KB), saved unchanged as handle 'wkgg9gwwhf': 100 pages. Its text follows, each page starting with the line `=== page N/100 ===`; its pages cannot be shown as images here (pypdfium2 is not installed).]",
            }
        )[missing]
    )


def test_text_extraction_stops_at_its_bounds_and_says_where() -> None:
    """The bounds a hostile file meets (pages read, characters kept, seconds spent): the count stays whole, the text
    stops, and `stopped` says why (the header shows it)."""
    pdf = _report(40)
    by_pages = read_pdf(pdf, max_pages=10)
    assert (by_pages.pages, len(by_pages.texts), by_pages.stopped) == snapshot(
        (40, 10, 'text is read from the first 10 pages only')
    )
    by_chars = read_pdf(pdf, max_chars=2_000)
    assert (by_chars.pages, len(by_chars.texts), by_chars.text_chars, by_chars.stopped) == snapshot(
        (40, 4, 2000, 'text is kept up to 2,000 characters')
    )
    by_time = read_pdf(pdf, seconds=0.0)
    assert (by_time.pages, len(by_time.texts), by_time.stopped) == snapshot(
        (40, 0, 'text extraction stopped after 0 s')
    )
    header = pdf_header('report', by_pages, handle='7217zk37ff', nbytes=len(pdf), pages_as_images=True)
    assert header == snapshot(
        "[`report` returned a PDF (19.8 KB), saved unchanged as handle '7217zk37ff': 40 pages. Its text follows (text is read from the first 10 pages only), each page starting with the line `=== page N/40 ===`; view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]\n"
    )
    assert cl100k_counter()(header) == snapshot(79)
