"""LocalFileStore: round trips, handles, extensions, permissions, root checks, atomicity, concurrency."""

from __future__ import annotations

import multiprocessing
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from pydantic_ai_harness.overflowing_tool_output.stores import (
    DeletableStore,
    HandleNotFoundError,
    LineIndexedStore,
    ListableStore,
    LocalFileStore,
    OverflowStore,
    RangeReadableStore,
    StoredPayload,
    StoreRootError,
    build_line_index,
)
from pydantic_ai_harness.overflowing_tool_output.stores._line_index import INLINE_INDEX_BYTES
from pydantic_ai_harness.overflowing_tool_output.stores._paths import is_short_handle

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> LocalFileStore:
    return LocalFileStore(base_dir=tmp_path / 'spill')


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob('*') if p.is_file())


async def test_round_trip_and_readable_handles(store: LocalFileStore) -> None:
    handle = await store.write('run-1/call_1/0', b'hello\nworld\n')
    content_handle = await store.write('run-1/call_1/0/content', b'content part')
    assert is_short_handle(handle) and len(handle) == 10
    assert await store.resolve(handle) == 'run-1/call_1/0'
    assert await store.resolve(content_handle) == 'run-1/call_1/0/content'
    assert await store.read(handle) == b'hello\nworld\n'
    assert await store.read(content_handle) == b'content part'


async def test_implements_every_extension(store: LocalFileStore) -> None:
    assert isinstance(store, OverflowStore)
    assert isinstance(store, RangeReadableStore)
    assert isinstance(store, LineIndexedStore)
    assert isinstance(store, ListableStore)
    assert isinstance(store, DeletableStore)


async def test_same_key_never_overwrites_and_same_bytes_keep_their_handle(store: LocalFileStore) -> None:
    first = await store.write('r/c/0', b'one')
    second = await store.write('r/c/0', b'two two')
    assert (await store.resolve(first), await store.resolve(second)) == ('r/c/0', 'r/c/0~~2')
    assert await store.read(first) == b'one'
    assert await store.read(second) == b'two two'
    assert (await store.line_index(first)).size == 3
    assert (await store.line_index(second)).size == 7
    assert await store.write('r/c/0', b'two two') == second
    assert await store.write('r/c/0', b'one') == first
    assert [p.handle for p in await store.list()] == ['r/c/0', 'r/c/0~~2']


async def test_odd_keys_get_escaped_handles_that_round_trip(store: LocalFileStore) -> None:
    keys = [
        '../../etc/passwd',
        '/abs/path',
        'run/..',
        'a//b',
        '',
        'nul\x00byte',
        'Ünïcødé/ｆｕｌｌｗｉｄｔｈ',
        'x' * 5000,
        'CON/aux/0',
        'Case/case',
        'case/case',
        'a/b/c/d/e/f/g/h/i/j/k',
        'spaces in key/and\ttabs',
        '~7e/~',
        '.hidden/.x',
    ]
    handles = [await store.write(key, key.encode('utf-8', 'surrogatepass') + b'!') for key in keys]
    assert len(set(handles)) == len(keys)
    for key, handle in zip(keys, handles):
        assert '\x00' not in handle
        assert not handle.startswith('/')
        assert '..' not in handle.split('/')
        assert len(handle) < 1024
        assert await store.read(handle) == key.encode('utf-8', 'surrogatepass') + b'!'
    root = store.root.resolve()
    for path in _files(root):
        assert path.resolve().is_relative_to(root)
    # Only lowercase-safe names hit the filesystem, so case-insensitive filesystems cannot merge handles.
    for path in root.rglob('*'):
        assert path.name == path.name.lower()


async def test_size_and_range_reads(store: LocalFileStore) -> None:
    handle = await store.write('r/c/0', b'0123456789')
    assert await store.size(handle) == 10
    assert await store.read_range(handle, 2, 5) == b'234'
    assert await store.read_range(handle, -5, 3) == b'012'
    assert await store.read_range(handle, 8, 10**12) == b'89'
    assert await store.read_range(handle, 7, 2) == b''


