"""The names of the query tools the capability registers (upstream's constant names), and of their toolset."""

from __future__ import annotations

__all__ = ('GREP_TOOL_NAME', 'QUERY_TOOLSET_ID', 'QUERY_TOOL_NAMES', 'READ_TOOL_NAME')

READ_TOOL_NAME = 'read_tool_result'
"""The tool that reads lines (or bytes) of a stored output back by handle."""

GREP_TOOL_NAME = 'grep_tool_result'
"""The tool that searches a stored output by handle."""

QUERY_TOOL_NAMES = frozenset({READ_TOOL_NAME, GREP_TOOL_NAME})
"""The names of the query tools, which the capability exempts from reduction."""

QUERY_TOOLSET_ID = 'overflowing_tool_output_query'
"""The id of the query toolset (durable execution engines need one)."""
