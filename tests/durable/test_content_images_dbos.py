"""Images of `ToolReturn.content` aging under DBOS: the stubs' writes are durable steps, so a recorded run sends the
same requests and writes nothing again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import Aging, ImageBand, OverflowingToolOutput

from ..media.test_image_aging import numbered_screenshot
from ._dbos_app import register_output, start
from ._step_budget_app import COUNTER_ENV, CountingStore, plain_output, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

SHOTS = 6


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = sum(isinstance(message, ModelResponse) for message in messages)
    if step < SHOTS:
        return ModelResponse(parts=[ToolCallPart('shot', {'number': step}, tool_call_id=f'call_{step}')])
    shown = [_described(part) for message in messages if isinstance(message, ModelRequest) for part in message.parts]
    return ModelResponse(parts=[TextPart(json.dumps([items for items in shown if items]))])


def _described(part: object) -> list[str]:
    """A prompt part holding a list (a `ToolReturn.content`), its images by size; `[]` for any other part."""
    if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
        return []
    return [
        f'image of {len(item.data)} bytes' if isinstance(item, BinaryContent) else str(item) for item in part.content
    ]


async def shot(number: int) -> ToolReturn[str]:
    return ToolReturn(f'screen {number}', content=[BinaryImage(numbered_screenshot(number), media_type='image/png')])


def build(store_dir: str | Path, *durability: DBOSDurability) -> Agent[None, str]:
    capability = OverflowingToolOutput(
        store=CountingStore(base_dir=store_dir),
        images=ImageBand(keep_newest=1),
        aging=Aging(after_turns=2, batch_tokens=1_000),
    )
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name='content_image_agent',
        tools=[shot],
        capabilities=[capability, *durability],
    )


async def test_content_images_age_the_same_under_dbos_and_on_replay(db_url: str, tmp_path: Path) -> None:
    expected = await plain_output(build, tmp_path / 'plain' / 'store', run_id='wf-content:1')
    start(db_url)
    run_agent = register_output(build(tmp_path / 'store', DBOSDurability()), 'content_image_run')
    DBOS.launch()
    with SetWorkflowID('wf-content'):
        output = await run_agent('go')
    shown = json.loads(output)
    stubs = [items for items in shown if items[0].startswith('[Image from `shot` moved out of context')]
    assert len(shown) == SHOTS and len(stubs) >= SHOTS - 2
    assert output == expected  # the same stubs and handles as without an engine
    written = writes(os.environ[COUNTER_ENV])
    assert written == len(stubs)  # each aged screenshot written once (sent as it was, so not stored on arrival)
    with SetWorkflowID('wf-content'):
        assert await run_agent('go') == output
    assert writes(os.environ[COUNTER_ENV]) == written  # the recorded run wrote nothing again
