"""Every handoff setting is checked where it is given (construction or call), naming the setting."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import HandoffConfig, HandoffHistory, Handoffs, delegate, remove_all_tools

from ._helpers import Recorder, summary_texts

pytestmark = pytest.mark.anyio


def _router(specialist: Agent[None, str], prompt: Any = 'Take a look', **delegate_kwargs: Any) -> Agent[None, str]:
    async def hand_off(ctx: RunContext[None]) -> str:
        """Hand the conversation over."""
        return (await delegate(specialist, ctx, prompt, **delegate_kwargs)).output

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {}, 'h')])

    return Agent(FunctionModel(model), name='router', output_type=[hand_off])


async def test_handoffs_takes_the_settings_as_keywords() -> None:
    recorder = Recorder()
    router = _router(Agent(recorder.model, name='specialist'))
    await router.run('I need help', capabilities=[Handoffs(nest_handoff_history=True)])
    assert len(summary_texts(recorder.last)) == 1
    assert Handoffs(nest_handoff_history=True).config == HandoffConfig(nest_handoff_history=True)
    merged = Handoffs(HandoffConfig(summary_role='user'), input_filter=remove_all_tools, max_record_chars=1_000)
    assert merged.config == HandoffConfig(summary_role='user', input_filter=remove_all_tools, max_record_chars=1_000)


@pytest.mark.parametrize(
    ('settings', 'message'),
    [
        ({'input_filter': 'remove_all_tools'}, 'Invalid input filter: remove_all_tools'),
        ({'nest_handoff_history': 'yes'}, "nest_handoff_history must be True or False, got 'yes'"),
        ({'forward_system_prompt': 1}, 'forward_system_prompt must be True or False, got 1'),
        ({'history_mapper': 'summary'}, 'Invalid history mapper: summary'),
        ({'summary_role': 'system'}, "summary_role must be 'assistant' or 'user', got 'system'"),
    ],
)
def test_a_bad_setting_is_refused_at_construction(settings: dict[str, Any], message: str) -> None:
    for build in (HandoffConfig, HandoffHistory, Handoffs):
        with pytest.raises(UserError) as exc_info:
            build(**settings)
        assert str(exc_info.value) == message


@pytest.mark.parametrize(
    ('settings', 'message'),
    [
        ({'nest_handoff_history': 'yes'}, "nest_handoff_history must be True or False, got 'yes'"),
        ({'history_mapper': 3}, 'Invalid history mapper: 3'),
        ({'max_record_chars': 10}, 'max_record_chars must be None or an int of at least 500, got 10'),
    ],
)
async def test_a_bad_delegate_argument_is_refused_before_the_delegate_runs(
    settings: dict[str, Any], message: str
) -> None:
    recorder = Recorder()
    with pytest.raises(UserError) as exc_info:
        await _router(Agent(recorder.model, name='specialist'), **settings).run('I need help')
    assert str(exc_info.value) == message
    assert recorder.seen == []


@pytest.mark.parametrize('prompt', ['', '   ', [], ['', '\n']])
async def test_an_empty_prompt_is_refused_before_the_delegate_runs(prompt: Any) -> None:
    recorder = Recorder()
    with pytest.raises(UserError, match='^delegate\\(\\) needs a non-empty prompt for the agent taking over, got '):
        await _router(Agent(recorder.model, name='specialist'), prompt=prompt).run('I need help')
    assert recorder.seen == []
