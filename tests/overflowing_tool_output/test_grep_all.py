"""`grep_tool_result` without a handle: one search over every stored result of the conversation, in real agent runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    QueryLimits,
    Spill,
    build_query_toolset,
)

pytestmark = pytest.mark.anyio


def _page(number: int) -> str:
    """About 300 KB of text; page 7 holds the one fact."""
    lines = [
        f'page {number} paragraph {n}: nothing of note here, just filler text to make it long.' for n in range(3_600)
    ]
    lines = [line + ' More filler words follow.' for line in lines]
    if number == 7:
        lines[2_345] = 'The launch code of project Halcyon is 4417-ZETA.'
    return '\n'.join(lines)


def _scripted(calls: list[list[tuple[str, dict[str, Any]]]], answers: list[str]) -> FunctionModel:
    """A model that makes `calls` one step at a time and records every tool return it is shown."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            answers.extend(str(part.content) for part in last.parts if isinstance(part, ToolReturnPart))
        # Steps count from this run's prompt, so a run continuing a conversation starts its script at step 0.
        prompt = max(
            i
            for i, message in enumerate(messages)
            if isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts)
        )
        step = sum(isinstance(message, ModelResponse) for message in messages[prompt:])
        if step >= len(calls):
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f'call_{step}_{i}') for i, (name, args) in enumerate(calls[step])
            ]
        )

    return FunctionModel(respond)


async def test_ten_300_kb_pages_one_grep_without_a_handle_finds_the_fact(tmp_path: Path) -> None:
    answers: list[str] = []
    calls = [
        [('fetch_page', {'number': n}) for n in range(10)],
        [('grep_tool_result', {'pattern': 'launch code'})],
    ]
    agent = Agent(
        _scripted(calls, answers), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))]
    )
    agent.tool_plain(name='fetch_page')(_page)
    result = await agent.run('What is the launch code of project Halcyon?')
    previews, grep = answers[:10], answers[10]
    assert all(len(_page(n)) > 290_000 for n in (0, 7))
    handle_of_page_7 = re.search(r"handle '(\w+)'", previews[7])
    assert handle_of_page_7 is not None
    assert grep.startswith("1 matching line for 'launch code' (literal, case-sensitive) in 1 stored result (10 stored")
    assert f'-- {handle_of_page_7.group(1)} (fetch_page, 3600 lines): 1 matching line --' in grep
    assert '2346| The launch code of project Halcyon is 4417-ZETA.' in grep
    # One retrieval call: the fact, its handle and its line, with the call that reads around it.
    retrievals = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_name.endswith('_tool_result')
    ]
    assert len(retrievals) == 1


async def test_a_thousand_spills_are_searched_within_the_total_bytes_cap(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path)
    stored: list[str] = []
    calls = [[('row', {'number': n}) for n in range(1_000)]]
    spill_small = OverflowingToolOutput(store=store, bands=[Band(over=100, action=Spill())])
    agent = Agent(_scripted(calls, stored), capabilities=[spill_small])
    agent.tool_plain(name='row')(lambda number: ''.join(f'row {number} item {i}\n' for i in range(200)))
    spilled = await agent.run('Store a thousand rows.')
    assert len(stored) == 1_000 and all('Saved in full under handle' in text for text in stored)

    # A reader over the same conversation with a low total-bytes cap: the search stops at it and says how to go on.
    answers: list[str] = []
    limits = QueryLimits(max_scan_bytes=50_000, time_budget=30)
    reader = Agent(
        _scripted([[('grep_tool_result', {'pattern': 'row 0 item 7'})]], answers),
        toolsets=[build_query_toolset(store, limits=limits, route=lambda _ctx, _handle: store)],
    )
    await reader.run('Find row 0 item 7.', message_history=spilled.all_messages())
    [answer] = answers
    searched = re.search(r'; (\d+) stored results searched of the 1000 this conversation holds', answer)
    assert searched is not None, answer
    assert 0 < int(searched.group(1)) < 1_000
    scanned = re.search(r'; (\d+) bytes\)', answer)
    assert scanned is not None and int(scanned.group(1)) <= 50_000
    position = int(searched.group(1)) + 1
    assert (
        f'one search without a handle scans at most 50000 bytes. Continue: '
        f"grep_tool_result(pattern='row 0 item 7', offset={position})" in answer
    )


