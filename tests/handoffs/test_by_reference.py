"""A sub-agent's result by reference: a bounded answer and a handle to its whole run, read with the query tools."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._economy_delegation import FORMS, measure_delegation, report
from pydantic_ai_harness.handoffs import agent_tool, delegate, result_by_reference
from pydantic_ai_harness.overflowing_tool_output import MemoryStore, OverflowingToolOutput

pytestmark = pytest.mark.anyio

_HANDLE = re.compile(r"is saved under handle '([^']+)'")
_CUT = '\n[The answer above is cut to {} characters.'


def _report(topic: int) -> str:
    """About 50 KB: 1,000 lines, one fact buried in the middle."""
    lines = [f'{topic}-{n}: routine line of the specialist report, nothing to see here' for n in range(1_000)]
    lines[637] = f'FACT-{topic}: the contract of region {topic} renews on 2027-0{topic % 9 + 1}-15'
    return '\n'.join(lines)


def _specialist(topic: int) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[ToolCallPart('load_records', {'region': topic}, f'load{topic}')])
        return ModelResponse(parts=[TextPart(_report(topic))])

    specialist = Agent(FunctionModel(respond), name=f'region_{topic}', description=f'Knows region {topic}.')

    @specialist.tool_plain
    def load_records(region: int) -> str:
        """Load the region's records."""
        return f'records of region {region}: 12 contracts'

    return specialist


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_eight_parallel_agents_cost_the_parent_a_few_hundred_tokens_each_and_every_fact_stays_reachable() -> None:
    store = MemoryStore()
    found: dict[int, str] = {}

    def manager_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = _returns(messages)
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart(f'region_{n}', {'input': f'Summarize region {n}.'}, f'ask{n}') for n in range(8)]
            )
        if len(returns) == 8:
            handles = {r.tool_call_id: _HANDLE.findall(r.model_response_str())[0] for r in returns}
            return ModelResponse(
                parts=[
                    ToolCallPart('grep_tool_result', {'handle': handles[f'ask{n}'], 'pattern': f'FACT-{n}'}, f'g{n}')
                    for n in range(8)
                ]
            )
        for r in returns[8:]:
            found[int(r.tool_call_id[1:])] = r.model_response_str()
        return ModelResponse(parts=[TextPart('All eight summarized.')])

    manager = Agent(
        FunctionModel(manager_model),
        tools=[agent_tool(_specialist(n), by_reference=True) for n in range(8)],
        capabilities=[OverflowingToolOutput(store=store)],
    )
    result = await manager.run('Summarize every region')
    answers = _returns(result.all_messages())[:8]
    sizes = [len(a.model_response_str()) for a in answers]
    assert all(1_000 < size < 1_500 for size in sizes), sizes  # 50 KB each reach the parent as ~320 tokens
    assert store.writes == 8
    assert sorted(found) == list(range(8))
    for n, answer in found.items():
        assert f'FACT-{n}: the contract of region {n} renews' in answer


async def test_the_note_names_the_handle_the_tools_and_where_the_answer_starts() -> None:
    store = MemoryStore()

    def manager_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not _returns(messages):
            return ModelResponse(parts=[ToolCallPart('region_3', {'input': 'Summarize region 3.'}, 'ask')])
        return ModelResponse(parts=[TextPart('done')])

    manager = Agent(
        FunctionModel(manager_model),
        tools=[agent_tool(_specialist(3), by_reference=True)],
        capabilities=[OverflowingToolOutput(store=store)],
    )
    result = await manager.run('Region 3?')
    [answer] = _returns(result.all_messages())
    text = answer.model_response_str()
    assert text.startswith(_report(3)[:1_000])
    note = text[1_000:]
    handle = _HANDLE.findall(note)[0]
    assert note.replace(handle, '<handle>') == snapshot(
        """\

[The answer above is cut to 1000 characters. The whole run of agent 'region_3' (its tool calls, their outputs, and its answer from line 9) is saved under handle '<handle>': read_tool_result(handle) pages it, grep_tool_result(handle, pattern) searches it. To give it to another agent, pass handles=['<handle>'] instead of restating it.]\
"""
    )
    assert len(note.replace(handle, '')) == snapshot(320)  # the note's cost, handle aside: about 80 tokens
    stored = store.payloads[handle].decode()
    assert stored.splitlines()[:9] == snapshot(
        [
            "Transcript of the run of agent 'region_3': each section verbatim, the answer last.",
            '=== 1. input ===',
            'Summarize region 3.',
            '=== 2. tool call load_records (load3) ===',
            '{"region":3}',
            '=== 3. tool output load_records (load3) ===',
            'records of region 3: 12 contracts',
            '=== 4. answer ===',
            '3-0: routine line of the specialist report, nothing to see here',
        ]
    )
    assert stored.endswith(_report(3))


