"""An output-function handoff records the delegate's answer under `Handoffs`, and warns once without it."""

from __future__ import annotations

import warnings

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import HandoffHistory, Handoffs, answered_by, delegate

from ._helpers import Recorder, summary_texts

pytestmark = pytest.mark.anyio

ANSWER = 'Refund of 80 EUR issued.'


def _router(billing: Agent[None, str], *, as_tool: bool = False) -> Agent[None, str]:
    async def to_billing(ctx: RunContext[None]) -> str:
        """Hand the conversation to billing."""
        return (await delegate(billing, ctx, 'Refund order 42')).output

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('Billing says: done.')])
        name = 'to_billing' if as_tool else info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(name, {}, 'h')])

    if as_tool:
        return Agent(FunctionModel(model), name='router', tools=[to_billing])
    return Agent(FunctionModel(model), name='router', output_type=[to_billing])


async def _next_turn_summary(history: list[ModelMessage]) -> str:
    recorder = Recorder('Within 5 days.')
    capability = HandoffHistory(nest_handoff_history=True)
    await Agent(recorder.model).run('When will I get it?', message_history=history, capabilities=[capability])
    [summary] = summary_texts(recorder.last)
    return summary


async def test_with_handoffs_the_next_turn_summary_holds_the_answer() -> None:
    router = _router(Agent(Recorder(ANSWER).model, name='billing'))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        result = await router.run('I want a refund', capabilities=[Handoffs()])
    history = result.all_messages()
    assert result.output == ANSWER and answered_by(history) == 'billing'
    assert f'assistant: {ANSWER}' in await _next_turn_summary(history)


async def test_without_handoffs_the_handoff_warns_naming_it() -> None:
    router = _router(Agent(Recorder(ANSWER).model, name='billing'))
    with pytest.warns(UserWarning, match=r'without the Handoffs capability.*capabilities=\[Handoffs\(\)\]'):
        result = await router.run('I want a refund')
    history = result.all_messages()
    assert result.output == ANSWER and answered_by(history) is None
    assert ANSWER not in await _next_turn_summary(history)  # what the warning says is lost


async def test_the_warning_is_shown_once_per_call_site() -> None:
    router = _router(Agent(Recorder(ANSWER).model, name='billing'))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('default')
        for _ in range(3):
            await router.run('I want a refund')
    assert [str(w.message).split(':')[0] for w in caught] == [
        'delegate() ran in an output function of a run without the Handoffs capability'
    ]


async def test_a_delegation_from_a_tool_never_warns_and_its_answer_is_the_tools_return() -> None:
    router = _router(Agent(Recorder(ANSWER).model, name='billing'), as_tool=True)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        result = await router.run('I want a refund')
    assert result.output == 'Billing says: done.'
    assert ANSWER in await _next_turn_summary(result.all_messages())
