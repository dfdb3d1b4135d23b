"""Aging names only handles it has checked, and stays within the bounds the configuration sets.

A spill's handle is reused by its stub only when the store still holds that payload and it is this return's own
(its key names this call, its size is what the metadata says); anything else (an expired payload, another
worker's store, metadata an application or a tool set) gets the text the model saw written under a handle of its
own. Metadata read from a message is untrusted input: a forged size cannot make a stub claim absurd sizes.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Aging,
    Band,
    LocalFileStore,
    MemoryStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Spill,
)

from .test_aging_hostile import returns, stub_of

pytestmark = pytest.mark.anyio

FATAL = 'FATAL: disk controller 3 offline'


def log_text(lines: int = 3_000) -> str:
    rows = [f'2026-12-06 10:{i // 60:02d}:{i % 60:02d} service ok request {i}' for i in range(lines)]
    rows[2] = FATAL  # in the preview's first lines, which the model saw
    return '\n'.join(rows)


def stubs(messages: list[ModelMessage]) -> dict[str, str]:
    """tool_call_id -> the handle its stub names."""
    found: dict[str, str] = {}
    for part in returns(messages):
        match = stub_of(part)
        if match is not None:
            found[part.tool_call_id] = match.group(3)
    return found


def chatter(turns: int):
    """A model that calls `dump` once, then `noop` `turns` times (so the dump grows old), then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(m, ModelResponse) for m in messages)
        if done == 0 and not any(p.tool_name == 'dump' for p in returns(messages)):
            return ModelResponse(parts=[ToolCallPart('dump', {}, tool_call_id='dump_call')])
        calls = sum(p.tool_name == 'noop' for p in returns(messages))
        if calls < turns:
            return ModelResponse(parts=[ToolCallPart('noop', {'n': calls}, tool_call_id=f'noop_{calls}')])
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


def agent_with(capability: OverflowingToolOutput[Any], dump: Callable[[], Any]) -> Agent[None, str]:
    agent = Agent(capabilities=[capability])
    agent.tool_plain(name='dump')(dump)

    @agent.tool_plain
    def noop(n: int) -> str:
        return f'nothing {n}'

    return agent


async def test_a_spill_whose_payload_expired_is_written_again_as_the_model_saw_it(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'store')
    spill = OverflowingToolOutput(store=store, workspace=None, bands=[Band(over=5_000, action=Spill())])
    first = await agent_with(spill, log_text).run('dump', model=chatter(0))
    [spilled] = [p for p in returns(first.all_messages()) if p.tool_name == 'dump']
    handle = spilled.metadata['overflow_handle']
    assert FATAL in spilled.model_response_str()
    assert await store.delete(handle)  # the TTL removed it before the chat was resumed

    aging = OverflowingToolOutput(
        store=store,
        workspace=None,
        bands=[Band(over=5_000, action=Spill())],
        aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10),
    )
    resumed = await agent_with(aging, log_text).run('go on', model=chatter(3), message_history=first.all_messages())
    named = stubs(resumed.all_messages())
    assert named['dump_call'] != handle
    # The stub's handle holds what the model saw, the FATAL line with it: nothing it read is gone.
    assert (await store.read(named['dump_call'])).decode() == spilled.model_response_str()


async def test_a_spill_stored_by_another_store_is_written_again(tmp_path: Path) -> None:
    worker = LocalFileStore(tmp_path / 'other-worker')
    spill = OverflowingToolOutput(store=worker, workspace=None, bands=[Band(over=5_000, action=Spill())])
    first = await agent_with(spill, log_text).run('dump', model=chatter(0))
    [spilled] = [p for p in returns(first.all_messages()) if p.tool_name == 'dump']

    here = LocalFileStore(tmp_path / 'this-worker')
    aging = OverflowingToolOutput(
        store=here, workspace=None, aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10)
    )
    resumed = await agent_with(aging, log_text).run('go on', model=chatter(3), message_history=first.all_messages())
    handle = stubs(resumed.all_messages())['dump_call']
    assert (await here.read(handle)).decode() == spilled.model_response_str()


