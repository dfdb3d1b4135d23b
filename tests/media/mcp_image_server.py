"""A real FastMCP server whose tool returns a screenshot as an MCP image, as browser and simulator servers do.

Run over stdio (`python mcp_image_server.py`), as the suite's MCP tests start theirs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.utilities.types import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the tests package is importable

from tests.media._images import screenshot

server = FastMCP('image-test-server')


@server.tool
def take_screenshot() -> Image:
    """A 4880x2560 screenshot of a Retina display, as PNG."""
    return Image(data=screenshot(), format='png')


if __name__ == '__main__':
    server.run(show_banner=False)
