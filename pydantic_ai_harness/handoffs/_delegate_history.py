"""The delegate's history: built from the delegating call's context with a handoff's settings, off the loop when long.

Every step that walks the whole history (splitting it, dropping system prompts, marking spills the delegate cannot
read, a synchronous filter, nesting, checking) runs in one worker thread per stage for a history `is_large` calls
large; only the store writes of long records and an async filter's own code run on the event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from ..overflowing_tool_output import OverflowingToolOutput
from ._config import HandoffConfig
from ._data import HandoffInputData
from ._history import (
    apply_handoff_input_filter,
    check_message_history,
    handoff_input_from_context,
    without_system_prompts,
)
from ._long_records import LongReturn, long_tool_returns, save_long_returns, store_timeout, with_cuts
from ._nesting import nest_handoff_history
from ._spills import mark_unreadable_spills
from ._worker import is_large, run_off_loop

__all__ = ('DelegateSpills', 'build_delegate_history', 'checked_history', 'map_segments', 'nest_off_loop')


@dataclass(frozen=True)
class DelegateSpills:
    """What a delegation knows of spills: whether the delegate reads the parent's, and where its own go."""

    readable: bool
    """Whether the delegate can page every handle the history names (the same store); if not, each says so."""

    overflow: OverflowingToolOutput[Any] | None
    """The `OverflowingToolOutput` the delegate runs with (its own or the inherited one): its store takes records
    too long for a summary, within its shortest `Spill.timeout`."""

    key_prefix: str
    """The store key prefix of those records (`handoff/<run id>`)."""


def map_segments(
    data: HandoffInputData, change: Callable[[Sequence[ModelMessage]], tuple[ModelMessage, ...]]
) -> HandoffInputData:
    """`data` with `change` applied to each segment of messages (a `str` history is kept)."""
    history = data.input_history
    return data.clone(
        input_history=history if isinstance(history, str) else change(history),
        pre_handoff_items=change(data.pre_handoff_items),
        new_items=change(data.new_items),
    )


def checked_history(data: HandoffInputData) -> list[ModelMessage]:
    """`data.to_message_history()`, checked by `check_message_history`."""
    history = data.to_message_history()
    check_message_history(history)
    return history


def _segments(data: HandoffInputData) -> tuple[str | Sequence[ModelMessage], ...]:
    return (data.input_history, data.pre_handoff_items, data.new_items)


def _start(
    ctx: RunContext[Any], target_name: str | None, settings: HandoffConfig, spills: DelegateSpills
) -> tuple[HandoffInputData, list[LongReturn]]:
    """The handoff input of `ctx`, without the parent's system prompts (unless forwarded), its unreadable spills
    marked, and the tool returns nesting will save before cutting them.
    """
    data = handoff_input_from_context(ctx, target_name=target_name)
    if not settings.forward_system_prompt:
        data = map_segments(data, without_system_prompts)
    if not spills.readable:
        data = map_segments(data, mark_unreadable_spills)
    cap = settings.max_record_chars
    saves = settings.input_filter is None and settings.nest_handoff_history and cap is not None
    if not saves or cap is None or spills.overflow is None or spills.overflow.store is None:
        return data, []
    return data, long_tool_returns(data, cap, spills.key_prefix)


def _nested(data: HandoffInputData, cuts: dict[tuple[int, int, int], str], settings: HandoffConfig) -> HandoffInputData:
    return nest_handoff_history(
        with_cuts(data, cuts),
        history_mapper=settings.history_mapper,
        summary_role=settings.summary_role,
        max_record_chars=settings.max_record_chars,
    )


async def build_delegate_history(
    ctx: RunContext[Any], target_name: str | None, settings: HandoffConfig, spills: DelegateSpills
) -> list[ModelMessage]:
    """The delegate's checked history, built from `ctx` with `settings` (filtered, or nested, or as it is).

    Raises:
        UserError: On an invalid filter or filter result, or an invalid resulting history.
    """
    large = is_large(ctx.messages)
    data, found = await run_off_loop(ctx, functools.partial(_start, ctx, target_name, settings, spills), large=large)
    if settings.input_filter is not None:
        data = await apply_handoff_input_filter(settings.input_filter, data, large=large)
        large = large or is_large(*_segments(data))
    elif settings.nest_handoff_history:
        cuts: dict[tuple[int, int, int], str] = {}
        overflow = spills.overflow
        if found and overflow is not None and overflow.store is not None and settings.max_record_chars is not None:
            cuts = await save_long_returns(found, settings.max_record_chars, overflow.store, store_timeout(overflow))
        data = await run_off_loop(ctx, functools.partial(_nested, data, cuts, settings), large=large)
    return await run_off_loop(ctx, functools.partial(checked_history, data), large=large)


async def nest_off_loop(data: HandoffInputData, **options: Any) -> HandoffInputData:
    """`nest_handoff_history(data, **options)`, in a worker thread when `is_large` calls the history large.

    Parsing and rendering are linear but pure Python (~0.3 s for 1.6 MB of short records): run inline they would
    hold the event loop, and every run in the process with it. The current context is copied into the thread, so
    the summary wrappers in effect apply there too.
    """
    work = functools.partial(nest_handoff_history, data, **options)
    return await run_off_loop(data.run_context, work, large=is_large(*_segments(data)))
