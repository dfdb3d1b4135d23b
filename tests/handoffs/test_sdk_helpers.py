"""`handoff()` and `agent_tool()`: the OpenAI Agents SDK's `handoff()` and `Agent.as_tool()`, one call each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from pydantic_ai_harness.handoffs import Delegation, Handoffs, agent_tool, answered_by, handoff, remove_all_tools

from ._helpers import Recorder, describe, summary_texts

pytestmark = pytest.mark.anyio


@dataclass
class Escalation:
    """Why the conversation is escalated."""

    reason: str


class Caller:
    """A FunctionModel that looks an order up, then calls `then` with `args`, recording the tools it was offered."""

    def __init__(self, then: str, args: dict[str, Any] | None = None) -> None:
        self.then, self.args = then, args or {}
        self.offered: list[ToolDefinition] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered = [*info.function_tools, *info.output_tools]
        returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart('lookup', {}, 'c1')])
        if returned == ['lookup']:
            return ModelResponse(parts=[ToolCallPart(self.then, self.args, 'c2')])
        return ModelResponse(parts=[TextPart(f'done after {returned[0]}')])

    def offered_tool(self, name: str) -> dict[str, Any]:
        [tool] = [t for t in self.offered if t.name == name]
        return {'kind': tool.kind, 'description': tool.description, 'schema': tool.parameters_json_schema}


def lookup() -> str:
    """Look the order up."""
    return 'order 42: paid'


async def test_handoff_is_an_output_tool_named_and_described_as_in_the_sdk() -> None:
    billing = Recorder('Refund issued.')
    target = Agent(billing.model, name='Billing Team', description='Handles refunds.')
    caller = Caller('transfer_to_billing_team')
    router = Agent(caller.model, output_type=[handoff(target)], tools=[lookup], capabilities=[Handoffs()])
    result = await router.run('I want a refund')
    assert result.output == 'Refund issued.'
    assert answered_by(result.all_messages()) == 'Billing Team'
    assert caller.offered_tool('transfer_to_billing_team') == snapshot(
        {
            'kind': 'output',
            'description': 'Handoff to the Billing Team agent to handle the request. Handles refunds.',
            'schema': {'additionalProperties': False, 'properties': {}, 'type': 'object'},
        }
    )
    # The delegate answers the conversation as it stands (no filter given): the user's prompt once, no new turn.
    assert describe(billing.last)[-4:] == snapshot(
        [
            '1 response: ToolCallPart: lookup({}) [c1]',
            '2 request: ToolReturnPart: lookup -> order 42: paid [c1]',
            '3 response: ToolCallPart: transfer_to_billing_team({}) [c2]',
            '4 request: ToolReturnPart: transfer_to_billing_team -> {"assistant": "Billing Team"} [c2]',
        ]
    )


async def test_handoff_with_input_type_on_handoff_and_a_filter() -> None:
    seen: list[tuple[str | None, Escalation]] = []

    async def on_handoff(ctx: RunContext[None], escalation: Escalation) -> None:
        seen.append((ctx.tool_name, escalation))

    billing = Recorder('Escalated.')
    target = Agent(billing.model, name='manager')
    chosen = handoff(
        target,
        tool_name_override='escalate',
        tool_description_override='Escalate to a manager.',
        on_handoff=on_handoff,
        input_type=Escalation,
        input_filter=remove_all_tools,
        prompt='Please take over.',
    )
    caller = Caller('escalate', {'reason': 'angry customer'})
    router = Agent(caller.model, output_type=[str, chosen], tools=[lookup], capabilities=[Handoffs()])
    assert (await router.run('I want a manager')).output == 'Escalated.'
    assert seen == [('escalate', Escalation('angry customer'))]
    assert caller.offered_tool('escalate') == snapshot(
        {
            'kind': 'output',
            'description': 'Escalate to a manager.. Why the conversation is escalated.',
            'schema': {
                'title': 'Escalation',
                'properties': {'reason': {'type': 'string'}},
                'required': ['reason'],
                'type': 'object',
            },
        }
    )
    assert describe(billing.last) == snapshot(
        ['0 request: user-prompt: I want a manager', '0 request: user-prompt: Please take over.']
    )


async def test_handoff_nests_with_nest_handoff_history_and_a_sync_on_handoff() -> None:
    calls: list[str | None] = []
    billing = Recorder()
    target = Agent(billing.model, name='billing')
    chosen = handoff(target, on_handoff=lambda ctx: calls.append(ctx.tool_call_id), nest_handoff_history=True)
    router = Agent(Caller('transfer_to_billing').model, output_type=chosen, tools=[lookup], capabilities=[Handoffs()])
    await router.run('Refund please')
    assert calls == ['c2']
    assert len(summary_texts(billing.last)) == 1  # one summary, the handoff turn included


def test_handoff_settings_are_checked_at_construction() -> None:
    nameless = Agent(Recorder().model)
    with pytest.raises(UserError, match=r'^The agent has no name: give it one .* or pass tool_name_override\.$'):
        handoff(nameless)
    assert handoff(nameless, tool_name_override='to_support').name == 'to_support'
    named = Agent(Recorder().model, name='billing')
    with pytest.raises(UserError, match='^on_handoff must take one argument: context$'):
        handoff(named, on_handoff=lambda ctx, extra: None)
    with pytest.raises(UserError, match='^on_handoff must take two arguments: context and input$'):
        handoff(named, on_handoff=lambda ctx: None, input_type=Escalation)
    with pytest.raises(UserError, match='^Invalid input filter: remove_all_tools$'):
        handoff(named, input_filter='remove_all_tools')  # pyright: ignore[reportArgumentType]
    with pytest.raises(UserError, match="^nest_handoff_history must be True or False, got 'yes'$"):
        agent_tool(named, nest_handoff_history='yes')  # pyright: ignore[reportArgumentType]
    with pytest.raises(UserError, match=r'^The agent has no name: .* or pass tool_name\.$'):
        agent_tool(nameless)


async def test_agent_tool_is_the_sdks_as_tool() -> None:
    researcher = Recorder('Order 42 shipped on Monday.')
    target = Agent(researcher.model, name='Researcher', description='Finds facts about orders.')
    caller = Caller('researcher', {'input': 'When did order 42 ship?'})
    router = Agent(caller.model, tools=[lookup, agent_tool(target)])
    result = await router.run('Where is my order?')
    assert result.output == 'done after researcher'
    assert caller.offered_tool('researcher') == snapshot(
        {
            'kind': 'function',
            'description': 'Finds facts about orders.',
            'schema': {
                'additionalProperties': False,
                'properties': {'input': {'description': 'What to ask the agent.', 'type': 'string'}},
                'required': ['input'],
                'type': 'object',
            },
        }
    )
    # Only the generated input, as the SDK's agent tool: not the caller's conversation or its tool outputs.
    assert describe(researcher.last) == snapshot(['0 request: user-prompt: When did order 42 ship?'])
    [answer] = [
        p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_call_id == 'c2'
    ]
    assert answer.content == 'Order 42 shipped on Monday.'


async def test_agent_tool_with_a_name_a_description_and_an_output_extractor() -> None:
    def extract(delegation: Delegation[str]) -> str:
        return f'{delegation.agent_name} said: {delegation.output}'

    target = Agent(Recorder('42 is paid').model, name='researcher')
    tool = agent_tool(target, tool_name='ask', tool_description='Ask the researcher.', custom_output_extractor=extract)
    caller = Caller('ask', {'input': 'Is 42 paid?'})
    result = await Agent(caller.model, tools=[lookup, tool]).run('Status?')
    assert caller.offered_tool('ask')['description'] == 'Ask the researcher.'
    [answer] = [
        p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_name == 'ask'
    ]
    assert answer.content == 'researcher said: 42 is paid'


async def test_agent_tool_sees_the_conversation_only_when_asked() -> None:
    researcher = Recorder('Order 42 shipped on Monday.')
    target = Agent(researcher.model, name='Researcher')
    caller = Caller('researcher', {'input': 'When did order 42 ship?'})
    tool = agent_tool(target, conversation=True, input_filter=remove_all_tools)
    await Agent(caller.model, tools=[lookup, tool]).run('Where is my order?')
    assert describe(researcher.last) == snapshot(
        ['0 request: user-prompt: Where is my order?', '0 request: user-prompt: When did order 42 ship?']
    )


def test_agent_tool_refuses_a_filter_without_the_conversation() -> None:
    target = Agent(Recorder().model, name='researcher')
    with pytest.raises(UserError, match=r"^agent_tool\('researcher'\): input_filter and nest_handoff_history apply"):
        agent_tool(target, input_filter=remove_all_tools)
    with pytest.raises(UserError, match=r'pass conversation=True as well, or drop them\.$'):
        agent_tool(target, nest_handoff_history=True)
    with pytest.raises(UserError, match="^conversation must be True or False, got 'yes'$"):
        agent_tool(target, conversation='yes')  # pyright: ignore[reportArgumentType]
