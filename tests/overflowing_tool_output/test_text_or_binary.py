"""Text or binary is one decision about a stored payload, and text is shown with its control characters escaped
(issue 31, section 3).

A text holding NUL or ESC characters was previewed as text, raw control characters and all, and answered as binary
by the query tools (16-byte hex rows where the preview advised `offset=2`); bytes that are text were previewed as
binary and read back as lines. Every run here is a real agent run over a real spill in a `LocalFileStore`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from inline_snapshot import snapshot
from pydantic_ai import Agent

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, build_line_index
from pydantic_ai_harness.overflowing_tool_output._rendering._markers import SpillSummary
from pydantic_ai_harness.overflowing_tool_output._rendering._preview import binary_preview, count_lines, text_preview
from pydantic_ai_harness.overflowing_tool_output.stores._sniff import SNIFF_BYTES

from ._scripted_queries import RUN_ID, Call, Script

pytestmark = pytest.mark.anyio


async def test_a_text_holding_nul_and_esc_is_text_everywhere_with_its_controls_escaped(tmp_path: Path) -> None:
    lines = [f'2026-05-01 12:00:{i % 60:02d} \x1b[32mINFO\x1b[0m request {i} ok' for i in range(4_000)]
    lines[2] = 'header\x00padding\x00'
    lines[3_000] = '2026-05-01 12:50:00 \x1b[31mERROR\x1b[0m request 3000 failed: quota\x07 exceeded\r (retry 2)'
    text = '\n'.join(lines)

    def queries(handles: dict[str, str]) -> list[Call]:
        logs = handles['logs']
        return [
            ('read_tool_result', {'handle': logs, 'offset': 2, 'limit': 2}),
            ('grep_tool_result', {'handle': logs, 'pattern': 'failed', 'context_lines': 0}),
            ('read_tool_result', {'handle': logs, 'pattern': 'quota'}),
        ]

    script = Script([('logs', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='logs')(lambda: text)
    await agent.run('What failed?', run_id=RUN_ID)
    preview, read, grep, by_pattern = script.shown
    for answer in script.shown:
        assert not re.search('[\x00-\x08\x0b-\x1f\x7f]', answer), answer[:400]
    # The preview says it is text, and line 3 is where it says; every query tool reads it as the same text.
    assert preview == snapshot("""\
