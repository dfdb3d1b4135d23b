"""Bounds the configuration sets, everywhere a delegation goes (issue 31, section 6), through real agent runs.

1. `delegate(..., nest_handoff_history=True)` saves a record too long for the summary to the delegate's store before
   cutting it: every write is bounded by the capability's `Spill.timeout`, the writes of one delegation by one
   such timeout in all, and a record the store did not take is cut saying so.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import delegate
from pydantic_ai_harness.handoffs._long_records import store_timeout
from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Spill,
    StepBudget,
    Summarize,
    Truncate,
)

from ._helpers import Recorder, summary_texts

pytestmark = pytest.mark.anyio

RECORD_CHARS = 50_000
"""Longer than the default `max_record_chars` (20,000): nesting saves it to the delegate's store, then cuts it."""


@dataclass
class HangingStore:
    """A remote store behind a network partition: every write hangs until cancelled."""

    attempts: int = 0
    """How many writes were started."""

    async def write(self, key: str, data: bytes) -> str:
        self.attempts += 1
        await anyio.sleep_forever()
        raise AssertionError('unreachable')

    async def read(self, handle: str) -> bytes:
        raise KeyError(handle)


@dataclass
class RaisingStore:
    """A store whose disk is full: every write raises at once, with a message that names a path."""

    attempts: int = 0
    """How many writes were started."""

    async def write(self, key: str, data: bytes) -> str:
        self.attempts += 1
        raise OSError(28, 'No space left on device', '/srv/secret/path')

    async def read(self, handle: str) -> bytes:
        raise KeyError(handle)


def long_records(count: int) -> list[str]:
    return [f'record {n}: ' + 'x' * RECORD_CHARS for n in range(count)]


def reading_triage(specialist: Agent[None, str], records: int) -> Agent[None, str]:
    """A triage agent (no reduction of its own) that calls `fetch` `records` times, then hands over, nesting."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.tool_name for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if 'transfer' in returned:
            return ModelResponse(parts=[TextPart('done')])
        if len(returned) < records:
            return ModelResponse(parts=[ToolCallPart('fetch', {'n': len(returned)}, f'c{len(returned)}')])
        return ModelResponse(parts=[ToolCallPart('transfer', {}, 'h')])

    triage = Agent(FunctionModel(respond), name='triage', deps_type=type(None))

    @triage.tool_plain
    def fetch(n: int) -> str:
        """Fetch a long record."""
        return long_records(records)[n]

    @triage.tool
    async def transfer(ctx: RunContext[None]) -> str:
        """Hand over."""
        return (await delegate(specialist, ctx, 'take over', nest_handoff_history=True)).output

    return triage


def cut_notes(summary: str) -> list[str]:
    return re.findall(r'\[\.\.\. record cut: [^\]]*\]', summary)


async def test_a_hung_store_is_bounded_by_the_spill_timeout_once_per_delegation() -> None:
    """Three long records and a store that never answers: one write is tried, for 0.2 s, and the run goes on."""
    store = HangingStore()
    recorder = Recorder()
    own = OverflowingToolOutput(bands=[Band(over=10_000_000, action=Spill(timeout=0.2))], store=store)
    specialist = Agent(recorder.model, name='specialist', capabilities=[own])
    with anyio.fail_after(10):  # measured before: the run waited for the store for ever
        result = await reading_triage(specialist, records=3).run('Read the three records')
    assert result.output == 'done'
    assert store.attempts == 1  # the deadline is spent: the other two records are not tried
    [summary] = summary_texts(recorder.last)
    assert len(summary) < 3 * 20_000 + 2_000  # three records of at most 20,000 characters, quoted, and the rest
    assert cut_notes(summary) == snapshot(
        [
            '[... record cut: the first 19867 of 50010 characters are shown; the rest was not kept (the store did not save it within 0.2 s).]',
            '[... record cut: the first 19867 of 50010 characters are shown; the rest was not kept (the store did not save it within 0.2 s).]',
            '[... record cut: the first 19867 of 50010 characters are shown; the rest was not kept (the store did not save it within 0.2 s).]',
        ]
    )


async def test_a_failing_store_cuts_each_record_without_showing_the_error(caplog: pytest.LogCaptureFixture) -> None:
    """A store that raises is tried for each record (it costs nothing); the model is told the record was not
    kept, never the store's error message (it may hold a path): that goes to the log."""
    store = RaisingStore()
    recorder = Recorder()
    own = OverflowingToolOutput(bands=[Band(over=10_000_000, action=Spill(timeout=5))], store=store)
    specialist = Agent(recorder.model, name='specialist', capabilities=[own])
    with caplog.at_level(logging.WARNING, logger='pydantic_ai_harness.handoffs'):
        await reading_triage(specialist, records=2).run('Read the two records')
    assert store.attempts == 2
    logged = (
        'delegate() could not save a 50010-character tool output to the store, so its record is cut: '
        "the store failed: OSError(28, 'No space left on device')"
    )
    assert [record.getMessage() for record in caplog.records] == [logged, logged]
    [summary] = summary_texts(recorder.last)
    assert '/srv/secret' not in summary and 'No space left' not in summary
    assert cut_notes(summary) == snapshot(
        [
            '[... record cut: the first 19878 of 50010 characters are shown; the rest was not kept (the store failed to save it).]',
            '[... record cut: the first 19878 of 50010 characters are shown; the rest was not kept (the store failed to save it).]',
        ]
    )


async def test_a_store_that_answers_saves_every_record(tmp_path: Path) -> None:
    recorder = Recorder()
    own = OverflowingToolOutput(bands=[Band(over=10_000_000, action=Spill(timeout=5))], store=LocalFileStore(tmp_path))
    specialist = Agent(recorder.model, name='specialist', capabilities=[own])
    await reading_triage(specialist, records=3).run('Read the three records')
    [summary] = summary_texts(recorder.last)
    assert [note.split(';')[1][:36] for note in cut_notes(summary)] == [' the full record is saved under hand'] * 3


def test_the_timeout_is_the_shortest_spill_timeout_of_the_capability_else_30_s(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)

    def timeout(*bands: Band, **per_tool: list[Band]) -> float:
        return store_timeout(
            OverflowingToolOutput(bands=bands or [Band(over=10_000, action=Spill())], per_tool=per_tool, store=store)
        )

    assert timeout() == 30.0  # Spill() with its default timeout
    assert timeout(Band(over=100, action=Truncate())) == 30.0  # no Spill: Spill's default
    assert timeout(Band(over=100, action=Spill(timeout=4)), Band(over=9, action=Spill(timeout=6))) == 4
    assert timeout(Band(over=100, action=Summarize(then=Spill(timeout=2)))) == 2  # a fallback's
    assert timeout(fetch=[Band(over=100, action=Spill(timeout=1.5))]) == 1.5
    budget = StepBudget(max_size=1_000, action=Spill(timeout=0.5))
    assert store_timeout(OverflowingToolOutput(step_budget=budget, store=store)) == 0.5
