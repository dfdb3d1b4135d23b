"""What the durable `overflow_read_pdf` operation records (`_media/_pdf_reading.py`): the text log a run without an
engine shows, masked as one text (a private key split by a page break is masked whole), bounded as JSON under
Temporal's 2 MB payload limit whatever characters the file holds, with parse errors masked too, and read back from
an engine's plain data whatever its shape."""

from __future__ import annotations

import base64
import json

import pytest
from inline_snapshot import snapshot

pytest.importorskip('pypdf', reason='the media extra is not installed')

from pydantic_ai_harness.overflowing_tool_output import MemoryStore, SecretRedaction
from pydantic_ai_harness.overflowing_tool_output._media._pdf_reading import (
    DURABLE_TEXT_BYTES,
    pdf_answer,
    read_masked,
    reading_from_answer,
)
from pydantic_ai_harness.overflowing_tool_output._redaction._withhold import SecretWithholding, build_withholding

from ._pdf_files import pdf_with_pages

pytestmark = pytest.mark.anyio

TOKEN = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode('ascii')


def _withholding(setting: SecretRedaction | None = None) -> SecretWithholding:
    withholding = build_withholding(setting or SecretRedaction(), query_store=MemoryStore())
    assert withholding is not None
    return withholding


async def test_the_recorded_text_is_bounded_and_says_where_it_stops() -> None:
    pages = [[f'page {n} line {i} ' + 'abcdefghij' * 4 for i in range(60)] for n in range(1, 401)]
    answer = await pdf_answer(_b64(pdf_with_pages(pages)), None)
    assert answer['pages'] == 400 and answer['checked'] is True  # the whole file was read before the cut
    assert DURABLE_TEXT_BYTES - 200 < len(json.dumps(answer['log'])) <= DURABLE_TEXT_BYTES
    assert len(json.dumps(answer).encode()) < 2 * 1000 * 1000  # Temporal's default payload limit
    assert answer['cut'] == 'text cut in page 298 of 400, after the first 1.0 MB'
    reading = reading_from_answer(answer)
    assert reading.digest.pages == 400 and reading.has_text
    assert reading.masked.log.startswith('=== page 1/400 ===\npage 1 line 0 ')


@pytest.mark.parametrize('character', ['\x01', '\x1f', '"', '\\', '\xe9'])
async def test_text_that_json_escapes_longer_still_fits_the_payload(character: str) -> None:
    """A 54 KB PDF of control characters is 6 MB as JSON: the bound is on the JSON, so the answer stays under 2 MB
    (a larger one is refused by Temporal's server and the run stalls until it times out)."""
    pdf = pdf_with_pages([[character * 200 for _ in range(50)] for _ in range(150)])
    answer = await pdf_answer(_b64(pdf), None)
    assert len(json.dumps(answer).encode()) < 2 * 1000 * 1000
    assert len(json.dumps(answer, ensure_ascii=False).encode()) < 2 * 1000 * 1000


async def test_a_private_key_split_by_a_page_break_is_masked_whole_as_without_an_engine() -> None:
    body1 = ['MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun']
    body2 = ['SuperSecretTailOfTheKeyXyZ0123456789abcdefABCDEF+/0123456789abcd']
    pdf = pdf_with_pages(
        [['intro', '-----BEGIN RSA PRIVATE KEY-----', *body1], [*body2, '-----END RSA PRIVATE KEY-----', 'outro']]
    )
    withholding = _withholding()
    answer = await pdf_answer(_b64(pdf), withholding.mask_text)
    assert 'SuperSecretTail' not in json.dumps(answer) and 'MIIEow' not in json.dumps(answer)
    assert answer['withheld'] is True and answer['checked'] is True
    assert reading_from_answer(answer).masked.log == read_masked(pdf, withholding.mask_text)[1].log


async def test_a_secret_spanning_pages_by_a_users_pattern_is_masked_whole() -> None:
    setting = SecretRedaction(patterns={'split key': r'KEYSTART-\w+\s+=== page \d+/\d+ ===\s+\w+-KEYEND'})
    pdf = pdf_with_pages([['intro', 'KEYSTART-abc123'], ['def456-KEYEND', 'outro']])
    answer = await pdf_answer(_b64(pdf), _withholding(setting).mask_text)
    assert answer['withheld'] is True and 'abc123' not in json.dumps(answer) and 'def456' not in json.dumps(answer)
    assert answer['log'].startswith('=== page 1/2 ===\nintro\n') and answer['log'].endswith('outro\n')


async def test_a_parse_error_quoting_the_files_bytes_is_recorded_masked() -> None:
    broken = f'%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages ({TOKEN} >>\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF'
    answer = await pdf_answer(_b64(broken.encode()), _withholding().mask_text)
    assert answer['withheld'] is True  # the raw bytes hold it
    assert TOKEN[:12] not in json.dumps(answer)


@pytest.mark.parametrize(
    'answer',
    [
        {},
        {'pages': '3', 'log': ['not', 'text'], 'unreadable': 'many', 'cut': 5},
        {'pages': -2, 'log': None, 'stopped': 5, 'withheld': 'yes', 'checked': 1, 'renders': 0, 'has_text': 'no'},
    ],
)
def test_a_recorded_answer_of_any_shape_reads_back_without_raising(answer: dict[str, object]) -> None:
    reading = reading_from_answer(answer)
    assert reading.digest.pages is None and reading.masked.log == '' and reading.cut == ''
    # Only a recorded `True` says a file held no unchecked text; anything else reads as the cautious answer.
    assert (reading.masked.withheld, reading.masked.checked, reading.renders, reading.has_text) == (
        False,
        False,
        False,
        False,
    )


