"""The toolset the model pages through stored results with: `read_tool_result` and `grep_tool_result`.

One pair of tool functions serves both forms of the toolset: the plain form reads every handle from one store and
knows no conversation; the routed form (`route=`) reads each handle from the store `route` picks in the run, and
resolves a mangled or unknown handle against the handles the conversation was shown. Argument mistakes raise
`ModelRetry` with a precise message; an unknown or expired handle, or a store that fails or does not answer in
time, returns guidance text instead (no retry burned). The answers themselves are the `_*_tool.py` modules'.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from functools import partial
from typing import Any, Literal

import anyio
from pydantic_ai import FunctionToolset, ModelRetry, RunContext, Tool
from pydantic_ai.toolsets.abstract import ToolsetTool

from .._events import logger
from ..stores._protocol import OverflowStore
from ._answers import DEFAULT_LIMIT, QueryLimits, show, storage_error
from ._grep_all import grep_all_tool_results
from ._grep_tool import grep_tool_result as _grep_tool_result
from ._handles import KnownHandle, clean_handle, conversation_handles, resolved_answer
from ._json_query_tool import PATH_QUERY_SECONDS, path_matches, query_path
from ._names import (
    GREP_TOOL_KIND,
    QUERY_TOOL_MARK,
    QUERY_TOOL_NAMES,
    QUERY_TOOLSET_ID,
    READ_TOOL_KIND,
    naming,
    run_names,
)
from ._read_tool import read_tool_result as _read_tool_result

__all__ = ('QUERY_TOOLSET_ID', 'QUERY_TOOL_NAMES', 'QueryLimits', 'build_query_toolset')

Route = Callable[[RunContext[Any], str], OverflowStore]
"""Picks the store a handle is read from in a run."""

_READ_DOC = (
    "Read a stored tool output. offset: first line, from 1 (from_end: counted back; unit='bytes': first byte); "
    "pattern keeps matching lines; path queries JSON ($.data[?@.status=='stuck'].id)."
)
"""The clamps (`QueryLimits`) are left out: an answer that was clamped says so, which costs nothing until then."""

_GREP_DOC = (
    'Find lines holding pattern in stored tool outputs (a preview names each handle), with context. Literal unless '
    'is_regex (RE2); offset/start: first line/byte searched. No handle: every stored output, newest first (offset: '
    'first output).'
)

_RUN: ContextVar[RunContext[Any] | None] = ContextVar('overflowing_tool_output_query_run', default=None)
"""The run a routed toolset's tool call belongs to, while the call runs (unset for the plain form)."""


class _QueryToolset(FunctionToolset[Any]):
    """The query toolset: each call's answer names the tools as the run offers them (`PrefixTools` renames them).

    An argument the model got wrong is answered in the shape of every other guidance, plain text saying what was
    wrong and what to pass instead, rather than as a retry (which pydantic-ai sends as `{"error": ...}` and counts).
    """

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        with naming(run_names(ctx)):
            try:
                return await super().call_tool(name, tool_args, ctx, tool)
            except ModelRetry as problem:
                return problem.message


