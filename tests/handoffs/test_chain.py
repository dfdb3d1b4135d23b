"""A chain of handoffs: who answered, what the delegating run's history records, and its bounds."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext, ToolOutput
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import Delegation, Handoffs, agent_tool, answered_by, delegate, handoff, last_agent
from pydantic_ai_harness.overflowing_tool_output import MemoryStore, OverflowingToolOutput

from ._helpers import describe

pytestmark = pytest.mark.anyio


def _transfer(to: str, call_id: str) -> FunctionModel:
    return FunctionModel(lambda messages, info: ModelResponse(parts=[ToolCallPart(f'transfer_to_{to}', {}, call_id)]))


def _chain(**handoffs_settings: Any) -> tuple[Agent[None, Any], Agent[None, Any], Agent[None, Any]]:
    refunds = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('Refunded.')])), name='refunds')
    billing = Agent(_transfer('refunds', 'h2'), name='billing', output_type=[str, handoff(refunds)])
    triage = Agent(
        _transfer('billing', 'h1'),
        name='triage',
        output_type=[str, handoff(billing)],
        capabilities=[Handoffs(**handoffs_settings)],
    )
    return triage, billing, refunds


async def test_the_history_records_every_hop_and_the_last_agent() -> None:
    triage, _, refunds = _chain()
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # no unrecorded-answer warning in billing's run: the run-wide Handoffs records
        result = await triage.run('Refund me')
    history = result.all_messages()
    assert describe(history) == snapshot(
        [
            '0 request: user-prompt: Refund me',
            '1 response: ToolCallPart: transfer_to_billing({}) [h1]',
            '2 request: ToolReturnPart: transfer_to_billing -> {"assistant": "billing"} [h1]',
            '3 response: ToolCallPart: transfer_to_refunds({}) [h2]',
            '4 request: ToolReturnPart: transfer_to_refunds -> {"assistant": "refunds"} [h2]',
            '5 response: text: Refunded.',
        ]
    )
    assert answered_by(history) == 'refunds'
    assert last_agent(history, triage) is refunds


async def test_a_delegation_knows_the_chain_it_starts() -> None:
    made: list[Delegation[Any]] = []
    refunds = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('Refunded.')])), name='refunds')
    billing = Agent(_transfer('refunds', 'h2'), name='billing', output_type=[str, handoff(refunds)])

    async def to_billing(ctx: RunContext[None]) -> str:
        delegation = await delegate(billing, ctx, None)
        made.append(delegation)
        return delegation.output

    triage = Agent(
        _transfer('billing', 'h1'),
        output_type=[str, ToolOutput(to_billing, name='transfer_to_billing')],
        capabilities=[Handoffs()],
    )
    await triage.run('Refund me')
    [delegation] = made
    assert delegation.mode == 'handoff' and delegation.agent is billing
    assert delegation.handed_to is not None and delegation.handed_to.agent is refunds
    assert delegation.last_agent is refunds and delegation.last is delegation.handed_to
    assert delegation.output == 'Refunded.'


async def test_last_agent_without_a_handoff_and_across_processes() -> None:
    triage, billing, refunds = _chain()
    history = (await triage.run('Refund me')).all_messages()
    plain = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('hi')])), name='plain')
    assert last_agent((await plain.run('hello')).all_messages(), plain) is plain
    # Read back where the agent object is not known: only its name is.
    stored = [
        ModelResponse(parts=m.parts, metadata={'pydantic_ai_harness_answered_by': 'refunds'})
        if isinstance(m, ModelResponse)
        else m
        for m in history
    ]
    assert last_agent(stored, triage, agents=[billing, refunds]) is refunds
    with pytest.raises(UserError, match=r"^The last answer was given by the agent 'refunds', which is not an agent"):
        last_agent(stored, triage)


async def test_an_agent_that_is_gone_is_not_kept_alive() -> None:
    triage, billing, refunds = _chain()
    history = (await triage.run('Refund me')).all_messages()
    del refunds, billing, triage
    gc.collect()
    other = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('x')])), name='other')
    with pytest.raises(UserError, match='pass it in agents='):
        last_agent(history, other)


async def test_a_delegate_s_long_tool_outputs_are_cut_in_the_recorded_chain() -> None:
    def billing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) and p.tool_name == 'dump' for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart('Checked the log.')])
        return ModelResponse(parts=[ToolCallPart('dump', {}, 'd1')])

    billing = Agent(FunctionModel(billing_model), name='billing')

    @billing.tool_plain
    def dump() -> str:
        """Dump the log."""
        return 'log line\n' * 10_000  # 90,000 characters

    triage = Agent(
        _transfer('billing', 'h1'),
        output_type=[str, handoff(billing)],
        capabilities=[Handoffs(max_record_chars=1_000)],
    )
    history = (await triage.run('Check')).all_messages()
    [dumped] = [
        p
        for m in history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if p.part_kind == 'tool-return' and p.tool_name == 'dump'
    ]
    text = dumped.model_response_str()
    assert len(text) <= 1_000 and text.endswith('the rest was not kept (no store to save it in).]')
    assert history[-1].parts == [TextPart('Checked the log.')]


async def test_too_many_handles_are_refused_to_the_model() -> None:
    seen: list[str] = []

    def manager_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if len(messages) == 1:
            args = {'input': 'Read these.', 'handles': [f'h{n}' for n in range(21)]}
            return ModelResponse(parts=[ToolCallPart('reader', args, 'c1')])
        seen.extend(line for line in describe([last]) if 'Pass at most' in line)
        return ModelResponse(parts=[TextPart('ok')])

    reader = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('read')])), name='reader')
    manager = Agent(
        FunctionModel(manager_model),
        tools=[agent_tool(reader, by_reference=True)],
        capabilities=[OverflowingToolOutput(store=MemoryStore())],
    )
    await manager.run('Go')
    assert len(seen) == 1 and 'Pass at most 20 handles' in seen[0]
