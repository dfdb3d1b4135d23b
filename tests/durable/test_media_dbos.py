"""Image blobs and EXIF-rotated images under DBOS (issue 35, item 5): workflow code reads an image's header and EXIF
orientation without Pillow and has any copy made by the durable `overflow_fit_image` step, so the model is sent
what a run without an engine sends it (an image blob shown, a turned photo upright), and a recorded run returns the
same answer without fitting or writing again."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS
from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, SecretRedaction

from ..media._images import images_sent, screenshot
from ..overflowing_tool_output.media.test_blob_images import _rotated_jpeg
from ._step_budget_app import COUNTER_ENV, CountingStore, run_beside_plain, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

PREFIX = 'media_agent__capability__overflowing_tool_output.'


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('fetch', {}, tool_call_id='call_0')])
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    sent = [
        (image.media_type, hashlib.sha256(image.data).hexdigest(), _green_top_left(image.data))
        for image in images_sent([request])
    ]
    return ModelResponse(parts=[TextPart(json.dumps(sent))])


def answer_text(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('fetch', {}, tool_call_id='call_0')])
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    return ModelResponse(
        parts=[TextPart(str([part.content for part in request.parts if isinstance(part, ToolReturnPart)]))]
    )


def _green_top_left(data: bytes) -> bool:
    """Whether the image's top-left pixel is green (the rotated test photo's, when it is shown upright)."""
    with Image.open(io.BytesIO(data)) as image:
        red, green, blue = image.convert('RGB').getpixel((5, 5))  # pyright: ignore[reportGeneralTypeIssues]
    return green > 150 and red < 80 and blue < 80


def build_for(tool: Callable[[], object]) -> Callable[..., Agent[None, str]]:
    def build(store_dir: str | Path, *durability: DBOSDurability) -> Agent[None, str]:
        agent = Agent(
            FunctionModel(respond, model_name='scripted'),
            name='media_agent',
            capabilities=[OverflowingToolOutput(store=CountingStore(base_dir=store_dir)), *durability],
        )
        agent.tool_plain(name='fetch')(tool)
        return agent

    return build


async def _run_twice(build: Callable[..., Agent[None, str]], db_url: str, tmp_path: Path, name: str) -> str:
    """The run under DBOS, checked against the run without an engine and against its own replay."""
    run = await run_beside_plain(build, db_url, tmp_path, name)
    output = run.output
    assert output == run.plain  # what a run without an engine sends
    written = writes(os.environ[COUNTER_ENV])
    steps = [step['function_name'] for step in await DBOS.list_workflow_steps_async(f'wf-{name}')]
    assert steps.count(PREFIX + 'overflow_fit_image') == 1  # the copy was made by the durable step, once
    assert await run.again() == output
    assert writes(os.environ[COUNTER_ENV]) == written  # the recorded run wrote nothing again
    return output


async def test_an_image_blob_is_shown_under_dbos(db_url: str, tmp_path: Path) -> None:
    page = json.dumps(
        {'title': 'dashboard', 'shot': 'data:image/png;base64,' + base64.b64encode(screenshot()).decode()}
    )
    output = await _run_twice(build_for(lambda: page), db_url, tmp_path, 'blob')
    ((media_type, _, _),) = json.loads(output)  # one image sent: the fitted copy of the 4880x2560 blob
    assert media_type in ('image/png', 'image/jpeg')


async def test_an_exif_rotated_photo_that_fits_is_sent_upright_under_dbos(db_url: str, tmp_path: Path) -> None:
    photo = _rotated_jpeg(6)
    output = await _run_twice(
        build_for(lambda: BinaryImage(photo, media_type='image/jpeg')), db_url, tmp_path, 'turned'
    )
    ((_, digest, upright),) = json.loads(output)
    assert upright and digest != hashlib.sha256(photo).hexdigest()  # a copy, turned upright; not the file as stored


@pytest.mark.parametrize('secret', [False, True])
async def test_with_redaction_a_pdf_blob_is_checked_by_the_durable_step_as_without_an_engine(
    secret: bool, db_url: str, tmp_path: Path
) -> None:
    """A blob's secret check runs in workflow code, which parses no PDF: a PDF blob is checked by the durable
    `overflow_read_pdf` step instead, so it is kept (or withheld, when its text holds a secret) exactly as without
    an engine."""
    from ..overflowing_tool_output.media._pdf_files import pdf_with_pages

    lines = ['quarterly report', *(f'row {i}' for i in range(40))]
    if secret:
        lines.append('token ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4')
    pdf = pdf_with_pages([lines])
    data_url = 'data:application/pdf;base64,' + base64.b64encode(pdf).decode()
    page = json.dumps({'name': 'report.pdf', 'file': data_url, 'log': [f'line {i}' for i in range(8_000)]})

    def build(store_dir: str | Path, *durability: DBOSDurability) -> Agent[None, str]:
        capability = OverflowingToolOutput(store=CountingStore(base_dir=store_dir), redact_secrets=SecretRedaction())
        agent = Agent(
            FunctionModel(answer_text, model_name='scripted'),
            name='media_agent',
            capabilities=[capability, *durability],
        )
        agent.tool_plain(name='fetch')(lambda: page)
        return agent

    run = await run_beside_plain(build, db_url, tmp_path, 'pdfblob')
    output = run.output
    assert output == run.plain
    recorded = await DBOS.list_workflow_steps_async('wf-pdfblob')
    (check,) = [step['output'] for step in recorded if step['function_name'] == PREFIX + 'overflow_read_pdf']
    assert check is not None
    assert check.value == {'withheld': secret, 'checked': True}  # two flags, not the text
    if secret:  # withheld, neither decoded nor encoded where the model reads
        assert 'holding a base64 blob' in output and 'it may hold a secret, so the whole output is not kept' in output
        stored = [path.read_bytes() for path in (tmp_path / 'store').rglob('*') if path.is_file()]
        assert not any(b'%PDF' in data or b'JVBER' in data for data in stored)
    else:
        assert 'saved apart and marked below; the whole output, unchanged, is handle' in output
