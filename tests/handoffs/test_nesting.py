from __future__ import annotations

from collections.abc import Iterator

import pytest
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    FilePart,
    ImageUrl,
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai_harness.handoffs import (
    HandoffInputData,
    SummaryRole,
    default_handoff_history_mapper,
    nest_handoff_history,
    reset_conversation_history_wrappers,
    set_conversation_history_wrappers,
)

from ._helpers import assistant, describe, summary_texts, user


@pytest.fixture(autouse=True)
def _reset_wrappers() -> Iterator[None]:
    reset_conversation_history_wrappers()
    yield
    reset_conversation_history_wrappers()


def handoff_turn(target: str = 'b', call_id: str = 'call_h') -> tuple[ModelMessage, ...]:
    return (
        ModelResponse(
            parts=[TextPart(f'Transferring you to {target}.'), ToolCallPart(f'transfer_to_{target}', {}, call_id)]
        ),
        ModelRequest(parts=[ToolReturnPart(f'transfer_to_{target}', f'{{"assistant": "{target}"}}', call_id)]),
    )


def worked_example() -> HandoffInputData:
    return HandoffInputData(
        input_history=(user("What's the weather?"),),
        pre_handoff_items=(
            ModelResponse(parts=[ToolCallPart('get_weather', '{"city": "London"}', 'call_1')]),
            ModelRequest(parts=[ToolReturnPart('get_weather', 'Sunny', 'call_1')]),
        ),
        new_items=(
            ModelResponse(
                parts=[
                    ThinkingPart('Thinking'),
                    TextPart('Let me transfer you.'),
                    ToolCallPart('transfer_to_b', {}, 'call_h'),
                ]
            ),
            ModelRequest(parts=[ToolReturnPart('transfer_to_b', '{"assistant": "b"}', 'call_h')]),
        ),
    )


def test_worked_example() -> None:
    data = worked_example()
    nested = nest_handoff_history(data)
    assert nested.pre_handoff_items == ()
    assert nested.input_items == ()
    assert nested.new_items == data.new_items
    assert all(a is b for a, b in zip(nested.new_items, data.new_items))
    assert isinstance(nested.input_history, tuple)
    assert describe(nested.input_history) == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What's the weather?
