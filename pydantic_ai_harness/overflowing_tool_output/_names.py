"""The names of the query tools the capability registers, exported under upstream's constant names."""

from __future__ import annotations

__all__ = ('GREP_TOOL_NAME', 'READ_TOOL_NAME')

READ_TOOL_NAME = 'read_tool_result'
"""The tool that reads lines (or bytes) of a stored output back by handle."""

GREP_TOOL_NAME = 'grep_tool_result'
"""The tool that searches a stored output by handle."""
