"""Media under DBOS (issue 35, item 5). Workflow code decodes nothing in place (seconds of CPU a replay would repeat):
a PDF's pages are read by the durable `overflow_read_pdf` step and an image blob is fitted by `overflow_fit_image`,
so the model is sent what a run without an engine sends it, and a recorded run returns the same answer without
reading, fitting or writing again. With secret redaction on, what the step records is already masked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')
pytest.importorskip('pypdf', reason='the media extra is not installed')

from dbos import DBOS
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

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, SecretRedaction

from ..overflowing_tool_output.media._pdf_files import pdf_with_pages
from ._step_budget_app import COUNTER_ENV, CountingStore, run_beside_plain, writes

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


async def _steps(workflow_id: str) -> list[str]:
    return [step['function_name'].removeprefix(PREFIX) for step in await DBOS.list_workflow_steps_async(workflow_id)]


async def test_in_workflow_code_a_pdf_is_read_page_by_page_by_a_durable_step_and_replayed(
    db_url: str, tmp_path: Path
) -> None:
    run = await run_beside_plain(build, db_url, tmp_path, 'pdf')
    output = run.output
    assert output == run.plain  # what a run without an engine sends: the header, then the pages' text
    (shown,) = json.loads(output)
    assert f': {PAGES} pages. Its text follows' in shown
    assert f'=== page {PAGES}/{PAGES} ===' in shown or 'read_tool_result' in shown
    handle = shown.split("handle '", 1)[1].split("'", 1)[0]
    assert await CountingStore(base_dir=tmp_path / 'store').read(handle) == report().data  # byte for byte
    steps = await _steps('wf-pdf')
    assert steps.count('overflow_read_pdf') == 1
    assert writes(os.environ[COUNTER_ENV]) == steps.count('overflow_spill_write') >= 1
    written = writes(os.environ[COUNTER_ENV])
    assert await run.again() == output
    assert writes(os.environ[COUNTER_ENV]) == written  # the recorded run wrote nothing again
    assert (await _steps('wf-pdf')).count('overflow_read_pdf') == 1  # nor read the file again


SECRET = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'


def secret_report() -> BinaryContent:
    pages = [[f'Report page {n}', *(f'row {n}.{i}: revenue {n * i}' for i in range(30))] for n in range(1, 41)]
    pages[2].append(f'deploy token {SECRET}')
    return BinaryContent(pdf_with_pages(pages), media_type='application/pdf')


def build_redacting(store_dir: str | Path, *durability: DBOSDurability) -> Agent[None, str]:
    capability = OverflowingToolOutput(store=CountingStore(base_dir=store_dir), redact_secrets=SecretRedaction())
    agent = Agent(
        FunctionModel(respond, model_name='scripted'),
        name='pdf_agent',
        capabilities=[capability, *durability],
    )
    agent.tool_plain(name='report')(secret_report)
    return agent


async def test_with_redaction_the_durable_step_records_the_text_masked_and_the_file_is_withheld(
    db_url: str, tmp_path: Path
) -> None:
    run = await run_beside_plain(build_redacting, db_url, tmp_path, 'secret')
    output = run.output
    assert output == run.plain
    (shown,) = json.loads(output)
    assert shown.startswith('[`report` returned a PDF (') and 'its text held secrets, masked below' in shown
    assert SECRET not in output
    recorded = await DBOS.list_workflow_steps_async('wf-secret')
    (read,) = [step['output'] for step in recorded if step['function_name'] == PREFIX + 'overflow_read_pdf']
    assert read is not None
    read = read.value  # the operation's recorded answer, as a replay gets it
    assert read['withheld'] is True and read['pages'] == 40
    assert 'deploy token [secret withheld: GitHub Token]\n=== page 4/40 ===' in read['log']
    assert SECRET not in repr([step['output'] for step in recorded])  # never recorded unmasked
    # Only the masked text is stored where the model reads (its spill), not the file.
    assert writes(os.environ[COUNTER_ENV]) == 1
    stored = [path.read_bytes() for path in (tmp_path / 'store').rglob('*') if path.is_file()]
    assert stored and not any(SECRET.encode() in data or b'%PDF' in data[:8] for data in stored)
