"""A PDF under DBOS (issue 35, item 5). Workflow code parses no file in place (seconds of CPU a replay would repeat):
there a PDF is stored byte for byte as binary data by a durable write, the model told so, and a recorded run
returns the same answer and writes nothing again. Outside workflow code the same file is read page by page."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')
pytest.importorskip('pypdf', reason='the media extra is not installed')

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

from ..overflowing_tool_output.media._pdf_files import pdf_with_pages
from ._dbos_app import register_output, start
from ._step_budget_app import COUNTER_ENV, CountingStore, plain_output, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

PREFIX = 'pdf_agent__capability__overflowing_tool_output.'
PAGES = 120


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('report', {}, tool_call_id='call_0')])
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    return ModelResponse(
        parts=[TextPart(json.dumps([p.model_response_str() for p in request.parts if isinstance(p, ToolReturnPart)]))]
    )


def report() -> BinaryContent:
    pages = [[f'Report page {n}', *(f'row {n}.{i}: revenue {n * i}' for i in range(30))] for n in range(1, PAGES + 1)]
    return BinaryContent(pdf_with_pages(pages), media_type='application/pdf')


def build(store_dir: str | Path, *durability: DBOSDurability) -> Agent[None, str]:
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name='pdf_agent',
        tools=[report],
        capabilities=[OverflowingToolOutput(store=CountingStore(base_dir=store_dir)), *durability],
    )


async def test_in_workflow_code_a_pdf_is_stored_as_bytes_by_a_durable_write_and_replayed(
    db_url: str, tmp_path: Path
) -> None:
    expected = await plain_output(build, tmp_path / 'plain' / 'store', run_id='wf-pdf:1')
    assert f': {PAGES} pages. Its text follows' in json.loads(expected)[0]  # without an engine the file is read
    start(db_url)
    run_agent = register_output(build(tmp_path / 'store', DBOSDurability()), 'pdf_run')
    DBOS.launch()
    with SetWorkflowID('wf-pdf'):
        output = await run_agent('go')
    (shown,) = json.loads(output)
    assert shown.startswith('[`report` returned binary data (')
    assert 'PDF document, application/pdf), which cannot be shown as text. Saved verbatim under handle' in shown
    handle = shown.split("handle '", 1)[1].split("'", 1)[0]
    assert await CountingStore(base_dir=tmp_path / 'store').read(handle) == report().data  # byte for byte
    steps = [step['function_name'] for step in await DBOS.list_workflow_steps_async('wf-pdf')]
    assert steps.count(PREFIX + 'overflow_spill_write') == 1
    assert writes(os.environ[COUNTER_ENV]) == 1
    with SetWorkflowID('wf-pdf'):
        assert await run_agent('go') == output
    assert writes(os.environ[COUNTER_ENV]) == 1  # the recorded run wrote nothing again
