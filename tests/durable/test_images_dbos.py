"""Images under DBOS (issue 35, item 5): fitting is a durable step of its own, so workflow code never decodes an
image, and a recorded run returns the same copy and handle without fitting or writing again."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import BinaryContent, BinaryImage, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

from ..media._images import images_sent, screenshot
from ._step_budget_app import COUNTER_ENV, CountingStore, run_beside_plain, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

PREFIX = 'image_agent__capability__overflowing_tool_output.'


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('shot', {}, tool_call_id='call_0')])
    (image,) = images_sent(messages)
    return ModelResponse(parts=[TextPart(json.dumps([len(messages), hashlib.sha256(image.data).hexdigest()]))])


def shot() -> BinaryContent:
    return BinaryImage(screenshot(), media_type='image/png')


def build(store_dir: str | Path, *durability: DBOSDurability) -> Agent[None, str]:
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name='image_agent',
        tools=[shot],
        capabilities=[OverflowingToolOutput(store=CountingStore(base_dir=store_dir)), *durability],
    )


async def test_fitting_is_a_durable_step_and_a_recorded_run_returns_the_same(db_url: str, tmp_path: Path) -> None:
    run = await run_beside_plain(build, db_url, tmp_path, 'image')
    output = run.output
    assert output == run.plain  # the same copy as without an engine
    steps = [step['function_name'] for step in await DBOS.list_workflow_steps_async('wf-image')]
    assert steps.count(PREFIX + 'overflow_fit_image') == 1
    assert steps.count(PREFIX + 'overflow_spill_write') == 1
    assert writes(os.environ[COUNTER_ENV]) == 1
    assert await run.again() == output
    assert writes(os.environ[COUNTER_ENV]) == 1  # the recorded run wrote nothing again
