"""A loop-lag monitor: a task that asks to wake every few milliseconds and records how late it woke."""

from __future__ import annotations

import contextlib
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


@contextlib.asynccontextmanager
async def watch_loop() -> AsyncIterator[LoopLag]:
    """Run the body while a monitor task measures the event loop's wake-up lateness."""
    lag = LoopLag()

    async def monitor() -> None:
        while True:
            asked = time.perf_counter()
            await anyio.sleep(TICK)
            lag.note(max(0.0, time.perf_counter() - asked - TICK))

    async with anyio.create_task_group() as group:
        group.start_soon(monitor)
        try:
            yield lag
        finally:
            group.cancel_scope.cancel()
