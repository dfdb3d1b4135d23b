from __future__ import annotations

import logging
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext, UsageLimitExceeded
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelSettingsDeltaPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage, UsageLimits

from pydantic_ai_harness.handoffs import (
    HandoffConfig,
    HandoffInputData,
    HandoffInputFilter,
    Handoffs,
    delegate,
    handoff_input_from_context,
    nest_handoff_history,
    remove_all_tools,
)

from ._helpers import Recorder, describe, user

pytestmark = pytest.mark.anyio


def triage_model(transfer_tool: str) -> FunctionModel:
    """Look an order up, then hand off (with a preamble), then finish once the handoff returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p.tool_name for p in last.parts if isinstance(p, ToolReturnPart)]
        if 'lookup' in returned:
            return ModelResponse(
                parts=[
                    TextPart('Transferring you to billing.'),
                    ToolCallPart(transfer_tool, {'reason': 'refund'}, 'call_h'),
                ]
            )
        if returned:
            return ModelResponse(parts=[TextPart('triage done')])
        return ModelResponse(parts=[ToolCallPart('lookup', {'order': '42'}, 'call_l')])

    return FunctionModel(respond)


def lookup(order: str) -> str:
    """Look an order up."""
    return f'order {order}: paid'


def make_triage(
    specialist: Agent[None, str],
    *,
    output_function: bool = False,
    **delegate_kwargs: Any,
) -> Agent[None, str]:
    async def transfer_to_billing(ctx: RunContext[None], reason: str) -> str:
        """Hand the conversation to billing."""
        result = await delegate(specialist, ctx, f'Customer needs: {reason}', **delegate_kwargs)
        return result.output

    agent: Agent[None, str]
    if output_function:
        agent = Agent(
            triage_model('final_result'), name='triage', output_type=[transfer_to_billing], capabilities=[Handoffs()]
        )
    else:
        agent = Agent(triage_model('transfer_to_billing'), name='triage', tools=[transfer_to_billing])
    agent.tool_plain(lookup)
    return agent


async def run_handoff(output_function: bool = False, **delegate_kwargs: Any) -> tuple[str, list[str]]:
    recorder = Recorder('refund issued')
    specialist = Agent(recorder.model, name='billing')
    triage = make_triage(specialist, output_function=output_function, **delegate_kwargs)
    result = await triage.run('I want a refund for order 42')
    return result.output, describe(recorder.last)


async def test_pass_through_tool_delegation_is_valid() -> None:
    output, seen = await run_handoff()
    assert output == 'triage done'
    assert seen == snapshot(
        [
            '0 request: user-prompt: I want a refund for order 42',
            '1 response: ToolCallPart: lookup({"order":"42"}) [call_l]',
            '2 request: ToolReturnPart: lookup -> order 42: paid [call_l]',
            '3 response: text: Transferring you to billing.',
            '3 response: ToolCallPart: transfer_to_billing({"reason":"refund"}) [call_h]',
            '4 request: ToolReturnPart: transfer_to_billing -> {"assistant": "billing"} [call_h]',
            '4 request: user-prompt: Customer needs: refund',
        ]
    )


async def test_tool_delegation_with_remove_all_tools() -> None:
    _, seen = await run_handoff(input_filter=remove_all_tools)
    assert seen == snapshot(
        [
            '0 request: user-prompt: I want a refund for order 42',
            '1 response: text: Transferring you to billing.',
            '2 request: user-prompt: Customer needs: refund',
        ]
    )


async def test_tool_delegation_with_nesting() -> None:
    _, seen = await run_handoff(nest_handoff_history=True)
    assert seen == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: I want a refund for order 42
2. {"arguments": "{\\"order\\":\\"42\\"}", "call_id": "call_l", "name": "lookup", "type": "function_call"}
3. {"call_id": "call_l", "output": "order 42: paid", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
            '1 response: text: Transferring you to billing.',
            """\
2 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. {"arguments": "{\\"reason\\":\\"refund\\"}", "call_id": "call_h", "name": "transfer_to_billing", "type": "function_call"}
2. {"call_id": "call_h", "output": "{\\"assistant\\": \\"billing\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
            '3 request: user-prompt: Customer needs: refund',
        ]
    )