2. {"arguments": "{\\"city\\":\\"London\\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call"}
3. {"call_id": "call_1", "output": "Sunny", "type": "function_call_output"}
4. {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking"}]}
</CONVERSATION HISTORY>\
""",
            '1 response: text: Let me transfer you.',
            """\
2 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. {"arguments": "{}", "call_id": "call_h", "name": "transfer_to_b", "type": "function_call"}
2. {"call_id": "call_h", "output": "{\\"assistant\\": \\"b\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
        ]
    )
    # the delegate's history is exactly the nested input history: new_items are not appended again
    assert nested.to_message_history() == list(nested.input_history)


def test_summary_is_an_assistant_response_with_one_text_part() -> None:
    nested = nest_handoff_history(worked_example())
    assert isinstance(nested.input_history, tuple)
    summary = nested.input_history[0]
    assert isinstance(summary, ModelResponse)
    assert len(summary.parts) == 1 and isinstance(summary.parts[0], TextPart)
    assert summary.model_name is None and summary.provider_name is None


def test_forwarded_response_keeps_provider_fields() -> None:
    response = ModelResponse(
        parts=[TextPart('Let me transfer you.'), ToolCallPart('transfer_to_b', {}, 'h')],
        model_name='gpt-x',
        provider_name='openai',
        provider_response_id='resp_1',
        history_digest='digest',
    )
    data = HandoffInputData(input_history='hi', pre_handoff_items=(), new_items=(response,))
    nested = nest_handoff_history(data)
    assert isinstance(nested.input_history, tuple)
    forwarded = nested.input_history[1]
    assert isinstance(forwarded, ModelResponse)
    assert forwarded.parts == [TextPart('Let me transfer you.')]
    assert (forwarded.model_name, forwarded.provider_name, forwarded.provider_response_id) == (
        'gpt-x',
        'openai',
        'resp_1',
    )
    assert forwarded.history_digest is None  # its parts changed: no server-side continuation from it


def test_str_history_and_empty_transcript() -> None:
    nested = nest_handoff_history(HandoffInputData(input_history='', pre_handoff_items=(), new_items=()))
    assert summary_texts(nested.to_message_history()) == snapshot(
        [
            """\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: \n\
</CONVERSATION HISTORY>\
"""
        ]
    )
    empty = nest_handoff_history(HandoffInputData(input_history=(), pre_handoff_items=(), new_items=()))
    assert summary_texts(empty.to_message_history()) == snapshot(
        [
            """\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
(no previous turns recorded)
</CONVERSATION HISTORY>\
"""
        ]
    )


def test_output_starts_with_a_summary_even_when_the_first_item_is_forwarded() -> None:
    data = HandoffInputData(input_history=(), pre_handoff_items=(user('forward me'),), new_items=())
    assert describe(nest_handoff_history(data).to_message_history()) == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
(no previous turns recorded)
</CONVERSATION HISTORY>\
""",
            '1 request: user-prompt: forward me',
        ]
    )


def web_search(call_id: str) -> ModelResponse:
    return ModelResponse(
        parts=[
            NativeToolCallPart('web_search', {'query': 'q'}, call_id, provider_name='openai'),
            NativeToolReturnPart('web_search', {'status': 'completed'}, call_id, provider_name='openai'),
        ],
        provider_name='openai',
    )


def test_hosted_and_other_pre_items() -> None:
    data = HandoffInputData(
        input_history='hi',
        pre_handoff_items=(web_search('ws_pre'), assistant('pre msg')),
        new_items=(web_search('ws_new'), assistant('new msg')),
    )
    assert describe(nest_handoff_history(data).to_message_history()) == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: hi
</CONVERSATION HISTORY>\
""",
            '1 response: NativeToolCallPart: web_search({"query":"q"}) [ws_pre]',
            '1 response: NativeToolReturnPart: web_search -> {"status":"completed"} [ws_pre]',
            """\
2 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. assistant: pre msg
</CONVERSATION HISTORY>\
""",
            '3 response: NativeToolCallPart: web_search({"query":"q"}) [ws_new]',
            '3 response: NativeToolReturnPart: web_search -> {"status":"completed"} [ws_new]',
            '4 response: text: new msg',
        ]
    )


def test_user_system_and_compaction_in_pre_items_are_forwarded() -> None:
    data = HandoffInputData(
        input_history='hi',
        pre_handoff_items=(
            ModelRequest(parts=[SystemPromptPart('be brief'), UserPromptPart('more input')]),
            ModelRequest(parts=[CompactionPart('earlier turns, compacted')]),
        ),
        new_items=(),
    )
    assert describe(nest_handoff_history(data).to_message_history())[1:] == snapshot(
        [
            '1 request: system-prompt: be brief',
            '1 request: user-prompt: more input',
            '2 request: compaction: earlier turns, compacted',
        ]
    )


def test_native_call_is_forwarded_with_its_return_and_files() -> None:
    png = BinaryContent(b'\x89PNG', media_type='image/png')
    response = ModelResponse(
        parts=[
            NativeToolCallPart('image_generation', {}, 'ig', provider_name='openai'),
            TextPart('Here it is.'),  # summarized: pre-handoff assistant text
            FilePart(png, id='ig', provider_name='openai'),
            NativeToolReturnPart('image_generation', {'status': 'completed'}, 'ig', provider_name='openai'),
            FilePart(png),  # a model-generated file: assistant content, summarized before the handoff turn
        ],
        provider_name='openai',
    )
    data = HandoffInputData(input_history='draw', pre_handoff_items=(response,), new_items=())
    assert describe(nest_handoff_history(data).to_message_history()) == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: draw
</CONVERSATION HISTORY>\
""",
            '1 response: NativeToolCallPart: image_generation({}) [ig]',
            '1 response: file: image/png [ig]',
            '1 response: NativeToolReturnPart: image_generation -> {"status":"completed"} [ig]',
            """\
