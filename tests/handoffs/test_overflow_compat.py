"""A spilled tool return summarized into a nested history keeps its handle; the delegate reads it back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import delegate, remove_all_tools
from pydantic_ai_harness.overflowing_tool_output import Band, LocalFileStore, OverflowingToolOutput, Spill

from ._helpers import summary_texts

pytestmark = pytest.mark.anyio


def big_report() -> str:
    """A long report."""
    return '\n'.join(f'line {i}: data {i * 7}' for i in range(500))


async def test_spilled_handle_survives_nesting_and_is_readable_by_the_delegate(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'spill')
    read_back: list[str] = []

    def specialist_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart) and p.tool_name == 'read_tool_result']
        if returns:
            read_back.append(returns[0].model_response_str())
            return ModelResponse(parts=[TextPart('line 200 checked')])
        [summary] = summary_texts(messages)
        match = re.search(r"handle '([^']+)'", summary)
        assert match is not None, summary
        return ModelResponse(
            parts=[ToolCallPart('read_tool_result', {'handle': match.group(1), 'offset': 201, 'limit': 1}, 'c_read')]
        )

    overflow = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=store)
    specialist = Agent(FunctionModel(specialist_model), name='analyst', capabilities=[overflow])

    def triage_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if 'big_report' in returned:
            return ModelResponse(parts=[ToolCallPart('transfer_to_analyst', {}, 'c_h')])
        if returned:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('big_report', {}, 'c_big')])

    triage = Agent(FunctionModel(triage_model), name='triage', capabilities=[overflow], deps_type=type(None))
    triage.tool_plain(big_report)

    @triage.tool
    async def transfer_to_analyst(ctx: RunContext[None]) -> str:
        """Hand the report to the analyst."""
        return (await delegate(specialist, ctx, 'Check line 200 of the report', nest_handoff_history=True)).output

    result = await triage.run('Analyse the report')
    assert result.output == 'done'
    [page] = read_back
    assert '\n201| line 200: data 1400\n' in page


async def test_remove_all_tools_drops_the_spill_marker_with_its_tool_return(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []

    def specialist_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart('ok')])

    def triage_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if 'big_report' in returned:
            return ModelResponse(parts=[ToolCallPart('transfer', {}, 'c_h')])
        if returned:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('big_report', {}, 'c_big')])

    overflow = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 's'))
    specialist = Agent(FunctionModel(specialist_model))
    triage = Agent(FunctionModel(triage_model), capabilities=[overflow], deps_type=type(None))
    triage.tool_plain(big_report)

    @triage.tool
    async def transfer(ctx: RunContext[None]) -> str:
        """Hand off."""
        return (await delegate(specialist, ctx, 'go', input_filter=remove_all_tools)).output

    await triage.run('Analyse the report')
    assert 'handle' not in repr(seen[-1])