async def test_a_handle_from_another_conversation_is_never_searched(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path)
    first: list[str] = []
    agent = Agent(
        _scripted([[('fetch_page', {'number': 7})]], first), capabilities=[OverflowingToolOutput(store=store)]
    )
    agent.tool_plain(name='fetch_page')(_page)
    await agent.run('Fetch page 7.')
    assert 'Saved in full' in first[0]

    # A new conversation over the same store: it holds only its own spill of page 3, not the other one's page 7.
    answers: list[str] = []
    calls = [[('fetch_page', {'number': 3})], [('grep_tool_result', {'pattern': 'launch code'})]]
    other = Agent(_scripted(calls, answers), capabilities=[OverflowingToolOutput(store=store)])
    other.tool_plain(name='fetch_page')(_page)
    await other.run('Fetch page 3 and find the launch code.')
    assert answers[1].startswith(
        "No line matches 'launch code' (literal, case-sensitive; 1 stored result searched of the 1 this conversation "
        'holds, newest first;'
    )


async def test_a_conversation_without_spills_is_told_to_call_the_tool_that_produces_the_output(tmp_path: Path) -> None:
    # A small model asked a question calls the query tools first (issue 36): each answer says what to do instead.
    answers: list[str] = []
    agent = Agent(
        _scripted([[('grep_tool_result', {'pattern': 'x'})], [('read_tool_result', {'handle': 'abc123'})]], answers),
        capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))],
    )
    await agent.run('Search.')
    assert answers == snapshot(
        [
            'Nothing is stored yet, so there is nothing to search. First call the tool that produces the output you need; an output too large to show is stored then, and its preview names the handle.',
            "No stored result found under handle 'abc123'. A handle is the exact string shown after 'handle' in the preview of an output too large to show; copy it exactly. An output shown in full has none: read it where it is in the conversation. If the output you need was not produced yet, or was cleaned up since, call the tool that produces it.",
        ]
    )


async def test_the_time_budget_stops_the_search_with_the_calls_that_continue(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path)
    stored: list[str] = []
    agent = Agent(
        _scripted([[('fetch_page', {'number': n}) for n in (1, 2)]], stored),
        capabilities=[OverflowingToolOutput(store=store)],
    )
    agent.tool_plain(name='fetch_page')(_page)
    spilled = await agent.run('Fetch two pages.')
    assert len(stored) == 2

    # No time at all: the newest result is searched in its first block all the same (every call gets further), and
    # the answer says first that the older one was not searched, with the call that searches it.
    answers: list[str] = []
    calls = [[('grep_tool_result', {'pattern': 'launch code'})], [('grep_tool_result', {'pattern': 'x', 'offset': -1})]]
    reader = Agent(
        _scripted(calls, answers),
        toolsets=[build_query_toolset(store, limits=QueryLimits(time_budget=0), route=lambda _ctx, _handle: store)],
    )
    await reader.run('Find the launch code.', message_history=spilled.all_messages())
    assert answers[0].splitlines()[0] == (
        'Incomplete: the time budget (0 s) ran out before the 2nd result; it and the older ones were not searched. '
        "Continue: grep_tool_result(pattern='launch code', offset=2)."
    )
    # Not "No line matches": the older result was not searched.
    assert (
        answers[0]
        .splitlines()[1]
        .startswith(
            "No match for 'launch code' in the part searched (literal, case-sensitive; 1 stored result searched of the 2"
        )
    )
    # A negative offset is answered as every guidance is: what offset means without a handle, and what to pass.
    assert answers[1] == (
        'offset must be 0 or more (without a handle: the stored result to start at, 1 = the newest), got -1. '
        'Leave it out to search from the newest.'
    )
