"""The documents and base64 blobs band under hostile input (the hostile review of issue 35): a secret in a PDF's
text or in a binary blob never reaches the model (shown, stored, rendered); a page that would take minutes to render
or to read costs seconds and says so; a PNG mentioning `%PDF-` stays an image. Real agent runs over real files."""

from __future__ import annotations

import base64
import io
import json
import random
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from PIL import Image, PngImagePlugin
from pydantic_ai import Agent, BinaryContent, BinaryImage
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pypdf import PdfReader, PdfWriter

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    SecretRedaction,
    Spill,
)
from pydantic_ai_harness.overflowing_tool_output._media import _pdf_view
from pydantic_ai_harness.overflowing_tool_output._media._pdf import is_pdf, read_pdf, text_seconds
from pydantic_ai_harness.overflowing_tool_output._media._pdf_view import page_image

from .._scripted_queries import RUN_ID, Call
from ._pdf_files import pdf_with_pages
from ._script import RunScript as Script

pytestmark = pytest.mark.anyio

GITHUB = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'


def _compressed(pdf: bytes) -> bytes:
    """`pdf` with its content streams deflated, so its raw bytes no longer spell its text."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    for page in writer.pages:
        page.compress_content_streams()
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _deploy_notes() -> bytes:
    return pdf_with_pages(
        [[f'Deploy notes, page {page}', *(f'step {page}.{row}: done' for row in range(20))] for page in (1, 2, 3)]
        + [['Rotation', f'deploy key {GITHUB}']]
    )


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [path.name for path in root.rglob('*') if path.is_file() and needle in path.read_bytes()]


_REDACT = SecretRedaction()


async def _run(
    value: object, tmp_path: Path, queries: Any = None, *, redact: SecretRedaction | None = _REDACT
) -> Script:
    store = LocalFileStore(base_dir=tmp_path / 'model')
    script = Script([('report', {})], queries or (lambda handles: []))
    capability = OverflowingToolOutput[Any](store=store, bands=[Band(over=500, action=Spill())], redact_secrets=redact)
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='report')(lambda: value)
    await agent.run('Read the report', run_id=RUN_ID)
    return script


@pytest.mark.parametrize('compressed', [False, True], ids=['plain streams', 'deflated streams'])
async def test_a_secret_in_a_pdfs_text_is_masked_and_the_file_is_not_stored(compressed: bool, tmp_path: Path) -> None:
    """Redaction on: the text the model reads is masked, and the file itself (whose pages the view tool would render
    and whose raw streams the query tools would read) is not stored where the model reads; the masked text is."""
    pdf = _compressed(_deploy_notes()) if compressed else _deploy_notes()
    script = await _run(
        BinaryContent(pdf, media_type='application/pdf'),
        tmp_path,
        lambda handles: [('grep_tool_result', {'handle': handles['report'], 'pattern': 'deploy key'})],
        redact=SecretRedaction(keep_original_in=LocalFileStore(base_dir=tmp_path / 'kept')),
    )
    preview, grep = script.shown
    assert re.sub(r'\(\d[\d.]* (?:bytes|KB)\)', '(PDF_SIZE)', preview.split('\n', 1)[0]) == snapshot(
        '[`report` returned a PDF (PDF_SIZE): 4 pages; its text held secrets, masked below, each page starting with the line `=== page N/4 ===`. The file is not kept where you can read it, so its pages cannot be shown as images.]'
    )
    assert grep.splitlines()[-1] == snapshot('>69| deploy key [secret withheld: GitHub Token]')
    assert _files_holding(tmp_path / 'model', GITHUB[:12].encode()) == []
    assert script.files == [[], []]  # no page image, no view tool offered
    kept = [path.read_bytes() for path in (tmp_path / 'kept').rglob('*') if path.is_file()]
    assert pdf in kept  # the operator's copy, byte for byte


def _encrypted(pdf: bytes) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password='s3cret', algorithm='AES-128')
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


_UNCHECKED = {
    'encrypted with a password': lambda: _encrypted(_deploy_notes()),
    'text extraction out of time': lambda: _forms_drawing_forms(3, pages=10),
}


@pytest.mark.parametrize('name', list(_UNCHECKED))
async def test_a_pdf_whose_text_cannot_all_be_checked_is_not_stored_with_redaction_on(
    name: str, tmp_path: Path
) -> None:
    """Redaction on, and a page's text not read: it could hold a secret, so the file is kept from the model too."""
    pdf = _UNCHECKED[name]()
    script = await _run(BinaryContent(pdf, media_type='application/pdf'), tmp_path)
    (shown,) = script.shown
    # Whether page 1 was read before the time was up depends on the machine: its text, and where it stopped, left out.
    first = re.sub(
        r', within page \d+|, each page starting with the line `[^`]+`|, the text that was read follows masked',
        '',
        shown.split('\n', 1)[0],
    )
    assert (
        re.sub(r'\([\d.]+ KB\)', '(N KB)', first)
        == snapshot(
            {
                'encrypted with a password': '[`report` returned a PDF (N KB); not all of its text could be checked for secrets (it is encrypted with a password). The file is not kept where you can read it, so its pages cannot be shown as images.]',
                'text extraction out of time': '[`report` returned a PDF (N KB): 10 pages; not all of its text could be checked for secrets (text extraction stopped after 2 s). The file is not kept where you can read it, so its pages cannot be shown as images.]',
            }
        )[name]
    )
    assert pdf not in [path.read_bytes() for path in (tmp_path / 'model').rglob('*') if path.is_file()]