async def test_list_and_delete(store: LocalFileStore) -> None:
    assert await store.list() == []
    await store.write('run-a/c1/0', b'a')
    await store.write('run-a/c1/0/content', b'bb')
    await store.write('run-b/c1/0', b'ccc')
    await store.write('weird key/x', b'dddd')
    listed = await store.list()
    assert [p.handle for p in listed] == ['run-a/c1/0', 'run-a/c1/0/content', 'run-b/c1/0', 'weird~20key/x']
    assert all(isinstance(p, StoredPayload) for p in listed)
    assert [p.size for p in await store.list('run-a/')] == [1, 2]
    assert await store.delete('run-a/c1/0') is True
    assert await store.delete('run-a/c1/0') is False
    assert await store.delete('../../x') is False
    with pytest.raises(HandleNotFoundError):
        await store.read('run-a/c1/0')
    assert await store.read('run-a/c1/0/content') == b'bb'


async def test_unknown_handles_raise_handle_not_found_without_paths(store: LocalFileStore) -> None:
    await store.write('r/c/0', b'x')
    for handle in ['r/c/1', 'r/c', 'r', 'nope', 'r/c/0/content']:
        with pytest.raises(HandleNotFoundError) as info:
            await store.read(handle)
        assert str(store.root) not in str(info.value)
        assert '/' not in str(info.value)


async def test_read_before_any_write_is_not_found(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'never-created')
    with pytest.raises(HandleNotFoundError):
        await store.read('r/c/0')
    assert await store.list() == []
    assert await store.delete('r/c/0') is False
    assert not store.root.exists()


