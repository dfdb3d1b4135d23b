"""Documents and base64 blobs: the time to reduce a 300-page PDF through a whole agent step against pypdf's own text
extraction of the same file in the same run, and the tokens of a JSON page holding a 3 MB data URL with and without.

Run it alone with `PYTHONPATH=$PWD .venv/bin/python -m bench documents`.
"""

from __future__ import annotations

import base64
import io
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from PIL import Image
from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pypdf import PdfReader

from bench._report import Entry
from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from tests.overflowing_tool_output.media._pdf_files import pdf_with_pages

TITLE = 'Documents and base64 blobs'
METHOD = """
PDF: one agent step (`Agent.run` with a scripted model) whose tool returns a 300-page PDF (30 lines of text a page,
written by the tests' minimal PDF writer), with `OverflowingToolOutput` (the file stored in a `LocalFileStore`, its
pages' text extracted in a worker thread and spilled), minus the same step without the capability, against pypdf's
own `PdfReader(...).pages[i].extract_text()` over every page of the same bytes; medians of 3, in the same run.
Blob: a JSON page (`json.dumps` of a dict) holding a 2.3 MB PNG as a 3.0 MB `data:image/png;base64,...` URL: cl100k
tokens of what the model is sent for the tool's return, with the capability's defaults and without it.
"""

SECTION = 'documents'
RUNS = 3


def _report() -> bytes:
    return pdf_with_pages(
        [
            [f'Quarterly report, page {page}', *(f'row {page}.{row}: revenue {page * row}' for row in range(30))]
            for page in range(1, 301)
        ]
    )


def _pypdf_text(data: bytes) -> float:
    started = time.perf_counter()
    reader = PdfReader(io.BytesIO(data))
    for page in reader.pages:
        page.extract_text()
    return time.perf_counter() - started


def _agent(value: object, capability: OverflowingToolOutput[Any] | None, seen: list[str]) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('fetch', {})])
        seen.extend(part.model_response_str() for part in messages[-1].parts if isinstance(part, ToolReturnPart))
        return ModelResponse(parts=[TextPart('ok')])

    agent = Agent(FunctionModel(model), capabilities=[capability] if capability else [])
    agent.tool_plain(name='fetch')(lambda: value)
    return agent


async def _step(value: object, capability: OverflowingToolOutput[Any] | None) -> tuple[float, str]:
    seen: list[str] = []
    agent = _agent(value, capability, seen)
    started = time.perf_counter()
    await agent.run('read it')
    return time.perf_counter() - started, seen[0]


async def _pdf_ratio(root: Path) -> Entry:
    pdf = _report()
    value = BinaryContent(pdf, media_type='application/pdf')
    steps, bare, own = [], [], []
    for n in range(RUNS):
        steps.append((await _step(value, OverflowingToolOutput(store=LocalFileStore(base_dir=root / f'pdf{n}'))))[0])
        bare.append((await _step(value, None))[0])
        own.append(_pypdf_text(pdf))
    step, plain, extract = statistics.median(steps), statistics.median(bare), statistics.median(own)
    ratio = (step - plain) / extract
    return Entry(
        SECTION,
        'reduce a 300-page PDF in an agent step / pypdf text extraction',
        ratio,
        'x',
        '<= 1.5x',
        ratio <= 1.5,
        f'step {step * 1e3:.0f} ms (without the capability {plain * 1e3:.0f} ms), pypdf alone {extract * 1e3:.0f} ms; '
        f'{len(pdf):,} bytes',
    )


async def _blob_tokens(root: Path) -> Entry:
    rng = random.Random(7)
    image = Image.frombytes('RGB', (1030, 730), rng.randbytes(1030 * 730 * 3))
    buffer = io.BytesIO()
    image.save(buffer, 'PNG')
    url = 'data:image/png;base64,' + base64.b64encode(buffer.getvalue()).decode()
    page = json.dumps({'url': 'https://example.com/', 'title': 'Example', 'screenshot': url, 'status': 200})
    count = cl100k_counter()
    _, shown = await _step(page, OverflowingToolOutput(store=LocalFileStore(base_dir=root / 'blob')))
    _, plain = await _step(page, None)
    with_band, without = count(shown), count(plain)
    ratio = with_band / without
    return Entry(
        SECTION,
        'JSON page holding a 3 MB data URL: tokens with / without',
        ratio,
        'x',
        '<= 0.001x',
        ratio <= 0.001,
        f'{with_band:,} vs {without:,} cl100k tokens; the data URL {len(url):,} characters',
    )


async def _run() -> list[Entry]:
    root = Path(tempfile.mkdtemp(prefix='bench-documents-'))
    return [await _pdf_ratio(root), await _blob_tokens(root)]


def run() -> list[Entry]:
    """The section's entries."""
    return anyio.run(_run)
