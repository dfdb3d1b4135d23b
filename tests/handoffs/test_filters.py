from __future__ import annotations

import dataclasses
import warnings

import pytest
from inline_snapshot import snapshot
from pydantic_ai.messages import (
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    FilePart,
    LoadCapabilityCallPart,
    LoadCapabilityReturnPart,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    NativeToolSearchCallPart,
    NativeToolSearchReturnPart,
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

from pydantic_ai_harness.handoffs import HandoffInputData, nest_handoff_history, remove_all_tools

from ._helpers import assistant, describe, user

PNG = BinaryContent(b'\x89PNG', media_type='image/png')


def test_empty_data() -> None:
    data = HandoffInputData(input_history=(), pre_handoff_items=(), new_items=())
    assert remove_all_tools(data) == data


def test_str_history_only() -> None:
    data = HandoffInputData(input_history='hello', pre_handoff_items=(), new_items=())
    assert remove_all_tools(data) == data


def test_str_history_and_list() -> None:
    data = HandoffInputData(input_history='hello', pre_handoff_items=(assistant('a'),), new_items=(assistant('b'),))
    assert remove_all_tools(data) == data


def test_list_history_and_list() -> None:
    data = HandoffInputData(
        input_history=(user('hi'), assistant('hello')),
        pre_handoff_items=(assistant('a'),),
        new_items=(assistant('b'),),
    )
    filtered = remove_all_tools(data)
    assert filtered == data
    assert all(a is b for a, b in zip(filtered.to_message_history(), data.to_message_history()))


def test_removes_function_calls_and_outputs_in_every_segment() -> None:
    data = HandoffInputData(
        input_history=(
            user('weather?'),
            ModelResponse(parts=[ToolCallPart('get_weather', {'city': 'Paris'}, 'c1')]),
            ModelRequest(parts=[ToolReturnPart('get_weather', 'Sunny', 'c1')]),
            assistant('It is sunny.'),
        ),
        pre_handoff_items=(
            ModelResponse(parts=[TextPart('Checking.'), ToolCallPart('lookup', {}, 'c2')]),
            ModelRequest(parts=[ToolReturnPart('lookup', 'ok', 'c2', outcome='failed')]),
        ),
        new_items=(
            ModelResponse(
                parts=[ThinkingPart('route it'), TextPart('Transferring.'), ToolCallPart('transfer', {}, 'h')]
            ),
            ModelRequest(parts=[ToolReturnPart('transfer', '{"assistant": "b"}', 'h')]),
        ),
    )
    assert describe(remove_all_tools(data).to_message_history()) == snapshot(
        [
            '0 request: user-prompt: weather?',
            '1 response: text: It is sunny.',
            '2 response: text: Checking.',
            '3 response: text: Transferring.',
        ]
    )


def test_removes_every_tool_part_kind_and_keeps_conversation() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        tool_retry = RetryPromptPart('bad args', tool_name='f', tool_call_id='c-retry')
        free_retry = RetryPromptPart('try again', tool_name=None)
    response = ModelResponse(
        parts=[
            ThinkingPart('thinking', signature='sig', provider_name='anthropic'),
            TextPart('Here is an image.'),
            NativeToolCallPart('image_generation', {}, 'ig1', provider_name='openai'),
            FilePart(PNG, id='ig1', provider_name='openai'),
            NativeToolReturnPart('image_generation', {'status': 'completed'}, 'ig1', provider_name='openai'),
            FilePart(PNG),
            NativeToolSearchCallPart(args={'queries': ['x']}, tool_call_id='ts1', provider_name='openai'),
            NativeToolSearchReturnPart(
                content={'discovered_tools': [], 'message': 'no match'}, tool_call_id='ts1', provider_name='openai'
            ),
            ToolSearchCallPart(args={'queries': ['y']}, tool_call_id='ts2'),
            LoadCapabilityCallPart(args={'id': 'cap'}, tool_call_id='lc1'),
            ToolCallPart('f', {'a': 1}, 'c-retry'),
            SpeechPart(speaker='assistant', transcript='spoken'),
            CompactionPart('summary of old turns'),
        ]
    )
    request = ModelRequest(
        parts=[
            ToolSearchReturnPart(content={'discovered_tools': [], 'message': 'no match'}, tool_call_id='ts2'),
            ToolAvailabilityDeltaPart(tools_added=['y'], tool_call_id='ts2'),
            LoadCapabilityReturnPart(content={'message': 'loaded', 'instructions': 'use cap'}, tool_call_id='lc1'),
            CapabilityLoadDeltaPart(loaded=['cap'], tool_call_id='lc1'),
            tool_retry,
            free_retry,
            RetryFeedbackPart('Please return text.', retry=RetryInfo(cause='no_output')),
            SystemPromptPart('be nice'),
            UserPromptPart('thanks'),
        ]
    )
    data = HandoffInputData(input_history=(user('draw'), response, request), pre_handoff_items=(), new_items=())
    kept = remove_all_tools(data).to_message_history()
    assert describe(kept) == snapshot(
        [
            '0 request: user-prompt: draw',
            '1 response: text: Here is an image.',
            '1 response: file: image/png [None]',
            '1 response: speech (assistant): spoken',
            '1 response: compaction: summary of old turns',
            '2 request: retry-prompt',
            '2 request: retry-feedback',
            '2 request: system-prompt: be nice',
            '2 request: user-prompt: thanks',
        ]
    )
    kept_response = kept[1]
    assert isinstance(kept_response, ModelResponse)
    assert dataclasses.replace(kept_response, parts=response.parts, history_digest=None) == response


def test_input_items_are_preserved_and_filtered() -> None:
    call = ModelResponse(parts=[TextPart('go'), ToolCallPart('transfer', {}, 'h')])
    output = ModelRequest(parts=[ToolReturnPart('transfer', '{"assistant": "b"}', 'h')])
    data = HandoffInputData(
        input_history='hi', pre_handoff_items=(), new_items=(call, output), input_items=(call, output)
    )
    filtered = remove_all_tools(data)
    assert filtered.input_items is not None
    assert describe(filtered.input_items) == ['0 response: text: go']
    assert remove_all_tools(data.clone(input_items=None)).input_items is None
    assert remove_all_tools(data.clone(input_items=())).input_items == ()


def test_chains_after_nesting() -> None:
    data = HandoffInputData(
        input_history=(user('hi'),),
        pre_handoff_items=(),
        new_items=(
            ModelResponse(parts=[TextPart('Transferring.'), ToolCallPart('transfer', {}, 'h')]),
            ModelRequest(parts=[ToolReturnPart('transfer', '{"assistant": "b"}', 'h')]),
        ),
    )
    nested = nest_handoff_history(data)
    chained = remove_all_tools(nested)
    assert chained.input_items == ()
    assert chained.input_history == nested.input_history  # summaries are assistant text: kept, and untouched
    assert chained.to_message_history() == nested.to_message_history()


def test_run_context_is_carried_over() -> None:
    data = HandoffInputData(input_history='hi', pre_handoff_items=(), new_items=())
    assert remove_all_tools(data).run_context is None


def test_input_is_not_mutated() -> None:
    response = ModelResponse(parts=[TextPart('a'), ToolCallPart('f', {}, 'c')])
    request = ModelRequest(parts=[ToolReturnPart('f', 'x', 'c'), UserPromptPart('more')])
    data = HandoffInputData(input_history=(response, request), pre_handoff_items=(), new_items=())
    snapshot_before = repr(data)
    remove_all_tools(data)
    assert repr(data) == snapshot_before
    assert len(response.parts) == 2 and len(request.parts) == 2


@pytest.mark.parametrize('bad', [['not a message'], 'x'])
def test_bad_segments_are_rejected(bad: object) -> None:
    with pytest.raises(TypeError, match='pre_handoff_items'):
        HandoffInputData(input_history='hi', pre_handoff_items=bad, new_items=())  # pyright: ignore[reportArgumentType]


def test_kept_parts_are_left_as_they_were() -> None:
    """Dropping a tool return from a request leaves the user prompt beside it as it was: a string stays a string."""
    response = ModelResponse(parts=[TextPart('checking'), ToolCallPart('lookup', {}, 'c')])
    prompt = UserPromptPart('kept')
    request = ModelRequest(parts=[ToolReturnPart('lookup', 'x', 'c'), prompt])
    data = HandoffInputData(input_history=(user('hi'), response, request), pre_handoff_items=(), new_items=())
    history = remove_all_tools(data).to_message_history()
    assert describe(history) == snapshot(
        ['0 request: user-prompt: hi', '1 response: text: checking', '2 request: user-prompt: kept']
    )
    assert history[2].parts == [prompt]
