from __future__ import annotations

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import HandoffHistory, HandoffInputData, SummaryRole, remove_all_tools

from ._helpers import Recorder, describe, summary_texts

pytestmark = pytest.mark.anyio


async def first_agent_messages() -> list[ModelMessage]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('Order 42 is paid; billing will take over.')])
        return ModelResponse(parts=[ToolCallPart('lookup', {'order': '42'}, 'call_l')])

    first = Agent(FunctionModel(model), name='triage')

    @first.tool_plain
    def lookup(order: str) -> str:
        return f'order {order}: paid'

    return (await first.run('I want a refund')).all_messages()


def two_step_model(recorder_seen: list[list[ModelMessage]]) -> FunctionModel:
    """Calls a tool once, then answers: two model requests in one run."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        recorder_seen.append(list(messages))
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('refund issued')])
        return ModelResponse(parts=[ToolCallPart('refund', {}, 'call_r')])

    return FunctionModel(respond)


async def test_nests_earlier_messages_once_per_run() -> None:
    previous = await first_agent_messages()
    seen: list[list[ModelMessage]] = []
    second = Agent(two_step_model(seen), name='billing', capabilities=[HandoffHistory(nest_handoff_history=True)])

    @second.tool_plain
    def refund() -> str:
        return 'ok'

    result = await second.run('Please refund', message_history=previous)
    assert describe(seen[0]) == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: I want a refund
2. {"arguments": "{\\"order\\":\\"42\\"}", "call_id": "call_l", "name": "lookup", "type": "function_call"}
3. {"call_id": "call_l", "output": "order 42: paid", "type": "function_call_output"}
4. assistant: Order 42 is paid; billing will take over.
</CONVERSATION HISTORY>\
""",
            '1 request: user-prompt: Please refund',
        ]
    )
    # the second request sees the same summary (not re-nested) plus this run's own messages
    assert describe(seen[1])[:2] == describe(seen[0])
    assert len(summary_texts(seen[1])) == 1
    assert describe(result.new_messages()) == snapshot(
        [
            '0 request: user-prompt: Please refund',
            '1 response: ToolCallPart: refund({}) [call_r]',
            '2 request: ToolReturnPart: refund -> ok [call_r]',
            '3 response: text: refund issued',
        ]
    )
    # and the summary is what the run persisted, so a third agent flattens it rather than nesting it
    third = Recorder()
    await Agent(third.model, capabilities=[HandoffHistory(nest_handoff_history=True)]).run(
        'Anything else?', message_history=result.all_messages()
    )
    [text] = summary_texts(third.last)
    assert text.count('<CONVERSATION HISTORY>') == 1
    assert '1. user: I want a refund' in text and 'assistant: refund issued' in text


async def test_filter_applies_to_earlier_messages_only() -> None:
    previous = await first_agent_messages()
    seen: list[list[ModelMessage]] = []
    second = Agent(two_step_model(seen), capabilities=[HandoffHistory(input_filter=remove_all_tools)])

    @second.tool_plain
    def refund() -> str:
        return 'ok'

    await second.run('Please refund', message_history=previous)
    assert describe(seen[1]) == snapshot(
        [
            '0 request: user-prompt: I want a refund',
            '1 response: text: Order 42 is paid; billing will take over.',
            '2 request: user-prompt: Please refund',
            '3 response: ToolCallPart: refund({}) [call_r]',
            '4 request: ToolReturnPart: refund -> ok [call_r]',
        ]
    )


async def test_filter_wins_over_nesting_and_async_filters_work() -> None:
    previous = await first_agent_messages()
    calls: list[int] = []

    async def count_and_strip(data: HandoffInputData) -> HandoffInputData:
        calls.append(len(data.to_message_history()))
        return remove_all_tools(data)

    recorder = Recorder()
    cap = HandoffHistory[None](input_filter=count_and_strip, nest_handoff_history=True)
    await Agent(recorder.model, deps_type=type(None), capabilities=[cap]).run('next', message_history=previous)
    assert calls == [len(previous)]
    assert summary_texts(recorder.last) == []


async def test_no_earlier_messages_or_nothing_to_do_is_a_no_op() -> None:
    recorder = Recorder()
    await Agent(recorder.model, capabilities=[HandoffHistory(nest_handoff_history=True)]).run('hello')
    assert describe(recorder.last) == ['0 request: user-prompt: hello']
    previous = await first_agent_messages()
    await Agent(recorder.model, capabilities=[HandoffHistory()]).run('next', message_history=previous)
    assert len(recorder.last) == len(previous) + 1


async def test_bad_filters_are_rejected() -> None:
    with pytest.raises(UserError, match='^Invalid input filter: 3$'):
        HandoffHistory(input_filter=3)  # pyright: ignore[reportArgumentType]
    previous = await first_agent_messages()
    recorder = Recorder()
    agent = Agent(recorder.model, capabilities=[HandoffHistory(input_filter=lambda data: 'nope')])  # pyright: ignore[reportArgumentType]
    with pytest.raises(UserError, match='^Invalid input filter result: nope$'):
        await agent.run('next', message_history=previous)

    def orphan(data: HandoffInputData) -> HandoffInputData:
        history = data.input_history
        assert isinstance(history, tuple)
        return data.clone(input_history=tuple(m for m in history if not isinstance(m, ModelRequest) or m is history[0]))

    agent = Agent(recorder.model, capabilities=[HandoffHistory(input_filter=orphan)])
    with pytest.raises(UserError, match='^Invalid handoff history: the tool calls lookup'):
        await agent.run('next', message_history=previous)
    assert len(recorder.seen) == 0


@pytest.mark.parametrize('role', ['assistant', 'user'])
async def test_a_run_resumed_with_deferred_tool_results_keeps_the_calls_it_answers(role: SummaryRole) -> None:
    """The response whose calls the resumed run answers stays verbatim after the summary: nothing is orphaned."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if any(isinstance(part, ToolReturnPart) and part.tool_name == 'refund' for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart('refunded')])
        return ModelResponse(parts=[ToolCallPart('refund', {}, f'r{len(seen)}')])

    agent = Agent(
        FunctionModel(respond),
        output_type=[str, DeferredToolRequests],
        capabilities=[HandoffHistory(nest_handoff_history=True, summary_role=role)],
    )

    @agent.tool_plain(requires_approval=True)
    def refund() -> str:
        return 'done'

    earlier = (
        await Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart('hello')]))).run('hi')
    ).all_messages()
    asked = await agent.run('refund please', message_history=earlier)
    assert isinstance(asked.output, DeferredToolRequests)
    [approval] = asked.output.approvals
    resumed = await agent.run(
        message_history=asked.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={approval.tool_call_id: True}),
    )
    assert resumed.output == 'refunded'
    assert [[type(part).__name__ for part in message.parts] for message in seen[-1]][1:] == [
        ['ToolCallPart'],
        ['ToolReturnPart'],
    ]
