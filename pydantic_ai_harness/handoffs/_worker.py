"""Large history work in a worker thread, so a long conversation never holds the event loop.

Splitting, filtering, nesting and checking a history are linear but pure Python: on 46,670 messages they held the
event loop, and every run in the process with it, for 0.15-0.5 s. A history over any of the sizes below is handled in
a worker thread instead; deciding so reads at most a bounded prefix of it. Workflow code under a durable engine may not
start threads, so there the work always runs in place.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio.to_thread
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from .._typing import is_array, is_dict

__all__ = ('OFF_LOOP_CHARS', 'OFF_LOOP_ITEMS', 'OFF_LOOP_MESSAGES', 'is_large', 'run_off_loop', 'value_is_large')

_T = TypeVar('_T')

OFF_LOOP_MESSAGES = 200
"""A history of more messages than this is handled in a worker thread."""

OFF_LOOP_ITEMS = 1_000
"""... or of more parts, and values inside structured content and arguments, than this (a message may hold many)."""

OFF_LOOP_CHARS = 200_000
"""... or holding more text than this. A value whose rendering cost cannot be told from plain data (a file, a
model, any other object) counts as large."""


class _Budget:
    """What a history costs to walk, counted until it is over either bound."""

    def __init__(self) -> None:
        self.items = 0
        self.chars = 0

    def spent(self, value: object) -> bool:
        """Count `value` (and what it holds); whether the history is large now."""
        stack: list[object] = [value]
        while stack:
            item = stack.pop()
            self.items += 1
            if self.items > OFF_LOOP_ITEMS or self.chars > OFF_LOOP_CHARS:
                return True
            if item is None or isinstance(item, bool | int | float):
                continue
            if isinstance(item, str):
                self.chars += len(item)
            elif is_dict(item):
                if len(item) > OFF_LOOP_ITEMS:
                    return True
                stack.extend(item.keys())
                stack.extend(item.values())
            elif is_array(item):
                if len(item) > OFF_LOOP_ITEMS:
                    return True
                stack.extend(item)
            else:
                return True
        return self.chars > OFF_LOOP_CHARS


def is_large(*segments: str | Sequence[ModelMessage]) -> bool:
    """Whether `segments` together are too much history to handle on the event loop.

    Stops reading as soon as the history is over a bound, so deciding costs little whatever the history.
    """
    if sum(len(segment) for segment in segments if not isinstance(segment, str)) > OFF_LOOP_MESSAGES:
        return True
    budget = _Budget()
    for segment in segments:
        if isinstance(segment, str):
            if budget.spent(segment):
                return True
            continue
        for message in segment:
            for part in message.parts:
                if budget.spent(getattr(part, 'content', None)):
                    return True
                args = getattr(part, 'args', None)  # a tool call's
                if args is not None and budget.spent(args):
                    return True
    return False


def value_is_large(value: object) -> bool:
    """Whether rendering `value` (a delegate's output, say) is too much work for the event loop."""
    return _Budget().spent(value)


async def run_off_loop(ctx: RunContext[Any] | None, work: Callable[[], _T], *, large: bool) -> _T:
    """`work()`, in a worker thread when `large` (and `ctx` is not durable workflow code), else in place.

    The current context is copied into the thread, so context variables in effect (the summary wrappers) apply there.
    """
    if not large or (ctx is not None and ctx.in_durable_context):
        return work()
    context = contextvars.copy_context()
    return await anyio.to_thread.run_sync(functools.partial(context.run, work))