async def test_output_function_handoff_with_and_without_remove_all_tools() -> None:
    output, seen = await run_handoff(output_function=True)
    assert output == 'refund issued'
    assert seen == snapshot(
        [
            '0 request: user-prompt: I want a refund for order 42',
            '1 response: ToolCallPart: lookup({"order":"42"}) [call_l]',
            '2 request: ToolReturnPart: lookup -> order 42: paid [call_l]',
            '3 response: text: Transferring you to billing.',
            '3 response: ToolCallPart: final_result({"reason":"refund"}) [call_h]',
            '4 request: ToolReturnPart: final_result -> {"assistant": "billing"} [call_h]',
            '4 request: user-prompt: Customer needs: refund',
        ]
    )
    output, seen = await run_handoff(output_function=True, input_filter=remove_all_tools)
    assert output == 'refund issued'
    assert seen == snapshot(
        [
            '0 request: user-prompt: I want a refund for order 42',
            '1 response: text: Transferring you to billing.',
            '2 request: user-prompt: Customer needs: refund',
        ]
    )


async def test_output_function_handoff_with_nesting() -> None:
    _, seen = await run_handoff(output_function=True, nest_handoff_history=True)
    assert 'final_result' in seen[2]
    assert seen[-1] == '3 request: user-prompt: Customer needs: refund'


async def test_custom_mapper() -> None:
    def keep_user_turns(transcript: list[ModelMessage]) -> list[ModelMessage]:
        return [
            message
            for message in transcript
            if isinstance(message, ModelRequest) and message.parts[0].part_kind == 'user-prompt'
        ]

    _, seen = await run_handoff(nest_handoff_history=True, history_mapper=keep_user_turns)
    assert seen == snapshot(
        ['0 request: user-prompt: I want a refund for order 42', '0 request: user-prompt: Customer needs: refund']
    )


async def test_filter_chain_sync_and_async() -> None:
    def chain(data: HandoffInputData) -> HandoffInputData:
        return remove_all_tools(nest_handoff_history(data))

    async def async_chain(data: HandoffInputData) -> HandoffInputData:
        return chain(data)

    _, seen_sync = await run_handoff(input_filter=chain)
    _, seen_async = await run_handoff(input_filter=async_chain)
    assert seen_sync == seen_async
    assert len(seen_sync) == 4
    assert seen_sync[1] == '1 response: text: Transferring you to billing.'


async def test_three_hops_with_nesting() -> None:
    final = Recorder('refund done')
    refunds = Agent(final.model, name='refunds')

    def billing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1], ModelRequest) and any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('billing done')])
        return ModelResponse(
            parts=[TextPart('Sending you to refunds.'), ToolCallPart('transfer_to_refunds', {}, 'call_r')]
        )

    billing = Agent(FunctionModel(billing_model), name='billing', deps_type=type(None))

    @billing.tool
    async def transfer_to_refunds(ctx: RunContext[None]) -> str:
        """Hand the conversation to refunds."""
        return (await delegate(refunds, ctx, 'Process the refund', nest_handoff_history=True)).output

    triage = make_triage(billing, nest_handoff_history=True)
    result = await triage.run('I want a refund for order 42')
    assert result.output == 'triage done'
    seen = describe(final.last)
    assert (
        sum(line.count('<CONVERSATION HISTORY>') for line in seen) == 2
    )  # one per summary message: no summary inside a summary
    assert seen == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: I want a refund for order 42
2. {"arguments": "{\\"order\\":\\"42\\"}", "call_id": "call_l", "name": "lookup", "type": "function_call"}
3. {"call_id": "call_l", "output": "order 42: paid", "type": "function_call_output"}
4. assistant: Transferring you to billing.
5. {"arguments": "{\\"reason\\":\\"refund\\"}", "call_id": "call_h", "name": "transfer_to_billing", "type": "function_call"}
6. {"call_id": "call_h", "output": "{\\"assistant\\": \\"billing\\"}", "type": "function_call_output"}
7. user: Customer needs: refund
</CONVERSATION HISTORY>\
""",
            '1 response: text: Sending you to refunds.',
            """\
2 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. {"arguments": "{}", "call_id": "call_r", "name": "transfer_to_refunds", "type": "function_call"}
2. {"call_id": "call_r", "output": "{\\"assistant\\": \\"refunds\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
            '3 request: user-prompt: Process the refund',
        ]
    )


class FalsyFilter:
    def __bool__(self) -> bool:
        return False

    def __call__(self, data: HandoffInputData) -> HandoffInputData:
        return remove_all_tools(data)


async def test_falsy_per_call_filter_takes_precedence() -> None:
    config = HandoffConfig(input_filter=lambda data: data)
    _, seen = await run_handoff(input_filter=FalsyFilter(), config=config)
    assert len(seen) == 3  # remove_all_tools ran, not the pass-through config filter


