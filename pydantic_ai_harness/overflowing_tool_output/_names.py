"""The names of the query tools the capability registers (upstream's constant names), and of their toolset."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic_ai.tools import ToolDefinition

__all__ = (
    'GREP_TOOL_NAME',
    'QUERY_TOOLSET_ID',
    'QUERY_TOOL_MARK',
    'QUERY_TOOL_NAMES',
    'READ_TOOL_NAME',
    'is_query_tool',
    'query_tool_names',
)

READ_TOOL_NAME = 'read_tool_result'
"""The tool that reads lines (or bytes) of a stored output back by handle."""

GREP_TOOL_NAME = 'grep_tool_result'
"""The tool that searches a stored output by handle."""

QUERY_TOOL_NAMES = frozenset({READ_TOOL_NAME, GREP_TOOL_NAME})
"""The names of the query tools, which the capability exempts from reduction."""

QUERY_TOOLSET_ID = 'overflowing_tool_output_query'
"""The id of the query toolset (durable execution engines need one)."""

QUERY_TOOL_MARK = {'overflowing_tool_output': 'query'}
"""The metadata of each query tool's definition: it survives renaming (`PrefixTools`), where the name and the
toolset id do not."""


def is_query_tool(tool_def: ToolDefinition) -> bool:
    """Whether `tool_def` is one of the capability's query tools, under whatever name it is offered."""
    metadata = tool_def.metadata or {}
    return tool_def.toolset_id == QUERY_TOOLSET_ID or QUERY_TOOL_MARK.items() <= metadata.items()


def query_tool_names(tool_defs: Iterable[ToolDefinition]) -> frozenset[str]:
    """The names the query tools have among `tool_defs` (renamed ones included), and their own names."""
    return QUERY_TOOL_NAMES | {tool_def.name for tool_def in tool_defs if is_query_tool(tool_def)}
