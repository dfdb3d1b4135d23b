"""What a `Summarize` needs from the capability, apart from the action itself: the request and outcome of the
durable summarize operation (plain data: they cross a durable boundary), the operation's shape, the per-run locks,
and `SummaryRun`, which carries them to the action in its `ActionContext`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

__all__ = ('DurableSummary', 'RunLocks', 'SummaryOutcome', 'SummaryRequest', 'SummaryRun')


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize and how to label the result."""

    tool_name: str
    """The tool whose output is summarized."""

    text: str
    """The model-visible text of the output."""

    prompt_template: str
    """The validated `summary_prompt`."""

    lines: int
    """Lines in the original."""


@dataclass(frozen=True)
class SummaryOutcome:
    """What the durable summarizer operation reports back; plain data, so it crosses a durable boundary."""

    summary: str | None
    """The summary (not yet labelled), or `None` when there is none."""

    reason: str = ''
    """Why there is no summary."""

    configuration_error: bool = False
    """The configuration cannot work (e.g. no request model): the caller raises, it does not fall back."""

    chunks: int = 1
    """How many parts the output was summarized in."""

    uncovered_chars: int = 0
    """Characters at the end of the output that were too many to summarize."""


class RunLocks:
    """One lock per run id, held while that run summarizes; an entry goes once no one holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, anyio.Lock] = {}

    def __len__(self) -> int:
        """How many runs hold or wait for a lock now."""
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, run_id: str | None) -> AsyncGenerator[None]:
        """Hold the lock of `run_id`'s summaries."""
        key = run_id or ''
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)


class DurableSummary(Protocol):
    """The capability's durable `overflow_summarize` operation."""

    def __call__(
        self, ctx: RunContext[Any], action_index: int, request: SummaryRequest
    ) -> Awaitable[tuple[SummaryOutcome, RunUsage]]: ...


@dataclass(frozen=True)
class SummaryRun:
    """The capability's summarizing machinery, handed to every `Summarize` through its `ActionContext`."""

    actions: tuple[object, ...]
    """Every `Summarize` of the configuration, in `summarize_actions` order: a durable operation names its action by
    its position here (an int crosses a durable boundary, a model or a function does not)."""

    prompt: str
    """The validated `summary_prompt`."""

    durable: DurableSummary
    """The capability's durable summarize operation."""

    locks: RunLocks = field(default_factory=RunLocks)
    """One lock per run: summaries of one run are made one at a time."""

    def index_of(self, action: object) -> int:
        """The position of `action` (this very object) in `actions`."""
        return next(i for i, known in enumerate(self.actions) if known is action)
