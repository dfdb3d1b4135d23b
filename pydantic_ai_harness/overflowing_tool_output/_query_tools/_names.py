"""The query tools' names, kinds and toolset id, and the names a run offers them under.

Tools are found by kind (`ToolDefinition.tool_kind`): a capability such as `PrefixTools` renames them, so every text
that tells the model to call one names it as the run offers it (`offered_names`), which the hooks and the query
tools set for the text they build (`naming`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ToolKind
from pydantic_ai.tools import RunContext, ToolDefinition

__all__ = (
    'GREP_TOOL_KIND',
    'GREP_TOOL_NAME',
    'QUERY_TOOLSET_ID',
    'QUERY_TOOL_KINDS',
    'QUERY_TOOL_MARK',
    'QUERY_TOOL_NAMES',
    'READ_TOOL_KIND',
    'READ_TOOL_NAME',
    'QueryToolNames',
    'is_query_tool',
    'names_in',
    'naming',
    'offered_names',
    'query_tool_names',
    'run_names',
)

READ_TOOL_NAME = 'read_tool_result'
"""The tool that reads lines (or bytes) of a stored output back by handle."""

GREP_TOOL_NAME = 'grep_tool_result'
"""The tool that searches a stored output by handle."""

READ_TOOL_KIND: ToolKind[Any, Any, Any] = ToolKind('overflowing_tool_output', 'read_tool_result')
"""The kind of `read_tool_result`, whatever it is named."""

GREP_TOOL_KIND: ToolKind[Any, Any, Any] = ToolKind('overflowing_tool_output', 'grep_tool_result')
"""The kind of `grep_tool_result`, whatever it is named."""

QUERY_TOOL_KINDS = frozenset({READ_TOOL_KIND.id, GREP_TOOL_KIND.id})
"""The ids of the query tools' kinds (their calls and returns carry them as `tool_kind`)."""

QUERY_TOOL_NAMES = frozenset({READ_TOOL_NAME, GREP_TOOL_NAME})
"""The names of the query tools, which the capability exempts from reduction."""

QUERY_TOOLSET_ID = 'overflowing_tool_output_query'
"""The id of the query toolset (durable execution engines need one)."""

QUERY_TOOL_MARK = {'overflowing_tool_output': 'query'}
"""The metadata of each query tool's definition: it survives renaming (`PrefixTools`), where the name and the
toolset id do not."""


def is_query_tool(tool_def: ToolDefinition) -> bool:
    """Whether `tool_def` is one of the capability's query tools, under whatever name it is offered."""
    if tool_def.tool_kind in QUERY_TOOL_KINDS or tool_def.toolset_id == QUERY_TOOLSET_ID:
        return True
    return QUERY_TOOL_MARK.items() <= (tool_def.metadata or {}).items()


def query_tool_names(tool_defs: Iterable[ToolDefinition]) -> frozenset[str]:
    """The names the query tools have among `tool_defs` (renamed ones included), and their own names."""
    return QUERY_TOOL_NAMES | {tool_def.name for tool_def in tool_defs if is_query_tool(tool_def)}


@dataclass(frozen=True)
class QueryToolNames:
    """The names the query tools are offered under in a run."""

    read: str = READ_TOOL_NAME
    """The name of `read_tool_result`."""

    grep: str = GREP_TOOL_NAME
    """The name of `grep_tool_result`."""


_OWN_NAMES = QueryToolNames()
_OFFERED: ContextVar[QueryToolNames | None] = ContextVar('overflowing_tool_output_offered_names', default=None)


def offered_names() -> QueryToolNames:
    """The query tools' names for a text built now: as the run offers them, inside `naming`; else their own."""
    return _OFFERED.get() or _OWN_NAMES


def names_in(tool_defs: Iterable[ToolDefinition]) -> QueryToolNames:
    """The names `tool_defs` offer the query tools under (their own names where none has the kind)."""
    by_kind = {tool_def.tool_kind: tool_def.name for tool_def in tool_defs if tool_def.tool_kind in QUERY_TOOL_KINDS}
    return QueryToolNames(
        by_kind.get(READ_TOOL_KIND.id, READ_TOOL_NAME), by_kind.get(GREP_TOOL_KIND.id, GREP_TOOL_NAME)
    )


def run_names(ctx: RunContext[Any]) -> QueryToolNames:
    """The names the run's current step offers the query tools under."""
    try:
        return QueryToolNames(
            ctx.tool_name_for_kind(READ_TOOL_KIND) or READ_TOOL_NAME,
            ctx.tool_name_for_kind(GREP_TOOL_KIND) or GREP_TOOL_NAME,
        )
    except Exception:  # noqa: BLE001 - a context that cannot list its tools (a durable unit's): the own names
        return QueryToolNames()


@contextmanager
def naming(names: QueryToolNames) -> Generator[QueryToolNames]:
    """Texts built inside name the query tools `names` (worker threads started inside inherit them)."""
    token = _OFFERED.set(names)
    try:
        yield names
    finally:
        _OFFERED.reset(token)
