"""Property tests: fuzzed, valid histories over every part kind."""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, Literal

import anyio
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    FilePart,
    ImageUrl,
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    ToolSearchCallPart,
    ToolSearchReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from pydantic_ai_harness.handoffs import (
    HandoffInputData,
    handoff_input_from_context,
    nest_handoff_history,
    remove_all_tools,
)
from pydantic_ai_harness.handoffs._delegation import check_message_history
from pydantic_ai_harness.handoffs._parts import part_to_item, render_part
from pydantic_ai_harness.handoffs._transcript import render_item

from ._helpers import Recorder, summary_texts

text = st.text(min_size=0, max_size=30)
PNG = BinaryContent(b'\x89PNG', media_type='image/png')
Outcome = Literal['success', 'failed', 'denied', 'interrupted', 'retried']
OUTCOMES: st.SearchStrategy[Outcome] = st.sampled_from(('success', 'failed', 'denied', 'interrupted', 'retried'))


@st.composite
def user_request(draw: st.DrawFn) -> ModelRequest:
    options: list[ModelRequestPart] = [
        UserPromptPart(draw(text)),
        UserPromptPart([draw(text), ImageUrl(url='https://example.com/x.png')]),
        SystemPromptPart(draw(text)),
        SpeechPart(speaker='user', transcript=draw(text)),
        RetryFeedbackPart('Please return text.', retry=RetryInfo(cause='no_output')),
        CompactionPart(draw(text)),
        InstructionDeltaPart(id=None, content=draw(text)),
        ModelSettingsDeltaPart(settings={}),
    ]
    chosen = draw(st.lists(st.sampled_from(options), min_size=1, max_size=4))
    return ModelRequest(parts=[*chosen, UserPromptPart(draw(text))])


@st.composite
def exchange(draw: st.DrawFn, index: int) -> list[ModelMessage]:
    """A response (text, thinking, files, native tools, tool calls) and the request answering its calls."""
    parts: list[ModelResponsePart] = []
    if draw(st.booleans()):
        parts.append(ThinkingPart(draw(text), signature='sig', provider_name='anthropic'))
    if draw(st.booleans()):
        parts.append(TextPart(draw(text)))
    if draw(st.booleans()):
        native_id = f'native_{index}'
        parts.append(NativeToolCallPart('code_execution', {'code': 'x'}, native_id, provider_name='openai'))
        if draw(st.booleans()):
            parts.append(FilePart(PNG, id=native_id, provider_name='openai'))
        parts.append(NativeToolReturnPart('code_execution', 'ok', native_id, provider_name='openai'))
    if draw(st.booleans()):
        parts.append(FilePart(PNG))
    if draw(st.booleans()):
        parts.append(SpeechPart(speaker='assistant', transcript=draw(text)))
    calls = draw(st.integers(min_value=0, max_value=3))
    returns: list[ModelRequestPart] = []
    for n in range(calls):
        call_id = f'call_{index}_{n}'
        kind = draw(st.sampled_from(['function', 'search', 'legacy_retry']))
        if kind == 'search':
            parts.append(ToolSearchCallPart(args={'queries': ['q']}, tool_call_id=call_id))
            returns.append(ToolSearchReturnPart(content={'discovered_tools': [], 'message': 'm'}, tool_call_id=call_id))
            returns.append(ToolAvailabilityDeltaPart(tools_added=['t'], tool_call_id=call_id))
        elif kind == 'legacy_retry':
            parts.append(ToolCallPart('f', {'x': draw(text)}, call_id))
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                returns.append(RetryPromptPart('bad', tool_name='f', tool_call_id=call_id))
        else:
            parts.append(ToolCallPart('f', {'x': draw(text)}, call_id))
            returns.append(ToolReturnPart('f', draw(text), call_id, outcome=draw(OUTCOMES)))
            if draw(st.booleans()):
                returns.append(CapabilityLoadDeltaPart(loaded=['cap'], tool_call_id=call_id))
    if not parts:
        parts.append(TextPart(draw(text)))
    messages: list[ModelMessage] = [ModelResponse(parts=parts, provider_name='openai', model_name='m')]
    if returns:
        messages.append(ModelRequest(parts=returns))
    return messages


@st.composite
def history(draw: st.DrawFn) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for index in range(draw(st.integers(min_value=0, max_value=6))):
        if draw(st.booleans()):
            messages.append(draw(user_request()))
        else:
            messages.extend(draw(exchange(index)))
    return messages


