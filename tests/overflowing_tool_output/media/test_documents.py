"""A PDF over budget (issue 35, item 2): stored unchanged, its page count and per-page text shown, its pages read
and searched by handle like the lines of a log. Real agent runs over real PDFs written by the tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, BinaryContent

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from .._scripted_queries import RUN_ID, Call, Script
from ._pdf_files import pdf_with_pages

pytestmark = pytest.mark.anyio


def _report(pages: int = 300) -> bytes:
    return pdf_with_pages(
        [
            [f'Quarterly report, page {page}', *(f'row {page}.{row}: revenue {page * row}' for row in range(30))]
            for page in range(1, pages + 1)
        ]
    )


def _original_handle(preview: str) -> str:
    found = re.search(r"saved unchanged as handle '([^']+)'", preview)
    assert found is not None, preview[:400]
    return found.group(1)


async def test_a_300_page_pdf_is_paged_like_a_log_and_kept_byte_identical(tmp_path: Path) -> None:
    pdf = _report()
    store = LocalFileStore(base_dir=tmp_path)

    def queries(handles: dict[str, str]) -> list[Call]:
        text = handles['report']
        return [
            ('grep_tool_result', {'handle': text, 'pattern': '=== page 150/300 ===', 'context_lines': 0}),
            ('read_tool_result', {'handle': text, 'offset': 4769, 'limit': 4}),
        ]

    script = Script([('report', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='report')(lambda: BinaryContent(pdf, media_type='application/pdf'))
    await agent.run('What was revenue on page 150?', run_id=RUN_ID)
    preview, grep, read = script.shown
    assert preview == snapshot("""\
[`report` returned a PDF (152.5 KB), saved unchanged as handle '7217zk37ff': 300 pages. Its text follows, each page starting with a line like `=== page 2/300 ===`; grep_tool_result(handle, pattern='=== page 2/300 ===') gives that page's line.]
[`report` returned too much to show (~57158 tokens). Saved in full under handle '7ewszaymfa': 9600 lines, 228631 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-5 of 9600):
1| === page 1/300 ===
2| Quarterly report, page 1
3| row 1.0: revenue 0
4| row 1.1: revenue 1
5| row 1.2: revenue 2
Last lines (9599-9600):
9599| row 300.28: revenue 8400
9600| row 300.29: revenue 8700\
""")
    assert grep == snapshot("""\
1 matching line for '=== page 150/300 ===' (literal, case-sensitive; 9600 lines searched). Showing all 1, marked ">", with 0 lines of context:
-- match at line 4769 (read around it: offset=4764) --
>4769| === page 150/300 ===\
""")
    assert read == snapshot("""\
Stored result '7ewszaymfa': lines 4769-4772 of 9600 (228631 bytes):
4769| === page 150/300 ===
4770| Quarterly report, page 150
4771| row 150.0: revenue 0
4772| row 150.1: revenue 150
(4828 more lines. Next page: read_tool_result(handle='7ewszaymfa', offset=4773, limit=4).)\
""")
    assert await store.read(_original_handle(preview)) == pdf
