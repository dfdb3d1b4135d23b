"""`read_tool_result(handle, path=...)`: a JSONPath query over a stored JSON result, and the answer text."""

from __future__ import annotations

import threading

import anyio
import anyio.from_thread
import anyio.to_thread
from pydantic_ai import ModelRetry

from ..._gil import called_off_by
from .._search._jsonpath import JsonQueryError, JsonQueryLimits, JsonQueryResult, NotQueryableError, query_json
from .._search._query import Payload
from ..stores._protocol import OverflowStore
from ._answers import DEFAULT_LIMIT
from ._handles import open_handle
from ._names import offered_names

__all__ = ('MAX_QUERY_MATCHES', 'PATH_QUERY_SECONDS', 'path_matches', 'query_path')

MAX_QUERY_MATCHES = 100
"""Most matches one answer lists (the total is always reported)."""

PATH_QUERY_SECONDS = JsonQueryLimits().time_budget
"""The time budget of one path query, past which it answers with what it found so far."""


async def query_path(store: OverflowStore, handle: str, path: str, max_matches: int, *, store_timeout: float) -> str:
    """`read_tool_result`'s answer to a path query: the matches of JSONPath `path` in the result `handle` holds."""
    max_matches = min(max_matches, MAX_QUERY_MATCHES)
    payload: Payload | str = f'The stored result {handle!r} could not be opened in time. Try again later.'
    with anyio.move_on_after(store_timeout):
        payload = await open_handle(store, handle)
    if isinstance(payload, str):
        return payload
    if payload.index.is_binary:
        return (
            f'The stored result {payload.handle!r} is binary, not JSON: read it without path, or use '
            f'{offered_names().grep}.'
        )
    try:
        result = await _run(payload, path, max_matches, JsonQueryLimits())
    except NotQueryableError as exc:
        return f'Stored result {payload.handle!r}: {exc}'
    except JsonQueryError as exc:
        raise ModelRetry(str(exc)) from None
    return _render(payload.handle, path.strip(), result)


_DEFAULT_PATH_MATCHES = 20
"""Matches a path query lists when `limit` is left at its default (the line default would flood the answer)."""


def path_matches(path: str, offset: int, limit: int, from_end: bool, pattern: str, unit: str) -> int:
    """How many matches a `path` query lists; 0 when there is no path (a plain read).

    Raises `ModelRetry` for arguments that only apply to reading lines or bytes.
    """
    if not path.strip():
        return 0
    if offset < 0:
        raise ModelRetry(f'offset must be 0 or more, got {offset}; with path, leave it out.')
    ignored = [
        name
        for name, given in (
            ('offset', offset not in (0, 1)),
            ('from_end', from_end),
            ('pattern', pattern != ''),
            ('unit', unit != 'lines'),
        )
        if given
    ]
    if ignored:
        raise ModelRetry(
            f'path selects JSON values, so {", ".join(ignored)} cannot be combined with it: pass path (and limit, '
            'the most matches to list) alone.'
        )
    if limit < 1:
        raise ModelRetry(f'limit must be 1 or more, got {limit}.')
    return _DEFAULT_PATH_MATCHES if limit == DEFAULT_LIMIT else limit


class _CalledOff(Exception):
    """The call the query runs for was cancelled: its worker stops at its next read."""


async def _run(payload: Payload, path: str, max_matches: int, caps: JsonQueryLimits) -> JsonQueryResult:
    """Run the query in a worker thread (it is CPU-bound), reading the payload through the event loop.

    A cancelled call stops the work too: the worker checks a flag between steps (where it checks its time budget,
    and before each read), so the call returns within a step of its cancellation, not at the end of the budget.
    """
    called_off = threading.Event()

    async def read_range(start: int, end: int) -> bytes:
        return await payload.read_range(start, end)

    def read(start: int, end: int) -> bytes:
        if called_off.is_set():
            raise _CalledOff
        return anyio.from_thread.run(read_range, start, end)

    def work() -> JsonQueryResult | Exception:
        # The outcome is returned, not raised: raised inside the task group below, it would come out as a group.
        with called_off_by(called_off):
            try:
                return query_json(read, payload.size, path, max_matches=max_matches, limits=caps)
            except Exception as exc:  # noqa: BLE001 - raised again below, once out of the task group
                return exc

    outcome: JsonQueryResult | Exception = _CalledOff()
    async with anyio.create_task_group() as group:
        group.start_soon(_call_off_when_cancelled, called_off)
        # Shielded: the worker calls back into the event loop for every read, and a cancelled host waiting on it made
        # the loop spin on cancel delivery while the worker waited on its read (a livelock). The watcher above is not
        # shielded: a cancellation sets the flag, and the worker stops at its next step.
        with anyio.CancelScope(shield=True):
            outcome = await anyio.to_thread.run_sync(work)
        group.cancel_scope.cancel()
    # A worker is called off only when the call was cancelled, and leaving the task group raised that: an exception
    # here is the query's own (a refused query, a failing store).
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


async def _call_off_when_cancelled(called_off: threading.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        called_off.set()


def _render(handle: str, path: str, result: JsonQueryResult) -> str:
    shown = len(result.matches)
    at_least = '' if result.complete else 'at least '
    noun = 'match' if result.total == 1 else 'matches'
    if not result.total:
        text = f'No match for {path!r} in {handle!r}.'
        if not result.complete:
            text += f' The query stopped at line {result.reached_line} to answer quickly; narrow the path.'
        return text
    scope = f'all {shown}' if shown == result.total and result.complete else f'the first {shown}'
    lines = [f'{at_least}{result.total} {noun} for {path!r} in {handle!r}; {scope}:']
    for match in result.matches:
        where = f'line {match.line}: ' if match.line is not None else ''
        lines.append(f'{where}{match.path} = {match.value}')
    footer: list[str] = []
    if not result.complete:
        footer.append(f'The query stopped at line {result.reached_line} to answer quickly; narrow the path.')
    if shown < result.total:
        more = f'Pass limit={MAX_QUERY_MATCHES} (the most) or narrow' if shown < MAX_QUERY_MATCHES else 'Narrow'
        footer.append(f'{more} the path to see more.')
    first_line = next((match.line for match in result.matches if match.line is not None), None)
    if first_line is not None:
        footer.append(
            f'In context: {offered_names().read}(handle={handle!r}, offset={max(1, first_line - 5)}, limit=20), '
            'with offset a few lines before a match.'
        )
    if footer:
        lines.append(f'({" ".join(footer)})')
    return '\n'.join(lines)
