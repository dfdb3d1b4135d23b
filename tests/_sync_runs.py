"""`agent.run_sync(...)` in a test without leaking its event loop: pydantic-ai's `run_sync` keeps a loop set in the
thread that called it, which, left open in pytest's thread, is reported as unraisable by a later test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ('in_thread',)

_T = TypeVar('_T')


def in_thread(run: Callable[[], _T]) -> _T:
    """`run()` in a thread of its own, whose event loop is closed after it; its exception is raised here."""
    results: list[_T] = []
    failures: list[BaseException] = []

    def target() -> None:
        try:
            results.append(run())
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failures.append(exc)
        finally:
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                pass
            else:
                loop.close()

    thread = threading.Thread(target=target, name='run-sync')
    thread.start()
    thread.join()
    if failures:
        raise failures[0]
    return results[0]
