"""A loop-lag monitor: a task that asks to wake every few milliseconds and records how late it woke."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

__all__ = ('LoopLag', 'watch_loop')

TICK = 0.005
"""How often the monitor asks to wake."""


@dataclass
class LoopLag:
    """How late the event loop woke the monitor: the longest stall any other task caused."""

    worst: float = 0.0
    """The largest lateness seen, in seconds."""

    ticks: int = 0
    """How many times the monitor woke."""

    samples: list[float] = field(default_factory=list[float])

    def note(self, late: float) -> None:
        self.ticks += 1
        self.worst = max(self.worst, late)


class _GcClock:
    """Seconds the interpreter spent in garbage collection: a pause of the whole process, not of the code under test.

    A full collection in a test process holding hundreds of thousands of objects takes tens of milliseconds and
    stops every thread; it is subtracted so the monitor measures what the capability does.
    """

    def __init__(self) -> None:
        self.total = 0.0
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == 'start':
            self.started = time.perf_counter()
        elif self.started:
            self.total += time.perf_counter() - self.started
            self.started = 0.0


@contextlib.asynccontextmanager
async def watch_loop() -> AsyncIterator[LoopLag]:
    """Run the body while a monitor task measures the event loop's wake-up lateness (garbage collection aside)."""
    lag = LoopLag()
    clock = _GcClock()

    async def monitor() -> None:
        while True:
            asked = time.perf_counter()
            collected = clock.total
            await anyio.sleep(TICK)
            now = time.perf_counter()
            # A collection whose stop callback has not run yet (a thread switch came first) is a pause all the same.
            in_progress = now - max(clock.started, asked) if clock.started else 0.0
            late = now - asked - TICK - (clock.total - collected) - in_progress
            lag.note(max(0.0, late))

    gc.callbacks.append(clock)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(monitor)
            try:
                yield lag
            finally:
                group.cancel_scope.cancel()
    finally:
        gc.callbacks.remove(clock)
