"""Every text the model reads in two sessions (spills, queries, a summary, a truncation), exactly, with default ids.

A uuid7 run id and provider-style tool call ids (as a run gets them by default), a real `LocalFileStore`, and a
scripted model that spills a test log and a binary blob, greps, reads around the hit, reads the blob's bytes and
mistypes a handle; then one that spills records, queries them by path, greps for nothing, and gets a summary and a
truncation. The snapshots are what the model is shown; the token counts are cl100k.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import Band, LocalFileStore, OverflowingToolOutput, Summarize, Truncate

pytestmark = pytest.mark.anyio

RUN_ID = '019adc3e-8f21-7c4b-9a6e-5d0f2b7c8e13'
"""A uuid7, the shape of pydantic-ai's default run id (fixed so that the snapshots are exact)."""

TEST_LOG = ''.join(f'tests/test_{n % 40}.py::test_case_{n} PASSED\n' for n in range(1, 4001)).replace(
    'tests/test_17.py::test_case_2017 PASSED\n',
    'Traceback (most recent call last):\n  File "tests/test_17.py", line 88, in test_case_2017\n'
    'AssertionError: expected 200, got 500\ntests/test_17.py::test_case_2017 FAILED\n',
)
BLOB = bytes(range(256)) * 64


def _mistyped(handle: str) -> str:
    """`handle` with its last character changed: a typo no near-miss rule forgives."""
    return handle[:-1] + ('y' if handle[-1] != 'y' else 'x')


Steps = list[list[tuple[str, dict[str, Any]]]]


@dataclass
class _Session:
    """A scripted model: each step's tool calls, built from the handles shown so far; it records what it is shown."""

    script: Callable[[dict[str, str]], Steps]
    """The steps, from the handles seen so far by tool name."""

    call_id_stem: str
    """Makes provider-style tool call ids: `call_<step><stem><index>`."""

    shown: list[str] = field(default_factory=list[str])
    """Every tool return the model was shown, in order."""

    handles: dict[str, str] = field(default_factory=dict[str, str])
    """The handle of each tool's spill, by tool name."""

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            last = messages[-1]
            if isinstance(last, ModelRequest) and len(messages) > 1:
                for part in last.parts:
                    if isinstance(part, ToolReturnPart):
                        self.shown.append(str(part.content))
                        if isinstance(part.metadata, dict) and 'overflow_handle' in part.metadata:
                            self.handles[part.tool_name] = part.metadata['overflow_handle']
            step = len([m for m in messages if isinstance(m, ModelResponse)])
            script = self.script(self.handles)
            if step >= len(script):
                return ModelResponse(parts=[TextPart('done')])
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f'call_{step}{self.call_id_stem}{index}')
                    for index, (name, args) in enumerate(script[step])
                ]
            )

        return FunctionModel(respond)


