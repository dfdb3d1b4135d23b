"""A real FastMCP server whose tools return what MCP servers return in practice, at sizes that overflow.

Run over stdio (`python mcp_server.py`) or streamable HTTP on loopback (`python mcp_server.py --http PORT`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from typing import Any

import mcp_types
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import ToolResult

NEEDLE = 'ERROR payment 31337 declined for needle-7f3a'
PNG = b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 64

server = FastMCP('overflow-test-server')


def _log(lines: int = 60_000) -> str:
    rows = [
        f'2024-05-01T12:00:{i % 60:02d} INFO worker {i % 7} handled request {i} in {i % 97} ms' for i in range(lines)
    ]
    rows[lines * 2 // 3] = NEEDLE
    return '\n'.join(rows) + '\n'


def _records(count: int = 20_000) -> list[dict[str, Any]]:
    return [{'id': i, 'status': 'declined' if i == 31337 % count else 'ok', 'note': f'item {i}'} for i in range(count)]


@server.tool
def big_log() -> str:
    """A 4 MB service log with one error line in it."""
    return _log()


@server.tool
def json_as_text() -> ToolResult:
    """JSON serialized into a text content block (no structuredContent), as many servers do."""
    return ToolResult(content=[mcp_types.TextContent(type='text', text=json.dumps({'records': _records()}))])


@server.tool
def structured() -> dict[str, Any]:
    """A dict: FastMCP sends it as structuredContent (and as JSON text for older clients)."""
    return {'records': _records(), 'total': 20_000}


@server.tool
def text_and_image() -> ToolResult:
    """A content list: a long text and an image."""
    image = mcp_types.ImageContent(type='image', data=base64.b64encode(PNG).decode(), mime_type='image/png')
    return ToolResult(content=[mcp_types.TextContent(type='text', text=_log(5_000)), image])


@server.tool
def embedded_resource() -> ToolResult:
    """An embedded text resource (a file the server attaches to its answer)."""
    resource = mcp_types.TextResourceContents(uri='file:///var/log/service.log', mime_type='text/plain', text=_log())
    return ToolResult(content=[mcp_types.EmbeddedResource(type='resource', resource=resource)])


@server.tool
def embedded_blob() -> ToolResult:
    """An embedded binary resource."""
    blob = base64.b64encode(PNG * 4).decode()
    resource = mcp_types.BlobResourceContents(uri='file:///tmp/chart.png', mime_type='image/png', blob=blob)
    return ToolResult(content=[mcp_types.EmbeddedResource(type='resource', resource=resource)])


@server.tool
def failing() -> str:
    """Fails with a long error message (a stack of 2,000 frames)."""
    frames = '\n'.join(f'  File "service.py", line {i}, in handler_{i}' for i in range(2_000))
    raise ToolError(f'Traceback (most recent call last):\n{frames}\nRuntimeError: {NEEDLE}')


@server.tool
async def hang() -> str:
    """Never answers."""
    await asyncio.sleep(3_600)
    return 'unreachable'


@server.tool
def die() -> str:
    """The server process exits in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--http':
        server.run(transport='http', host='127.0.0.1', port=int(sys.argv[2]), show_banner=False, log_level='warning')
    else:
        server.run(show_banner=False, log_level='warning')