async def test_a_clean_pdf_with_redaction_on_is_stored_and_its_pages_viewable(tmp_path: Path) -> None:
    pdf = pdf_with_pages([['Invoice 2026-114', 'Total: 1,250.00 EUR'], ['Paid on 2026-05-02']])
    script = await _run(pdf, tmp_path)
    (shown,) = script.shown
    assert shown.split('\n', 1)[0] == snapshot(
        "[`report` returned a PDF (993 bytes), saved unchanged as handle '7217zk37ff': 2 pages. Its text follows, each page starting with the line `=== page N/2 ===`; view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]"
    )


def _zip_with(line: str) -> bytes:
    """A zip-like binary: the local file header signature, then a stored entry holding `line`, then noise."""
    noise = random.Random(3).randbytes(2_000)
    return b'PK\x03\x04' + b'\x00' * 26 + f'{line}\n'.encode() + noise


_BINARY_BLOBS = {
    'a data URL of bytes starting with NUL': lambda: json.dumps(
        {
            'attachment': 'data:application/octet-stream;base64,'
            + base64.b64encode(b'\x00\x01\x02\x03' + f'GITHUB_TOKEN={GITHUB}\n'.encode() * 8 + b'\x00' * 64).decode(),
            'log': 'x' * 3_000,
        }
    ),
    'a bare base64 zip': lambda: json.dumps(
        {'archive': base64.b64encode(_zip_with(f'GITHUB_TOKEN={GITHUB}')).decode()}
    ),
    'a PDF data URL, its text deflated': lambda: json.dumps(
        {'file': 'data:application/pdf;base64,' + base64.b64encode(_compressed(_deploy_notes())).decode()}
    ),
}


@pytest.mark.parametrize('name', list(_BINARY_BLOBS))
async def test_a_binary_blob_holding_a_secret_is_withheld(name: str, tmp_path: Path) -> None:
    """Decoded and stored, the blob's hex dump (or its page, rendered) would spell the token; stored encoded, the
    model could decode it: nothing of it is stored where the model reads, and its marker says why."""
    value = _BINARY_BLOBS[name]()
    encoded = max(json.loads(value).values(), key=lambda text: len(set(text))).split(',')[-1]
    script = await _run(value, tmp_path)
    (shown,) = script.shown
    assert 'so the whole output is not kept' in shown and 'withheld: it may hold a secret (' in shown
    assert 'saved as handle' not in shown
    assert _files_holding(tmp_path, GITHUB[:12].encode()) == []
    assert _files_holding(tmp_path, encoded[100:160].encode()) == []


async def test_a_binary_blob_without_a_secret_still_moves_out_with_redaction_on(tmp_path: Path) -> None:
    archive = _zip_with('release notes for 2026')
    script = await _run(json.dumps({'archive': base64.b64encode(archive).decode()}), tmp_path)
    (shown,) = script.shown
    assert shown.split('\n', 1)[1] == snapshot(
        '{"archive": "[application/zip base64, 2.1 KB, saved as handle \'rn01cc9y9a\']"}'
    )


def _form(body: bytes, resources: bytes) -> bytes:
    data = zlib.compress(body, 9)
    return (
        b'<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << %s >> /Length %d /Filter /FlateDecode >>'
        b'\nstream\n' % (resources, len(data)) + data + b'\nendstream'
    )


def _forms_drawing_forms(depth: int, fan: int = 10, *, pages: int = 1) -> bytes:
    """`pages` pages each drawing form 0 `fan` times, form i drawing form i+1 `fan` times, the last one a line and a
    letter: `fan ** (depth + 1)` leaves a page from a file of about 2 KB (a "billion laughs" of form XObjects)."""
    font = b'/Font << /F1 3 0 R >>'
    first_page = 6 + depth + 1
    kids = b' '.join(b'%d 0 R' % (first_page + page) for page in range(pages))
    objects = [
        b'<< /Type /Catalog /Pages 2 0 R >>',
        b'<< /Type /Pages /Kids [%s] /Count %d >>' % (kids, pages),
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
        b'<< /Length %d >>\nstream\n%s\nendstream' % (len(b'/X Do ' * fan), b'/X Do ' * fan),
        b'<< /Font << /F1 3 0 R >> /XObject << /X 6 0 R >> >>',
    ]
    for level in range(depth + 1):
        if level < depth:
            objects.append(_form(b'/X Do ' * fan, font + b' /XObject << /X %d 0 R >>' % (7 + level)))
        else:
            objects.append(_form(b'BT /F1 11 Tf 50 700 Td (A) Tj ET 0 0 m 600 700 l S', font))
    objects += [b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources 5 0 R /Contents 4 0 R >>'] * pages
    out = bytearray(b'%PDF-1.4\n')
    offsets: list[int] = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b'%d 0 obj\n' % number + body + b'\nendobj\n'
    xref = len(out)
    out += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objects) + 1)
    out += b''.join(b'%010d 00000 n \n' % offset for offset in offsets)
    out += b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objects) + 1, xref)
    return bytes(out)


