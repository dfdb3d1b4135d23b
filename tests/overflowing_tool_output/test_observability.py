from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, Instrumentation, on_event
from pydantic_ai.messages import ToolReturn
from pydantic_ai.models.test import TestModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    OverflowReduced,
    OverflowRunSummary,
    Spill,
    Truncate,
    overflow_report,
)

from .conftest import FailingStore, MemoryStore, call_tools_once

pytestmark = pytest.mark.anyio


def _agent(capability: OverflowingToolOutput[Any], *values: Any) -> Agent[None, str]:
    agent = Agent(call_tools_once(*[(f'tool_{i}', {}) for i in range(len(values))]), capabilities=[capability])
    for i, value in enumerate(values):
        agent.tool_plain(name=f'tool_{i}')(lambda value=value: value)
    return agent


@dataclass
class Listener(AbstractCapability[Any]):
    """An application-side listener, as a user would write one."""

    seen: list[Any] = field(default_factory=list[Any])

    @on_event(OverflowReduced, OverflowRunSummary)
    async def _record(self, ctx: RunContext[Any], event: OverflowReduced | OverflowRunSummary) -> None:
        self.seen.append(event)


async def _events(agent: Agent[None, str], run_id: str | None = None) -> list[Any]:
    listener = Listener()
    await agent.run('go', run_id=run_id, capabilities=[listener])
    return listener.seen


async def test_each_reduction_is_a_typed_event_and_the_run_gets_a_summary(memory_store: MemoryStore) -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=50_000, action=Spill()), Band(over=1_000, action=Truncate(max_chars=500))],
        store=memory_store,
    )
    agent = _agent(capability, 'a' * 60_000, 'b' * 2_000, 'small')
    events = await _events(agent, run_id='obs')
    reductions = sorted((e for e in events if isinstance(e, OverflowReduced)), key=lambda e: e.tool_name or '')
    assert [(e.tool_name, e.action, e.fallback_path, e.chars_before, e.handle) for e in reductions] == [
        ('tool_0', 'spill', ['Spill'], 60_000, 'obs/call_0/0'),
        ('tool_1', 'truncate', ['Truncate'], 2_000, None),
    ]
    assert all(e.chars_after < e.chars_before for e in reductions)
    assert all(e.capability_id == 'overflowing_tool_output' for e in reductions)
    [summary] = [e for e in events if isinstance(e, OverflowRunSummary)]
    assert summary.reduced == 2
    assert summary.chars_before == 62_000
    assert summary.handles == ['obs/call_0/0']
    assert summary.chars_saved == 62_000 - sum(e.chars_after for e in reductions)
    assert summary.tokens_saved == summary.chars_saved // 4


async def test_fallback_path_is_reported() -> None:
    capability = OverflowingToolOutput(store=FailingStore())
    with pytest.warns(OverflowingToolOutputWarning):
        events = await _events(_agent(capability, 'x' * 20_000))
    [reduced] = [e for e in events if isinstance(e, OverflowReduced)]
    assert reduced.fallback_path == ['Spill', 'Truncate']
    assert reduced.action == 'truncate'


async def test_overflow_report_reads_the_history(memory_store: MemoryStore) -> None:
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=memory_store)
    envelope = ToolReturn(return_value='v' * 3_000, content='c' * 4_000)
    result = await _agent(capability, envelope, 'small').run('go', run_id='rep')
    report = overflow_report(result.all_messages())
    assert report.reduced == 2
    assert report.by_action == {'spill': 2}
    assert report.chars_before == 7_000
    assert report.handles == ('rep/call_0/0', 'rep/call_0/0/content')
    assert 0 < report.chars_saved < 7_000
    assert overflow_report([]).reduced == 0


async def test_a_run_without_reductions_has_no_summary() -> None:
    events = await _events(_agent(OverflowingToolOutput(), 'tiny'))
    assert not [e for e in events if isinstance(e, (OverflowReduced, OverflowRunSummary))]


async def test_reductions_are_logged(memory_store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger='pydantic_ai_harness'):
        await _agent(OverflowingToolOutput(store=memory_store), 'z' * 20_000).run('go', run_id='log')
    [record, run_record] = [r for r in caplog.records if r.name == 'pydantic_ai_harness.overflowing_tool_output']
    assert record.getMessage() == (
        f'reduced the return_value of tool_0: spill (Spill), 20000 -> {record.overflow_chars_after} characters, '  # type: ignore[attr-defined]
        'stored as log/call_0/0'
    )
    assert record.overflow_handle == 'log/call_0/0'  # type: ignore[attr-defined]
    assert run_record.getMessage().startswith('run log: reduced 1 tool outputs')


async def test_span_attributes_when_instrumented(memory_store: MemoryStore) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(
        TestModel(call_tools=['big']),
        capabilities=[
            Instrumentation(settings=InstrumentationSettings(tracer_provider=provider)),
            OverflowingToolOutput(store=memory_store),
        ],
    )
    agent.tool_plain(name='big')(lambda: 'q' * 20_000)
    await agent.run('go')
    [tool_span] = [
        s for s in exporter.get_finished_spans() if s.attributes and s.attributes.get('gen_ai.tool.name') == 'big'
    ]
    attributes = dict(tool_span.attributes or {})
    assert attributes['pydantic_ai_harness.overflow.action'] == 'spill'
    assert attributes['pydantic_ai_harness.overflow.chars_before'] == 20_000
    assert attributes['pydantic_ai_harness.overflow.fallback_path'] == ('Spill',)


async def test_the_event_names_the_short_handle_and_the_key_behind_it(tmp_path: Path) -> None:
    """A built-in store shows the model a short handle; the event also carries the full key the store lists."""
    store = LocalFileStore(base_dir=tmp_path)
    events = await _events(_agent(OverflowingToolOutput(store=store), 'q' * 20_000))
    [reduced] = [e for e in events if isinstance(e, OverflowReduced)]
    assert reduced.handle is not None and len(reduced.handle) == 10
    assert reduced.key is not None and reduced.key.endswith('/0') and reduced.key.count('/') == 2
    assert await store.read(reduced.handle) == await store.read(reduced.key) == b'q' * 20_000
    assert [stored.handle for stored in await store.list('')] == [reduced.key]


async def test_a_store_returning_its_key_as_handle_reports_both_the_same(memory_store: MemoryStore) -> None:
    events = await _events(_agent(OverflowingToolOutput(store=memory_store), 'q' * 20_000), run_id='own')
    [reduced] = [e for e in events if isinstance(e, OverflowReduced)]
    assert (reduced.handle, reduced.key) == ('own/call_0/0', 'own/call_0/0')
