"""A real FastMCP server whose tool returns a PDF as an embedded blob resource, as document servers do.

Run over stdio (`python mcp_pdf_server.py`), as the suite's MCP tests start theirs.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import mcp_types
from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run as a script: the tests package is importable

from tests.overflowing_tool_output.media._pdf_files import pdf_with_pages

server = FastMCP('pdf-test-server')


def report() -> bytes:
    """A 120-page report, the same bytes every time."""
    return pdf_with_pages(
        [[f'Contract, page {page}', *(f'clause {page}.{i}' for i in range(25))] for page in range(1, 121)]
    )


@server.tool
def fetch_contract() -> ToolResult:
    """The contract, as a PDF."""
    blob = base64.b64encode(report()).decode()
    resource = mcp_types.BlobResourceContents(uri='file:///tmp/contract.pdf', mime_type='application/pdf', blob=blob)
    return ToolResult(content=[mcp_types.EmbeddedResource(type='resource', resource=resource)])


if __name__ == '__main__':
    server.run(show_banner=False)
