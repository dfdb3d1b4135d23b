"""Stores under hostile or unlucky conditions: a symlinked spill directory, short-id collisions with deletes,
replays of the same write, store keys that are no handles, and pruning that empties whole runs."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import anyio.to_thread
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    DeletableStore,
    HandleNotFoundError,
    LocalFileStore,
    OverflowingToolOutput,
    ResolvableStore,
)
from pydantic_ai_harness.overflowing_tool_output._cli import main
from pydantic_ai_harness.overflowing_tool_output.stores import _local_aliases, _paths

from ..workspace._support import handle_in, listing, log_text, tool_returns
from ..workspace.test_fallbacks import pager
from .conftest import RedisServer, StoreKit

pytestmark = pytest.mark.anyio

LOGGER = 'pydantic_ai_harness.overflowing_tool_output'


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


# -- a `.overflow` symlink into a directory the operator trusts -------------------------------------------------


async def test_a_spill_directory_linked_into_an_operator_path_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    (workspace / 'instructions').mkdir(parents=True)
    (workspace / 'instructions' / 'AGENTS.md').write_text('Be careful.\n')
    (workspace / '.overflow').symlink_to('instructions')  # Inside the workspace, so only authority can tell.
    trusted = LocalWorkspace(workspace, authority='user', path_authority={'instructions': 'operator'})
    agent = Agent(pager(), capabilities=[trusted, OverflowingToolOutput(store=LocalFileStore(base_dir=private))])
    agent.tool_plain(name='fetch_log')(log_text)
    with caplog.at_level(logging.WARNING, LOGGER):
        result = await agent.run('find the failed payment')

    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_log')[0].content))
    assert not handle.startswith('.overflow/')  # The private store took it, and the run still found the fact.
    assert 'payment failed' in result.output
    assert listing(workspace / 'instructions') == ['AGENTS.md']  # Nothing written where the operator's text lives.
    (reason,) = [r.getMessage() for r in caplog.records if 'instead of the workspace' in r.getMessage()]
    assert 'leads out of the spill directory .overflow (through a symlink)' in reason


# -- short-id collisions and deletes ----------------------------------------------------------------------------


def collide(monkeypatch: pytest.MonkeyPatch, *modules: object) -> tuple[str, str]:
    """Two keys whose handles share their first short id in `modules` (a 50-bit collision, made rather than found)."""
    first, second = 'run/a/0', 'run/b/0'
    real = _paths.short_handles
    taken = next(real(first))

    def short_handles(handle: str) -> Iterator[str]:
        shorts = list(real(handle))
        if handle == second:
            shorts = [taken, *(taken + short[len(taken) :] for short in shorts[1:])]
        return iter(shorts)

    for module in modules:
        monkeypatch.setattr(module, 'short_handles', short_handles)
    return first, second


@pytest.fixture
def colliding(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    return collide(monkeypatch, _local_aliases)


async def test_a_freed_short_id_never_goes_to_another_key(tmp_path: Path, colliding: tuple[str, str]) -> None:
    first, second = colliding
    store = LocalFileStore(base_dir=tmp_path / 'store')
    a = await store.write(first, b'payload A')
    b = await store.write(second, b'payload B')
    assert len(b) == len(a) + 1 and b.startswith(a)  # B collided with A and got one character more.
    assert await store.delete(a)
    assert await store.write(second, b'payload B') == b  # Written again: B keeps its own id, not A's freed one.
    with pytest.raises(HandleNotFoundError):
        await store.read(a)  # A's old handle never reads B's payload.
    assert await store.resolve(a) == a

    assert await store.delete(b)
    assert await store.alias(second) is None  # B's alias went with it: no orphan.
    assert await store.resolve(b) == b
    with pytest.raises(HandleNotFoundError):
        await store.read(b)
    assert await store.write(first, b'payload A') == a  # Only the same key takes its id back.
    assert await store.read(a) == b'payload A'


async def test_a_pruned_alias_leaves_no_hole_that_hides_a_later_one(tmp_path: Path, colliding: tuple[str, str]) -> None:
    first, second = colliding
    store = LocalFileStore(base_dir=tmp_path / 'store')
    a = await store.write(first, b'payload A')
    b = await store.write(second, b'payload B')
    (store.root / '.aliases' / a).unlink()  # As a prune of A's old payload and alias leaves it.
    assert await store.alias(second) == b
    assert await store.write(second, b'payload B') == b  # Found behind the hole: B does not get a second id.
    assert await store.delete(b)
    assert await store.alias(second) is None


async def test_tombstones_go_once_older_than_the_age_limit(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')
    handle = await store.write('run/c/0', b'x')
    assert await store.delete(handle)
    tombstone = store.root / '.aliases' / handle
    assert tombstone.read_bytes() == b'\x00run/c/0'  # Held for its handle, so the id goes to no other key.
    assert await store.prune(timedelta(hours=1)) == 0 and tombstone.exists()
    _age(tombstone, 7200)
    await store.prune(timedelta(hours=1))
    assert not tombstone.exists()


# -- writing the same key and bytes again ------------------------------------------------------------------------


async def test_writing_the_same_bytes_again_restarts_the_ttl(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')
    handle = await store.write('run/call/0', b'line\n' * 100)
    payload = next(store.root.rglob('0.out'))
    _age(payload, 7200)
    assert await store.write('run/call/0', b'line\n' * 100) == handle  # A durable replay of the same write.
    assert time.time() - payload.stat().st_mtime < 600
    assert await store.prune(timedelta(hours=1)) == 0
    assert await store.read(handle) == b'line\n' * 100
    assert (await store.line_index(handle)).line_count == 100
    assert next(store.root.rglob('0.idx')).stat().st_mtime >= payload.stat().st_mtime - 1  # Sidecar kept valid.


async def test_streaming_the_same_bytes_again_restarts_the_ttl(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')
    first = await store.write_stream('run/call/0', [b'a\n', b'b\n'])
    payload = next(store.root.rglob('0.out'))
    _age(payload, 7200)
    again = await store.write_stream('run/call/0', [b'a\n', b'b\n'])
    assert again.handle == first.handle
    assert await store.prune(timedelta(hours=1)) == 0
    assert await store.read(first.handle) == b'a\nb\n'


# -- a store key that is no handle -------------------------------------------------------------------------------


def _big() -> str:
    return '\n'.join(f'line {i}: all fine' for i in range(20_000))


async def test_the_overflow_key_of_an_empty_or_spaced_tool_call_id_reads_back(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart('big', {}, tool_call_id=''), ToolCallPart('big', {}, tool_call_id='call 2')]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='big')(_big)
    result = await agent.run('go')
    returns = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    keys = [part.metadata['overflow_key'] for part in returns if part.metadata]
    assert [key.split('/', 1)[1] for key in keys] == ['/0', 'call 2/0']
    for key in keys:
        assert await store.read(key) == _big().encode()
        assert await store.size(key) == len(_big())
        full = await store.resolve(key)
        assert full != key and await store.read(full) == _big().encode()
    out, err = io.StringIO(), io.StringIO()
    show = ['--root', str(store.root), 'show', keys[0], '--lines', '2:2']
    assert await anyio.to_thread.run_sync(lambda: main(show, out=out, err=err)) == 0  # The CLI runs its own loop.
    assert out.getvalue() == 'line 1: all fine\n'
    assert await store.delete(keys[1])
    assert [p.handle for p in await store.list()] == [await store.resolve(keys[0])]


# -- pruning a whole run -----------------------------------------------------------------------------------------


def test_cli_prune_removes_the_run_directories_it_empties(tmp_path: Path) -> None:
    root = tmp_path / 'store'
    store = LocalFileStore(base_dir=root)

    async def fill() -> None:
        await store.write('run-old/call_1/0', b'old\n')
        await store.write('run-old/call_2/0', b'old too\n')
        await store.write('run-new/call_1/0', b'new\n')

    asyncio.run(fill())
    for payload in (root / 'run-old').rglob('*.out'):
        _age(payload, 7200)  # Only the payloads are old: their directories were touched since (a sidecar rewrite).
    out, err = io.StringIO(), io.StringIO()
    assert main(['--root', str(root), 'prune', '--older-than', '1h', '--yes'], out=out, err=err) == 0
    assert out.getvalue().splitlines()[-1] == 'deleted 2 payloads (12 bytes)'
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ['.aliases', 'run-new']


async def test_every_store_keeps_a_freed_short_id_from_other_keys(
    kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai_harness.overflowing_tool_output.stores import _object, _redis

    first, second = collide(monkeypatch, _local_aliases, _redis, _object)
    store = kit.make()
    assert isinstance(store, DeletableStore) and isinstance(store, ResolvableStore)
    a = await store.write(first, b'payload A')
    b = await store.write(second, b'payload B')
    assert b.startswith(a) and len(b) == len(a) + 1
    assert await store.delete(a)
    assert await store.write(second, b'payload B') == b
    with pytest.raises(HandleNotFoundError):
        await store.read(a)
    assert await store.delete(b)
    assert await store.resolve(b) == b  # No orphaned alias left behind.
    assert await store.write(first, b'payload A') == a
    assert await store.read(a) == b'payload A'


async def test_redis_restarts_the_expiry_of_the_same_bytes_written_again(redis_server: RedisServer) -> None:
    from redis.asyncio import Redis

    from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore

    store = RedisStore(redis_server.url, namespace='replay', cleanup_after=timedelta(hours=1))
    client = Redis.from_url(redis_server.url)
    try:
        short = await store.write('run/call/0', b'the output')
        keys = ['replay:~p:run/call/0', 'replay:~i:run/call/0', f'replay:~a:{short}']
        for key in keys:
            await client.pexpire(key, 1_000)  # As if the hour had nearly passed.
        assert await store.write('run/call/0', b'the output') == short  # A durable replay.
        for key in keys:
            assert await client.pttl(key) > 3_000_000, key  # A fresh hour, for the payload, its index and alias.
        assert await store.read(short) == b'the output'
    finally:
        await client.aclose()
        await store.aclose()
