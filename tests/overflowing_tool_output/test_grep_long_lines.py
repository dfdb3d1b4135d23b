"""A search reaches every byte of a long line, or says first what it did not search (issue 31, section 3).

Against the official MCP filesystem server, 3 of 15 planted facts were not found, all more than 4 MiB into a single
line: `grep_tool_result` and `read_tool_result(pattern=)` searched a line in its first 4 MiB only (a regex in its
first 1-1.5 MiB), answered "No line matches" and put that caveat at the end; the search without a handle gave no
caveat at all. Every test here is a real agent run over a real spill in a `LocalFileStore`, with a scripted model
that calls the query tools with the handles it was shown.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    LocalFileStore,
    OverflowingToolOutput,
    QueryLimits,
    build_query_toolset,
)

from ._scripted_queries import RUN_ID, Call, Script, call_arguments

pytestmark = pytest.mark.anyio

MIB = 1 << 20
FACT = 'fact-7Q2X: the vault code is 5521'
PLANTED = (5 * MIB, int(8.9 * MIB))
"""Where the fact starts in the one line: past the first 4 MiB block, and near the end of the third."""

FOUND_AT = tuple(at + FACT.index('vault code') for at in PLANTED)
"""Where `vault code` starts in the stored bytes (the line is the whole payload, ASCII)."""


def one_line() -> str:
    """A 9 MiB single line of words (a minified asset, say) with the fact planted twice."""
    rng = random.Random(31)
    words = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'kappa', 'sigma', 'theta', 'lambda']
    text = ' '.join(rng.choices(words, k=9 * MIB // 5))[: 9 * MIB]
    for at in PLANTED:
        text = text[:at] + FACT + text[at + len(FACT) :]
    return text


def table() -> str:
    """A second spill, 20,000 ordinary lines, holding the same fact on line 1235."""
    lines = [f'row {i}: status ok, nothing to report' for i in range(20_000)]
    lines[1_234] = f'row 1234: {FACT}'
    return '\n'.join(lines)


def spilling_agent(script: Script, store: LocalFileStore) -> Agent[None, str]:
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='dump')(one_line)
    agent.tool_plain(name='table')(table)
    return agent


@pytest.mark.xfail(reason='issue 31 section 3: a line is searched in its first 4 MiB only', strict=True)
async def test_a_fact_deep_in_a_9_mib_line_is_found_by_every_search(tmp_path: Path) -> None:
    def queries(handles: dict[str, str]) -> list[Call]:
        dump = handles['dump']
        return [
            ('grep_tool_result', {'handle': dump, 'pattern': 'vault code'}),
            ('grep_tool_result', {'handle': dump, 'pattern': r'vault code is \d+', 'is_regex': True}),
            ('grep_tool_result', {'pattern': 'vault code'}),
            ('read_tool_result', {'handle': dump, 'pattern': 'vault code'}),
        ]

    script = Script([('dump', {}), ('table', {})], queries)
    await spilling_agent(script, LocalFileStore(base_dir=tmp_path)).run('Find the vault code.', run_id=RUN_ID)
    _previews, grep_literal, grep_regex, grep_all, read = script.shown[:2], *script.shown[2:]
    for answer in (grep_literal, grep_regex, grep_all):
        assert 'No line matches' not in answer
        # Both places in the one line are found, each shown with the bytes around it.
        assert all(f'byte {at}' in answer for at in FOUND_AT), answer
        assert answer.count('vault code is 5521') >= 2
    assert script.handles['table'] in grep_all
    assert 'No line containing' not in read and 'vault code is 5521' in read


@pytest.mark.xfail(reason='issue 31 section 3: a stop inside a long line cannot be continued there', strict=True)
async def test_a_search_stopped_inside_a_long_line_says_so_first_and_continues_there(tmp_path: Path) -> None:
    """No time budget at all: each call searches one step of the line, says first where it stopped, and the call it
    names continues there, until both places are found."""
    store = LocalFileStore(base_dir=tmp_path)
    spilled = Script([('dump', {}), ('table', {})], lambda handles: [])
    history = await spilling_agent(spilled, store).run('Fetch the dump.', run_id=RUN_ID)
    dump = spilled.handles['dump']

    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and isinstance(last.parts[-1], ToolReturnPart) and len(answers) < 40:
            answers.append(str(last.parts[-1].content))
            follow = re.search(r'Continue: (grep_tool_result\(.*?\))[.]', answers[-1])
            if follow is None:
                return ModelResponse(parts=[TextPart('done')])
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', call_arguments(follow.group(1)))])
        if len(answers) >= 40:
            return ModelResponse(parts=[TextPart('gave up')])
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': dump, 'pattern': 'vault code'})])

    toolset = build_query_toolset(store, limits=QueryLimits(time_budget=0), route=lambda _ctx, _handle: store)
    reader = Agent(FunctionModel(model), toolsets=[toolset])
    await reader.run('Find the vault code.', message_history=history.all_messages())
    assert 1 < len(answers) < 40
    found = [at for at in FOUND_AT if any(f'byte {at}' in answer for answer in answers)]
    assert found == list(FOUND_AT)
    for answer in answers[:-1]:
        # What was not searched comes first, with the call that continues there.
        assert answer.splitlines()[0].startswith('Incomplete'), answer[:300]
        assert 'No line matches' not in answer
