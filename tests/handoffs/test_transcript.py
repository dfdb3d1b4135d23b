from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from inline_snapshot import snapshot
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart

from pydantic_ai_harness.handoffs import (
    HandoffInputData,
    default_handoff_history_mapper,
    get_conversation_history_wrappers,
    nest_handoff_history,
    reset_conversation_history_wrappers,
    set_conversation_history_wrappers,
)
from pydantic_ai_harness.handoffs._transcript import (
    build_summary_text,
    flatten_summaries,
    parse_summary_text,
    render_item,
)

WRAPPERS = ('<CONVERSATION HISTORY>', '</CONVERSATION HISTORY>')


@pytest.fixture(autouse=True)
def _reset_wrappers() -> Iterator[None]:
    reset_conversation_history_wrappers()
    yield
    reset_conversation_history_wrappers()


def _text(messages: list[ModelMessage]) -> str:
    [summary] = messages
    [part] = summary.parts
    assert isinstance(part, TextPart)
    return part.content


def _summary_of(messages: list[ModelMessage]) -> str:
    return _text(default_handoff_history_mapper(messages))


def test_constants_are_byte_identical() -> None:
    assert _summary_of([]) == (
        'For context, here is the conversation so far between the user and the previous agent:\n'
        '<CONVERSATION HISTORY>\n'
        '(no previous turns recorded)\n'
        '</CONVERSATION HISTORY>'
    )


@pytest.mark.parametrize(
    ('item', 'rendered'),
    [
        ({'role': 'user', 'content': 'hi'}, 'user: hi'),
        ({'role': 'system', 'content': 'sys'}, 'system: sys'),
        ({'role': 'developer', 'content': 'dev'}, 'developer: dev'),
        ({'role': 'user', 'content': None}, 'user: '),
        ({'role': 'user', 'content': ''}, 'user: '),
        ({'role': 'user', 'name': 'Alice', 'content': 'Hello'}, 'user (Alice): Hello'),
        ({'role': 'user', 'name': '', 'content': 'Hello'}, 'user: Hello'),
        ({'role': 'user', 'name': 3, 'content': 'Hello'}, 'user: Hello'),
        ({'type': 'message', 'role': 'user', 'content': 'hi', 'id': 'x'}, 'user: hi'),
        ({'role': 'user', 'content': 'line1\nline2'}, '{"role": "user", "content": "line1\\nline2"}'),
        ({'role': 'user', 'content': 'a\rb'}, '{"role": "user", "content": "a\\rb"}'),
        (
            {'role': 'user', 'content': [{'type': 'input_text', 'text': 'look'}]},
            '{"role": "user", "content": [{"type": "input_text", "text": "look"}]}',
        ),
        (
            {'type': 'web_search_call', 'id': 'ws', 'provider_data': {'secret': 1}},
            '{"type": "web_search_call", "id": "ws"}',
        ),
        ({'role': 'user', 'content': 'ünïcode'}, 'user: ünïcode'),
        ({'type': 'x', 'value': object}, '{"type": "x", "value": "<class \'object\'>"}'),
        ({'role': 'user', 'content': 'hi', '_agents_tool_description': 'd', '_agents_tool_title': 't'}, 'user: hi'),
    ],
)
def test_render_item(item: dict[str, object], rendered: str) -> None:
    assert render_item(item) == rendered


def test_render_falls_back_on_unserializable_items() -> None:
    circular: dict[str, object] = {'type': 'loop'}
    circular['self'] = circular
    assert render_item(circular).startswith('loop: ')
    circular_content: list[object] = []
    circular_content.append(circular_content)
    assert render_item({'role': 'user', 'content': circular_content}) == 'user: [[...]]'


def test_summary_numbers_records() -> None:
    text = _summary_of(
        [
            ModelRequest(parts=[UserPromptPart("What's the weather?")]),
            ModelResponse(parts=[ToolCallPart('get_weather', '{"city":"London"}', 'call_1')]),
        ]
    )
    assert text == snapshot("""\
For context, here is the conversation so far between the user and the previous agent:
<CONVERSATION HISTORY>
1. user: What's the weather?
2. {"arguments": "{\\"city\\":\\"London\\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call"}
</CONVERSATION HISTORY>\
""")


@pytest.mark.parametrize(
    'item',
    [
        {'role': 'user', 'content': 'line1\nline2'},
        {'role': 'user', 'content': [{'type': 'text', 'text': 'look'}]},
        {'role': 'user', 'content': ''},
        {'role': 'assistant', 'content': 'plain'},
        {'role': 'user', 'name': 'Alice', 'content': 'Hello'},
        {'role': 'system', 'content': 'be brief'},
        {'type': 'function_call', 'call_id': 'c', 'name': 'f', 'arguments': '{}'},
        {'type': 'reasoning', 'summary': [{'type': 'summary_text', 'text': 'hmm\nmore'}]},
        {'role': 'user', 'content': 'text with \u2028 a unicode line separator'},
    ],
)
def test_records_round_trip(item: dict[str, object]) -> None:
    assert parse_summary_text(build_summary_text([item])) == [item]


