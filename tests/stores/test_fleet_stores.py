"""What only the networked stores do: expiry, size limits, fallbacks, failures, two processes, lazy imports."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
import pytest
from obstore.store import LocalStore, MemoryStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from redis.asyncio import Redis

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, OverflowingToolOutputWarning
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset
from pydantic_ai_harness.overflowing_tool_output.stores import (
    HandleNotFoundError,
    ObjectStore,
    PayloadTooLargeError,
    RedisStore,
    StoreBackendError,
    _object_ops as object_ops,
    build_line_index,
)

from .conftest import RedisServer, S3Server, free_port

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def eventually_missing(store: Any, handle: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await store.read(handle)
        except HandleNotFoundError:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f'{handle!r} did not expire within {timeout} s')


# -- Redis ------------------------------------------------------------------------------------------


@pytest.fixture
async def redis_raw(redis_server: RedisServer) -> Any:
    client = Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


async def test_redis_expiry_is_native_and_covers_the_index(redis_server: RedisServer, redis_raw: Redis) -> None:
    store = RedisStore(redis_server.url, namespace='ttl-app', cleanup_after=timedelta(milliseconds=400))
    try:
        handle = await store.write('run/call/0', b'short\nlived\n')
        assert await store.read(handle) == b'short\nlived\n'
        for key in ('ttl-app:~p:run/call/0', 'ttl-app:~i:run/call/0', f'ttl-app:~a:{handle}'):  # the alias too
            assert 0 < await redis_raw.pttl(key) <= 400
        await eventually_missing(store, handle)
        assert await redis_raw.exists('ttl-app:~p:run/call/0', 'ttl-app:~i:run/call/0', f'ttl-app:~a:{handle}') == 0
        assert await store.list() == []
    finally:
        await store.aclose()


async def test_redis_a_payload_without_an_alias_gets_one_with_its_remaining_lifetime(
    redis_server: RedisServer, redis_raw: Redis
) -> None:
    # A payload written before short handles existed, replayed now: the alias lives exactly as long as it, and the
    # replay restarts both lifetimes (a payload written again must not expire early).
    store = RedisStore(redis_server.url, namespace='old-app', cleanup_after=timedelta(minutes=5))
    try:
        handle = await store.write('run/call/0', b'older payload')
        await redis_raw.delete(f'old-app:~a:{handle}')
        await redis_raw.pexpire('old-app:~p:run/call/0', 60_000)
        assert await store.write('run/call/0', b'older payload') == handle
        for key in (f'old-app:~a:{handle}', 'old-app:~p:run/call/0'):
            assert 60_000 < await redis_raw.pttl(key) <= 300_000
        assert await store.read(handle) == b'older payload'
    finally:
        await store.aclose()


async def test_redis_without_cleanup_after_keeps_payloads(redis_server: RedisServer, redis_raw: Redis) -> None:
    store = RedisStore(redis_server.url, namespace='keep-app')
    try:
        handle = await store.write('run/call/0', b'kept')
        assert await redis_raw.pttl('keep-app:~p:run/call/0') == -1
        assert await redis_raw.get(f'keep-app:~a:{handle}') == b'run/call/0'  # the alias: the full handle
        assert await redis_raw.pttl(f'keep-app:~a:{handle}') == -1
    finally:
        await store.aclose()


async def test_redis_rebuilds_a_missing_index_with_the_same_expiry(redis_server: RedisServer, redis_raw: Redis) -> None:
    store = RedisStore(redis_server.url, namespace='rebuild-app', cleanup_after=timedelta(minutes=5))
    data = b''.join(b'row %d\n' % i for i in range(200_000))
    try:
        handle = await store.write('run/call/0', data)
        await redis_raw.delete('rebuild-app:~i:run/call/0')
        index = await store.line_index(handle)
        assert index.line_count == 200_000 and list(index.newlines_before) == list(
            build_line_index(data).newlines_before
        )
        assert 0 < await redis_raw.pttl('rebuild-app:~i:run/call/0') <= 300_000
        await redis_raw.set('rebuild-app:~i:run/call/0', b'garbage')  # A corrupt index is rebuilt too.
        assert (await store.line_index(handle)).line_count == 200_000
    finally:
        await store.aclose()


async def test_redis_never_reads_keys_outside_its_namespace(redis_server: RedisServer, redis_raw: Redis) -> None:
    await redis_raw.set('secret-app-token', b'hunter2')
    await redis_raw.set('confined:~p', b'marker without handle')
    store = RedisStore(redis_server.url, namespace='confined')
    try:
        for handle in ('secret-app-token', '../secret-app-token', ':secret-app-token', '*', ''):
            with pytest.raises(HandleNotFoundError):
                await store.read(handle)
        assert await store.list() == []
    finally:
        await store.aclose()


async def test_redis_accepts_a_client_and_leaves_it_open(redis_server: RedisServer, redis_raw: Redis) -> None:
    store = RedisStore(client=redis_raw, namespace='shared-client')
    handle = await store.write('run/call/0', b'via client')
    await store.aclose()
    assert await store.read(handle) == b'via client'


def test_redis_configuration_errors() -> None:
    with pytest.raises(ValueError, match='namespace'):
        RedisStore(namespace='has~tilde')
    with pytest.raises(ValueError, match='namespace'):
        RedisStore(namespace='has space')
    with pytest.raises(ValueError, match='namespace'):
        RedisStore(namespace='a::b')
    with pytest.raises(ValueError, match='decode_responses'):
        RedisStore(client=Redis(decode_responses=True))
    with pytest.raises(ValueError, match='not both'):
        RedisStore('redis://127.0.0.1:1/0', client=Redis())
    with pytest.raises(ValueError, match='max_bytes'):
        RedisStore(max_bytes=-1)
    with pytest.raises(ValueError, match='cleanup_after'):
        RedisStore(cleanup_after=timedelta(0))
    assert 'hunter2' not in repr(RedisStore('redis://:hunter2@127.0.0.1:1/0'))


async def test_redis_server_down_is_a_clean_backend_error() -> None:
    port = free_port()
    store = RedisStore(f'redis://:hunter2@127.0.0.1:{port}/0', socket_timeout=2.0)
    try:
        with pytest.raises(StoreBackendError) as caught:
            await store.write('run/call/0', b'data')
        for leak in ('127.0.0.1', str(port), 'hunter2', 'redis://'):
            assert leak not in str(caught.value)
        with pytest.raises(StoreBackendError):
            await store.read('run/call/0')
        answer = await query_once(store, {'handle': 'run/call/0'})
        assert 'could not be read right now' in answer and '127.0.0.1' not in answer and str(port) not in answer
    finally:
        await store.aclose()


async def test_redis_store_survives_a_new_event_loop(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, namespace='loops')
    handle = await store.write('run/call/0', b'first loop')

    def in_another_loop() -> bytes:
        async def read_and_close() -> bytes:
            try:
                return await store.read(handle)
            finally:
                await store.aclose()

        return asyncio.run(read_and_close())

    assert await asyncio.to_thread(in_another_loop) == b'first loop'
    assert await store.read(handle) == b'first loop'
    await store.aclose()


# -- ObjectStore ------------------------------------------------------------------------------------


@pytest.fixture(params=['memory', 'local', 's3'])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == 'memory':
        return MemoryStore()
    if request.param == 'local':
        return LocalStore(tmp_path)
    server: S3Server = request.getfixturevalue('s3_server')
    return server.s3_store()


async def all_paths(backend: Any, prefix: str) -> list[str]:
    return sorted(meta['path'] for page in obstore.list(backend, prefix) for meta in page)


async def test_object_store_expiry_and_prune(backend: Any, tmp_path: Path) -> None:
    prefix = f'ttl-{tmp_path.name}'
    store = ObjectStore(backend, prefix=prefix, cleanup_after=timedelta(milliseconds=1200))
    forever = ObjectStore(backend, prefix=prefix)
    keep = await forever.write('run/kept/0', b'kept\n')
    handle = await store.write('run/call/0', b'short\nlived\n')
    assert await store.read(handle) == b'short\nlived\n'
    assert await store.size(handle) == 12
    await eventually_missing(store, handle)
    for operation in (store.size(handle), store.line_index(handle), store.read_range(handle, 0, 0)):
        with pytest.raises(HandleNotFoundError):
            await operation
    if not isinstance(backend, LocalStore):
        # The expiry travels with the object: a reader configured without a TTL honours it too.
        with pytest.raises(HandleNotFoundError):
            await forever.read(handle)
    assert [payload.handle for payload in await store.list()] == ['run/call/0', 'run/kept/0']  # Listed until pruned.
    assert await forever.prune() == (0 if isinstance(backend, LocalStore) else 1)
    if isinstance(backend, LocalStore):
        assert await store.prune() == 2  # No metadata on local files: the age rule applies to both.
        assert await all_paths(backend, prefix) == []
    else:
        assert await forever.read(keep) == b'kept\n'
        assert [payload.handle for payload in await store.list()] == ['run/kept/0']
        # The expired payload's alias went with it; the kept one's stays.
        assert await all_paths(backend, prefix) == [
            f'{prefix}/~a/{keep}@',
            f'{prefix}/~i/run/kept/0@',
            f'{prefix}/~p/run/kept/0@',
        ]
        assert await forever.prune(older_than=timedelta(0)) == 1
        assert await all_paths(backend, prefix) == []


async def test_object_store_prune_removes_orphan_indexes(
    backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f'orphans-{tmp_path.name}'
    store = ObjectStore(backend, prefix=prefix)
    handle = await store.write('run/call/0', b'data\n')
    await obstore.delete_async(backend, f'{prefix}/~p/run/call/0@')  # A payload deleted behind our back.
    assert await store.prune() == 0
    # Young orphans may be in flight. The alias stays until it expires (or is old enough for `older_than`).
    assert await all_paths(backend, prefix) == [f'{prefix}/~a/{handle}@', f'{prefix}/~i/run/call/0@']
    monkeypatch.setattr(object_ops, 'ORPHAN_INDEX_GRACE', -1.0)
    assert await store.prune() == 0
    assert await all_paths(backend, prefix) == [f'{prefix}/~a/{handle}@']
    with pytest.raises(HandleNotFoundError):
        await store.read(handle)  # An orphan alias reads as not found.
    assert await store.prune(older_than=timedelta(0)) == 0
    assert await all_paths(backend, prefix) == []


async def test_object_store_rebuilds_a_missing_or_stale_index(backend: Any, tmp_path: Path) -> None:
    prefix = f'rebuild-{tmp_path.name}'
    store = ObjectStore(backend, prefix=prefix)
    data = b''.join(b'row %d\n' % i for i in range(200_000))
    handle = await store.write('run/call/0', data)
    await obstore.delete_async(backend, f'{prefix}/~i/run/call/0@')
    assert (await store.line_index(handle)).line_count == 200_000
    assert f'{prefix}/~i/run/call/0@' in await all_paths(backend, prefix)
    # Another writer replaces the payload without touching the index: the e-tag no longer matches.
    await obstore.put_async(backend, f'{prefix}/~p/run/call/0@', b'one\ntwo\n')
    assert (await store.line_index(handle)).line_count == 2
    await obstore.put_async(backend, f'{prefix}/~i/run/call/0@', b'garbage')
    assert (await store.line_index(handle)).line_count == 2


def test_object_store_configuration_errors() -> None:
    for prefix in ('', '/', 'a/../b', 'a//b', 'has~tilde', 'has space', './a'):
        with pytest.raises(ValueError, match='prefix'):
            ObjectStore(MemoryStore(), prefix=prefix)
    assert ObjectStore(MemoryStore(), prefix='/app/eu/').prefix == 'app/eu'
    with pytest.raises(ValueError, match='prune_concurrency'):
        ObjectStore(MemoryStore(), prune_concurrency=0)
    with pytest.raises(ValueError, match='max_bytes'):
        ObjectStore(MemoryStore(), max_bytes=-5)


async def test_s3_server_down_is_a_clean_backend_error() -> None:
    from obstore.store import S3Store

    port = free_port()
    backend = S3Store(
        'private-bucket',
        endpoint=f'http://127.0.0.1:{port}',
        region='us-east-1',
        access_key_id='AKIASECRET',
        secret_access_key='very-secret',
        virtual_hosted_style_request=False,
        client_options={'allow_http': True, 'connect_timeout': '2s', 'timeout': '5s'},
        retry_config={'max_retries': 0, 'retry_timeout': timedelta(seconds=2)},
    )
    store = ObjectStore(backend, prefix='down')
    with pytest.raises(StoreBackendError) as caught:
        await store.write('run/call/0', b'data')
    for leak in ('127.0.0.1', str(port), 'private-bucket', 'AKIASECRET', 'very-secret', 'http'):
        assert leak not in str(caught.value)
    answer = await query_once(store, {'handle': 'run/call/0'})
    assert 'could not be read right now' in answer and 'private-bucket' not in answer and str(port) not in answer
    with pytest.warns(Warning) as recorded:
        assert await store.prune() == 0
    assert all('private-bucket' not in str(warning.message) for warning in recorded)


# -- both: size limits and the capability's fallback ------------------------------------------------


@pytest.fixture(params=['redis', 'valkey', 'object-s3', 'object-memory'])
async def limited_store(request: pytest.FixtureRequest) -> Any:
    if request.param in ('redis', 'valkey'):
        server: RedisServer = request.getfixturevalue(f'{request.param}lite_server')
        store: Any = RedisStore(server.url, namespace=f'limit-{time.monotonic_ns()}', max_bytes=1000)
        yield store
        await store.aclose()
        return
    backend = MemoryStore() if request.param == 'object-memory' else request.getfixturevalue('s3_server').s3_store()
    yield ObjectStore(backend, prefix=f'limit-{time.monotonic_ns()}', max_bytes=1000)


async def test_max_bytes_is_enforced_with_a_clear_error(limited_store: Any) -> None:
    assert await limited_store.read(await limited_store.write('run/ok/0', b'x' * 1000)) == b'x' * 1000
    with pytest.raises(PayloadTooLargeError, match=r'1,001 bytes.*max_bytes of 1,000') as caught:
        await limited_store.write('run/big/0', b'x' * 1001)
    assert '127.0.0.1' not in str(caught.value)
    assert [payload.handle for payload in await limited_store.list()] == ['run/ok/0']


async def test_capability_falls_back_to_truncation_when_the_payload_is_too_large(limited_store: Any) -> None:
    big = '\n'.join(f'line {i}: ' + 'x' * 60 for i in range(400))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('dump', {})])
        part = messages[-1].parts[-1]
        assert isinstance(part, ToolReturnPart)
        return ModelResponse(parts=[TextPart(str(part.content))])

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=limited_store)])

    @agent.tool_plain
    def dump() -> str:
        return big

    with pytest.warns(OverflowingToolOutputWarning, match='max_bytes') as recorded:
        result = await agent.run('go', run_id='run-limit')
    assert len(result.output) <= 5000  # The default fallback: Truncate() to 5,000 characters.
    assert 'truncated' in result.output
    assert await limited_store.list() == []
    assert all('127.0.0.1' not in str(warning.message) for warning in recorded)


# -- two processes ----------------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import asyncio, hashlib, json, sys
    from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore, RedisStore

    config = json.loads(sys.stdin.read())

    def make():
        if config['kind'] == 'redis':
            return RedisStore(config['url'], namespace=config['namespace'])
        from obstore.store import S3Store
        backend = S3Store(
            config['bucket'], endpoint=config['endpoint'], region='us-east-1', access_key_id='testing',
            secret_access_key='testing', virtual_hosted_style_request=False, client_options={'allow_http': True},
        )
        return ObjectStore(backend, prefix=config['namespace'])

    async def main():
        store = make()
        if config['action'] == 'write':
            handle = await store.write(config['key'], bytes.fromhex(config['data']))
            print(json.dumps({'handle': handle}))
        else:
            data = await store.read(config['handle'])
            index = await store.line_index(config['handle'])
            window = await store.read_range(config['handle'], 10, 20)
            print(json.dumps({'sha256': hashlib.sha256(data).hexdigest(), 'lines': index.line_count,
                              'window': window.hex()}))
        if hasattr(store, 'aclose'):
            await store.aclose()

    asyncio.run(main())
    sys.stdout.flush()
    # obstore's Rust runtime occasionally aborts (SIGABRT) during interpreter shutdown after S3 requests
    # (about 1 process in 30 with obstore 0.12, reproduced without this library): leave without finalizing.
    import os
    os._exit(0)
    """
)


