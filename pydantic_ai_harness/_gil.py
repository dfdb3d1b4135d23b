"""Keeping the event loop responsive while a worker thread runs a long Python loop.

CPython's convoy effect: a CPU-bound thread keeps the GIL until the switch interval (5 ms) forces it out, and
the event loop's thread, which gives the GIL up at every `select()`, then waits that long each time it wants it
back. A 0.5 s scan in a worker held the loop up by 35-120 ms that way. Sleeping for 0 s every 2 ms hands the
GIL over at once, so the loop waits a few milliseconds at most, at no measurable cost to the scan.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from contextlib import contextmanager

__all__ = ('HAND_OVER_EVERY', 'called_off_by', 'hand_over', 'past')

HAND_OVER_EVERY = 0.002
"""Seconds of a worker's loop between two hand-overs of the GIL."""


class _Schedule(threading.local):
    next_hand_over: float = 0.0
    called_off: threading.Event | None = None


_schedule = _Schedule()


def hand_over() -> float:
    """Give the GIL away if this thread has run 2 ms since it last did; returns `time.monotonic()`.

    Call it once per iteration (or every few dozen cheap ones) of a loop that may run in a worker thread.
    """
    now = time.monotonic()
    if now >= _schedule.next_hand_over:
        time.sleep(0)  # releases the GIL: a thread waiting for it, the event loop's, takes it now
        _schedule.next_hand_over = now + HAND_OVER_EVERY
    return now


def past(deadline: float) -> bool:
    """Whether `deadline` (a `time.monotonic()` value) has passed, handing the GIL over as `hand_over` does.

    Within `called_off_by(event)`, it has also passed once `event` is set.
    """
    called_off = _schedule.called_off
    return hand_over() > deadline or (called_off is not None and called_off.is_set())


@contextmanager
def called_off_by(event: threading.Event) -> Generator[None]:
    """Within it, `past()` in this thread is true once `event` is set: a worker whose caller has gone stops."""
    previous = _schedule.called_off
    _schedule.called_off = event
    try:
        yield
    finally:
        _schedule.called_off = previous