async def test_a_page_too_complex_to_render_in_time_is_answered_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2 KB page whose forms draw each other renders for seconds (minutes a level deeper): past the render budget
    the model is told, and pointed at the page's text; the render left behind does not hold the run, and a view
    behind it is told to try again."""
    monkeypatch.setattr(_pdf_view, 'RENDER_SECONDS', 0.2)
    pdf = _forms_drawing_forms(3)

    def queries(handles: dict[str, str]) -> list[Call]:
        found = re.search(r"saved unchanged as handle '([^']+)'", script.shown[0])
        assert found is not None
        view: Call = ('view_tool_result_image', {'handle': found.group(1), 'page': 1})
        return [view, view]  # the second while the first render, given up on, still runs

    store = LocalFileStore(base_dir=tmp_path)
    script = Script([('report', {})], queries)
    agent = Agent(
        script.model(), capabilities=[OverflowingToolOutput(store=store, bands=[Band(over=100, action=Spill())])]
    )
    agent.tool_plain(name='report')(lambda: BinaryContent(pdf, media_type='application/pdf'))
    await agent.run('Show page 1', run_id=RUN_ID)
    assert script.shown[1:] == snapshot(
        [
            "Page 1 of the PDF '7217zk37ff' is too complex to render in time (0.2 s). Its text is in the PDF's text, after the line starting `=== page 1/`.",
            "Page 1 of the PDF '7217zk37ff' cannot be rendered right now: another page is still rendering. Try again in a few seconds.",
        ]
    )
    assert script.files[1:] == [[], []]


async def test_text_extraction_of_a_tiny_hostile_file_stops_within_its_budget(tmp_path: Path) -> None:
    """Ten pages of a 2 KB file whose forms draw each other (pypdf spends over a second on each): extraction stops
    at 2 s (2 s plus 1 s per MB), inside a page if need be, and the header says so."""
    pdf = _forms_drawing_forms(3, pages=10)
    script = await _run(BinaryContent(pdf, media_type='application/pdf'), tmp_path, redact=None)
    (shown,) = script.shown
    header = shown.split('\n', 1)[0]
    # Whether page 1 was read before the 2 s were up depends on the machine; the stop does not.
    assert re.search(r': 10 pages.* \(text extraction stopped after 2 s(, within page \d+)?\)', header), header
    assert read_pdf(pdf, seconds=0.2).stopped == snapshot('text extraction stopped after 0.2 s, within page 1')
    assert [text_seconds(size) for size in (2_000, 5 * 1024 * 1024, 100 * 1024 * 1024)] == snapshot([2.0, 7.0, 30.0])


def _png_mentioning_pdf(size: tuple[int, int]) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text('Title', 'report.pdf - %PDF-1.7 viewer')
    out = io.BytesIO()
    Image.new('RGB', size, 'white').save(out, 'PNG', pnginfo=info)
    return out.getvalue()


async def test_a_png_mentioning_pdf_stays_an_image_the_view_tool_shows(tmp_path: Path) -> None:
    """A screenshot whose PNG text chunk says `%PDF-1.7`: still an image, whose regions the view tool shows."""
    png = _png_mentioning_pdf((4000, 3000))
    answers: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart('report', {}, tool_call_id='call_0')])
        content: object = returns[-1].content
        answers.append(str(content[0] if isinstance(content, list) else content))
        found = re.search(r"under handle '([^']+)'", answers[0])
        if len(returns) > 1 or found is None:
            return ModelResponse(parts=[TextPart('done')])
        view = {'handle': found.group(1), 'width': 100, 'height': 100}
        return ModelResponse(parts=[ToolCallPart('view_tool_result_image', view, tool_call_id='call_1')])

    agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='report')(lambda: BinaryImage(png, media_type='image/png'))
    await agent.run('Show the screenshot', run_id=RUN_ID)
    assert answers[-1] == snapshot("Region x=0..100, y=0..100 of the 4000x3000 image '0x5ge0n476' (full detail):")
    assert [is_pdf(data, None) for data in (png, b'\xef\xbb\xbf\r\n%PDF-1.7\n', b'  %PDF-1.4', b'Re: %PDF-1.4')] == [
        False,
        True,
        True,
        False,
    ]


async def test_a_pdf_pdfium_cannot_open_is_answered_in_one_sentence() -> None:
    _, why = await page_image(b'%PDF-1.4 truncated', 'h1', 1, 1568)
    assert why == snapshot(
        "The PDF 'h1' cannot be shown: the PDF could not be opened: Failed to load document (PDFium: Data format error)."
    )