async def test_permissions_root_0700_files_0600(store: LocalFileStore) -> None:
    old_umask = os.umask(0)  # The most permissive umask must still give owner-only modes.
    try:
        await store.write('run/call/0', b'secret')
        big = await store.write('big/call/0', b'x\n' * (INLINE_INDEX_BYTES // 2 + 10))
        await store.line_index(big)  # Lets the background indexer publish its sidecar.
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    for path in store.root.rglob('*'):
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, path
        elif path.name != '.prune-lock':
            assert mode == 0o600, path


async def test_default_root_is_per_user_under_tempdir() -> None:
    store = LocalFileStore()
    assert store.root.name == f'pyai_harness_overflow-{os.getuid()}'
    import tempfile

    assert store.root.parent == Path(tempfile.gettempdir())


async def test_relative_base_dir_is_fixed_at_creation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = LocalFileStore(base_dir='spill')
    monkeypatch.chdir('/')
    handle = await store.write('r/c/0', b'x')
    assert (tmp_path / 'spill').is_dir()
    assert await store.read(handle) == b'x'


async def test_symlinked_root_is_refused(tmp_path: Path) -> None:
    target = tmp_path / 'real'
    target.mkdir(mode=0o700)
    link = tmp_path / 'link'
    link.symlink_to(target)
    with pytest.raises(StoreRootError, match='symlink'):  # at construction: it names the path
        LocalFileStore(base_dir=link)
    link.unlink()
    store = LocalFileStore(base_dir=link)
    link.symlink_to(target)  # made a link after construction: refused on use, the message holds no path
    with pytest.raises(StoreRootError, match='symlink') as info:
        await store.write('r/c/0', b'x')
    assert str(tmp_path) not in str(info.value)
    assert list(target.iterdir()) == []


async def test_group_or_other_accessible_root_is_made_private(tmp_path: Path) -> None:
    for mode in (0o750, 0o705, 0o770, 0o777):
        root = tmp_path / f'root-{mode:o}'
        root.mkdir()
        root.chmod(mode)
        store = LocalFileStore(base_dir=root)  # at construction
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        root.chmod(mode)  # and again at a write, when it went back
        await store.write('r/c/0', b'x')
        assert stat.S_IMODE(root.stat().st_mode) == 0o700


async def test_root_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / 'file').write_text('x')
    with pytest.raises(StoreRootError):
        await LocalFileStore(base_dir=tmp_path / 'file').write('r/c/0', b'x')


@pytest.mark.skipif(os.geteuid() != 0, reason='changing a directory owner needs root')
async def test_foreign_owned_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / 'foreign'
    root.mkdir(mode=0o700)
    store = LocalFileStore(base_dir=root)
    os.chown(root, 12345, 12345)  # after construction (which refuses it: tests/.../test_store_mode.py)
    with pytest.raises(StoreRootError, match='another user'):
        await store.write('r/c/0', b'x')
    with pytest.raises(StoreRootError):
        await store.read('r/c/0')


async def test_line_index_sidecar_is_written_and_matches(store: LocalFileStore) -> None:
    data = b''.join(f'line {i}\n'.encode() for i in range(10_000))
    handle = await store.write('r/c/0', data)
    index = await store.line_index(handle)
    assert index == build_line_index(data)
    assert index.line_count == 10_000
    assert not index.is_binary


async def test_stale_or_corrupt_sidecar_is_never_trusted(store: LocalFileStore) -> None:
    handle = await store.write('r/c/0', b'a\nb\nc\n')
    sidecar = next(store.root.rglob('*.idx'))
    sidecar.write_bytes(b'garbage')
    assert (await store.line_index(handle)).line_count == 3
    # A sidecar of another payload (same size, different identity) is rebuilt too.
    other = await store.write('r/c/1', b'x\ny\nz\n')
    other_sidecar = max(store.root.rglob('*.idx'))
    sidecar.write_bytes(other_sidecar.read_bytes())
    payload = next(store.root.rglob('0.out'))
    payload.write_bytes(b'1\n2\n3\n4\n')  # Rewritten in place: new size and mtime.
    assert (await store.line_index(handle)).line_count == 4
    assert (await store.line_index(other)).line_count == 3


async def test_large_payload_is_indexed_in_the_background(store: LocalFileStore) -> None:
    data = b'0123456789abcdef\n' * (INLINE_INDEX_BYTES // 8)
    handle = await store.write('r/big/0', data)
    index = await store.line_index(handle)  # Waits for (or rebuilds) the background index.
    assert index.line_count == INLINE_INDEX_BYTES // 8
    for _ in range(100):
        if list(store.root.rglob('*.idx')):
            break
        await anyio.sleep(0.01)
    assert len(list(store.root.rglob('*.idx'))) == 1


async def test_two_hundred_concurrent_writes_read_back_identical(store: LocalFileStore) -> None:
    payloads = {f'run/call_{i}/0': os.urandom(1 + (i * 7919) % 20_000) for i in range(200)}
    handles: dict[str, str] = {}

    async def write(key: str) -> None:
        handles[key] = await store.write(key, payloads[key])

    async with anyio.create_task_group() as group:
        for key in payloads:
            group.start_soon(write, key)
    assert len(set(handles.values())) == 200
    for key, handle in handles.items():
        assert await store.read(handle) == payloads[key]
    assert not [p for p in store.root.rglob('.tmp-*')]


def _write_forever(base_dir: str, ready: Any) -> None:  # pragma: no cover - child
    import anyio as child_anyio

    store = LocalFileStore(base_dir=base_dir)
    payload = b'A' * (64 << 20)

    async def main() -> None:
        await store.write('warmup/c/0', b'ok')
        ready.set()
        written = 0
        while True:  # A new key each time: the same bytes under the same key are not written again.
            await store.write(f'r/crash/{written}', payload)
            written += 1

    child_anyio.run(main)


async def test_child_killed_mid_write_leaves_no_partial_payload(tmp_path: Path) -> None:
    base_dir = str(tmp_path / 'spill')
    context = multiprocessing.get_context('spawn')
    ready = context.Event()
    child = context.Process(target=_write_forever, args=(base_dir, ready))
    child.start()
    try:
        assert ready.wait(30)
        store = LocalFileStore(base_dir=base_dir)
        # Kill it while a 64 MB temp file is being written.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not list(Path(base_dir).rglob('.tmp-*')):
            await anyio.sleep(0.001)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(10)
    assert child.exitcode == -signal.SIGKILL
    # Every published payload is complete: the one being written when the child died is either there or not.
    listed = await store.list()
    assert 'warmup/c/0' in [p.handle for p in listed]
    for payload in listed:
        expected = b'ok' if payload.handle == 'warmup/c/0' else b'A' * (64 << 20)
        assert await store.read(payload.handle) == expected, payload.handle


def _write_one_key(base_dir: str, writer: int, start: Any, results: Any) -> None:  # pragma: no cover - child
    import anyio as child_anyio

    store = LocalFileStore(base_dir=base_dir)

    async def main() -> list[str]:
        start.wait(30)
        handles = [await store.write('run/call_0/0', f'writer {writer} payload {n}\n'.encode() * 50) for n in range(12)]
        handles.append(await store.write('run/call_0/0', b'the same bytes from every writer\n'))
        return handles

    results.put((writer, child_anyio.run(main)))


async def test_processes_writing_one_key_never_clobber_each_other(tmp_path: Path) -> None:
    base_dir = str(tmp_path / 'spill')
    context = multiprocessing.get_context('spawn')
    start, results = context.Event(), context.Queue()
    children = [context.Process(target=_write_one_key, args=(base_dir, n, start, results)) for n in range(3)]
    for child in children:
        child.start()
    start.set()
    try:
        reports = dict(results.get(timeout=60) for _ in children)
    finally:
        for child in children:
            child.join(30)
    store = LocalFileStore(base_dir=base_dir)
    for writer, handles in reports.items():
        for n, handle in enumerate(handles[:-1]):
            assert await store.read(handle) == f'writer {writer} payload {n}\n'.encode() * 50
    distinct = [handle for handles in reports.values() for handle in handles[:-1]]
    assert len(set(distinct)) == 36
    shared = {handles[-1] for handles in reports.values()}
    assert len(shared) == 1 and not shared & set(distinct)
    assert len(await store.list()) == 37
    assert not list(Path(base_dir).rglob('.tmp-*'))


def test_threads_writing_one_key_never_clobber_each_other(store: LocalFileStore) -> None:
    import threading

    handles: dict[tuple[int, int], str] = {}

    def writer(number: int) -> None:
        async def main() -> None:
            for n in range(10):
                handles[(number, n)] = await store.write('run/call_0/0', f'{number}:{n}'.encode() * 1000)

        anyio.run(main)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(set(handles.values())) == 60

    async def check() -> None:
        for (number, n), handle in handles.items():
            assert await store.read(handle) == f'{number}:{n}'.encode() * 1000

    anyio.run(check)


async def test_without_hard_links_publication_is_still_exclusive(
    store: LocalFileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A filesystem without hard links (FAT, some FUSE and SMB mounts) refuses link(2) with EPERM.
    import errno

    def no_links(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, 'Operation not permitted')

    monkeypatch.setattr(os, 'link', no_links)
    payloads = [f'payload {n}\n'.encode() * (1 + n) for n in range(20)] * 2
    handles: list[str] = [''] * len(payloads)

    async def write(position: int) -> None:
        handles[position] = await store.write('run/call_0/0', payloads[position])

    async with anyio.create_task_group() as group:
        for position in range(len(payloads)):
            group.start_soon(write, position)
    assert len(set(handles)) == 20 and handles[:20] == handles[20:]
    for handle, data in zip(handles, payloads):
        assert await store.read(handle) == data
    assert not list(store.root.rglob('.tmp-*'))


async def test_a_thousand_payloads_under_one_key_is_the_bound(store: LocalFileStore) -> None:
    from pydantic_ai_harness.overflowing_tool_output.stores._paths import MAX_CANDIDATES

    assert await store.resolve(await store.write('k', b'1')) == 'k'
    for n in range(2, MAX_CANDIDATES + 1):  # The files the store would have written for `k~~2` ... `k~~1000`.
        path = store.root / f'k~7e~7e{n}.out'
        path.write_bytes(b'%d' % n)
        path.chmod(0o600)
    with pytest.raises(ValueError, match='1,000 different payloads are already stored under this key'):
        await store.write('k', b'one more')
    assert await store.resolve(await store.write('k', b'999')) == 'k~~999'
    assert await store.read('k~~500') == b'500'
    assert len(await store.list()) == MAX_CANDIDATES
