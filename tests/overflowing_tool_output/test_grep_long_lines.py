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
from inline_snapshot import snapshot
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
        # Both places in the one line are found, each shown with the bytes around it.
        assert all(f'the match starts at byte {at}]' in answer for at in FOUND_AT), answer
        assert answer.count('vault code is 5521') == 2 + (answer is grep_all)
    assert grep_literal == snapshot("""\
2 matches inside lines longer than 1000 bytes for 'vault code' (literal, case-sensitive; 1 line searched). Showing all 2, marked ">", with 2 lines of context:
-- 2 matches in line 1 --
>1| ...delta omega delta lambda sigma theta lambda sigma theta beta sigma delta theta lambda sigma delta theta alpha alpha delta delta lambda gamma alpha delta lambda lambda gamma kappa beta sigma lambda kappa gamma alpha theta delta gamma sifact-7Q2X: the vault code is 5521 gamma sigma theta lambda gamma alpha alpha kappa alpha gamma omega gamma sigma gamma lambda theta sigma omega lambda alpha kappa beta lambda beta gamma sigma beta theta omega theta delta sigma beta beta sigma beta beta theta lambda kappa the... [bytes 5242645-5243154 of the result, in line 1 (bytes 0-9437183); the match starts at byte 5242895]
>1| ...ma kappa theta beta gamma omega gamma alpha omega gamma omega lambda beta omega sigma omega beta gamma delta beta theta delta gamma delta sigma alpha kappa theta omega kappa gamma gamma lambda alpha alpha lambda kappa alpha gamma thetafact-7Q2X: the vault code is 5521pha beta delta beta kappa gamma lambda sigma omega lambda beta delta theta gamma alpha lambda kappa lambda alpha alpha beta beta gamma alpha kappa kappa alpha delta kappa delta beta sigma gamma beta lambda beta sigma beta sigma omega gamma om... [bytes 9332091-9332600 of the result, in line 1 (bytes 0-9437183); the match starts at byte 9332341]\
""")
    assert grep_regex.splitlines()[0] == snapshot(
        '2 matches inside lines longer than 1000 bytes for \'vault code is \\\\d+\' (regex; 1 line searched). Showing all 2, marked ">", with 2 lines of context:'
    )
    assert grep_all == snapshot("""\
1 matching line and 2 matches inside lines longer than 1000 bytes for 'vault code' (literal, case-sensitive) in 2 stored results (2 stored results searched of the 2 this conversation holds, newest first; 10226078 bytes). Showing all, under the handle of the result holding them:
-- awyddxmbp8 (table, 20000 lines): 1 matching line --
1235| row 1234: fact-7Q2X: the vault code is 5521
-- 7ewszaymfa (dump, 1 line): 2 matches inside lines longer than 1000 bytes --
1| ...delta omega delta lambda sigma theta lambda sigma theta beta sigma delta theta lambda sigma delta theta alpha alpha delta delta lambda gamma alpha delta lambda lambda gamma kappa beta sigma lambda kappa gamma alpha theta delta gamma sifact-7Q2X: the vault code is 5521 gamma sigma theta lambda gamma alpha alpha kappa alpha gamma omega gamma sigma gamma lambda theta sigma omega lambda alpha kappa beta lambda beta gamma sigma beta theta omega theta delta sigma beta beta sigma beta beta theta lambda kappa the... [bytes 5242645-5243154 of the result, in line 1 (bytes 0-9437183); the match starts at byte 5242895]
1| ...ma kappa theta beta gamma omega gamma alpha omega gamma omega lambda beta omega sigma omega beta gamma delta beta theta delta gamma delta sigma alpha kappa theta omega kappa gamma gamma lambda alpha alpha lambda kappa alpha gamma thetafact-7Q2X: the vault code is 5521pha beta delta beta kappa gamma lambda sigma omega lambda beta delta theta gamma alpha lambda kappa lambda alpha alpha beta beta gamma alpha kappa kappa alpha delta kappa delta beta sigma gamma beta lambda beta sigma beta sigma omega gamma om... [bytes 9332091-9332600 of the result, in line 1 (bytes 0-9437183); the match starts at byte 9332341]
(Read around a match with its handle and line: read_tool_result(handle='awyddxmbp8', offset=1230, limit=12); one result with context: grep_tool_result(handle='awyddxmbp8', pattern='vault code').)\
""")
    # A pattern read keeps lines: the one line, shown around its first match.
    assert read == snapshot("""\
Stored result '7ewszaymfa': 1 line containing 'vault code' (literal, case-sensitive), from lines 1-1 of 1:
1| ...delta omega delta lambda sigma theta lambda sigma theta beta sigma delta theta lambda sigma delta theta alpha alpha delta delta lambda gamma alpha delta lambda lambda gamma kappa beta sigma lambda kappa gamma alpha theta delta gamma sifact-7Q2X: the vault code is 5521 gamma sigma theta lambda gamma alpha alpha kappa alpha gamma omega gamma sigma gamma lambda theta sigma omega lambda alpha kappa beta lambda beta gamma sigma beta theta omega theta delta sigma beta beta sigma beta beta theta lambda kappa the... [bytes 5242645-5243154 of the result, in line 1 (bytes 0-9437183); the match starts at byte 5242895]
(No more matching lines: the scan reached the end.)\
""")


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
            follow = re.search(r'Continue(?: there)?: (grep_tool_result\(.*?\))[.,]', answers[-1])
            if follow is None:
                return ModelResponse(parts=[TextPart('done')])
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', call_arguments(follow.group(1)))])
        if len(answers) >= 40:
            return ModelResponse(parts=[TextPart('gave up')])
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': dump, 'pattern': 'vault code'})])

    toolset = build_query_toolset(store, limits=QueryLimits(time_budget=0), route=lambda _ctx, _handle: store)
    reader = Agent(FunctionModel(model), toolsets=[toolset])
    await reader.run('Find the vault code.', message_history=history.all_messages())
    assert len(answers) == 3
    found = [at for at in FOUND_AT if any(f'the match starts at byte {at}]' in answer for answer in answers)]
    assert found == list(FOUND_AT)
    for answer in answers[:-1]:
        # What was not searched comes first, with the call that continues there; no "no match" for the rest.
        assert answer.splitlines()[0].startswith('Incomplete'), answer[:300]
        assert 'No line matches' not in answer
    assert answers[0] == snapshot("""\
Incomplete: the time budget (0 s) ran out inside line 1 of 1; nothing from byte 4194295 on was searched. Continue there: grep_tool_result(handle='7ewszaymfa', pattern='vault code', start=4194295).
No match for 'vault code' in the part searched (literal, case-sensitive; line 1 of 1 searched, only before byte 4194295).\
""")
    assert answers[1].splitlines()[:2] == snapshot(
        [
            "Incomplete: the time budget (0 s) ran out inside line 1 of 1; nothing from byte 8388590 on was searched. Continue there: grep_tool_result(handle='7ewszaymfa', pattern='vault code', start=8388590).",
            'At least 1 match inside lines longer than 1000 bytes for \'vault code\' (literal, case-sensitive; line 1 of 1 searched, only bytes 4194295-8388589). Showing all 1, marked ">", with 2 lines of context:',
        ]
    )
    assert answers[2].splitlines()[0] == snapshot(
        '1 match inside lines longer than 1000 bytes for \'vault code\' (literal, case-sensitive; line 1 of 1 searched, only from byte 8388590). Showing all 1, marked ">", with 2 lines of context:'
    )


