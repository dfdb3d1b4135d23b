"""Every text the model reads in one spill session, exactly, with pydantic-ai's default id shapes.

A uuid7 run id and provider-style tool call ids (as a run gets them by default), a real `LocalFileStore`, and a
scripted model that spills a test log and a binary blob, greps, reads around the hit, reads the blob's bytes and
mistypes a handle. The snapshots are what the model is shown; the token counts are cl100k.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

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


async def test_the_texts_of_a_spill_session_with_default_ids(tmp_path: Path) -> None:
    shown: list[str] = []
    handles: dict[str, str] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and len(messages) > 1:
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    shown.append(str(part.content))
                    if isinstance(part.metadata, dict) and 'overflow_handle' in part.metadata:
                        handles[part.tool_name] = part.metadata['overflow_handle']
        step = len([m for m in messages if isinstance(m, ModelResponse)])
        script: list[list[tuple[str, dict[str, Any]]]] = [
            [('run_tests', {}), ('dump', {})],
            [('grep_tool_result', {'handle': handles.get('run_tests', ''), 'pattern': 'FAILED', 'context_lines': 1})],
            [('read_tool_result', {'handle': handles.get('run_tests', ''), 'offset': 2013, 'limit': 8})],
            [('read_tool_result', {'handle': handles.get('dump', ''), 'unit': 'bytes', 'offset': 0, 'limit': 32})],
            [('grep_tool_result', {'handle': _mistyped(handles.get('run_tests', 'x')), 'pattern': 'FAILED'})],
        ]
        if step >= len(script):
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f'call_{step}Xq3vR8bN2mKp7LwT9yZ{index}')
                for index, (name, args) in enumerate(script[step])
            ]
        )

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
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
-- match at line 2020 (read around it: offset=2015) --
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
    assert [count(text) for text in shown] == snapshot([224, 154, 100, 186, 168, 61])