2 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. assistant: Here it is.
2. {"type": "file", "media_type": "image/png", "id": null}
</CONVERSATION HISTORY>\
""",
        ]
    )


def test_history_native_parts_and_files_are_summarized_without_bytes() -> None:
    response = ModelResponse(
        parts=[
            NativeToolCallPart('web_search', {'query': 'q'}, 'ws', provider_name='openai'),
            NativeToolReturnPart('web_search', 'results', 'ws', provider_name='openai'),
            FilePart(BinaryContent(b'secret-bytes', media_type='image/png'), id='f1', provider_name='openai'),
        ]
    )
    nested = nest_handoff_history(HandoffInputData(input_history=(response,), pre_handoff_items=(), new_items=()))
    [text] = summary_texts(nested.to_message_history())
    assert 'secret-bytes' not in text
    assert text.splitlines()[2:5] == snapshot(
        [
            '1. {"type": "builtin_tool_call", "name": "web_search", "call_id": "ws", "arguments": "{\\"query\\":\\"q\\"}"}',
            '2. {"type": "builtin_tool_return", "name": "web_search", "call_id": "ws", "output": "results"}',
            '3. {"type": "file", "media_type": "image/png", "id": "f1"}',
        ]
    )


def test_parent_state_parts_are_dropped() -> None:
    data = HandoffInputData(
        input_history='hi',
        pre_handoff_items=(ModelRequest(parts=[InstructionDeltaPart(id=None, content='secret operator text')]),),
        new_items=(),
    )
    history = nest_handoff_history(data).to_message_history()
    assert 'secret operator text' not in repr(history)
    assert len(history) == 1


def test_tool_outcomes_are_recorded() -> None:
    data = HandoffInputData(
        input_history=(
            ModelResponse(parts=[ToolCallPart('f', {'x': 1}, 'c1')]),
            ModelRequest(parts=[ToolReturnPart('f', 'boom', 'c1', outcome='failed')]),
        ),
        pre_handoff_items=(),
        new_items=(),
    )
    [text] = summary_texts(nest_handoff_history(data).to_message_history())
    assert text.splitlines()[3] == snapshot(
        '2. {"call_id": "c1", "output": "boom", "type": "function_call_output", "outcome": "failed"}'
    )


def nest_three_times(first: HandoffInputData, role: SummaryRole = 'assistant') -> HandoffInputData:
    data = nest_handoff_history(first, summary_role=role)
    for hop, target in enumerate(('c', 'd'), 2):
        data = nest_handoff_history(
            HandoffInputData(
                input_history=tuple(data.to_message_history()),
                pre_handoff_items=(user(f'question {hop}'), assistant(f'answer {hop}')),
                new_items=handoff_turn(target, f'call_{hop}'),
            ),
            summary_role=role,
        )
    return data


def test_three_hops_hold_exactly_one_summary_block_and_every_record_once() -> None:
    data = nest_three_times(worked_example())
    history = data.to_message_history()
    texts = summary_texts(history)
    joined = '\n'.join(describe(history))
    assert joined.count('<CONVERSATION HISTORY>') == len(texts)
    assert describe(history) == snapshot(
        [
            """\