@st.composite
def handoff_data(draw: st.DrawFn) -> HandoffInputData:
    messages = draw(history())
    # segment boundaries only where no call is waiting for its return
    cuts = [i for i in range(len(messages) + 1) if i == 0 or not _has_calls(messages[i - 1])]
    first = draw(st.sampled_from(cuts))
    second = draw(st.sampled_from([c for c in cuts if c >= first]))
    input_history: str | tuple[ModelMessage, ...] = draw(st.one_of(st.just(tuple(messages[:first])), text))
    return HandoffInputData(
        input_history=input_history if isinstance(input_history, str) or first else tuple(messages[:first]),
        pre_handoff_items=tuple(messages[first:second]),
        new_items=tuple(messages[second:]),
    )


def _has_calls(message: ModelMessage) -> bool:
    return isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts)


def assert_valid(messages: list[ModelMessage]) -> None:
    check_message_history(messages)
    assert all(message.parts for message in messages)


PARENT_STATE = InstructionDeltaPart | ModelSettingsDeltaPart | ToolAvailabilityDeltaPart | CapabilityLoadDeltaPart


def parent_state(messages: list[ModelMessage]) -> list[Any]:
    return [p for m in messages for p in m.parts if isinstance(p, PARENT_STATE)]


def tool_parts(messages: list[ModelMessage]) -> list[Any]:
    return [
        p
        for m in messages
        for p in m.parts
        if isinstance(p, BaseToolCallPart | BaseToolReturnPart | ThinkingPart | ToolAvailabilityDeltaPart)
    ]


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(handoff_data())
def test_remove_all_tools_leaves_no_tool_artefacts(data: HandoffInputData) -> None:
    assert_valid(data.to_message_history())
    filtered = remove_all_tools(data)
    history = filtered.to_message_history()
    assert_valid(history)
    assert tool_parts(history) == []
    assert remove_all_tools(filtered) == filtered  # idempotent


@FUZZ
@given(handoff_data())
def test_nesting_never_orphans_and_always_starts_with_a_summary(data: HandoffInputData) -> None:
    nested = nest_handoff_history(data)
    history = nested.to_message_history()
    assert_valid(history)
    assert summary_texts(history[:1])
    # only provider-executed tool parts are forwarded; everything else tool-related is in the summary
    assert all(isinstance(p, NativeToolCallPart | NativeToolReturnPart) for p in tool_parts(history))
    assert parent_state(history) == []
    assert nested.new_items == data.new_items
    # nesting again never puts a summary inside a summary
    again = nest_handoff_history(HandoffInputData(tuple(history), (), ())).to_message_history()
    [text_again] = summary_texts(again[:1])
    assert text_again.count('<CONVERSATION HISTORY>') == 1
    assert_valid(again)


@FUZZ
@given(handoff_data())
def test_filters_chain_in_both_orders(data: HandoffInputData) -> None:
    assert_valid(remove_all_tools(nest_handoff_history(data)).to_message_history())
    assert_valid(nest_handoff_history(remove_all_tools(data)).to_message_history())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history(), st.integers(min_value=0, max_value=2), st.sampled_from(['none', 'remove', 'nest']))
def test_handoff_from_context_is_runnable(messages: list[ModelMessage], siblings: int, mode: str) -> None:
    if messages and _has_calls(messages[-1]):
        messages = messages[:-1]
    parts: list[ModelResponsePart] = [TextPart('handing off'), ToolCallPart('transfer', {}, 'h')]
    parts.extend(ToolCallPart('other', {}, f'sibling_{n}') for n in range(siblings))
    ctx = RunContext[None](
        deps=None,
        model=TestModel(),
        usage=RunUsage(),
        messages=[*messages, ModelResponse(parts=parts)],
        run_id=None,
        tool_call_id='h',
    )
    data = handoff_input_from_context(ctx, target_name='b')
    if mode == 'remove':
        data = remove_all_tools(data)
    elif mode == 'nest':
        data = nest_handoff_history(data)
    history = data.to_message_history()
    assert_valid(history)
    assert parent_state(history) == []
    recorder = Recorder()
    result = anyio.run(partial(Agent(recorder.model).run, 'continue', message_history=history))
    assert result.output == 'specialist answer'
    assert len(recorder.seen) == 1


@FUZZ
@given(history(), st.text(max_size=20))
def test_fast_rendering_matches_the_transcript_items(messages: list[ModelMessage], tricky: str) -> None:
    extra: list[Any] = [
        TextPart(tricky),
        UserPromptPart(tricky),
        SystemPromptPart(tricky),
        ToolCallPart(tricky or 'f', tricky or None, tricky or 'id'),
        ToolReturnPart(tricky or 'f', tricky, tricky or 'id', outcome='failed'),
        ToolReturnPart('f', {'nested': [tricky]}, 'id'),
        ThinkingPart(tricky),
    ]
    for part in [*(p for m in messages for p in m.parts), *extra]:
        item = part_to_item(part)
        assert render_part(part) == (None if item is None else render_item(item))