async def test_filter_beats_nesting() -> None:
    _, seen = await run_handoff(input_filter=lambda data: data, nest_handoff_history=True)
    _, pass_through = await run_handoff()
    assert seen == pass_through
    _, seen = await run_handoff(config=HandoffConfig(input_filter=remove_all_tools, nest_handoff_history=True))
    assert not any('CONVERSATION HISTORY' in line for line in seen)


async def test_per_call_nesting_overrides_the_config() -> None:
    _, enabled = await run_handoff(nest_handoff_history=True, config=HandoffConfig())
    assert 'CONVERSATION HISTORY' in enabled[0]
    _, disabled = await run_handoff(nest_handoff_history=False, config=HandoffConfig(nest_handoff_history=True))
    assert not any('CONVERSATION HISTORY' in line for line in disabled)
    _, from_config = await run_handoff(config=HandoffConfig(nest_handoff_history=True))
    assert from_config == enabled


async def test_config_mapper_is_used_for_nesting_only() -> None:
    def one_line(transcript: list[ModelMessage]) -> list[ModelMessage]:
        return [user('mapped')]

    _, nested = await run_handoff(config=HandoffConfig(nest_handoff_history=True, history_mapper=one_line))
    assert nested == ['0 request: user-prompt: mapped', '0 request: user-prompt: Customer needs: refund']
    _, filtered = await run_handoff(
        input_filter=remove_all_tools, config=HandoffConfig(nest_handoff_history=True, history_mapper=one_line)
    )
    assert filtered[0] == '0 request: user-prompt: I want a refund for order 42'


async def assert_delegate_not_run(expected: str, **delegate_kwargs: Any) -> None:
    recorder = Recorder()
    triage = make_triage(Agent(recorder.model, name='billing'), **delegate_kwargs)
    with pytest.raises(UserError) as exc_info:
        await triage.run('I want a refund for order 42')
    assert str(exc_info.value) == expected
    assert recorder.seen == []


async def test_non_callable_filter() -> None:
    await assert_delegate_not_run('Invalid input filter: not a filter', input_filter='not a filter')


async def test_filter_returning_the_wrong_type() -> None:
    await assert_delegate_not_run('Invalid input filter result: []', input_filter=lambda data: [])


async def test_filter_that_orphans_a_call() -> None:
    def drop_returns(data: HandoffInputData) -> HandoffInputData:
        return data.clone(new_items=data.new_items[:1])

    await assert_delegate_not_run(
        'Invalid handoff history: the tool calls transfer_to_billing (call_h) have no tool return. '
        'Remove tool calls and their returns together.',
        input_filter=drop_returns,
    )


async def test_filter_that_orphans_a_return() -> None:
    def drop_calls(data: HandoffInputData) -> HandoffInputData:
        return data.clone(new_items=data.new_items[1:])

    await assert_delegate_not_run(
        "Invalid handoff history: the tool return for call 'call_h' in message 3 answers no tool call of the "
        'response before it. Remove tool calls and their returns together.',
        input_filter=drop_calls,
    )


async def test_message_history_cannot_be_passed() -> None:
    await assert_delegate_not_run(
        'delegate() builds the message history itself; do not pass `message_history`.', message_history=[]
    )


async def test_server_managed_conversation_rejects_filters() -> None:
    await assert_delegate_not_run(
        'Server-managed conversations do not support handoff input filters. Remove Handoff.input_filter or '
        'RunConfig.handoff_input_filter, or disable conversation_id, previous_response_id, and auto_previous_response_id.',
        input_filter=remove_all_tools,
        model_settings={'openai_previous_response_id': 'resp_123'},
    )


async def test_server_managed_conversation_disables_nesting(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger='pydantic_ai_harness.handoffs'):
        _, seen = await run_handoff(nest_handoff_history=True, model_settings={'openai_conversation_id': 'conv_1'})
    _, pass_through = await run_handoff()
    assert seen == pass_through
    expected = (
        'Server-managed conversations do not support nest_handoff_history for handoff triage -> billing. '
        'Disabling nested handoff history and continuing with delta-only input.'
    )
    assert caplog.messages == [expected]
    _, auto = await run_handoff(nest_handoff_history=True, model_settings={'openai_previous_response_id': 'auto'})
    assert 'CONVERSATION HISTORY' in auto[0]