def test_empty_summary_flattens_to_nothing() -> None:
    assert parse_summary_text(build_summary_text([])) == []


def test_parse_rules() -> None:
    lines = [
        '1. user',  # bare role recovery
        '2. user (Bob)',  # bare role with a name
        '3. just some prose',  # no colon, not a role: dropped
        '4. : no role',  # empty role: dropped
        '5. (Bob): hi',  # a name without a role is a developer message
        '6. Note: something',  # unknown roles with a colon are accepted
        '7. function_call: {"name": "f"}',  # legacy typed item
        '8. [1, 2]',  # a JSON list is not an item: no colon, dropped
        '',
        '   ',
        '9. assistant: first line',
        'continued line   ',
        '10. {"role": "user", "content": "x", "provider_data": {"p": 1}, "_agents_tool_title": "t"}',
    ]
    body = '\n'.join(lines)
    text = f'For context, here is the conversation so far between the user and the previous agent:\n{WRAPPERS[0]}\n{body}\n{WRAPPERS[1]}'
    assert parse_summary_text(text) == snapshot(
        [
            {'role': 'user', 'content': ''},
            {'role': 'user', 'name': 'Bob', 'content': ''},
            {'role': 'developer', 'name': 'Bob', 'content': 'hi'},
            {'role': 'Note', 'content': 'something'},
            {'name': 'f', 'type': 'function_call'},
            {'role': 'assistant', 'content': 'first line\ncontinued line'},
            {'role': 'user', 'content': 'x'},
        ]
    )


def test_unnumbered_first_lines_are_their_own_records() -> None:
    text = f'For context, here is the conversation so far:\n{WRAPPERS[0]}\nuser: a\nassistant: b\n{WRAPPERS[1]}'
    assert parse_summary_text(text) == [{'role': 'user', 'content': 'a'}, {'role': 'assistant', 'content': 'b'}]


@pytest.mark.parametrize(
    'text',
    [
        'plain text',
        'For context, here is the conversation so far between the user and the previous agent:',
        'Other first line\n<CONVERSATION HISTORY>\n1. user: hi\n</CONVERSATION HISTORY>',
        'For context, here is the conversation so far:\n<CONVERSATION HISTORY>\n1. user: hi\n</CONVERSATION HISTORY>\ntrailing',
        'For context, here is the conversation so far:\n<OTHER>\n1. user: hi\n</CONVERSATION HISTORY>',
    ],
)
def test_non_summaries_are_not_parsed(text: str) -> None:
    assert parse_summary_text(text) is None


def test_only_assistant_messages_are_flattened() -> None:
    summary = build_summary_text([{'role': 'user', 'content': 'inner'}])
    items = [
        {'role': 'user', 'content': summary},
        {'type': 'message', 'role': 'assistant', 'content': summary},
        {'role': 'assistant', 'content': [summary]},
    ]
    assert flatten_summaries(items, WRAPPERS) == [
        {'role': 'user', 'content': summary},
        {'role': 'user', 'content': 'inner'},
        {'role': 'assistant', 'content': [summary]},
    ]


def test_wrappers_api() -> None:
    assert get_conversation_history_wrappers() == WRAPPERS
    set_conversation_history_wrappers(start='<<START>>')
    assert get_conversation_history_wrappers() == ('<<START>>', '</CONVERSATION HISTORY>')
    set_conversation_history_wrappers(end='<<END>>')
    assert get_conversation_history_wrappers() == ('<<START>>', '<<END>>')
    text = _summary_of([ModelRequest(parts=[UserPromptPart('hi')])])
    assert text.splitlines()[1] == '<<START>>'
    assert text.splitlines()[-1] == '<<END>>'
    earlier = HandoffInputData(
        input_history=(ModelResponse(parts=[TextPart(text)]),), pre_handoff_items=(), new_items=()
    )
    assert _text(nest_handoff_history(earlier).to_message_history()).splitlines()[2] == '1. user: hi'  # flattened
    reset_conversation_history_wrappers()
    assert get_conversation_history_wrappers() == WRAPPERS
    assert '\\n<<START>>\\n1. user: hi' in _text(nest_handoff_history(earlier).to_message_history())  # a plain record


@pytest.mark.anyio
async def test_wrappers_do_not_leak_between_concurrent_tasks() -> None:
    results: dict[str, str] = {}

    async def worker(name: str, delay: float) -> None:
        set_conversation_history_wrappers(start=f'<{name}>', end=f'</{name}>')
        await anyio.sleep(delay)
        results[name] = build_summary_text([{'role': 'user', 'content': name}])

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, 'a', 0.02)
        tg.start_soon(worker, 'b', 0.0)
    assert results['a'].splitlines()[1] == '<a>'
    assert results['b'].splitlines()[1] == '<b>'
    assert get_conversation_history_wrappers() == WRAPPERS
