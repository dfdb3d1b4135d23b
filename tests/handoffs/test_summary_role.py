"""`summary_role='user'`: nested summaries as user turns, for models that want a conversation to open with one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from pydantic_ai_harness.handoffs import (
    HandoffConfig,
    HandoffHistory,
    HandoffInputData,
    nest_handoff_history,
)

from ._helpers import Recorder, assistant, describe, user
from .test_delegation import run_handoff
from .test_nesting import nest_three_times, worked_example

pytestmark = pytest.mark.anyio


def as_assistant_summaries(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The same history with every user-turn summary turned back into an assistant summary."""
    result: list[ModelMessage] = []
    for message in messages:
        first = message.parts[0]
        if isinstance(first, UserPromptPart) and isinstance(first.content, str) and first.content.startswith(PREAMBLE):
            assert len(message.parts) == 1
            result.append(assistant(first.content))
        else:
            result.append(message)
    return result


PREAMBLE = 'For context, here is the conversation so far'


def summary_text(message: ModelMessage) -> str:
    [part] = message.parts
    assert isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str)
    return part.content


async def test_a_user_summary_is_one_marked_user_prompt_with_the_same_text() -> None:
    as_assistant = nest_handoff_history(worked_example()).to_message_history()
    as_user = nest_handoff_history(worked_example(), summary_role='user').to_message_history()
    assert isinstance(as_assistant[0], ModelResponse) and isinstance(as_user[0], ModelRequest)
    [assistant_part], [user_part] = as_assistant[0].parts, as_user[0].parts
    assert isinstance(assistant_part, TextPart) and isinstance(user_part, UserPromptPart)
    assert user_part.content == assistant_part.content


async def test_user_summaries_flatten_across_hops_exactly_like_assistant_ones() -> None:
    """Three hops with user-turn summaries give the assistant-turn history, summary for summary: never nested."""
    as_user = nest_three_times(worked_example(), 'user').to_message_history()
    as_assistant = nest_three_times(worked_example()).to_message_history()
    assert describe(as_assistant_summaries(as_user)) == describe(as_assistant)
    assert '\n'.join(describe(as_user)).count('<CONVERSATION HISTORY>') == 3


async def test_with_the_assistant_role_a_user_turn_summary_stays_a_user_record() -> None:
    """Only `summary_role='user'` reads user turns as summaries: by default a summary-shaped prompt is user text."""
    forged_text = summary_text(nest_handoff_history(worked_example(), summary_role='user').to_message_history()[0])
    forged = HandoffInputData(input_history=(user(forged_text),), pre_handoff_items=(), new_items=())
    [summary] = nest_handoff_history(forged).to_message_history()
    text = summary_text(summary)
    # The block is one quoted user record inside the new summary, not four records of its own.
    assert text.count('<CONVERSATION HISTORY>') == 2
    assert '\n1. {"role": "user", "content": "For context, here is the conversation so far' in text
    assert '\n2. ' not in text


async def test_user_summaries_flatten_across_agent_runs_that_merge_requests() -> None:
    """pydantic-ai merges the summary with the next prompt into one request; the next hop still flattens it."""
    history = (await Agent(Recorder('first answer').model).run('What is the refund policy?')).all_messages()
    capability = HandoffHistory(nest_handoff_history=True, summary_role='user')
    recorder = Recorder()
    for hop in range(3):
        recorder = Recorder(f'answer {hop}')
        result = await Agent(recorder.model, capabilities=[capability]).run(f'question {hop}', message_history=history)
        history = result.all_messages()
        seen = '\n'.join(describe(recorder.last))
        assert seen.count('<CONVERSATION HISTORY>') == 1, seen
    assert describe(recorder.last) == snapshot(
        [
            """\
0 request: user-prompt: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What is the refund policy?
2. assistant: first answer
3. user: question 0
4. assistant: answer 0
5. user: question 1
6. assistant: answer 1
</CONVERSATION HISTORY>\
""",
            '0 request: user-prompt: question 2',
        ]
    )


async def test_a_custom_mapper_receives_the_records_of_a_user_summary() -> None:
    first = nest_handoff_history(worked_example(), summary_role='user')
    seen: list[list[str]] = []

    def mapper(transcript: list[ModelMessage]) -> list[ModelMessage]:
        seen.append(describe(transcript))
        return [user('only this')]

    nest_handoff_history(
        HandoffInputData(input_history=tuple(first.to_message_history()), pre_handoff_items=(), new_items=()),
        history_mapper=mapper,
        summary_role='user',
    )
    assert seen[0][:3] == [
        "0 request: user-prompt: What's the weather?",
        '1 response: ToolCallPart: get_weather({"city":"London"}) [call_1]',
        '2 request: ToolReturnPart: get_weather -> Sunny [call_1]',
    ]


@pytest.mark.parametrize(
    'build',
    [
        lambda: nest_handoff_history(worked_example(), summary_role='system'),  # pyright: ignore[reportArgumentType]
        lambda: HandoffConfig(summary_role='User'),  # pyright: ignore[reportArgumentType]
        lambda: HandoffHistory(nest_handoff_history=True, summary_role=None),  # pyright: ignore[reportArgumentType]
    ],
)
async def test_an_unknown_summary_role_is_rejected_with_the_choices(build: Any) -> None:
    with pytest.raises(UserError, match="summary_role must be 'assistant' or 'user', got "):
        build()


async def test_delegate_with_a_user_summary_config() -> None:
    output, seen = await run_handoff(config=HandoffConfig(nest_handoff_history=True, summary_role='user'))
    assert output == 'triage done'
    assert seen[0].startswith('0 request: user-prompt: For context, here is the conversation so far')
    assert seen == snapshot(
        [
            """\
0 request: user-prompt: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: I want a refund for order 42
2. {"arguments": "{\\"order\\":\\"42\\"}", "call_id": "call_l", "name": "lookup", "type": "function_call"}
3. {"call_id": "call_l", "output": "order 42: paid", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
            '1 response: text: Transferring you to billing.',
            """\
2 request: user-prompt: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. {"arguments": "{\\"reason\\":\\"refund\\"}", "call_id": "call_h", "name": "transfer_to_billing", "type": "function_call"}
2. {"call_id": "call_h", "output": "{\\"assistant\\": \\"billing\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
            '2 request: user-prompt: Customer needs: refund',
        ]
    )


async def test_delegate_summary_role_wins_over_the_config() -> None:
    config = HandoffConfig(nest_handoff_history=True, summary_role='user')
    _, as_assistant = await run_handoff(config=config, summary_role='assistant')
    _, as_user = await run_handoff(nest_handoff_history=True, summary_role='user')
    assert as_assistant[0].startswith('0 response: text: For context')
    assert as_user[0].startswith('0 request: user-prompt: For context')
    with pytest.raises(UserError, match="summary_role must be 'assistant' or 'user'"):
        await run_handoff(nest_handoff_history=True, summary_role='system')


async def test_handoff_history_capability_with_user_summaries() -> None:
    first = Recorder('first answer')
    earlier = (await Agent(first.model).run('What is the refund policy?')).all_messages()
    second = Recorder('second answer')
    capability = HandoffHistory(nest_handoff_history=True, summary_role='user')
    await Agent(second.model, capabilities=[capability]).run('And for order 42?', message_history=earlier)
    assert describe(second.last) == snapshot(
        [
            """\
0 request: user-prompt: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What is the refund policy?
2. assistant: first answer
</CONVERSATION HISTORY>\
""",
            '0 request: user-prompt: And for order 42?',
        ]
    )
    assert isinstance(second.last[0], ModelRequest)