async def test_the_texts_of_a_spill_session_with_default_ids(tmp_path: Path) -> None:
    def script(handles: dict[str, str]) -> Steps:
        return [
            [('run_tests', {}), ('dump', {})],
            [('grep_tool_result', {'handle': handles.get('run_tests', ''), 'pattern': 'FAILED', 'context_lines': 1})],
            [('read_tool_result', {'handle': handles.get('run_tests', ''), 'offset': 2013, 'limit': 8})],
            [('read_tool_result', {'handle': handles.get('dump', ''), 'unit': 'bytes', 'offset': 0, 'limit': 32})],
            [('grep_tool_result', {'handle': _mistyped(handles.get('run_tests', 'x')), 'pattern': 'FAILED'})],
        ]

    session = _Session(script, 'Xq3vR8bN2mKp7LwT9yZ')
    shown, handles = session.shown, session.handles
    agent = Agent(session.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='run_tests')(lambda: TEST_LOG)
    agent.tool_plain(name='dump')(lambda: BLOB)
    await agent.run('Why is CI red?', run_id=RUN_ID)
    log_preview, blob_preview, grep, read, hex_read, unknown = shown
    assert all(len(handle) == 10 for handle in handles.values())
    count = cl100k_counter()
    assert log_preview == snapshot("""\
[`run_tests` returned too much to show (~39505 tokens). Saved in full under handle 'fffen44zdz': 4003 lines, 158020 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Lines that look important (errors, failures, exit status):
2017| Traceback (most recent call last):
2019| AssertionError: expected 200, got 500
2020| tests/test_17.py::test_case_2017 FAILED
First lines (1-3 of 4003):
1| tests/test_1.py::test_case_1 PASSED
2| tests/test_2.py::test_case_2 PASSED
3| tests/test_3.py::test_case_3 PASSED
Last lines (4002-4003):
4002| tests/test_39.py::test_case_3999 PASSED
4003| tests/test_0.py::test_case_4000 PASSED\
""")
    assert blob_preview == snapshot("""\
[`dump` returned binary data (16384 bytes, unknown binary data), which cannot be shown as text. Saved verbatim under handle 'frqhfqrrw7'.
read_tool_result(handle, unit='bytes', offset=0, limit=512) shows a hex dump of a byte range; grep_tool_result(handle, pattern) searches it for text.]
First bytes: 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f\
""")
    assert grep == snapshot("""\
1 matching line for 'FAILED' (literal, case-sensitive; 4003 lines searched). Showing all 1, marked ">", with 1 line of context:
-- match at line 2020 (read around it: read_tool_result(handle='fffen44zdz', offset=2015, limit=12)) --
 2019| AssertionError: expected 200, got 500
>2020| tests/test_17.py::test_case_2017 FAILED
 2021| tests/test_18.py::test_case_2018 PASSED\
""")
    assert read == snapshot("""\
Stored result 'fffen44zdz': lines 2013-2020 of 4003 (158020 bytes):
2013| tests/test_13.py::test_case_2013 PASSED
2014| tests/test_14.py::test_case_2014 PASSED
2015| tests/test_15.py::test_case_2015 PASSED
2016| tests/test_16.py::test_case_2016 PASSED
2017| Traceback (most recent call last):
2018|   File "tests/test_17.py", line 88, in test_case_2017
2019| AssertionError: expected 200, got 500
2020| tests/test_17.py::test_case_2017 FAILED
(1983 more lines. Next page: read_tool_result(handle='fffen44zdz', offset=2021, limit=8).)\
""")
    assert hex_read == snapshot("""\
Stored result 'frqhfqrrw7' is binary (16384 bytes). Hex dump of bytes 0-31; offsets on the left are hexadecimal; offset and limit count bytes:
00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|
00000010  10 11 12 13 14 15 16 17  18 19 1a 1b 1c 1d 1e 1f  |................|
(16352 more bytes. Next: read_tool_result(handle='frqhfqrrw7', offset=32, limit=32, unit='bytes').)\
""")
    assert unknown == snapshot("""\
No stored result found under handle 'fffen44zdy'. Stored results of this conversation, newest first:
frqhfqrrw7  (dump)
fffen44zdz  (run_tests)
Pass one of these handles exactly. A result cleaned up since needs its tool called again.\
""")
    assert [count(text) for text in shown] == snapshot([224, 154, 115, 186, 168, 61])


ORDERS = [
    {'id': f'ord_{n:05d}', 'customer': f'cus_{n * 7919 % 10_000:04d}', 'total': n % 500, 'status': 'paid'}
    for n in range(3_000)
]
ORDERS[1_234]['status'] = 'stuck'
REPORT = ''.join(f'check {n}: ok\n' for n in range(2_000)) + 'check 2000: FAILED (disk 97% full)\n'


async def test_the_texts_of_a_json_summary_and_truncation_session_with_default_ids(tmp_path: Path) -> None:
    """The other texts: a structured preview, a path query, a grep that finds nothing, a summary, a truncation."""

    def script(handles: dict[str, str]) -> Steps:
        orders = handles.get('list_orders', '')
        return [
            [('list_orders', {}), ('health_report', {}), ('tail_log', {'lines': 2_000})],
            [('read_tool_result', {'handle': orders, 'path': "$[?@.status=='stuck'].id"})],
            [('grep_tool_result', {'handle': orders, 'pattern': 'refunded'})],
        ]

    session = _Session(script, 'Hd7sQ2xLm9Pz4Kc8Vb1N')
    shown, handles = session.shown, session.handles

    def summarize(tool_name: str, text: str) -> str:
        return f'{text.count(": ok")} checks passed; check 2000 FAILED: disk 97% full.'

    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=tmp_path),
        per_tool={
            'health_report': [Band(over=10_000, action=Summarize(summarize=summarize))],
            'tail_log': [Band(over=10_000, action=Truncate(max_chars=400))],
        },
    )
    agent = Agent(session.model(), capabilities=[capability])
    agent.tool_plain(name='list_orders')(lambda: ORDERS)
    agent.tool_plain(name='health_report')(lambda: REPORT)

    @agent.tool_plain
    def tail_log(lines: int) -> str:
        return ''.join(f'event {n}: ok\n' for n in range(lines))

    await agent.run('Which order is stuck, and is the cluster healthy?', run_id=RUN_ID)
    orders_preview, summary, truncated, query, no_match = shown
    assert len(handles['list_orders']) == 10
    count = cl100k_counter()
    assert orders_preview == snapshot("""\
[`list_orders` returned too much to show (~51586 tokens). Saved in full under handle '2xsnevr9vk' as JSON, one element per line: 3002 lines, 212344 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Shape: array[3000] of {id: str, customer: str, total: int, status: str}
First lines (2-4 of 3002):
2|  {"id":"ord_00000","customer":"cus_0000","total":0,"status":"paid"},
3|  {"id":"ord_00001","customer":"cus_7919","total":1,"status":"paid"},
4|  {"id":"ord_00002","customer":"cus_5838","total":2,"status":"paid"},
Last lines (3000-3001):
3000|  {"id":"ord_02998","customer":"cus_1162","total":498,"status":"paid"},
3001|  {"id":"ord_02999","customer":"cus_9081","total":499,"status":"paid"}\
""")
    assert summary == snapshot("""\
[Summary of what `health_report` returned (28925 characters, 2001 lines; too many to keep). It may miss details. The full original is saved under handle 'm9wfypt4nr': grep_tool_result(handle, pattern) checks a detail; read_tool_result(handle, from_end=True) reads the end.]
2000 checks passed; check 2000 FAILED: disk 97% full.\
""")
    assert truncated == snapshot("""\
[truncated: the middle 28677 of 28890 characters (lines 10-1993) omitted and not kept; call the tool again with narrower arguments to see them]
event 0: ok
event 1: ok
event 2: ok
event 3: ok
event 4: ok
event 5: ok
event 6: ok
event 7: ok
event 8: ok
[lines 10-1993 omitted here]
event 1993: ok
event 1994: ok
event 1995: ok
event 1996: ok
event 1997: ok
event 1998: ok
event 1999: ok
""")
    assert query == snapshot("""\
1 match for "$[?@.status=='stuck'].id" in '2xsnevr9vk'; all 1:
line 1236: $[1234]['id'] = "ord_01234"
(In context: read_tool_result(handle='2xsnevr9vk', offset=1231, limit=20), with offset a few lines before a match.)\
""")
    assert no_match == snapshot(
        "No line matches 'refunded' (literal, case-sensitive; 3002 lines searched). Any case: is_regex=True, pattern='(?i)refunded'."
    )
    assert [count(text) for text in shown] == snapshot([260, 87, 151, 80, 34])


