"""Configuration checks of `OverflowingToolOutput`: the ones construction can make, and the tool names a run reveals."""

from __future__ import annotations

import difflib
import inspect
import os
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence

import anyio

from .._typing import is_instance, is_mapping, is_sequence
from ._actions._action import action_chain
from ._actions._bands import Band, Spill
from .stores import LocalFileStore, OverflowStore

__all__ = ('check_store', 'check_tool_filter', 'named_tools', 'spill_timeout', 'unknown_tool_names', 'uses_store')

_SELECTOR_FORMS = "'all', a list of tool names, a metadata dict, or a callable `(ctx, tool_def) -> bool`"


def check_tool_filter(selector: object) -> None:
    """Raise `TypeError` naming `tool_filter` unless `selector` is a `ToolSelector`."""
    if callable(selector) or isinstance(selector, str):
        return  # a str other than 'all' is one tool name, as `matches_tool_selector` reads it
    if is_mapping(selector):
        keys = list(selector)
        bad_keys = [key for key in keys if not isinstance(key, str)]
        if bad_keys:
            raise TypeError(f'tool_filter as a metadata dict needs str keys, got {bad_keys[0]!r}')
        return
    if is_sequence(selector) and not isinstance(selector, (bytes, bytearray)):
        for index, item in enumerate(selector):
            if not isinstance(item, str):
                raise TypeError(
                    f'tool_filter[{index}] must be a tool name (str), got {type(item).__name__} {item!r}; '
                    f'tool_filter is {_SELECTOR_FORMS}'
                )
        return
    raise TypeError(f'tool_filter must be {_SELECTOR_FORMS}; got {type(selector).__name__} {selector!r}')


def check_store(store: object) -> None:
    """Raise `TypeError` naming `store` unless it has the async `write` and `read` of `OverflowStore`."""
    if is_instance(store, (str, bytes, os.PathLike)):
        raise TypeError(
            f'store must be a store object, not a path: pass store=LocalFileStore(base_dir=...); '
            f'got {type(store).__name__} {store!r}'
        )
    for name, signature in (('write', 'write(key: str, data: bytes) -> str'), ('read', 'read(handle: str) -> bytes')):
        method = getattr(store, name, None)
        if method is None:
            problem = 'has none'
        elif not inspect.iscoroutinefunction(method):
            problem = 'has one that is not `async def`'
        else:
            continue
        raise TypeError(
            f'store must have `async def {signature}` (the OverflowStore protocol); {type(store).__name__} {problem}'
        )


def spill_timeout(band_lists: Iterable[Sequence[Band]]) -> float:
    """The shortest `Spill.timeout` the bands configure (the default `Spill`'s when none spills): what aging's store
    calls may take when `Aging.timeout` is not set.
    """
    timeouts = [
        timeout
        for bands in band_lists
        for band in bands
        for action in action_chain(band.action)
        if (timeout := action.spill_timeout) is not None
    ]
    return min(timeouts, default=Spill().timeout)


def uses_store(band_lists: Iterable[Sequence[Band]]) -> bool:
    """Whether any action reachable from the bands writes to the store (`Spill`, `Summarize(keep_original=True)`)."""
    for bands in band_lists:
        for band in bands:
            if any(action.writes_store for action in action_chain(band.action)):
                return True
    return False


def named_tools(selector: object) -> tuple[str, ...]:
    """The tool names a `tool_filter` lists (none for `'all'`, a metadata dict or a callable)."""
    if selector == 'all' or callable(selector) or isinstance(selector, Mapping):
        return ()
    if isinstance(selector, str):
        return (selector,)
    if is_sequence(selector):
        return tuple(item for item in selector if isinstance(item, str))
    return ()


def unknown_tool_names(per_tool: Iterable[str], tool_filter: object, tools: Iterable[str]) -> list[str]:
    """One warning per `per_tool` / `tool_filter` name that matches none of `tools`, with the closest tool name."""
    available = sorted(set(tools))
    messages: list[str] = []
    for setting, names, effect in (
        ('per_tool', list(per_tool), 'its bands apply to no tool'),
        ('tool_filter', list(named_tools(tool_filter)), 'it selects no tool'),
    ):
        for name in dict.fromkeys(names):
            if name in available:
                continue
            close = difflib.get_close_matches(name, available, n=1)
            if close:
                hint = f'did you mean {close[0]!r}?'
            elif available:
                shown = ', '.join(repr(tool) for tool in available[:10])
                hint = f'its tools are {shown}{", ..." if len(available) > 10 else ""}'
            else:
                hint = 'it has no tools'
            messages.append(
                f'OverflowingToolOutput {setting} names {name!r}, but this agent has no tool of that name '
                f'({hint}); {effect}'
            )
    return messages


async def store_root_problem(
    store: OverflowStore,
    band_lists: Iterable[Sequence[Band]],
    *,
    durable: bool,
    aging: bool = False,
    timeout: float = 30.0,
) -> str | None:
    """What makes a `LocalFileStore` root unusable, when spills (or `aging`) write there; `None` when fine or unchecked.

    Workflow code does no file I/O (`durable`), and other stores report their failures on write. A store checked
    less than `ROOT_RECHECK_SECONDS` ago is not checked again. The check waits at most `timeout` seconds (a hung
    mount answers nothing): past it, that is the problem, and no second check starts while the first still waits.
    """
    if durable or not isinstance(store, LocalFileStore) or not (aging or uses_store(band_lists)):
        return None
    checked = _ROOT_CHECKS.get(id(store))
    now = time.monotonic()
    if checked is not None and checked[0]() is store and now - checked[1] < ROOT_RECHECK_SECONDS:
        return checked[2]  # checked moments ago: a run start pays no thread hop for it (the spill warns anyway)
    unanswered = (
        f'the LocalFileStore root {store.root_path} did not answer a check within {timeout:g} s (a hung mount?); '
        'spills there will time out'
    )
    running = _CHECKING.get(store.root_path)
    if running is not None:
        # One check at a time per root: the runs starting meanwhile wait for it (no second thread on a hung mount).
        with anyio.move_on_after(timeout):
            await running.wait()
        done = _ROOT_CHECKS.get(id(store))
        return done[2] if done is not None and done[0]() is store and done[1] >= now - timeout else unanswered
    finished = _CHECKING[store.root_path] = anyio.Event()
    problem: str | None = unanswered

    def check() -> str | None:
        try:
            return store.root_problem()
        finally:
            _CHECKING.pop(store.root_path, None)

    try:
        with anyio.move_on_after(timeout):
            problem = await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
        if len(_ROOT_CHECKS) > 1_000:
            _ROOT_CHECKS.clear()
        _ROOT_CHECKS[id(store)] = (weakref.ref(store), now, problem)
    finally:
        finished.set()
    return problem


_CHECKING: dict[str, anyio.Event] = {}
"""Roots whose check is running (in a worker thread that, on a hung mount, waits for as long as it hangs)."""


ROOT_RECHECK_SECONDS = 60.0
"""How long a store's root check holds for the runs that start after it."""

_ROOT_CHECKS: dict[int, tuple[weakref.ref[LocalFileStore], float, str | None]] = {}