def run_child(config: dict[str, Any]) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, '-c', _CHILD],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, 'PYTHONPATH': str(ROOT)},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('kind', ['redis', 'valkey', 's3'])
async def test_a_handle_written_by_one_process_is_read_by_another(kind: str, request: pytest.FixtureRequest) -> None:
    namespace = f'xproc-{time.monotonic_ns()}'
    config: dict[str, Any] = {'kind': 'redis' if kind == 'valkey' else kind, 'namespace': namespace}
    store: Any
    if kind in ('redis', 'valkey'):
        server: RedisServer = request.getfixturevalue(f'{kind}lite_server')
        config['url'] = server.url
        store = RedisStore(server.url, namespace=namespace)
    else:
        s3: S3Server = request.getfixturevalue('s3_server')
        config.update(endpoint=s3.endpoint, bucket=s3.bucket)
        store = ObjectStore(s3.s3_store(), prefix=namespace)
    data = b''.join(b'worker line %d\n' % i for i in range(50_000)) + bytes(range(256))
    try:
        # Child writes, parent reads.
        written = await asyncio.to_thread(
            run_child, {**config, 'action': 'write', 'key': 'run-x/call_child/0', 'data': data.hex()}
        )
        assert await store.read(written['handle']) == data
        assert (await store.line_index(written['handle'])).line_count == build_line_index(data).line_count
        # Parent writes, child reads.
        handle = await store.write('run-x/call_parent/0', data)
        seen = await asyncio.to_thread(run_child, {**config, 'action': 'read', 'handle': handle})
        assert seen == {
            'sha256': hashlib.sha256(data).hexdigest(),
            'lines': build_line_index(data).line_count,
            'window': data[10:20].hex(),
        }
    finally:
        if isinstance(store, RedisStore):
            await store.aclose()