async def test_forged_spill_metadata_neither_names_another_payload_nor_claims_its_size(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)
    victim = await store.write('another-run/call_secret/0', b'another conversation\n' * 1_000)
    own = 'own text of this return\n' * 92  # 2,208 characters, written nowhere else

    def forged() -> ToolReturn[str]:
        return ToolReturn(
            return_value=own,
            metadata={'overflow_action': 'spill', 'overflow_handle': victim, 'overflow_size_before': 10**30},
        )

    capability = OverflowingToolOutput(
        store=store, workspace=None, aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10)
    )
    result = await agent_with(capability, forged).run('go', model=chatter(3))
    [aged] = [p for p in returns(result.all_messages()) if p.tool_name == 'dump']
    match = stub_of(aged)
    assert match is not None
    assert match.group(3) != victim
    assert (await store.read(match.group(3))).decode() == own
    assert int(match.group(2).replace(',', '')) < 1_000  # ~552 tokens, not 2.5e29


async def test_aging_writes_are_bounded_by_the_configured_timeout(tmp_path: Path) -> None:
    store = MemoryStore(hang=True)
    capability = OverflowingToolOutput(
        store=store,
        workspace=None,
        bands=[Band(over=100_000, action=Spill(timeout=0.3))],
        aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10),
    )
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', OverflowingToolOutputWarning)
        await agent_with(capability, lambda: 'a small return of some length\n' * 40).run('go', model=chatter(3))
    # One batch gave up after the band's 0.3 s, where a fixed 30 s had stalled the run (measured: 30.1 s).
    assert time.monotonic() - started < 10
    assert store.writes >= 1


async def test_aging_takes_its_own_timeout_when_given(tmp_path: Path) -> None:
    assert Aging(timeout=0.5).timeout == 0.5
    with pytest.raises(ValueError, match='aging.timeout'):
        Aging(timeout=0)


def many_returns_history(count: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = [ModelRequest.user_text_prompt('start')]
    for n in range(count):
        call = f'old_{n}'
        messages.append(ModelResponse(parts=[ToolCallPart('noop', {'n': n}, call)]))
        messages.append(ModelRequest(parts=[ToolReturnPart('noop', f'old return {n} ' + 'x' * 40, call)]))
    messages.append(ModelResponse(parts=[TextPart('ok')]))
    return messages


async def test_old_returns_are_tokenized_once_however_many_the_conversation_holds(tmp_path: Path) -> None:
    """12,000 old returns, none worth aging: each is counted once, not again on every request (a cache cleared at
    10,000 entries recounted all of them on every request: 0.7-2 s a request with cl100k)."""
    counted: list[int] = []

    def tokenizer(text: str) -> int:
        counted.append(len(text))
        return len(text) // 4

    capability = OverflowingToolOutput(
        store=LocalFileStore(tmp_path),
        workspace=None,
        tokenizer=tokenizer,
        aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10**9, batch_share=None),
    )
    history = many_returns_history(12_000)
    await agent_with(capability, lambda: 'x').run('go', model=chatter(4), message_history=history)
    assert len(counted) <= 12_000 + 50


async def test_a_large_batch_of_due_returns_is_tokenized_off_the_event_loop(tmp_path: Path) -> None:
    """100 parallel returns of 9.5 KB: counted in a worker thread, so the loop keeps serving the run's other tasks
    (on the loop, cl100k took 0.3-1.6 s in one request)."""
    threads: set[str] = set()

    def tokenizer(text: str) -> int:
        threads.add(threading.current_thread().name)
        return len(text) // 4

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(m, ModelResponse) for m in messages)
        if done == 0:
            return ModelResponse(parts=[ToolCallPart('dump', {}, tool_call_id=f'c{i}') for i in range(100)])
        if done < 4:
            return ModelResponse(parts=[ToolCallPart('noop', {'n': done}, tool_call_id=f'n{done}')])
        return ModelResponse(parts=[TextPart('done')])

    capability = OverflowingToolOutput(
        store=LocalFileStore(tmp_path),
        workspace=None,
        bands=[Band(over=100_000, action=Spill())],
        tokenizer=tokenizer,
        aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10**9, batch_share=None),
    )
    await agent_with(capability, lambda: 'y' * 9_500).run('go', model=FunctionModel(respond))
    assert threads - {threading.main_thread().name}