0 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What's the weather?
2. {"arguments": "{\\"city\\":\\"London\\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call"}
3. {"call_id": "call_1", "output": "Sunny", "type": "function_call_output"}
4. {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking"}]}
5. assistant: Let me transfer you.
6. {"arguments": "{}", "call_id": "call_h", "name": "transfer_to_b", "type": "function_call"}
7. {"call_id": "call_h", "output": "{\\"assistant\\": \\"b\\"}", "type": "function_call_output"}
8. user: question 2
9. assistant: answer 2
10. assistant: Transferring you to c.
11. {"arguments": "{}", "call_id": "call_2", "name": "transfer_to_c", "type": "function_call"}
12. {"call_id": "call_2", "output": "{\\"assistant\\": \\"c\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
            '1 request: user-prompt: question 3',
            """\
2 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. assistant: answer 3
</CONVERSATION HISTORY>\
""",
            '3 response: text: Transferring you to d.',
            """\
4 response: text: For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. {"arguments": "{}", "call_id": "call_3", "name": "transfer_to_d", "type": "function_call"}
2. {"call_id": "call_3", "output": "{\\"assistant\\": \\"d\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""",
        ]
    )


def test_history_nested_three_times_via_input_history_only() -> None:
    """Each hop's whole history is the next hop's input history: one summary, every record once."""
    data = nest_handoff_history(worked_example())
    for hop in range(2, 4):
        data = nest_handoff_history(
            HandoffInputData(
                input_history=(*data.to_message_history(), user(f'question {hop}')),
                pre_handoff_items=(),
                new_items=(),
            )
        )
    [text] = summary_texts(data.to_message_history())
    assert text.count('<CONVERSATION HISTORY>') == 1
    assert text == snapshot("""\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What's the weather?
2. {"arguments": "{\\"city\\":\\"London\\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call"}
3. {"call_id": "call_1", "output": "Sunny", "type": "function_call_output"}
4. {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking"}]}
5. assistant: Let me transfer you.
6. {"arguments": "{}", "call_id": "call_h", "name": "transfer_to_b", "type": "function_call"}
7. {"call_id": "call_h", "output": "{\\"assistant\\": \\"b\\"}", "type": "function_call_output"}
8. user: question 2
9. user: question 3
</CONVERSATION HISTORY>\
""")


def test_multi_line_named_and_list_content_round_trip_through_renesting() -> None:
    history = (
        ModelRequest(parts=[UserPromptPart('line1\nline2')]),
        ModelRequest(parts=[UserPromptPart(['look at this', ImageUrl(url='https://example.com/cat.png')])]),
        assistant(''),
    )
    once = nest_handoff_history(HandoffInputData(input_history=history, pre_handoff_items=(), new_items=()))
    twice = nest_handoff_history(
        HandoffInputData(input_history=tuple(once.to_message_history()), pre_handoff_items=(), new_items=())
    )
    assert summary_texts(twice.to_message_history()) == summary_texts(once.to_message_history())
    assert summary_texts(once.to_message_history()) == snapshot(
        [
            """\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. {"role": "user", "content": "line1\\nline2"}
2. {"role": "user", "content": [{"type": "text", "text": "look at this"}, {"type": "image-url", "url": "https://example.com/cat.png"}]}
3. assistant: \n\
</CONVERSATION HISTORY>\
"""
        ]
    )


def test_named_roles_from_an_openai_summary_are_kept() -> None:
    openai_summary = (
        'For context, here is the conversation so far between the user and the previous agent:\n'
        '<CONVERSATION HISTORY>\n'
        '1. user (Alice): Hello\n'
        '2. {"arguments": "{}", "call_id": "c", "name": "f", "type": "function_call", "id": "fc_1"}\n'
        '</CONVERSATION HISTORY>'
    )
    nested = nest_handoff_history(
        HandoffInputData(input_history=(assistant(openai_summary), user('next')), pre_handoff_items=(), new_items=())
    )
    assert summary_texts(nested.to_message_history()) == snapshot(
        [
            """\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user (Alice): Hello
2. {"arguments": "{}", "call_id": "c", "name": "f", "type": "function_call", "id": "fc_1"}
3. user: next
</CONVERSATION HISTORY>\
"""
        ]
    )


def test_custom_wrappers_round_trip() -> None:
    set_conversation_history_wrappers(start='<<START>>', end='<<END>>')
    data = nest_three_times(worked_example())
    joined = '\n'.join(describe(data.to_message_history()))
    assert '<CONVERSATION HISTORY>' not in joined
    assert joined.count('<<START>>') == len(summary_texts(data.to_message_history()))
    first = summary_texts(data.to_message_history())[0]
    assert first.count('<<START>>') == 1 and first.count('<<END>>') == 1


def test_changing_wrappers_between_hops_nests_the_old_summary() -> None:
    first = nest_handoff_history(worked_example())
    set_conversation_history_wrappers(start='<<START>>', end='<<END>>')
    second = nest_handoff_history(
        HandoffInputData(input_history=tuple(first.to_message_history()), pre_handoff_items=(), new_items=())
    )
    [text] = summary_texts(second.to_message_history())
    assert text.count('<<START>>') == 1
    assert '<CONVERSATION HISTORY>' in text  # the old summary is now an ordinary (JSON) record
    assert text.splitlines()[2].startswith('1. {"role": "assistant", "content": "For context')


def test_forwarded_messages_are_summarized_once_at_the_next_hop() -> None:
    first = nest_handoff_history(worked_example())
    second = nest_handoff_history(
        HandoffInputData(input_history=tuple(first.to_message_history()), pre_handoff_items=(), new_items=())
    )
    [text] = summary_texts(second.to_message_history())
    assert text.count('Let me transfer you.') == 1


def test_explicit_default_mapper_gives_one_summary_with_everything() -> None:
    nested = nest_handoff_history(worked_example(), history_mapper=default_handoff_history_mapper)
    history = nested.to_message_history()
    assert len(history) == 1
    [text] = summary_texts(history)
    assert 'transfer_to_b' in text
    assert text == snapshot("""\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What's the weather?
2. {"arguments": "{\\"city\\":\\"London\\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call"}
3. {"call_id": "call_1", "output": "Sunny", "type": "function_call_output"}
4. {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking"}]}
5. assistant: Let me transfer you.
6. {"arguments": "{}", "call_id": "call_h", "name": "transfer_to_b", "type": "function_call"}
7. {"call_id": "call_h", "output": "{\\"assistant\\": \\"b\\"}", "type": "function_call_output"}
</CONVERSATION HISTORY>\
""")


def test_custom_mapper_receives_the_flattened_chronological_transcript() -> None:
    seen: list[list[str]] = []

    def mapper(transcript: list[ModelMessage]) -> list[ModelMessage]:
        seen.append(describe(transcript))
        return [user('only this')]

    first = nest_handoff_history(worked_example())
    nested = nest_handoff_history(
        HandoffInputData(
            input_history=tuple(first.to_message_history()), pre_handoff_items=(), new_items=handoff_turn('c')
        ),
        history_mapper=mapper,
    )
    assert describe(nested.to_message_history()) == ['0 request: user-prompt: only this']
    assert nested.pre_handoff_items == () and nested.input_items == ()
    assert seen == snapshot(
        [
            [
                "0 request: user-prompt: What's the weather?",
                '1 response: ToolCallPart: get_weather({"city":"London"}) [call_1]',
                '2 request: ToolReturnPart: get_weather -> Sunny [call_1]',
                '3 response: thinking: Thinking',
                '4 response: text: Let me transfer you.',
                '5 response: ToolCallPart: transfer_to_b({}) [call_h]',
                '6 request: ToolReturnPart: transfer_to_b -> {"assistant": "b"} [call_h]',
                '7 response: text: Transferring you to c.',
                '7 response: ToolCallPart: transfer_to_c({}) [call_h]',
                '8 request: ToolReturnPart: transfer_to_c -> {"assistant": "c"} [call_h]',
            ]
        ]
    )


def test_named_records_map_back_with_the_name_in_the_content() -> None:
    seen: list[list[str]] = []

    def mapper(transcript: list[ModelMessage]) -> list[ModelMessage]:
        seen.append(describe(transcript))
        return transcript

    summary = (
        'For context, here is the conversation so far between the user and the previous agent:\n'
        '<CONVERSATION HISTORY>\n'
        '1. user (Alice): Hello\n'
        '2. system: be brief\n'
        '3. Note: something\n'
        '4. {"type": "compaction", "content": "old"}\n'
        '5. {"type": "web_search_call", "id": "ws"}\n'
        '</CONVERSATION HISTORY>'
    )
    nest_handoff_history(
        HandoffInputData(input_history=(assistant(summary),), pre_handoff_items=(), new_items=()),
        history_mapper=mapper,
    )
    assert seen == snapshot(
        [
            [
                '0 request: user-prompt: Alice: Hello',
                '0 request: system-prompt: be brief',
                '0 request: user-prompt: Note: something',
                '0 request: compaction: old',
                '1 response: text: {"type": "web_search_call", "id": "ws"}',
            ]
        ]
    )


@pytest.mark.parametrize('bad', ['text', [1, 2], None])
def test_mapper_returning_the_wrong_type_is_rejected(bad: object) -> None:
    with pytest.raises(UserError, match='^Invalid history mapper result: '):
        nest_handoff_history(worked_example(), history_mapper=lambda transcript: bad)  # pyright: ignore[reportArgumentType]


def test_non_callable_mapper_is_rejected() -> None:
    with pytest.raises(UserError, match='^Invalid history mapper: 42$'):
        nest_handoff_history(worked_example(), history_mapper=42)  # pyright: ignore[reportArgumentType]


def test_input_is_not_mutated() -> None:
    data = worked_example()
    before = repr(data)
    nest_handoff_history(data)
    nest_handoff_history(data, history_mapper=default_handoff_history_mapper)
    assert repr(data) == before