class _RoutedToolset(_QueryToolset):
    """The query toolset whose tool calls know their run: the tools read it from `_RUN` to route and resolve."""

    before_call: Callable[[RunContext[Any]], None] | None = None
    """Run before each call with its run (the capability settles a compaction's ledger there, so a search made
    right after a compaction already covers the handles it took out)."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self.before_call is not None:
            self.before_call(ctx)
        token = _RUN.set(ctx)
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        finally:
            _RUN.reset(token)


def build_query_toolset(
    store: OverflowStore,
    *,
    limits: QueryLimits | None = None,
    route: Route | None = None,
    before_call: Callable[[RunContext[Any]], None] | None = None,
) -> FunctionToolset[Any]:
    """The `read_tool_result` / `grep_tool_result` toolset over `store`.

    Works with any [`OverflowStore`][pydantic_ai_harness.overflowing_tool_output.OverflowStore]; stores
    that also implement the range and line-index extensions answer in O(window).

    Args:
        store: Where the stored results live.
        limits: Output and time caps (defaults: [`QueryLimits()`][pydantic_ai_harness.overflowing_tool_output.QueryLimits]).
        route: Picks the store for a handle in a run (e.g. the run's workspace for its own handles); default: `store`.
        before_call: With `route`, called with the run before each tool call.
    """
    caps = limits or QueryLimits()

    def answer(
        handle: str, seconds: float, tool_answer: Callable[[OverflowStore, str], Awaitable[str]]
    ) -> Awaitable[str]:
        # In a routed run, each handle is read from the store `route` picks and resolved against the conversation;
        # otherwise (the plain form, or a call made outside a run) against `store` alone.
        ctx = _RUN.get() if route is not None else None
        store_for: Callable[[str], OverflowStore] = (
            partial(route, ctx) if route is not None and ctx is not None else (lambda _handle: store)
        )
        known: list[KnownHandle] = (conversation_handles(ctx) if ctx is not None else None) or []

        def read(meant: str) -> Awaitable[str]:
            return tool_answer(store_for(meant), meant)

        resolved = resolved_answer(store_for(clean_handle(handle)), handle, known, read)
        return _within_store_timeout(resolved, handle, seconds)

    def grep_all(pattern: str, max_matches: int, is_regex: bool, offset: int) -> Awaitable[str]:
        # Only the handles this run's messages carry (none outside a routed run): never a listing of the store.
        ctx = _RUN.get() if route is not None else None
        if route is None or ctx is None:
            return grep_all_tool_results([], lambda _handle: store, caps, pattern, max_matches, is_regex, offset)
        known = conversation_handles(ctx)
        if known is None:
            logger.warning(  # for the operator: the model's answer already says to pass a handle
                'grep_tool_result without a handle ran where the run context has neither the messages nor their '
                'handles: under Temporal, pass run_context_type=OverflowTemporalRunContext to TemporalDurability'
            )
        return grep_all_tool_results(known, partial(route, ctx), caps, pattern, max_matches, is_regex, offset)

    async def read_tool_result(
        handle: str,
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
        from_end: bool = False,
        pattern: str = '',
        unit: Literal['lines', 'bytes'] = 'lines',
        path: str = '',
    ) -> str:
        matches = path_matches(path, offset, limit, from_end, pattern, unit)

        def query(store: OverflowStore, meant: str) -> Awaitable[str]:
            return _guarded_query(store, meant, path, matches, caps.store_timeout)

        def read(store: OverflowStore, meant: str) -> Awaitable[str]:
            return _read_tool_result(store, caps, meant, offset, limit, from_end, pattern, unit)

        if matches:
            # The query's own time budget on top of the store's: one that runs out answers with what it found.
            return await answer(handle, caps.store_timeout + PATH_QUERY_SECONDS, query)
        return await answer(handle, caps.store_timeout, read)

    async def grep_tool_result(
        handle: str = '',
        *,
        pattern: str,
        context_lines: int = 2,
        max_matches: int = 20,
        is_regex: bool = False,
        offset: int = 0,
        start: int = 0,
    ) -> str:
        if not clean_handle(handle):
            if start:
                raise ModelRetry(
                    'start (a byte to start at) needs a handle: pass the handle the search was stopped in.'
                )
            return await grep_all(pattern, max_matches, is_regex, offset)

        def grep(store: OverflowStore, meant: str) -> Awaitable[str]:
            return _grep_tool_result(store, caps, meant, pattern, context_lines, max_matches, is_regex, offset, start)

        return await answer(handle, caps.store_timeout, grep)

    read_tool_result.__doc__ = _READ_DOC
    grep_tool_result.__doc__ = _GREP_DOC
    # Generous retries: a model that keeps passing a bad argument gets the precise error several times
    # before the run gives up.
    # Each carries its kind, so the capability and core find it whatever it is named.
    tools = [Tool(read_tool_result, tool_kind=READ_TOOL_KIND), Tool(grep_tool_result, tool_kind=GREP_TOOL_KIND)]
    if route is None:
        return _QueryToolset(tools, id=QUERY_TOOLSET_ID, max_retries=5, metadata=dict(QUERY_TOOL_MARK))
    routed = _RoutedToolset(tools, id=QUERY_TOOLSET_ID, max_retries=5, metadata=dict(QUERY_TOOL_MARK))
    routed.before_call = before_call
    return routed


async def _guarded_query(store: OverflowStore, handle: str, path: str, matches: int, store_timeout: float) -> str:
    """A path query's answer, or the storage-error guidance when the store fails underneath it."""
    try:
        return await query_path(store, handle, path, matches, store_timeout=store_timeout)
    except ModelRetry:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return storage_error(handle, exc)


async def _within_store_timeout(answer: Awaitable[str], handle: str, seconds: float) -> str:
    """Await a tool's answer, or tell the model the store did not answer in time."""
    deadline: anyio.CancelScope | None = None
    try:
        with anyio.fail_after(seconds) as deadline:
            return await answer
    except TimeoutError as exc:
        if deadline is None or not deadline.cancel_called:
            return storage_error(clean_handle(handle), exc)  # the store's own timeout, not ours
        return (
            f'The stored result {show(handle)} could not be read right now (the storage did not answer within '
            f'{seconds:g} s). Try again later, or call the original tool again.'
        )
