"""Store fixes of issue 24 (items 11 and 12) driven through real agent runs that a durable engine replays.

A durable engine re-executes a run under the same `run_id`, so its tool calls write the same store keys again.
These runs pass `run_id` themselves, as the engine does.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, build_query_toolset

from .test_store_hardening import collide

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio


def _log(name: str) -> str:
    return '\n'.join(f'{name} line {i}: all fine' for i in range(20_000))


async def spill_in_a_run(store: LocalFileStore, run_id: str, call_id: str) -> str:
    """One run (`run_id`) whose single tool call (`call_id`) returns a log too large to send: the spill's handle."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('fetch_log', {}, tool_call_id=call_id)])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='fetch_log')(lambda: _log(call_id))
    async with agent.iter('go', run_id=run_id) as run:
        async for _ in run:
            pass
    assert run.result is not None
    [part] = [
        p
        for m in run.result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    assert isinstance(part.metadata, dict), part.content
    return part.metadata['overflow_handle']


async def test_a_replayed_run_keeps_its_spill_from_the_next_prune(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')
    handle = await spill_in_a_run(store, 'run-replayed', 'call_1')
    [payload] = store.root.rglob('0.out')
    then = time.time() - 7200
    os.utime(payload, (then, then))  # The first execution was two hours ago.
    assert await spill_in_a_run(store, 'run-replayed', 'call_1') == handle  # The engine replays the run.
    assert await store.prune(timedelta(hours=1)) == 0  # Written again just now: not the prune's to take.
    assert await store.read(handle) == _log('call_1').encode()


async def test_a_freed_short_id_never_answers_for_another_run_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai_harness.overflowing_tool_output.stores import _local_aliases

    collide(monkeypatch, _local_aliases)  # The keys 'run/a/0' and 'run/b/0' share their first short id.
    store = LocalFileStore(base_dir=tmp_path / 'store')
    a = await spill_in_a_run(store, 'run', 'a')
    b = await spill_in_a_run(store, 'run', 'b')
    assert b.startswith(a) and len(b) == len(a) + 1
    assert await store.delete(a)  # An operator deletes the first spill.
    assert await spill_in_a_run(store, 'run', 'b') == b  # The replay keeps its own id.
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    answer = await read(handle=a)
    assert answer.startswith(f"No stored result found under handle '{a}'"), answer[:300]  # Not B's payload.
    assert 'b line 0: all fine' in await read(handle=b)
