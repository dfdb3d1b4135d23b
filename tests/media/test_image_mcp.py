"""An MCP server's image result takes the image band's path (issue 35): a real FastMCP server over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import PythonStdioTransport
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from ._images import assert_fits_every_provider, images_sent, line_and_image, screenshot
from .test_image_band import Scripted, handle_in, last_returns

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name('mcp_image_server.py')


async def test_an_mcp_screenshot_is_fitted_and_its_original_kept(tmp_path: Path) -> None:
    toolset: MCPToolset[Any] = MCPToolset(PythonStdioTransport(SERVER, keep_alive=False), init_timeout=30)
    script = Scripted(
        [('take_screenshot', {})],
        lambda messages: [('view_tool_result_image', {'handle': handle_in(messages), 'width': 800, 'height': 600})],
    )
    store = LocalFileStore(base_dir=tmp_path)
    agent = Agent(script.model(), toolsets=[toolset], capabilities=[OverflowingToolOutput(store=store)])
    await agent.run('look', run_id='run-1')
    (part,) = last_returns(script.requests[1])
    line, _copy = line_and_image(part)
    assert line == snapshot(
        "[Image 4880x2560 PNG (394 KB), shown below as a 1480x776 PNG copy. Original stored under handle '0n29rk9asg': view_tool_result_image(handle, x, y, width, height) shows any region of it in full detail.]"
    )
    assert_fits_every_provider(images_sent(script.requests[1]))
    assert isinstance(part.metadata, dict)
    assert await store.read(part.metadata[IMAGES_KEY][0]['handle']) == screenshot()
    (view,) = last_returns(script.requests[2])
    assert line_and_image(view)[0] == snapshot(
        "Region x=0..800, y=0..600 of the 4880x2560 image '0n29rk9asg' (full detail):"
    )
