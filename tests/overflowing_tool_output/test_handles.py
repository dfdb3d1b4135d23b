"""Short handles with pydantic-ai's default ids, and what the query tools do with a handle they do not know.

Real agent runs (`FunctionModel` scripts) over a real `LocalFileStore`: a uuid7 run id and provider-style tool
call ids, as a run gets them by default.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._query_tools._handles import KnownHandle, near_misses
from pydantic_ai_harness.overflowing_tool_output.stores._paths import is_short_handle

pytestmark = pytest.mark.anyio

RUN_ID = '019adc3e-8f21-7c4b-9a6e-5d0f2b7c8e13'
"""A uuid7, the shape of pydantic-ai's default run id (fixed so that the snapshots below are exact)."""

CALLS = {
    'run_tests': 'call_Xq3vR8bN2mKp7LwT9yZc',
    'fetch_logs': 'call_9hTq2LmXv4RbN8pKs1Wd',
    'list_files': 'call_Jr5nB2xQ7vLk3MpZ8tYe',
}
"""Tool name -> the tool call id a provider gives it (OpenAI's shape)."""


def output_of(tool: str) -> str:
    return ''.join(f'{tool} line {n}\n' for n in range(1, 3001))


def spilled(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and isinstance(part.metadata, dict) and 'overflow_handle' in part.metadata
    ]


def handle_of(part: ToolReturnPart) -> str:
    assert isinstance(part.metadata, dict)
    return part.metadata['overflow_handle']


def key_of(part: ToolReturnPart) -> str:
    assert isinstance(part.metadata, dict)
    return part.metadata['overflow_key']


def scripted_agent(
    store: LocalFileStore, ask: Callable[[list[ToolReturnPart]], dict[str, Any]], calls: dict[str, str] = CALLS
) -> tuple[Agent[None, str], list[str]]:
    """An agent whose model calls every tool in `calls` at once, then `read_tool_result(**ask(spilled parts))`."""
    answers: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if not any(isinstance(part, ToolReturnPart) for part in last.parts):
            return ModelResponse(parts=[ToolCallPart(tool, {}, tool_call_id=call) for tool, call in calls.items()])
        reads = [p for p in last.parts if isinstance(p, ToolReturnPart) and p.tool_name == 'read_tool_result']
        if reads:
            answers.append(str(reads[0].content))
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('read_tool_result', ask(spilled(messages)))])

    agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=store)])
    for tool in calls:
        agent.tool_plain(name=tool)(lambda tool=tool: output_of(tool))
    return agent, answers


