"""An MCP server's PDF (an embedded blob resource) takes the document path: a real FastMCP server over stdio."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import PythonStdioTransport
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from .._scripted_queries import RUN_ID, Call
from ._script import RunScript
from .mcp_pdf_server import report

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name('mcp_pdf_server.py')


async def test_an_mcp_pdf_is_read_by_page_and_kept_byte_identical(tmp_path: Path) -> None:
    toolset: MCPToolset[Any] = MCPToolset(PythonStdioTransport(SERVER, keep_alive=False), init_timeout=30)
    store = LocalFileStore(base_dir=tmp_path)

    def queries(handles: dict[str, str]) -> list[Call]:
        return [
            (
                'grep_tool_result',
                {'handle': handles['fetch_contract'], 'pattern': '=== page 77/120 ===', 'context_lines': 1},
            )
        ]

    script = RunScript([('fetch_contract', {})], queries)
    agent = Agent(script.model(), toolsets=[toolset], capabilities=[OverflowingToolOutput(store=store)])
    await agent.run('What does page 77 say?', run_id=RUN_ID)
    shown, grep = script.shown
    assert shown.split('\n')[0] == snapshot(
        "[`fetch_contract` returned a PDF (46.9 KB), saved unchanged as handle '7217zk37ff': 120 pages. Its text follows, each page starting with the line `=== page N/120 ===`; view_tool_result_image(handle='7217zk37ff', page=N) shows page N as an image.]"
    )
    assert grep == snapshot("""\
1 matching line for '=== page 77/120 ===' (literal, case-sensitive; 3240 lines searched). Showing all 1, marked ">", with 1 line of context:
-- match at line 2053 (read around it: read_tool_result(handle='7ewszaymfa', offset=2048, limit=12)) --
 2052| clause 76.24
>2053| === page 77/120 ===
 2054| Contract, page 77\
""")
    original = re.search(r"saved unchanged as handle '([^']+)'", shown)
    assert original is not None
    assert await store.read(original.group(1)) == report()