# -- imports ----------------------------------------------------------------------------------------


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )


def test_importing_the_package_needs_neither_redis_nor_obstore() -> None:
    completed = python(
        'import sys\n'
        "sys.modules['redis'] = None\n"
        "sys.modules['obstore'] = None\n"
        'import pydantic_ai_harness.overflowing_tool_output as o\n'
        'from pydantic_ai_harness.overflowing_tool_output.stores import LocalFileStore, PayloadTooLargeError\n'
        'from pydantic_ai_harness.overflowing_tool_output import stores\n'
        'for name in ("RedisStore", "ObjectStore"):\n'
        '    try:\n'
        '        getattr(stores, name)\n'
        '    except ImportError as exc:\n'
        '        print(exc)\n'
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "RedisStore needs the `redis` package: pip install 'redis>=5' (the `redis` extra of pydantic-ai-harness-context installs it)",
        "ObjectStore needs the `obstore` package: pip install 'obstore>=0.6' (the `object-store` extra of pydantic-ai-harness-context installs it)",
    ]


async def query_once(store: Any, args: dict[str, Any]) -> str:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('read_tool_result', args)])
        part = messages[-1].parts[-1]
        assert isinstance(part, ToolReturnPart)
        return ModelResponse(parts=[TextPart(str(part.content))])

    result = await Agent(FunctionModel(model), toolsets=[build_query_toolset(store)]).run('read')
    return result.output


async def test_more_concurrent_writes_than_the_connection_pool_holds_wait_their_turn(
    redis_server: RedisServer,
) -> None:
    """redis-py's pool holds 100 connections and refuses the 101st: a fleet worker spilling 300 returns at once
    would lose 200 of them to the fallback. The store's pool makes the extra writes wait for a connection."""
    store = RedisStore(redis_server.url, namespace='pool-app')
    try:
        payloads = {f'run/call_{i}/0': f'payload {i}\n'.encode() * 200 for i in range(300)}
        handles = await asyncio.gather(*(store.write(key, data) for key, data in payloads.items()))
        for handle, data in zip(handles, payloads.values()):
            assert await store.read(handle) == data
    finally:
        await store.aclose()
