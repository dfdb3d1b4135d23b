"""The Spill action as the capability runs it: handles, metadata, previews, fallbacks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from dirty_equals import IsInt
from inline_snapshot import snapshot
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturn, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Spill,
    stores,
)

from .conftest import MemoryStore, call_tools_once, run_tool

pytestmark = pytest.mark.anyio


def build_log(lines: int = 50_000) -> str:
    rows = [f'2026-11-29 12:00:{i % 60:02d} INFO worker step {i} ok' for i in range(1, lines + 1)]
    rows[lines // 2 - 3] = 'Traceback (most recent call last):'
    rows[lines // 2 - 2] = '  File "app/api.py", line 88, in login'
    rows[lines // 2 - 1] = 'FAILED tests/test_api.py::test_login - AssertionError: expected 200, got 500'
    return '\n'.join(rows) + '\nexit status 1\n'


async def test_spill_preview_for_a_log(memory_store: MemoryStore) -> None:
    run = await run_tool(OverflowingToolOutput(store=memory_store), build_log(), tool_name='run_tests')
    preview = run.returned()
    assert len(preview) <= 1_100
    assert preview == snapshot("""\
[`run_tests` returned too much to show (~572231 tokens). Saved in full under handle 'run-1/call_0/0': 50001 lines, 2288921 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Lines that look important (errors, failures, exit status):
24998| Traceback (most recent call last):
25000| FAILED tests/test_api.py::test_login - AssertionError: expected 200, got 500
50001| exit status 1
First lines (1-3 of 50001):
1| 2026-11-29 12:00:01 INFO worker step 1 ok
2| 2026-11-29 12:00:02 INFO worker step 2 ok
3| 2026-11-29 12:00:03 INFO worker step 3 ok
Last lines (49999-50000):
49999| 2026-11-29 12:00:19 INFO worker step 49999 ok
50000| 2026-11-29 12:00:20 INFO worker step 50000 ok\
""")
    assert run.returns()[0].metadata == {
        'overflow_action': 'spill',
        'overflow_size_before': len(build_log()),
        'overflow_size_after': len(preview),
        'overflow_handle': 'run-1/call_0/0',
        'overflow_bytes': len(build_log().encode()),
        'overflow_key': 'run-1/call_0/0',
    }
    assert memory_store.data['run-1/call_0/0'] == build_log().encode()


async def test_a_preview_budget_too_small_for_any_line_promises_no_preview(memory_store: MemoryStore) -> None:
    """With `preview_chars` taken by the header and the paging line, the header says only where the output is."""
    capability = OverflowingToolOutput(store=memory_store, bands=[Band(over=1_000, action=Spill(preview_chars=200))])
    preview = (await run_tool(capability, 'ticket filed\n' + 'x' * 7_000, tool_name='a')).returned()
    assert preview == snapshot("""\
[`a` returned too much to show (~1754 tokens). Saved in full under handle 'run-1/call_0/0': 2 lines, 7013 bytes.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]\
""")
    assert 'a preview follows' not in preview


async def test_spill_preview_for_structured_data(memory_store: MemoryStore) -> None:
    data = {
        'meta': {'page': 1, 'total': 40_000},
        'items': [{'id': i, 'name': f'user {i}', 'tags': ['a', 'b']} for i in range(2_000)],
        'next': None,
    }
    run = await run_tool(OverflowingToolOutput(store=memory_store), data, tool_name='list_users')
    assert run.returned() == snapshot("""\
[`list_users` returned too much to show (~23459 tokens). Saved in full under handle 'run-1/call_0/0' as JSON, one element per line: 2006 lines, 99845 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Shape: {meta: {page: int, total: int}, items: array[2000] of {id: int, name: str, tags: array[2]}, next: null}
First lines (2-6 of 2006):
2|  "meta":{"page":1,"total":40000},
3|  "items":[
4|   {"id":0,"name":"user 0","tags":["a","b"]},
5|   {"id":1,"name":"user 1","tags":["a","b"]},
6|   {"id":2,"name":"user 2","tags":["a","b"]},
Last lines (2002-2005):
2002|   {"id":1998,"name":"user 1998","tags":["a","b"]},
2003|   {"id":1999,"name":"user 1999","tags":["a","b"]}
2005|  "next":null\
""")
    stored = memory_store.data['run-1/call_0/0'].decode()
    assert json.loads(stored) == data
    assert '\n  {"id":1234,"name":"user 1234","tags":["a","b"]},\n' in stored  # one record per line: a hit is whole


async def test_spill_of_binary_is_verbatim(memory_store: MemoryStore) -> None:
    blob = b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 100
    run = await run_tool(OverflowingToolOutput(store=memory_store), blob, tool_name='screenshot')
    assert memory_store.data['run-1/call_0/0'] == blob
    assert run.returned() == snapshot("""\
[`screenshot` returned binary data (25608 bytes, PNG image, image/png), which cannot be shown as text. Saved verbatim under handle 'run-1/call_0/0'.
read_tool_result(handle, unit='bytes', offset=0, limit=512) shows a hex dump of a byte range; grep_tool_result(handle, pattern) searches it for text.]
First bytes: 89 50 4e 47 0d 0a 1a 0a 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13 14 15 16 17\
""")


async def test_value_and_content_spill_to_distinct_handles(memory_store: MemoryStore) -> None:
    envelope = ToolReturn(return_value='v' * 20_000, content='c' * 20_000, metadata={'origin': 'tool'})
    run = await run_tool(OverflowingToolOutput(store=memory_store), envelope)
    assert run.returns()[0].metadata == {
        'origin': 'tool',
        'overflow_action': 'spill',
        'overflow_size_before': 20_000,
        'overflow_size_after': IsInt(lt=1_100),
        'overflow_handle': 'run-1/call_0/0',
        'overflow_bytes': 20_000,
        'overflow_key': 'run-1/call_0/0',
        'overflow_content_action': 'spill',
        'overflow_content_size_before': 20_000,
        'overflow_content_size_after': IsInt(lt=1_100),
        'overflow_content_handle': 'run-1/call_0/0/content',
        'overflow_content_bytes': 20_000,
        'overflow_content_key': 'run-1/call_0/0/content',
    }
    assert sorted(memory_store.data) == ['run-1/call_0/0', 'run-1/call_0/0/content']
    [content] = run.user_texts()
    assert 'run-1/call_0/0/content' in content


async def test_hundred_parallel_oversized_calls_get_distinct_readable_handles(memory_store: MemoryStore) -> None:
    agent = Agent(
        call_tools_once(*[('big', {'n': n}) for n in range(100)]),
        capabilities=[OverflowingToolOutput(store=memory_store)],
    )

    @agent.tool_plain
    def big(n: int) -> str:
        return f'payload {n}\n' * 2_000

    result = await agent.run('go', run_id='run-1')
    returns = [p for m in result.all_messages() for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    handles = {p.metadata['overflow_handle'] for p in returns}
    assert len(handles) == 100
    for part in returns:
        n = int(part.tool_call_id.removeprefix('call_'))
        assert memory_store.data[part.metadata['overflow_handle']] == (f'payload {n}\n' * 2_000).encode()


@dataclass
class RejectFirstAttempt(AbstractCapability[Any]):
    """An outer capability that sends the first attempt back with ModelRetry, after the spill happened."""

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: dict[str, Any], result: Any
    ) -> Any:
        if ctx.retry == 0:
            raise ModelRetry('not good enough, run it again')
        return result


async def test_a_retried_call_never_clobbers_the_earlier_spill(memory_store: MemoryStore) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) < 4:  # the first call, then the retry the rejection asks for (same call id)
            return ModelResponse(parts=[ToolCallPart('flaky', {}, tool_call_id='call_0')])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond),
        capabilities=[RejectFirstAttempt(), OverflowingToolOutput(store=memory_store)],
    )

    @agent.tool(retries=3)
    def flaky(ctx: RunContext[Any]) -> str:
        return f'attempt {ctx.retry}\n' * 5_000

    await agent.run('go', run_id='run-1')
    assert sorted(memory_store.data) == ['run-1/call_0/0', 'run-1/call_0/1']
    assert memory_store.data['run-1/call_0/0'].startswith(b'attempt 0')
    assert memory_store.data['run-1/call_0/1'].startswith(b'attempt 1')


async def test_the_same_input_gives_byte_identical_model_visible_text() -> None:
    first = await run_tool(OverflowingToolOutput(store=MemoryStore()), build_log(5_000))
    second = await run_tool(OverflowingToolOutput(store=MemoryStore()), build_log(5_000))
    assert first.returned() == second.returned()


async def test_a_hanging_store_is_bounded_by_the_timeout() -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=100, action=Spill(timeout=0.2))], store=stores.MemoryStore(hang=True)
    )
    with pytest.warns(
        OverflowingToolOutputWarning, match=r'did not finish writing within 0.2 s; falling back to Truncate'
    ):
        run = await run_tool(capability, 'h' * 10_000)
    assert 'not kept' in run.returned()


@pytest.mark.parametrize('bad_handle', ['', None, 42])
async def test_a_store_returning_no_handle_falls_back(bad_handle: Any) -> None:
    class OddStore:
        async def write(self, key: str, data: bytes) -> Any:
            return bad_handle

        async def read(self, handle: str) -> bytes:
            raise KeyError(handle)

    with pytest.warns(OverflowingToolOutputWarning, match='instead of a handle string'):
        run = await run_tool(OverflowingToolOutput(store=OddStore()), 'o' * 20_000)
    assert len(run.returned()) <= 5_000


async def test_the_query_tools_own_output_is_never_reduced(memory_store: MemoryStore) -> None:
    """A read capped at the tools' own 20,000 characters passes through even with a 100-character band."""
    capability = OverflowingToolOutput(bands=[Band(over=100, action=Spill())], store=memory_store)
    agent = Agent(
        call_tools_once(('big', {})),
        capabilities=[capability],
    )
    agent.tool_plain(name='big')(lambda: ''.join(f'row {i}: ' + 'x' * 20 + '\n' for i in range(5_000)))
    result = await agent.run('go', run_id='run-1')
    handle = _returns(result.all_messages())[0].metadata['overflow_handle']

    reader = Agent(
        call_tools_once(('read_tool_result', {'handle': handle, 'offset': 0, 'limit': 1_000})),
        capabilities=[capability],
    )
    read = await reader.run('read it')
    part = _returns(read.all_messages())[0]
    assert part.tool_name == 'read_tool_result'
    assert part.metadata is None  # untouched by the capability
    text = part.model_response_str()
    assert len(text) > 19_000
    assert 'row 540: ' in text


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
