"""Store keys in real agent runs: a reused tool call id never overwrites a spill, and any run id spills losslessly.

Findings 4 and 8 of issue 13. The store contract (`tests/stores/test_contract.py`) holds the same rules for every
built-in store; these runs show them end to end, through the capability and the query tools.
"""

from __future__ import annotations

import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from obstore.store import MemoryStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output.stores import ListableStore, ObjectStore, OverflowStore

from ._support import tool_returns

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

LONG_RUN_ID = 'TENANT-ACME-CONVERSATION-' + 'Q' * 62
"""An application run id whose file name, escaped, was over 255 bytes: every spill of its run was truncated."""


def report(source: int) -> str:
    """A large tool output that says on every line which call made it."""
    return ''.join(f'report {source} line {i}: status=ok value={i * source}\n' for i in range(1, 20_001))


@pytest.fixture(params=['local', 'object-memory'])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> OverflowStore:
    if request.param == 'local':
        return LocalFileStore(base_dir=tmp_path / 'spill')
    return ObjectStore(MemoryStore(), prefix='runs')


class ReusedIds:
    """Two steps whose calls both carry `call_0` and return different reports; then it reads both handles."""

    def __init__(self) -> None:
        self.handles: list[str] = []
        self.reads: list[str] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)] if len(messages) > 1 else []
        for part in returns:
            if part.tool_name == 'fetch_report':
                self.handles.append((part.metadata or {})['overflow_handle'])
            else:
                self.reads.append(str(part.content))
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < 2:
            return ModelResponse(parts=[ToolCallPart('fetch_report', {'source': step + 1}, tool_call_id='call_0')])
        if step == 2:
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        'read_tool_result', {'handle': handle, 'offset': 100, 'limit': 2}, tool_call_id=f'r{n}'
                    )
                    for n, handle in enumerate(self.handles)
                ]
            )
        return ModelResponse(parts=[TextPart('done')])


def agent_with(store: OverflowStore, model: FunctionModel) -> Agent[None, str]:
    agent = Agent(model, capabilities=[OverflowingToolOutput(store=store)])

    @agent.tool_plain
    def fetch_report(source: int) -> str:
        return report(source)

    return agent


async def test_two_steps_with_the_same_tool_call_id_keep_both_spills(store: OverflowStore) -> None:
    script = ReusedIds()
    result = await agent_with(store, script.model).run('compare the two reports', run_id='run-reused')
    assert result.output == 'done'
    first, second = script.handles
    assert first != second
    assert await store.read(first) == report(1).encode()
    assert await store.read(second) == report(2).encode()
    # The model reads each handle back through read_tool_result and gets its own call's output.
    assert 'report 1 line 101: status=ok value=101' in script.reads[0]
    assert 'report 2 line 101: status=ok value=202' in script.reads[1]
    assert 'report 2' not in script.reads[0] and 'report 1' not in script.reads[1]


async def test_a_replayed_run_writes_the_same_bytes_to_the_same_handles(store: OverflowStore) -> None:
    # A durable engine that re-executes a run (or a retry that repeats it) gives the same key and the same bytes:
    # the handles and every model-visible text stay identical, and nothing is stored twice.
    runs: list[tuple[list[str], list[str]]] = []
    for _ in range(2):
        script = ReusedIds()
        result = await agent_with(store, script.model).run('compare the two reports', run_id='run-replayed')
        runs.append((script.handles, [str(p.content) for p in tool_returns(result.all_messages())]))
    assert runs[0] == runs[1]
    if isinstance(store, ListableStore):
        assert len(await store.list('run-replayed/')) == 2


async def test_a_long_uppercase_run_id_spills_losslessly(store: OverflowStore) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('fetch_report', {'source': 3}, tool_call_id='call_0')])
        return ModelResponse(parts=[TextPart('done')])

    with warnings.catch_warnings():
        warnings.simplefilter('error')  # A fallback to truncation warns: there must be none.
        result = await agent_with(store, FunctionModel(respond)).run('get the report', run_id=LONG_RUN_ID)
    (part,) = tool_returns(result.all_messages())
    metadata: dict[str, Any] = part.metadata or {}
    assert metadata['overflow_action'] == 'spill'
    handle, key = metadata['overflow_handle'], metadata['overflow_key']
    assert len(handle) == 10 and key == f'{LONG_RUN_ID}/call_0/0'  # The model sees the short handle.
    assert f"Saved in full under handle '{handle}'" in str(part.content)
    assert await store.read(handle) == report(3).encode()
    if isinstance(store, ListableStore):
        [listed] = [payload.handle for payload in await store.list()]
        assert listed.startswith('TENANT-ACME-CONVERSATION-') and listed.endswith('/call_0/0')
        assert await store.read(listed) == report(3).encode()
    requests = [m for m in result.all_messages() if isinstance(m, ModelRequest)]
    assert requests[-1].run_id == LONG_RUN_ID


def test_an_object_store_prefix_too_long_for_s3_keys_is_refused_at_construction() -> None:
    from pydantic_ai_harness.overflowing_tool_output.stores._object import MAX_PREFIX_LENGTH

    assert MAX_PREFIX_LENGTH == 238
    ObjectStore(MemoryStore(), prefix='p' * MAX_PREFIX_LENGTH)
    with pytest.raises(ValueError, match='ObjectStore prefix is 239 characters long: use at most 238'):
        ObjectStore(MemoryStore(), prefix='p' * (MAX_PREFIX_LENGTH + 1))


@pytest.mark.parametrize('cleanup_after', [None, timedelta(hours=1)])
async def test_an_object_backend_without_conditional_puts_still_never_overwrites(
    monkeypatch: pytest.MonkeyPatch, cleanup_after: timedelta | None
) -> None:
    # Some obstore backends (HTTP/WebDAV) have no create-if-absent put: the store checks before it puts.
    import obstore

    real_put = obstore.put_async

    async def put_without_create(*args: Any, mode: Any = None, **kwargs: Any) -> Any:
        if mode == 'create':
            raise NotImplementedError('conditional put')
        return await real_put(*args, mode=mode, **kwargs)

    monkeypatch.setattr(obstore, 'put_async', put_without_create)
    backend = MemoryStore()
    store = ObjectStore(backend, prefix='runs', cleanup_after=cleanup_after)
    first = await store.write('run/call_0/0', b'first')
    second = await store.write('run/call_0/0', b'second')
    assert [await store.resolve(first), await store.resolve(second)] == ['run/call_0/0', 'run/call_0/0~~2']
    assert await store.write('run/call_0/0', b'second') == second
    assert [await store.read(first), await store.read(second)] == [b'first', b'second']
    stored = await obstore.get_async(backend, 'runs/~p/run/call_0/0~~2@')
    assert ('expires-at' in stored.attributes) == (cleanup_after is not None)  # Expiry metadata is kept.