async def test_a_preview_says_how_long_the_handle_lasts_only_when_the_store_deletes_old_payloads(
    tmp_path: Path,
) -> None:
    def script(handles: dict[str, str]) -> Steps:
        return [[('run_tests', {}), ('dump', {})]]

    async def first_lines(capability: OverflowingToolOutput[Any]) -> list[str]:
        session = _Session(script, 'Xq3vR8bN2mKp7LwT9yZ')
        agent = Agent(session.model(), capabilities=[capability])
        agent.tool_plain(name='run_tests')(lambda: TEST_LOG)
        agent.tool_plain(name='dump')(lambda: BLOB)
        await agent.run('Why is CI red?', run_id=RUN_ID)
        return [shown.splitlines()[0] for shown in session.shown]

    # The default store (no `store` given) deletes payloads after 7 days, so the preview says so, in three tokens.
    assert await first_lines(OverflowingToolOutput(workspace=None)) == snapshot(
        [
            "[`run_tests` returned too much to show (~39505 tokens). Saved in full for 7 days under handle 'fffen44zdz': 4003 lines, 158020 bytes; a preview follows.",
            "[`dump` returned binary data (16384 bytes, unknown binary data), which cannot be shown as text. Saved verbatim for 7 days under handle 'frqhfqrrw7'.",
        ]
    )
    # A store that keeps payloads forever promises nothing; one with another TTL states its own.
    kept = await first_lines(OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'forever')))
    assert all(' for ' not in line for line in kept)
    hourly = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'hourly', cleanup_after=5_400))
    assert [line.split(' under handle')[0][-25:] for line in await first_lines(hourly)] == snapshot(
        ['ed in full for 90 minutes', 'd verbatim for 90 minutes']
    )


async def test_the_text_of_a_search_over_every_spill_with_default_ids(tmp_path: Path) -> None:
    def script(handles: dict[str, str]) -> Steps:
        return [
            [('run_tests', {}), ('fetch_report', {})],
            [('grep_tool_result', {'pattern': 'FAILED'})],
        ]

    session = _Session(script, 'Xq3vR8bN2mKp7LwT9yZ')
    agent = Agent(session.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='run_tests')(lambda: TEST_LOG)
    agent.tool_plain(name='fetch_report')(lambda: REPORT)
    await agent.run('Why is CI red?', run_id=RUN_ID)
    *_previews, grep = session.shown
    assert grep == snapshot("""\
2 matching lines for 'FAILED' (literal, case-sensitive) in 2 stored results (2 stored results searched of the 2 this conversation holds, newest first; 186945 bytes). Showing all, under the handle of the result holding them:
-- frqhfqrrw7 (fetch_report, 2001 lines): 1 matching line --
2001| check 2000: FAILED (disk 97% full)
-- fffen44zdz (run_tests, 4003 lines): 1 matching line --
2020| tests/test_17.py::test_case_2017 FAILED
(Read around a match with its handle and line: read_tool_result(handle='frqhfqrrw7', offset=1996, limit=12); one result with context: grep_tool_result(handle='frqhfqrrw7', pattern='FAILED').)\
""")
    assert cl100k_counter()(grep) == snapshot(181)
