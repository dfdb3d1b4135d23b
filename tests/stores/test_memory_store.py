"""`MemoryStore`, the public test double: the store contract, its call counts, and the faults it is told to have."""

from __future__ import annotations

import time
import warnings

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    HandleNotFoundError,
    LineIndexedStore,
    ListableStore,
    MemoryStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    OverflowStore,
    PayloadTooLargeError,
    RangeReadableStore,
    Spill,
)

pytestmark = pytest.mark.anyio

LOG = '\n'.join(f'line {i}: ok' for i in range(3_000)).replace('line 2999: ok', 'line 2999: FATAL')


async def test_it_never_replaces_a_payload_and_gives_the_same_bytes_the_same_handle() -> None:
    store = MemoryStore()
    first = await store.write('run/call/0', b'one')
    assert await store.write('run/call/0', b'one') == first
    second = await store.write('run/call/0', b'two')
    assert second != first and (await store.read(first), await store.read(second)) == (b'one', b'two')
    assert await store.size(second) == 3 and await store.read_range(second, 1, 99) == b'wo'
    assert (await store.line_index(first)).size == 3
    assert [p.handle for p in await store.list('run/')] == [first, second]
    assert await store.delete(first) and not await store.delete(first)
    with pytest.raises(HandleNotFoundError):
        await store.read(first)
    assert (store.writes, store.reads) == (3, 6)


def test_it_meets_the_store_protocols_and_its_base_form_only_the_base_one() -> None:
    store = MemoryStore()
    assert isinstance(store, OverflowStore | RangeReadableStore | LineIndexedStore | ListableStore)
    base = store.base_protocol()
    assert isinstance(base, OverflowStore)
    assert not isinstance(base, RangeReadableStore | LineIndexedStore | ListableStore)


def _spilling_agent(store: object) -> tuple[Agent[None, str], list[str]]:
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart('dump', {})])
        if len(returns) == 1 and returns[0].metadata and 'overflow_handle' in returns[0].metadata:
            handle = returns[0].metadata['overflow_handle']
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'FATAL'})])
        seen.extend(str(p.content) for p in returns)
        return ModelResponse(parts=[TextPart('done')])

    capability = OverflowingToolOutput(store=store, workspace=None, bands=[Band(over=5_000, action=Spill(timeout=0.2))])  # pyright: ignore[reportArgumentType]
    agent = Agent(FunctionModel(respond), capabilities=[capability])
    agent.tool_plain(name='dump')(lambda: LOG)
    return agent, seen


@pytest.mark.parametrize('form', ['full', 'base protocol'])
async def test_a_run_spills_into_it_and_reads_back(form: str) -> None:
    store = MemoryStore()
    agent, seen = _spilling_agent(store if form == 'full' else store.base_protocol())
    await agent.run('go')
    assert store.writes == 1 and list(store.payloads.values()) == [LOG.encode()]
    assert '3000| line 2999: FATAL' in seen[-1]


@pytest.mark.parametrize(
    ('fault', 'reason'),
    [
        (MemoryStore(hang=True), 'did not finish writing within 0.2 s'),
        (MemoryStore(fail=OSError(28, 'No space left on device')), 'OSError'),
        (MemoryStore(max_bytes=1_000), 'PayloadTooLargeError'),
    ],
    ids=['hang', 'fail', 'too large'],
)
async def test_each_fault_makes_the_run_fall_back(fault: MemoryStore, reason: str) -> None:
    agent, seen = _spilling_agent(fault)
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('go')
    assert time.monotonic() - started < 5
    assert fault.writes == 1 and not fault.payloads
    assert any(reason in str(w.message) for w in caught if issubclass(w.category, OverflowingToolOutputWarning))
    assert seen[0].startswith('[truncated:')  # the default `then`: a lossy cut, with its notice


async def test_a_delay_holds_every_call() -> None:
    store = MemoryStore(delay=0.05)
    started = time.monotonic()
    handle = await store.write('k', b'x')
    await store.read(handle)
    assert time.monotonic() - started >= 0.1
    with pytest.raises(PayloadTooLargeError):
        await MemoryStore(max_bytes=1).write('k', b'xy')
