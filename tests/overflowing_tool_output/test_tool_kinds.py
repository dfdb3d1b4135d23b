"""The query tools carry a tool kind, so every text that tells the model to call one names it as it is offered.

`PrefixTools` (or any capability that renames tools) offers `read_tool_result` as `x_read_tool_result`: previews,
stubs, answers and the compaction note say `x_read_tool_result`, and the capability still knows its own tools.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import PrefixTools
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._query_tools._names import GREP_TOOL_KIND, READ_TOOL_KIND

pytestmark = pytest.mark.anyio

LOG = '\n'.join(f'line {i}: ok' for i in range(5_000)).replace('line 4321: ok', 'line 4321: ERROR disk full')


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_the_query_tools_are_offered_with_their_kinds(tmp_path: Path) -> None:
    offered: dict[str, str | None] = {}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.update({tool.name: tool.tool_kind for tool in info.function_tools})
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond),
        capabilities=[PrefixTools(OverflowingToolOutput(store=LocalFileStore(tmp_path)), prefix='x')],
    )
    await agent.run('go')
    assert offered == {'x_read_tool_result': READ_TOOL_KIND.id, 'x_grep_tool_result': GREP_TOOL_KIND.id}


async def test_previews_and_answers_name_the_tools_as_offered(tmp_path: Path) -> None:
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart('dump', {})])
        seen.append(str(done[-1].content))
        if len(done) == 1:
            handle = done[0].metadata['overflow_handle']
            return ModelResponse(parts=[ToolCallPart('x_grep_tool_result', {'handle': handle, 'pattern': 'ERROR'})])
        if len(done) == 2:
            return ModelResponse(parts=[ToolCallPart('x_grep_tool_result', {'pattern': 'ok', 'max_matches': 2})])
        return ModelResponse(parts=[TextPart('done')])

    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None)
    agent = Agent(FunctionModel(respond), capabilities=[PrefixTools(capability, prefix='x')])
    agent.tool_plain(name='dump')(lambda: LOG)
    await agent.run('go')
    preview, grep, search = seen
    assert 'x_grep_tool_result(handle, pattern) finds lines; x_read_tool_result(handle, offset=N)' in preview
    assert 'line 4321: ERROR disk full' in grep
    # No bare name anywhere: a model told `read_tool_result` would call a tool it is not offered.
    for text in seen:
        assert not re.search(r'(?<!x_)(read|grep)_tool_result\(', text), text
    assert 'x_grep_tool_result' in search, search


def test_the_migration_page_names_the_kinds_the_tools_carry() -> None:
    page = (Path(__file__).resolve().parents[2] / 'docs' / 'migration.md').read_text()
    assert f'`{READ_TOOL_KIND.id}`' in page and f'`{GREP_TOOL_KIND.id}`' in page
    assert 'no tool kind' not in page