async def test_a_handle_is_passed_to_the_next_agent_which_reads_it_itself() -> None:
    store = MemoryStore()
    reader_saw: list[str] = []

    def reader_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = _returns(messages)
        prompt = ' '.join(str(p.content) for p in messages[0].parts if isinstance(p, UserPromptPart))
        if not returns:
            reader_saw.append(prompt)
            handle = re.findall(r"handle '([^']+)'", prompt)[0]
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'FACT-5'}, 'r')])
        reader_saw.append(returns[-1].model_response_str())
        return ModelResponse(parts=[TextPart('The renewal is on 2027-06-15.')])

    reader = Agent(FunctionModel(reader_model), name='reader')

    def manager_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = _returns(messages)
        if not returns:
            return ModelResponse(parts=[ToolCallPart('region_5', {'input': 'Report on region 5.'}, 'ask')])
        if len(returns) == 1:
            handle = _HANDLE.findall(returns[0].model_response_str())[0]
            args = {'input': 'When does the region 5 contract renew?', 'handles': [handle]}
            return ModelResponse(parts=[ToolCallPart('reader', args, 'next')])
        return ModelResponse(parts=[TextPart(returns[-1].model_response_str().split('\n')[0])])

    manager = Agent(
        FunctionModel(manager_model),
        tools=[agent_tool(_specialist(5), by_reference=True), agent_tool(reader, by_reference=True)],
        capabilities=[OverflowingToolOutput(store=store)],
    )
    result = await manager.run('When does region 5 renew?')
    assert result.output == 'The renewal is on 2027-06-15.'
    prompt, grep_answer = reader_saw
    assert prompt.startswith('When does the region 5 contract renew?\n\n[Earlier results to use, saved under handle')
    assert 'FACT-5: the contract of region 5 renews on 2027-06-15' in grep_answer  # the reader read it itself


async def test_delegate_users_get_the_same_with_result_by_reference() -> None:
    store = MemoryStore()
    specialist = _specialist(2)

    async def ask(ctx: RunContext[None], question: str) -> str:
        """Ask the specialist."""
        delegation = await delegate(specialist, ctx, question, conversation=False)
        return await result_by_reference(ctx, delegation, answer_chars=600)

    def manager_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not _returns(messages):
            return ModelResponse(parts=[ToolCallPart('ask', {'question': 'Region 2?'}, 'a')])
        return ModelResponse(parts=[TextPart('ok')])

    manager = Agent(
        FunctionModel(manager_model),
        deps_type=type(None),
        tools=[ask],
        capabilities=[OverflowingToolOutput(store=store)],
    )
    [answer] = _returns((await manager.run('Go')).all_messages())
    assert answer.model_response_str().startswith(_report(2)[:600] + _CUT.format(600))


async def test_without_a_store_it_refuses_and_a_failing_store_cuts_the_answer(caplog: pytest.LogCaptureFixture) -> None:
    def manager_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not _returns(messages):
            return ModelResponse(parts=[ToolCallPart('region_1', {'input': 'Region 1?'}, 'ask')])
        return ModelResponse(parts=[TextPart('ok')])

    tool: Any = agent_tool(_specialist(1), by_reference=True)
    with pytest.raises(
        UserError, match="^A result by reference is stored with the calling agent's OverflowingToolOutput"
    ):
        await Agent(FunctionModel(manager_model), tools=[tool]).run('Go')

    failing = OverflowingToolOutput(store=MemoryStore(fail=OSError('disk full at /var/secret')))
    with caplog.at_level(logging.WARNING, logger='pydantic_ai_harness.handoffs'):
        result = await Agent(FunctionModel(manager_model), tools=[tool], capabilities=[failing]).run('Go')
    [answer] = _returns(result.all_messages())
    text = answer.model_response_str()
    assert len(text) <= 1_000
    assert text.endswith('the rest was not kept (the store did not save it).]')
    assert '/var/secret' not in text  # the store's error goes to the log only
    assert 'disk full at /var/secret' in caplog.text


def test_by_reference_settings_are_checked_at_construction() -> None:
    specialist = _specialist(1)
    with pytest.raises(UserError, match='^answer_chars must be an int of at least 500, got 10$'):
        agent_tool(specialist, by_reference=True, answer_chars=10)
    with pytest.raises(UserError, match='by_reference and custom_output_extractor both make the tool'):
        agent_tool(specialist, by_reference=True, custom_output_extractor=lambda d: d.output)
    with pytest.raises(UserError, match="^by_reference must be True or False, got 'yes'$"):
        agent_tool(specialist, by_reference='yes')  # pyright: ignore[reportArgumentType]


async def test_the_delegation_scenario_of_the_economy_benchmark(tmp_path: Path) -> None:
    """The claims docs/handoffs.md makes from `bench/_economy_delegation.py` (there counted with cl100k_base; here
    with ~4 characters a token, which gives the same ordering)."""
    traces = await measure_delegation(tmp_path, lambda text: -(-len(text) // 4))
    text, spilled, by_reference = (traces[form] for form in FORMS)
    assert len(report('sales')) > 45_000
    assert [trace.found for trace in traces.values()] == [6, 6, 6]  # every fact reachable in every form
    assert by_reference.input_tokens < 0.15 * text.input_tokens  # 88.6% saved with cl100k_base
    assert by_reference.peak_request_tokens < 0.1 * text.peak_request_tokens
    assert spilled.input_tokens < by_reference.input_tokens  # a spill's preview is shorter than 1,000 characters
    assert (by_reference.retrievals, spilled.retrievals, text.retrievals) == (6, 6, 0)
