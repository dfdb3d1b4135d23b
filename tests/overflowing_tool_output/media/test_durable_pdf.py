"""What the durable `overflow_read_pdf` operation records (`_media/_pdf_reading.py`): bounded under Temporal's 2 MB
payload limit however much text the file holds, masked page by page, the whole text withheld when a secret only
the whole text shows spans two pages, and read back from an engine's plain data whatever its shape."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip('pypdf', reason='the media extra is not installed')

from pydantic_ai_harness.overflowing_tool_output import MemoryStore, SecretRedaction
from pydantic_ai_harness.overflowing_tool_output._media._pdf_reading import (
    DURABLE_TEXT_BYTES,
    pdf_answer,
    reading_from_answer,
)
from pydantic_ai_harness.overflowing_tool_output._redaction._withhold import build_withholding

from ._pdf_files import pdf_with_pages

pytestmark = pytest.mark.anyio


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode('ascii')


async def test_the_recorded_text_is_bounded_and_says_where_it_stops() -> None:
    pages = [[f'page {n} line {i} ' + 'abcdefghij' * 4 for i in range(60)] for n in range(1, 401)]
    answer = await pdf_answer(_b64(pdf_with_pages(pages)), None)
    assert answer['pages'] == 400 and answer['checked'] is True  # the whole file was read before the cut
    kept = sum(len(text.encode()) for text in answer['texts'])
    assert DURABLE_TEXT_BYTES - 100 < kept <= DURABLE_TEXT_BYTES
    assert len(json.dumps(answer).encode()) < 2 * 1000 * 1000  # Temporal's default payload limit
    assert answer['stopped'] == 'text is kept up to 1.0 MB in a durable run'
    reading = reading_from_answer(answer)
    assert reading.digest.pages == 400 and reading.masked.log.startswith('=== page 1/400 ===\npage 1 line 0 ')


async def test_a_secret_spanning_pages_withholds_the_whole_text() -> None:
    setting = SecretRedaction(patterns={'split key': r'KEYSTART-\w+\s+=== page \d+/\d+ ===\s+\w+-KEYEND'})
    mask = build_withholding(setting, query_store=MemoryStore())
    assert mask is not None
    pdf = pdf_with_pages([['intro', 'KEYSTART-abc123'], ['def456-KEYEND', 'outro']])
    answer = await pdf_answer(_b64(pdf), mask.mask_text)
    assert answer['withheld'] is True
    assert answer['texts'] == ['', ''] and answer['stopped'] == 'its text is not shown: a secret in it spans pages'
    assert 'abc123' not in json.dumps(answer)


@pytest.mark.parametrize(
    'answer',
    [
        {},
        {'pages': '3', 'texts': 'not a list', 'unreadable': 'many'},
        {'pages': 2, 'texts': [1, None], 'stopped': 5, 'withheld': 'yes', 'renders': 0},
    ],
)
def test_a_recorded_answer_of_any_shape_reads_back_without_raising(answer: dict[str, object]) -> None:
    reading = reading_from_answer(answer)
    assert reading.digest.pages in (None, 2)
    assert isinstance(reading.masked.log, str)
