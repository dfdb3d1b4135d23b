"""The line-index sidecar of `LocalFileStore`: `<stem>.idx` beside `<stem>.out`, and the thread that builds large ones.

A sidecar starts with the payload's inode, mtime and size, so a stale one is never trusted; readers rebuild (and
re-save) a missing or stale sidecar.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ._line_index import LineIndex, LineIndexBuilder, build_line_index
from ._local_fs import (
    INDEX_SUFFIX,
    PAYLOAD_SUFFIX,
    READ_BLOCK,
    Dir,
    open_root,
    publish,
    read_exact,
    read_small_file,
    walk,
)

__all__ = ('freshen', 'index_in_background', 'line_index_of', 'load_sidecar', 'publish_sidecar')

_MAX_INDEX_FILE = 256 << 20
_IDENTITY = struct.Struct('<QqQ')
"""Sidecar header: the payload's inode, mtime_ns and size, so a stale sidecar is never trusted."""


def index_in_background(root_path: str, names: list[str], data: bytes, identity: os.stat_result) -> None:
    """Build and save the sidecar of the payload just published as `names` in a background thread.

    `line_index_of` waits for it rather than building the same index again.
    """
    _INDEXER.submit(_IndexJob(root_path, names, data, identity, threading.Event()))


def publish_sidecar(directory: Dir, stem: str, index: LineIndex, identity: os.stat_result) -> None:
    """Write the sidecar of the payload `stem` (atomically: a temp file renamed into place)."""
    data = _IDENTITY.pack(identity.st_ino, identity.st_mtime_ns, identity.st_size) + index.to_bytes()
    publish(directory, stem + INDEX_SUFFIX, data, durable=False)


def freshen(directory: Dir, stem: str) -> bool:
    """Make the stored payload `stem` count as written now (its TTL restarts), keeping its sidecar valid; whether
    the payload is still there after (a prune that took it as old just before may have removed it: write it again).

    A write of the same bytes again (a durable replay, a retry) must not leave a payload that a TTL prune takes
    as old. Best effort: a file system that refuses the touch leaves the payload as it was.
    """
    try:
        before = directory.lstat(stem + PAYLOAD_SUFFIX)
        index = load_sidecar(directory, stem, before)
        directory.touch(stem + PAYLOAD_SUFFIX)
        if index is not None:
            publish_sidecar(directory, stem, index, directory.lstat(stem + PAYLOAD_SUFFIX))
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        directory.lstat(stem + PAYLOAD_SUFFIX)
    except FileNotFoundError:
        return False
    except OSError:
        pass
    return True


def line_index_of(root_path: str, fd: int, directory: Dir, names: list[str]) -> LineIndex:
    """The line index of the open payload `fd`: from its sidecar, or rebuilt (and re-saved) when missing or stale."""
    identity = os.fstat(fd)
    index = load_sidecar(directory, names[-1], identity)
    if index is None:
        # A background indexer may be finishing this very payload: waiting is cheaper than redoing it.
        _INDEXER.wait(root_path, names, timeout=10.0)
        index = load_sidecar(directory, names[-1], identity)
    if index is not None:
        return index
    builder = LineIndexBuilder()
    position = 0
    while position < identity.st_size:
        block = read_exact(fd, position, READ_BLOCK)
        if not block:
            break
        builder.feed(block)
        position += len(block)
    index = builder.finish()
    try:
        publish_sidecar(directory, names[-1], index, identity)
    except OSError:
        pass  # Read-only or full disk: the index still serves this call.
    return index


def load_sidecar(directory: Dir, stem: str, identity: os.stat_result) -> LineIndex | None:
    """The sidecar of the payload `stem` when it belongs to the file with `identity`, else `None`."""
    data = read_small_file(directory, stem + INDEX_SUFFIX, _MAX_INDEX_FILE)
    if data is None or len(data) < _IDENTITY.size:
        return None
    inode, mtime_ns, size = _IDENTITY.unpack_from(data)
    if (inode, mtime_ns, size) != (identity.st_ino, identity.st_mtime_ns, identity.st_size):
        return None
    try:
        index = LineIndex.from_bytes(data[_IDENTITY.size :])
    except ValueError:
        return None
    return index if index.size == identity.st_size else None


def _write_sidecar(root_path: str, names: list[str], index: LineIndex, identity: os.stat_result) -> None:
    root = open_root(root_path, create=False)
    try:
        directory = walk(root, names, create=False)
        try:
            publish_sidecar(directory, names[-1], index, identity)
        finally:
            if directory is not root:
                directory.close()
    finally:
        root.close()


@dataclass
class _IndexJob:
    root_path: str
    names: list[str]
    data: bytes
    identity: os.stat_result
    done: threading.Event


class _BackgroundIndexer:
    """One daemon thread, started on demand, that line-indexes large payloads after `write` returned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_IndexJob] = deque()
        self._pending: dict[tuple[str, tuple[str, ...]], threading.Event] = {}
        self._thread: threading.Thread | None = None

    def submit(self, job: _IndexJob) -> None:
        with self._lock:
            self._pending[(job.root_path, tuple(job.names))] = job.done
            self._queue.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name='pyai-harness-overflow-index', daemon=True)
                self._thread.start()

    def wait(self, root: str, names: Sequence[str], timeout: float) -> None:
        with self._lock:
            event = self._pending.get((root, tuple(names)))
        if event is not None:
            event.wait(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                job = self._queue.popleft()
            try:
                _write_sidecar(job.root_path, job.names, build_line_index(job.data), job.identity)
            except Exception:  # noqa: BLE001, S110 - the sidecar is an optimisation: readers rebuild it
                pass
            finally:
                with self._lock:
                    key = (job.root_path, tuple(job.names))
                    if self._pending.get(key) is job.done:
                        del self._pending[key]
                job.done.set()


_INDEXER = _BackgroundIndexer()
