"""Structured values and texts that are JSON, spilled: one compact record per line, read, grepped and queried."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._rendering._json_text import JSON_TEXT_MAX_CHARS, json_text_layout
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value

pytestmark = pytest.mark.anyio

RUN_ID = '019ad7c2-5b3e-7f41-9c2d-8e6a4b1f0d37'
"""A uuid7, as pydantic-ai makes a default run id."""

CALL_ID = 'call_Xq3fZ8kLmN2pR7sT9vW1yB4d'
"""A provider-style tool call id."""

HANDLE = f'{RUN_ID}/{CALL_ID}/0'


def users(count: int) -> list[dict[str, Any]]:
    return [
        {
            'id': n,
            'login': f'user-{n}',
            'tags': ['admin', 'ops'] if n % 4 else ['ops'],
            'status': 'suspended' if n == 1234 else 'active',
        }
        for n in range(count)
    ]


def _tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def run_calls(
    tmp_path: Path, value: Any, *follow_ups: tuple[str, dict[str, Any]]
) -> tuple[list[str], LocalFileStore]:
    """Run an agent whose tool returns `value`, then makes the `follow_ups` calls; the tool answers, in order."""
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    steps = [('fetch', {}), *follow_ups]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = (len(messages) - 1) // 2
        if step < len(steps):
            name, args = steps[step]
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f'{CALL_ID}' if step == 0 else f'c{step}')]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=store)])

    @agent.tool_plain
    def fetch() -> Any:
        return value

    result = await agent.run('go', run_id=RUN_ID)
    return [str(part.content) for part in _tool_returns(result.all_messages())], store


async def test_a_list_of_records_is_previewed_as_whole_compact_records(tmp_path: Path) -> None:
    (preview,), store = await run_calls(tmp_path, users(2_000))
    assert preview == snapshot("""\