def test_the_headers_name_the_cut_apart_from_why_reading_stopped() -> None:
    """A durable read's cut and a page whose text could not be read are both named, neither hiding the other; a file
    withheld for a secret says where its masked text stops."""
    from pydantic_ai_harness.overflowing_tool_output._media._pdf import PdfDigest
    from pydantic_ai_harness.overflowing_tool_output._media._pdf_reading import MaskedPdf, PdfReading
    from pydantic_ai_harness.overflowing_tool_output._media._steps import pdf_header, withheld_pdf_header

    digest = PdfDigest(pages=400, unreadable=1)
    reading = PdfReading(
        digest, MaskedPdf('', False, True), True, True, 'text cut in page 298 of 400, after the first 1.0 MB'
    )
    header = pdf_header('report', digest, handle='7217zk37ff', nbytes=2_000_000, pages_as_images=True, reading=reading)
    assert header == snapshot(
        "[`report` returned a PDF (2.0 MB), saved unchanged as handle '7217zk37ff': 400 pages. Its text follows (the text of 1 page could not be read; text cut in page 298 of 400, after the first 1.0 MB), each page starting with the line `=== page N/400 ===`; view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]\n"
    )
    withheld = withheld_pdf_header('report', digest, nbytes=2_000_000, withheld=True, reading=reading)
    assert withheld == snapshot(
        '[`report` returned a PDF (2.0 MB): 400 pages; its text held secrets, masked below (text cut in page 298 of 400, after the first 1.0 MB; the rest is not shown), each page starting with the line `=== page N/400 ===`. The file is not kept where you can read it, so its pages cannot be shown as images.]\n'
    )


async def test_a_lone_surrogate_a_font_maps_is_replaced_so_every_engine_can_record_the_answer() -> None:
    """pydantic-ai's Temporal converter (`pydantic_core.to_json`) refuses a lone surrogate: the activity failed and
    the file went to the model unread."""
    import pydantic_core

    from ._pdf_files import glyph_pdf

    answer = await pdf_answer(_b64(glyph_pdf('D800', 10)), None)
    assert answer['log'] == '=== page 1/1 ===\n' + '\ufffd' * 10 + '\n'
    assert pydantic_core.to_json(answer)


async def test_one_long_line_is_cut_to_the_budget_whatever_its_characters() -> None:
    """A page of one line: kept up to the budget as JSON writes it, ASCII escapes included (an emoji outside the
    BMP is 12 bytes there), and close to it for plain ASCII (not a sixth of it)."""
    from ._pdf_files import glyph_pdf

    emoji = await pdf_answer(_b64(glyph_pdf('D83DDE00', 300_000)), None)
    assert DURABLE_TEXT_BYTES - 12 < len(json.dumps(emoji['log'])) <= DURABLE_TEXT_BYTES
    assert len(json.dumps(emoji).encode()) < 2 * 1000 * 1000
    assert emoji['cut'] == 'text cut in page 1 of 1, after the first 1.0 MB'
    pages = [['x' * 120_000] * 10]  # one page of ten 120,000-character lines
    ascii_log = (await pdf_answer(_b64(pdf_with_pages(pages)), None))['log']
    assert DURABLE_TEXT_BYTES - 200 < len(json.dumps(ascii_log)) <= DURABLE_TEXT_BYTES


async def test_a_secret_check_records_two_flags_not_the_text() -> None:
    """A PDF blob's check (`check_only`) records whether the file held a secret and was read whole, nothing else:
    64 blobs would otherwise record 64 MB of text a check throws away."""
    pages = [[f'page {n} line {i} ' + 'abcdefghij' * 4 for i in range(60)] for n in range(1, 41)]
    answer = await pdf_answer(_b64(pdf_with_pages(pages)), _withholding().mask_text, check_only=True)
    assert answer == {'withheld': False, 'checked': True}


def test_a_file_withheld_as_not_all_checked_names_the_cut_too() -> None:
    from pydantic_ai_harness.overflowing_tool_output._media._pdf import PdfDigest
    from pydantic_ai_harness.overflowing_tool_output._media._pdf_reading import MaskedPdf, PdfReading
    from pydantic_ai_harness.overflowing_tool_output._media._steps import withheld_pdf_header

    digest = PdfDigest(pages=5_050, stopped='text is read from the first 5,000 pages only')
    reading = PdfReading(digest, MaskedPdf('', False, False), True, True, 'text cut in page 1494 of 5050, after 1.0 MB')
    assert withheld_pdf_header('report', digest, nbytes=9_000_000, withheld=False, reading=reading) == snapshot(
        '[`report` returned a PDF (9.0 MB): 5050 pages; not all of its text could be checked for secrets (text is read from the first 5,000 pages only; text cut in page 1494 of 5050, after 1.0 MB; the rest is not shown), the text that was read follows masked, each page starting with the line `=== page N/5050 ===`. The file is not kept where you can read it, so its pages cannot be shown as images.]\n'
    )