async def test_the_search_without_a_handle_says_first_and_per_result_what_it_did_not_search(tmp_path: Path) -> None:
    """No time budget at all: the newest result (the one line) is searched one step, and the answer says first
    where it stopped and which calls go on; the result's label says what of it was not searched."""
    store = LocalFileStore(base_dir=tmp_path)
    spilled = Script([('table', {}), ('dump', {})], lambda handles: [])
    history = await spilling_agent(spilled, store).run('Fetch both.', run_id=RUN_ID)
    script = Script([], lambda handles: [('grep_tool_result', {'pattern': 'vault code'})])
    toolset = build_query_toolset(store, limits=QueryLimits(time_budget=0), route=lambda _ctx, _handle: store)
    await Agent(script.model(), toolsets=[toolset]).run('Find it.', message_history=history.all_messages())
    [answer] = script.shown[-1:]
    assert answer == snapshot("""\
Incomplete: the time budget (0 s) ran out in 'awyddxmbp8' inside line 1 of 1, at byte 4194295; the rest of it and the older results were not searched. Continue there: grep_tool_result(handle='awyddxmbp8', pattern='vault code', start=4194295), then the older results: grep_tool_result(pattern='vault code', offset=2).
No match for 'vault code' in the part searched (literal, case-sensitive; 1 stored result searched of the 2 this conversation holds, newest first; 4194295 bytes).
-- awyddxmbp8 (dump, 1 line): no match; searched only before byte 4194295 (inside line 1): the time budget ran out --\
""")