async def test_default_ids_get_short_handles_that_resolve_in_another_process(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'spill')
    agent, answers = scripted_agent(store, lambda parts: {'handle': handle_of(parts[0]), 'limit': 2})
    result = await agent.run('go')  # No run id given: pydantic-ai makes a uuid7.
    parts = spilled(result.all_messages())
    assert len(parts) == 3
    for part in parts:
        handle, key = handle_of(part), key_of(part)
        assert is_short_handle(handle) and len(handle) <= 16
        assert re.fullmatch(rf'{result.run_id}/{CALLS[part.tool_name]}/0', key)  # The full form stays in metadata.
        assert handle in str(part.content) and result.run_id not in str(part.content)
    assert re.match(rf'Stored result {handle_of(parts[0])!r}: lines 1-2 of 3,?000', answers[0])
    # Another process and a later run: the CLI reads the short handle from the same root.
    shown = subprocess.run(  # noqa: ASYNC221 - a real second process, once
        [sys.executable, '-m', 'pydantic_ai_harness.overflowing_tool_output', '--root', str(store.root)]
        + ['show', handle_of(parts[1]), '--lines', '1:1'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert 'fetch_logs line 1' in shown.stdout
    later = LocalFileStore(tmp_path / 'spill')
    assert await later.read(handle_of(parts[2])) == output_of('list_files').encode()


async def test_an_unknown_handle_lists_the_handles_of_the_run_newest_first(tmp_path: Path) -> None:
    agent, answers = scripted_agent(LocalFileStore(tmp_path / 'spill'), lambda parts: {'handle': 'k3x9m2p7qd'})
    await agent.run('go', run_id=RUN_ID)
    assert answers[0] == snapshot("""\
No stored result found under handle 'k3x9m2p7qd'. Stored results of this conversation, newest first:
j68nfkvggv  (list_files)
9pjwbfxzjx  (fetch_logs)
p7jrrmpjr4  (run_tests)
Pass one of these handles exactly. A result cleaned up since needs its tool called again.\
""")


async def test_the_list_is_bounded_to_the_ten_newest(tmp_path: Path) -> None:
    calls = {f'tool_{n}': f'call_{n:02d}Xq3vR8bN2mKp7LwT9' for n in range(12)}
    agent, answers = scripted_agent(LocalFileStore(tmp_path / 'spill'), lambda parts: {'handle': 'nope'}, calls)
    await agent.run('go', run_id=RUN_ID)
    lines = answers[0].splitlines()
    assert lines[0].endswith('Stored results of this conversation (the newest 10 of 12), newest first:')
    assert [line.split()[-1] for line in lines[1:-1]] == [f'(tool_{n})' for n in range(11, 1, -1)]


NEAR_MISSES: dict[str, Callable[[str, str], str]] = {
    'double quotes': lambda handle, key: f'"{handle}"',
    'backticks': lambda handle, key: f'`{handle}`',
    'whitespace': lambda handle, key: f' {handle}\n',
    'angle brackets': lambda handle, key: f'<{handle}>',
    'upper case': lambda handle, key: handle.upper(),
    'a trailing full stop': lambda handle, key: f'{handle}.',
    'a label': lambda handle, key: f'handle={handle}',
    'an added prefix': lambda handle, key: f'.overflow/{handle}',
    'the full form': lambda handle, key: key,
    'the full form, quoted': lambda handle, key: f"'{key}'",
    'the full form without its run id': lambda handle, key: key.split('/', 1)[1],
    'the full form in upper case': lambda handle, key: key.upper(),
}


@pytest.mark.parametrize('mangle', NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
async def test_an_unambiguous_near_miss_is_read_with_a_note(tmp_path: Path, mangle: Callable[[str, str], str]) -> None:
    asked: list[str] = []

    def ask(parts: list[ToolReturnPart]) -> dict[str, Any]:
        asked.append(mangle(handle_of(parts[1]), key_of(parts[1])))
        return {'handle': asked[0], 'limit': 1}

    agent, answers = scripted_agent(LocalFileStore(tmp_path / 'spill'), ask)
    result = await agent.run('go', run_id=RUN_ID)
    meant = handle_of(spilled(result.all_messages())[1])
    note, header, line, *_ = answers[0].splitlines()
    assert note == f'(Read {asked[0]!r} as the handle {meant!r}.)'
    assert re.match(rf'Stored result {meant!r}: lines 1-1 of 3,?000', header)
    assert line == '1| fetch_logs line 1'


def test_ambiguous_or_too_short_near_misses_resolve_to_nothing() -> None:
    known = [
        KnownHandle('w1ttbrr2f9', 'list_files', f'{RUN_ID}/call_Xq3vR8bN2mKp7LwT9yZc/0'),
        KnownHandle('6b2ysa7ad1', 'list_files', '019adc3f-0000-7000-8000-000000000000/call_Xq3vR8bN2mKp7LwT9yZc/0'),
    ]
    assert len(near_misses('call_Xq3vR8bN2mKp7LwT9yZc/0', known)) == 2  # The same call id in two runs.
    assert near_misses('0', known) == []  # Far too short to stand for a handle.
    assert near_misses('""', known) == []
    assert near_misses('ttbrr2f9', known) == []  # Part of a short handle is no handle.
    assert near_misses('handle=' * 200_000 + 'w1ttbrr2f9', known) == []  # Hostile and huge: no quadratic stripping.


async def test_an_ambiguous_near_miss_lists_its_candidates(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'spill')
    first, _ = scripted_agent(store, lambda parts: {'handle': handle_of(parts[0])}, {'run_tests': 'call_A1'})
    history = (await first.run('go', run_id=RUN_ID)).all_messages()
    second, answers = scripted_agent(store, lambda parts: {'handle': 'call_A1/0', 'limit': 1}, {'run_tests': 'call_A1'})
    await second.run('again', run_id='019adc3f-0000-7000-8000-000000000000', message_history=history)
    assert answers[0] == snapshot("""\
The handle 'call_A1/0' could mean any of these stored results, newest first:
0swv1b4b8x  (run_tests)
wrmw6661ba  (run_tests)
Pass one of these handles exactly. A result cleaned up since needs its tool called again.\
""")