async def test_usage_is_shared_with_the_parent() -> None:
    recorder = Recorder()
    triage = make_triage(Agent(recorder.model, name='billing'))
    result = await triage.run('I want a refund for order 42')
    assert result.usage.requests == 4  # three triage requests and the delegate's one
    with pytest.raises(UsageLimitExceeded):
        await make_triage(Agent(recorder.model, name='billing')).run(
            'I want a refund for order 42', usage_limits=UsageLimits(request_limit=2)
        )


async def test_parallel_sibling_calls_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    specialist = Agent(recorder.model, name='billing')

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart('lookup', {'order': '1'}, 'c_sibling'), ToolCallPart('transfer', {}, 'c_h')]
            )
        return ModelResponse(parts=[TextPart('done')])

    triage = Agent(FunctionModel(model), name='triage', deps_type=type(None))
    triage.tool_plain(lookup)

    @triage.tool
    async def transfer(ctx: RunContext[None]) -> str:
        """Hand off."""
        return (await delegate(specialist, ctx, 'help')).output

    with caplog.at_level(logging.INFO, logger='pydantic_ai_harness.handoffs'):
        await triage.run('hi')
    assert describe(recorder.last) == snapshot(
        [
            '0 request: user-prompt: hi',
            '1 response: ToolCallPart: transfer({}) [c_h]',
            '2 request: ToolReturnPart: transfer -> {"assistant": "billing"} [c_h]',
            '2 request: user-prompt: help',
        ]
    )
    assert caplog.messages == [
        "Handoff from tool call 'c_h': dropping parallel tool calls without a result: lookup (c_sibling)"
    ]


def make_ctx(
    messages: list[ModelMessage], *, run_id: str | None = 'run-2', tool_call_id: str | None = 'h'
) -> RunContext[None]:
    return RunContext(
        deps=None, model=TestModel(), usage=RunUsage(), messages=messages, run_id=run_id, tool_call_id=tool_call_id
    )


def test_segments_of_a_second_run() -> None:
    earlier = [
        ModelRequest(parts=[user('first').parts[0]], run_id='run-1'),
        ModelResponse(parts=[TextPart('first answer')], run_id='run-1'),
    ]
    current = [
        ModelRequest(parts=[user('second').parts[0], InstructionDeltaPart(id=None, content='op')], run_id='run-2'),
        ModelResponse(parts=[ToolCallPart('lookup', {}, 'c1')], run_id='run-2'),
        ModelRequest(parts=[ToolReturnPart('lookup', 'ok', 'c1'), ModelSettingsDeltaPart(settings={})], run_id='run-2'),
        ModelResponse(parts=[TextPart('handing off'), ToolCallPart('transfer', {}, 'h')], run_id='run-2'),
    ]
    data = handoff_input_from_context(make_ctx([*earlier, *current]), target_name='billing')
    assert isinstance(data.input_history, tuple)
    assert describe(data.input_history) == [
        '0 request: user-prompt: first',
        '1 response: text: first answer',
        '2 request: user-prompt: second',
    ]
    assert describe(data.pre_handoff_items) == [
        '0 response: ToolCallPart: lookup({}) [c1]',
        '1 request: ToolReturnPart: lookup -> ok [c1]',
    ]
    assert describe(data.new_items) == [
        '0 response: text: handing off',
        '0 response: ToolCallPart: transfer({}) [h]',
        '1 request: ToolReturnPart: transfer -> {"assistant": "billing"} [h]',
    ]
    assert data.new_items[0] is current[-1]
    assert data.input_items is None and data.run_context is not None


def test_segments_without_a_delegating_call_or_run_id() -> None:
    messages: list[ModelMessage] = [user('hi'), ModelResponse(parts=[TextPart('hello')])]
    data = handoff_input_from_context(make_ctx(messages, run_id=None, tool_call_id=None))
    assert data.input_history == (messages[0],) and data.pre_handoff_items == ()
    assert data.new_items == (messages[1],)  # no delegating call to answer
    more = user('more')
    ending_in_request = handoff_input_from_context(make_ctx([*messages, more], run_id=None))
    assert ending_in_request.to_message_history() == [*messages, more]
    assert ending_in_request.new_items == ()


def test_filter_type_alias_accepts_sync_and_async_filters() -> None:
    async def async_filter(data: HandoffInputData) -> HandoffInputData:
        return data

    filters: list[HandoffInputFilter] = [remove_all_tools, nest_handoff_history, async_filter]
    assert len(filters) == 3