async def test_a_regex_that_may_match_more_than_the_overlap_says_so_first(tmp_path: Path) -> None:
    """A regex without a literal to skip by, over the 9 MiB line: searched in overlapping windows. A bounded one
    (at most 20 bytes a match) is answered exactly; an unbounded one says first what a window edge may hide."""

    def queries(handles: dict[str, str]) -> list[Call]:
        return [
            ('grep_tool_result', {'handle': handles['dump'], 'pattern': '[0-9]{4}x', 'is_regex': True}),
            ('grep_tool_result', {'handle': handles['dump'], 'pattern': '[0-9]{2,}x', 'is_regex': True}),
        ]

    script = Script([('dump', {})], queries)
    await spilling_agent(script, LocalFileStore(base_dir=tmp_path)).run('Search.', run_id=RUN_ID)
    _preview, bounded, unbounded = script.shown
    assert bounded == snapshot("No line matches '[0-9]{4}x' (regex; 1 line searched).")
    assert unbounded == snapshot("""\
Caveat: 1 line was too long for one regex search and searched in windows overlapping by 610 KiB: a match longer than that in it may be missed.
No line matches '[0-9]{2,}x' (regex; 1 line searched).\
""")


async def test_a_pattern_read_stopped_inside_a_long_line_names_the_search_that_goes_on_there(tmp_path: Path) -> None:
    """`read_tool_result` starts at a line; inside one, its literal search goes on through `grep_tool_result(start=)`
    (the same search). Read from the end, the line met first is searched whole, so every call gets further."""
    store = LocalFileStore(base_dir=tmp_path)
    spilled = Script([('dump', {})], lambda handles: [])
    history = await spilling_agent(spilled, store).run('Fetch the dump.', run_id=RUN_ID)
    dump = spilled.handles['dump']
    script = Script(
        [],
        lambda handles: [
            ('read_tool_result', {'handle': dump, 'pattern': 'vault code'}),
            ('read_tool_result', {'handle': dump, 'pattern': 'vault code', 'from_end': True}),
        ],
    )
    toolset = build_query_toolset(store, limits=QueryLimits(time_budget=0), route=lambda _ctx, _handle: store)
    await Agent(script.model(), toolsets=[toolset]).run('Find it.', message_history=history.all_messages())
    forward, backward = script.shown[-2:]
    assert forward == snapshot("""\
Incomplete: the time budget (0 s) ran out inside line 1 of 1; nothing from byte 4194295 on was searched. Continue there: grep_tool_result(handle='7ewszaymfa', pattern='vault code', start=4194295).
No line containing 'vault code' (literal, case-sensitive) in the part searched, lines 1-1 (line 1 only before byte 4194295) of the stored result '7ewszaymfa' (1 line).\
""")
    assert backward.splitlines()[0] == snapshot(
        "Stored result '7ewszaymfa': the last 1 line containing 'vault code' (literal, case-sensitive), from lines 1-1 of 1:"
    )
    assert f'the match starts at byte {FOUND_AT[0]}]' in backward