[`fetch` returned too much to show (~34946 tokens). Saved in full under handle '6rm6wxww11' as JSON, one element per line: 2002 lines, 143786 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Shape: array[2000] of {id: int, login: str, tags: array[1-2] of str, status: str}
First lines (2-5 of 2002):
2|  {"id":0,"login":"user-0","tags":["ops"],"status":"active"},
3|  {"id":1,"login":"user-1","tags":["admin","ops"],"status":"active"},
4|  {"id":2,"login":"user-2","tags":["admin","ops"],"status":"active"},
5|  {"id":3,"login":"user-3","tags":["admin","ops"],"status":"active"},
Last lines (2000-2001):
2000|  {"id":1998,"login":"user-1998","tags":["admin","ops"],"status":"active"},
2001|  {"id":1999,"login":"user-1999","tags":["admin","ops"],"status":"active"}\
""")
    stored = await store.read(HANDLE)
    assert json.loads(stored) == users(2_000)
    assert stored.split(b'\n')[1235] == b' {"id":1234,"login":"user-1234","tags":["admin","ops"],"status":"suspended"},'


async def test_a_grep_hit_is_a_whole_record_and_the_query_tool_finds_its_line(tmp_path: Path) -> None:
    answers, _ = await run_calls(
        tmp_path,
        users(2_000),
        ('grep_tool_result', {'handle': HANDLE, 'pattern': 'suspended', 'context_lines': 0}),
        ('read_tool_result', {'handle': HANDLE, 'path': "$[?@.status=='suspended'].login"}),
    )
    _, grep, query = answers
    assert '>1236|  {"id":1234,"login":"user-1234","tags":["admin","ops"],"status":"suspended"},' in grep
    assert 'line 1236: $[1234][\'login\'] = "user-1234"' in query


async def test_text_that_is_json_is_stored_and_previewed_like_a_structured_value(tmp_path: Path) -> None:
    """What MCP servers and HTTP tools return: a JSON document as one string, often on one line."""
    text = json.dumps({'data': users(2_000), 'next_cursor': None})
    (preview, read, query), store = await run_calls(
        tmp_path,
        text,
        ('read_tool_result', {'handle': HANDLE, 'offset': 1237, 'limit': 1}),
        ('read_tool_result', {'handle': HANDLE, 'path': '$.data[1234].status'}),
    )
    assert preview.split('\n')[0] == snapshot(
        "[`fetch` returned too much to show (~39329 tokens). Saved in full under handle '6rm6wxww11' as JSON, one element per line: 2005 lines, 145820 bytes; a preview follows."
    )
    assert (
        'Shape: {data: array[2000] of {id: int, login: str, tags: array[1-2], status: str}, next_cursor: null}'
        in preview
    )
    assert '3|   {"id":0,"login":"user-0","tags":["ops"],"status":"active"},' in preview
    assert json.loads(await store.read(HANDLE)) == json.loads(text)
    assert '1237|   {"id":1234,"login":"user-1234","tags":["admin","ops"],"status":"suspended"},' in read
    assert "line 1237: $['data'][1234]['status'] = \"suspended\"" in query


@pytest.mark.parametrize(
    'text',
    [
        '{"unterminated": [' + '1,' * 20_000,  # looks like JSON, is not
        '[' + 'x' * 30_000 + ']',
        'NaN' + ' ' * 20_000,
    ],
)
def test_text_that_is_not_json_stays_text(text: str) -> None:
    assert json_text_layout(text) is None
    assert render_value(text).json_text_layout is None


def test_only_texts_that_open_an_object_or_an_array_are_parsed_and_only_up_to_a_size() -> None:
    assert json_text_layout('  \n [1, 2, 3]') is not None
    assert json_text_layout('"a JSON string"') is None
    assert json_text_layout('12345') is None
    big = '[' + '0,' * (JSON_TEXT_MAX_CHARS // 2) + '0]'
    assert len(big) > JSON_TEXT_MAX_CHARS
    assert json_text_layout(big) is None  # parsing it would cost several times its size in memory


async def test_a_one_line_text_gets_guidance_in_bytes_and_a_cut_with_its_offset(tmp_path: Path) -> None:
    token = 'eyJhbGciOi' * 3_000 + 'MARK' + 'Zm9vYmFy' * 2_000
    (preview, read), _ = await run_calls(
        tmp_path, token, ('read_tool_result', {'handle': HANDLE, 'unit': 'bytes', 'offset': 160, 'limit': 20})
    )
    assert preview == snapshot("""\
[`fetch` returned too much to show (~11501 tokens). Saved in full under handle '6rm6wxww11': 1 line, 46004 bytes; a preview follows.
grep_tool_result(handle, pattern) finds each match and its byte offset; read_tool_result(handle, unit='bytes', offset=N, limit=16000) reads 16000 bytes from byte N.]
Start of the one line:
eyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOieyJhbGciOi[... line cut: read on with unit='bytes', offset=160]\
""")
    assert 'eyJhbGciOieyJhbGciOi' in read  # the offset shown reads on where the preview stopped
    assert 'lines' not in preview.split('\n')[1]


def test_model_facing_json_preview_costs_what_it_says() -> None:
    """The fixed part of a JSON preview (header and paging line), counted with cl100k on a real default handle."""
    from examples._scripted import cl100k_counter
    from pydantic_ai_harness.overflowing_tool_output._rendering._markers import (
        SpillSummary,
        spill_header,
        spill_how_to_read,
    )

    count = cl100k_counter()
    summary = SpillSummary('fetch', HANDLE, 1_000_000, 250_000, 20_000, 1_020_000, json=True)
    assert count(spill_header(summary) + spill_how_to_read()) == snapshot(136)
    assert count(spill_header(summary) + spill_how_to_read(one_line=True)) == snapshot(144)


def test_the_stored_json_of_a_text_parses_back_equal() -> None:
    text = json.dumps({'a': [1.5, 'x', None, {'b': [True] * 600}]})
    layout = json_text_layout(text)
    assert layout is not None
    assert pydantic_core.from_json(layout.data()) == json.loads(text)
    assert re.match(rb'\{\n "a":\[\n  1.5,\n', layout.data())


class _Row(pydantic.BaseModel):
    """A record whose serializer notes the thread it runs in."""

    n: int

    @pydantic.field_serializer('n')
    def _note_thread(self, n: int) -> int:
        SERIALIZED_IN.add(threading.current_thread() is threading.main_thread())
        return n


SERIALIZED_IN: set[bool] = set()


@pytest.mark.parametrize(
    'value',
    [
        lambda: [_Row(n=n) for n in range(30_000)],
        lambda: {'items': [_Row(n=n) for n in range(30_000)], 'total': 30_000},
    ],
    ids=['list', 'dict holding a list'],
)
async def test_a_large_value_is_serialized_off_the_event_loop(tmp_path: Path, value: Any) -> None:
    """Serializing a large return runs in a worker thread (handing the GIL back), never on the event loop's."""
    SERIALIZED_IN.clear()
    (preview,), _ = await run_calls(tmp_path, value())
    assert 'as JSON, one element per line: 3000' in preview
    assert SERIALIZED_IN == {False}