[`logs` returned too much to show (~49723 tokens). Saved in full under handle '7ewszaymfa': 4000 lines, 198891 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Lines that look important (errors, failures, exit status):
3001| 2026-05-01 12:50:00 \\x1b[31mERROR\\x1b[0m request 3000 failed: quota\\x07 exceeded\\x0d (retry 2)
First lines (1-4 of 4000):
1| 2026-05-01 12:00:00 \\x1b[32mINFO\\x1b[0m request 0 ok
2| 2026-05-01 12:00:01 \\x1b[32mINFO\\x1b[0m request 1 ok
3| header\\x00padding\\x00
4| 2026-05-01 12:00:03 \\x1b[32mINFO\\x1b[0m request 3 ok
Last lines (3999-4000):
3999| 2026-05-01 12:00:38 \\x1b[32mINFO\\x1b[0m request 3998 ok
4000| 2026-05-01 12:00:39 \\x1b[32mINFO\\x1b[0m request 3999 ok\
""")
    assert read == snapshot("""\
Stored result '7ewszaymfa': lines 2-3 of 4000 (198891 bytes):
2| 2026-05-01 12:00:01 \\x1b[32mINFO\\x1b[0m request 1 ok
3| header\\x00padding\\x00
(3997 more lines. Next page: read_tool_result(handle='7ewszaymfa', offset=4, limit=2).)\
""")
    assert grep == snapshot("""\
1 matching line for 'failed' (literal, case-sensitive; 4000 lines searched). Showing all 1, marked ">", with 0 lines of context:
-- match at line 3001 (read around it: read_tool_result(handle='7ewszaymfa', offset=2996, limit=12)) --
>3001| 2026-05-01 12:50:00 \\x1b[31mERROR\\x1b[0m request 3000 failed: quota\\x07 exceeded\\x0d (retry 2)\
""")
    assert by_pattern == snapshot("""\
Stored result '7ewszaymfa': 1 line containing 'quota' (literal, case-sensitive), from lines 1-4000 of 4000:
3001| 2026-05-01 12:50:00 \\x1b[31mERROR\\x1b[0m request 3000 failed: quota\\x07 exceeded\\x0d (retry 2)
(No more matching lines: the scan reached the end.)\
""")


async def test_bytes_that_are_text_are_previewed_and_read_as_text(tmp_path: Path) -> None:
    data = ''.join(f'12:00:{i % 60:02d} INFO job {i} done\n' for i in range(20_000)).encode()

    def queries(handles: dict[str, str]) -> list[Call]:
        return [('read_tool_result', {'handle': handles['run'], 'offset': 20_000})]

    script = Script([('run', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='run')(lambda: data)
    await agent.run('Did the jobs finish?', run_id=RUN_ID)
    preview, read = script.shown
    assert preview == snapshot("""\
[`run` returned too much to show (~142223 tokens). Saved in full under handle '7ewszaymfa': 20000 lines, 568890 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-3 of 20000):
1| 12:00:00 INFO job 0 done
2| 12:00:01 INFO job 1 done
3| 12:00:02 INFO job 2 done
Last lines (19999-20000):
19999| 12:00:18 INFO job 19998 done
20000| 12:00:19 INFO job 19999 done\
""")
    assert read == snapshot("""\
Stored result '7ewszaymfa': lines 20000-20000 of 20000 (568890 bytes):
20000| 12:00:19 INFO job 19999 done
(End of the result: line 20000 is the last line.)\
""")


async def test_a_text_that_is_mostly_nul_is_binary_everywhere(tmp_path: Path) -> None:
    def queries(handles: dict[str, str]) -> list[Call]:
        return [('read_tool_result', {'handle': handles['dump'], 'limit': 2})]

    script = Script([('dump', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='dump')(lambda: 'PK' + '\x00' * 200_000 + 'end')
    await agent.run('What is in the dump?', run_id=RUN_ID)
    preview, read = script.shown
    assert preview == snapshot("""\
[`dump` returned binary data (200005 bytes, unknown binary data), which cannot be shown as text. Saved verbatim under handle '7ewszaymfa'.
read_tool_result(handle, unit='bytes', offset=0, limit=512) shows a hex dump of a byte range; grep_tool_result(handle, pattern) searches it for text.]
First bytes: 50 4b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\
""")
    assert read == snapshot("""\
Stored result '7ewszaymfa' is binary (200005 bytes). Hex dump of bytes 0-31; offsets on the left are hexadecimal; offset and limit count 16-byte rows:
00000000  50 4b 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |PK..............|
00000010  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|
(199973 more bytes. Next: read_tool_result(handle='7ewszaymfa', offset=2, limit=2, unit='lines').)\
""")


_TEXTISH = st.text(st.sampled_from(['a', 'é', ' ', '\n', '\t', '\x00', '\x1b', '\x07', '\x01', '\udce9']), max_size=400)


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(
        _TEXTISH,
        st.binary(max_size=400),
        _TEXTISH.map(lambda text: text.encode('utf-8', 'surrogatepass')),
        _TEXTISH.map(lambda text: 'x' * (SNIFF_BYTES - 3) + text),
    )
)
def test_the_preview_and_the_store_make_the_same_decision(value: str | bytes) -> None:
    """Whatever the payload, its preview is a binary one exactly when the store's line index takes it for binary (and
    then the query tools dump it in hex); no control character reaches a text preview unescaped."""
    data = value.encode('utf-8', 'surrogatepass') if isinstance(value, str) else value
    if isinstance(value, str):
        summary = SpillSummary('tool', 'h', len(value), 1, count_lines(value), len(data))
        preview = text_preview(summary, value, 1_000)
    else:
        preview = binary_preview('tool', 'h', data, None, budget=1_000)
    assert ('returned binary data' in preview) is build_line_index(data).is_binary
    assert not re.search('[\x00-\x08\x0b-\x1f\x7f]', preview)
