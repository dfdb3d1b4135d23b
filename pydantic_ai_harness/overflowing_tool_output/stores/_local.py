"""`LocalFileStore`: one file per payload under an owner-only root, published atomically and never replaced.

The class holds the store's operations; the on-disk layout and descriptor I/O live in `_local_fs`, the short-id
aliases in `_local_aliases`, the line-index sidecar in `_local_index` and TTL pruning in `_local_prune`.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from ._line_index import INLINE_INDEX_BYTES, LineIndex, LineIndexBuilder, build_line_index
from ._local_aliases import alias_of, all_aliases, drop_alias, link_alias, resolved
from ._local_fs import (
    INDEX_SUFFIX,
    NOT_FOUND,
    O_NONBLOCK,
    PAYLOAD_SUFFIX,
    USE_DIR_FD,
    WRITE_ATTEMPTS,
    Dir,
    PayloadFile,
    StoreRootError,
    default_root,
    holds_data,
    holds_file,
    link_exclusive,
    make_root_private,
    open_root,
    read_exact,
    read_whole,
    remove_quietly,
    root_problem,
    stem,
    temp_name,
    walk,
    write_all,
    write_temp,
)
from ._local_index import freshen, index_in_background, line_index_of, publish_sidecar
from ._local_prune import prune_root, schedule_prune, warn_or_raise
from ._paths import (
    MAX_CANDIDATES,
    MAX_SEGMENTS,
    as_handle,
    candidate_handles,
    handle_for_key,
    handle_for_names,
    names_for_handle,
)
from ._protocol import HandleNotFoundError, StoredPayload, StreamedPayload
from ._ttl import normalize_ttl
from ._upstream_local import index_of_open_file, upstream_names, with_upstream_file

__all__ = ('LocalFileStore', 'StoreRootError')

_T = TypeVar('_T')

DEFAULT_RETENTION = timedelta(days=7)
"""How long the capability's default store (`OverflowingToolOutput()` with no `store`) keeps a payload."""


@dataclass
class LocalFileStore:
    """Spilled payloads as files under an owner-only directory, kept until you prune them.

    Each payload is one file (plus a small line-index sidecar), written to a temp file and hard-linked
    into place, so a crash never leaves a partial payload under a handle and a stored payload is never
    replaced. Its full handle is the key itself when it is plain (`run/call_1/0`), escaped otherwise
    (long segments keep a readable prefix and a hash); `write` returns a short alias of it (`p7jrrmpjr4`,
    recorded in `.aliases/`), and reads accept either. No handle contains a filesystem path.

    The root is created with mode 0700. A `base_dir` that exists is made private (0700, logged once) at
    construction, or refused there with
    [`StoreRootError`][pydantic_ai_harness.overflowing_tool_output.StoreRootError] naming the path and its mode
    when it is a symlink, not a directory or another user's; a root that goes bad later is refused on use. Reads open every path component relative to the
    root without following symlinks, so a handle can never reach a file outside it.
    """

    base_dir: str | os.PathLike[str] | None = None
    """The root directory. Default: `pyai_harness_overflow-<uid>` in the system temp directory."""

    cleanup_after: timedelta | float | None = None
    """Delete payloads whose modification time is older than this, in a background thread after writes.

    A positive `timedelta` or a positive number of seconds (stored as a `timedelta`); zero, a negative value or
    another type raises at construction. `None` (the default) keeps payloads forever. Pruning runs at most once
    at a time per root and at most every few minutes, and reports failures with `StoreCleanupWarning` instead of
    raising.
    """

    durable: bool = False
    """`fsync` each payload before publishing it, so it also survives a power loss (slower writes)."""

    root_path: str = field(init=False, repr=False, compare=False)
    """The absolute root path, fixed when the store is created (a later `chdir` does not move it)."""

    _ttl: timedelta | None = field(default=None, init=False, repr=False, compare=False)
    """`cleanup_after` as checked at construction."""

    def __post_init__(self) -> None:
        self._ttl = self.cleanup_after = normalize_ttl(self.cleanup_after, 'LocalFileStore.cleanup_after')
        if not _is_path_or_none(self.base_dir):
            raise TypeError(
                f'LocalFileStore.base_dir must be a path (str or os.PathLike) or None, got {self.base_dir!r}'
            )
        self.root_path = os.path.abspath(os.fspath(self.base_dir)) if self.base_dir is not None else default_root()
        if self.base_dir is not None:
            # A root configured by hand (often made with `mkdir`, mode 0755) is made private now, or refused now:
            # never a surprise at the first spill. The default root is created private; if another user got there
            # first, the run start names it and spills fall back, as a root that goes bad later does.
            make_root_private(self.root_path, 'LocalFileStore.base_dir')

    @property
    def root(self) -> Path:
        """The root directory (it is created on the first write)."""
        return Path(self.root_path)

    def root_problem(self) -> str | None:
        """Why writes to this store would fail right now, naming the directory and the fix; `None` when they would not.

        For the operator (logs, warnings), never for the model: the message contains the path. The capability
        checks it at the start of a run; the same conditions make `write` raise `StoreRootError`.
        """
        return root_problem(self.root_path)

    # -- the OverflowStore protocol -------------------------------------------------------------------

    async def write(self, key: str, data: bytes) -> str:
        """Store `data` atomically under a handle derived from `key`, and return its short alias.

        A stored payload is never replaced: when the key's handle already holds different bytes, the payload
        gets the next free candidate handle (`<handle>~~2`, ...); when it holds the same bytes, nothing is
        written. Either way the short alias of the handle used is returned (the same one every time).
        """
        handle = handle_for_key(key)
        payload = bytes(data) if isinstance(data, (bytearray, memoryview)) else data
        stored = await _in_thread(self.root_path, lambda: self._write_sync(handle, payload))
        self._maybe_schedule_prune()
        return stored

    async def write_stream(self, key: str, pieces: Iterable[bytes]) -> StreamedPayload:
        """Store the concatenation of `pieces` like `write` does, line-indexing it as it goes.

        The pieces are written to the temp file and indexed one at a time in a worker thread, so the payload is
        never held as one `bytes` and its sidecar is published with it (no background indexing afterwards).
        """
        handle = handle_for_key(key)
        stored = await _in_thread(self.root_path, lambda: self._write_stream_sync(handle, pieces))
        self._maybe_schedule_prune()
        return stored

    async def read(self, handle: str) -> bytes:
        """The exact bytes stored under `handle`; `HandleNotFoundError` when there are none."""
        return await _in_thread(self.root_path, lambda: self._with_payload(handle, read_whole))

    # -- optional extensions ---------------------------------------------------------------------------

    async def size(self, handle: str) -> int:
        """The payload size in bytes."""
        return await _in_thread(
            self.root_path, lambda: self._with_payload(handle, lambda fd, _d, _n: os.fstat(fd).st_size)
        )

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of the payload, clamped to its size."""

        def read(fd: int, _directory: Dir, _names: list[str]) -> bytes:
            size = os.fstat(fd).st_size
            low, high = max(0, start), min(size, end)
            return read_exact(fd, low, high - low)

        return await _in_thread(self.root_path, lambda: self._with_payload(handle, read))

    async def open_reader(self, handle: str) -> PayloadFile:
        """The payload under `handle` opened once, for the many block reads of one scan (close it after)."""

        def opened(fd: int, _directory: Dir, _names: list[str]) -> PayloadFile:
            return PayloadFile(os.dup(fd), os.fstat(fd).st_size)

        return await _in_thread(self.root_path, lambda: self._with_payload(handle, opened))

    async def line_index(self, handle: str) -> LineIndex:
        """The payload's line index: from its sidecar, or rebuilt (and re-saved) when that is missing or stale."""
        return await _in_thread(
            self.root_path,
            lambda: self._with_payload(
                handle,
                lambda fd, d, names: line_index_of(self.root_path, fd, d, names),
                lambda fd, _d, _n: index_of_open_file(fd),  # upstream's files get no sidecar
            ),
        )

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        """The stored payloads whose handle starts with `prefix`, sorted by handle."""
        return await _in_thread(self.root_path, lambda: self._list_sync(prefix))

    async def delete(self, handle: str) -> bool:
        """Delete the payload under `handle` (short or full) with its sidecar and alias; `True` if it existed."""
        return await _in_thread(self.root_path, lambda: self._delete_sync(handle))

    async def resolve(self, handle: str) -> str:
        """The full handle a short one stands for (`handle` itself when it is no known alias).

        A store key that is no handle (an empty or spaced tool call id: `run//0`) gives the handle it was filed under.
        """
        full = as_handle(handle)
        return await _in_thread(self.root_path, lambda: self._in_root(lambda root: resolved(root, full), full))

    async def alias(self, handle: str) -> str | None:
        """The short handle recorded for the full `handle` (what `write` returned), or `None` when it has none."""
        return await _in_thread(self.root_path, lambda: self._in_root(lambda root: alias_of(root, handle), None))

    async def aliases(self) -> dict[str, str]:
        """Every full handle that has a short handle, mapped to it (what `alias` gives each), read in one pass."""
        return await _in_thread(self.root_path, lambda: self._in_root(all_aliases, {}))

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Delete payloads older than `older_than` (default: `cleanup_after`) now; return how many.

        Failures are reported with `StoreCleanupWarning`, never raised. Returns 0 when there is no age
        limit; waits for a pruner already running on the same root (in any process) to finish first.
        """
        limit = older_than if older_than is not None else self._ttl
        if limit is None:
            return 0
        return await _in_thread(
            self.root_path, lambda: prune_root(self.root_path, limit, warn_or_raise, wait_for_lock=True)
        )

    # -- implementation --------------------------------------------------------------------------------

    def _in_root(self, use: Callable[[Dir], _T], missing: _T) -> _T:
        """`use(root)` on the open root, or `missing` when the root does not exist yet."""
        try:
            root = open_root(self.root_path, create=False)
        except HandleNotFoundError:
            return missing
        try:
            return use(root)
        finally:
            root.close()

    def _write_sync(self, handle: str, data: bytes) -> str:
        """Publish `data` under the first free candidate of `handle`, record its alias; the alias (the short handle)."""
        names = _names(handle)
        for attempt in range(WRITE_ATTEMPTS):
            root = open_root(self.root_path, create=True)
            directory: Dir | None = None
            try:
                # Every candidate handle differs from `handle` in its last segment only: one directory for all.
                directory = walk(root, names, create=True)
                written = self._publish_payload(directory, handle, names, data)
                return link_alias(root, written, durable=self.durable)
            except FileNotFoundError:
                # A concurrent pruner removed an empty directory between our mkdir and our open: retry.
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
            finally:
                if directory is not None and directory is not root:
                    directory.close()
                root.close()
        raise AssertionError('unreachable')  # pragma: no cover

    def _publish_payload(
        self, directory: Dir, handle: str, names: list[str], data: bytes, *, again: bool = False
    ) -> str:
        """Publish `data` under the first candidate of `handle` that is free or holds the same bytes.

        The payload is written to a temp file once, then hard-linked to the candidate's name: a link never
        replaces an existing file, so two writers (threads or processes) can never clobber each other's
        payload, and a reader only ever sees a complete file.
        """
        temp: str | None = None
        identity: os.stat_result | None = None
        try:
            for candidate in candidate_handles(handle):
                name = stem(candidate, names)
                target = name + PAYLOAD_SUFFIX
                for _ in range(WRITE_ATTEMPTS):
                    holds = holds_data(directory, target, data)
                    if holds != 'missing':
                        break
                    if temp is None or identity is None:
                        temp, identity = write_temp(directory, data, durable=self.durable)
                    if len(data) <= INLINE_INDEX_BYTES:
                        # Small payloads: the sidecar lands before the payload, so it is there from the first read.
                        publish_sidecar(directory, name, build_line_index(data), identity)
                    if link_exclusive(directory, temp, target):
                        if self.durable:
                            directory.fsync()
                        if len(data) > INLINE_INDEX_BYTES:
                            index_in_background(self.root_path, [*names[:-1], name], data, identity)
                        return candidate
                    # Another writer published this name first: compare with what it wrote.
                else:  # pragma: no cover - the name kept appearing and vanishing under us
                    holds = 'different'
                if holds == 'same':
                    if freshen(directory, name):
                        return candidate
                    if again:
                        raise OSError(errno.ENOENT, 'the payload was pruned each time it was written again')
                    break  # a TTL prune took it just before the touch: publish it again, as new
            else:
                raise _full()
        finally:
            if temp is not None:
                remove_quietly(directory, temp)
        return self._publish_payload(directory, handle, names, data, again=True)

    def _write_stream_sync(self, handle: str, pieces: Iterable[bytes]) -> StreamedPayload:
        names = _names(handle)
        for attempt in range(WRITE_ATTEMPTS):
            root = open_root(self.root_path, create=True)
            directory: Dir | None = None
            try:
                try:
                    directory = walk(root, names, create=True)
                    temp = temp_name()
                    fd = directory.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileNotFoundError:
                    # A concurrent pruner removed an empty directory between our mkdir and our open: retry. Only
                    # here: the pieces can be read once, and once the temp file exists the directory stays.
                    if attempt == WRITE_ATTEMPTS - 1:
                        raise
                    continue
                identity, index = self._stream_into(directory, temp, fd, pieces)
                written = self._publish_streamed(directory, handle, names, temp, identity, index)
                return StreamedPayload(link_alias(root, written.handle, durable=self.durable), written.index)
            finally:
                if directory is not None and directory is not root:
                    directory.close()
                root.close()
        raise AssertionError('unreachable')  # pragma: no cover

    def _stream_into(
        self, directory: Dir, temp: str, fd: int, pieces: Iterable[bytes]
    ) -> tuple[os.stat_result, LineIndex]:
        """Write and line-index `pieces` into the open temp file `temp` (removed again if anything fails)."""
        builder = LineIndexBuilder()
        try:
            try:
                for piece in pieces:
                    write_all(fd, piece)
                    builder.feed(piece)
                if self.durable:
                    os.fsync(fd)
                return os.fstat(fd), builder.finish()
            finally:
                os.close(fd)
        except BaseException:
            remove_quietly(directory, temp)
            raise

    def _publish_streamed(
        self, directory: Dir, handle: str, names: list[str], temp: str, identity: os.stat_result, index: LineIndex
    ) -> StreamedPayload:
        """Publish the written temp file under the first candidate of `handle` free or holding the same bytes."""
        try:
            for candidate in candidate_handles(handle):
                name = stem(candidate, names)
                target = name + PAYLOAD_SUFFIX
                for _ in range(WRITE_ATTEMPTS):
                    holds = holds_file(directory, target, temp, identity.st_size)
                    if holds != 'missing':
                        break
                    # The index is complete already: the sidecar lands before the payload, there from the first read.
                    publish_sidecar(directory, name, index, identity)
                    if link_exclusive(directory, temp, target):
                        if self.durable:
                            directory.fsync()
                        return StreamedPayload(candidate, index)
                    # Another writer published this name first: compare with what it wrote.
                else:  # pragma: no cover - the name kept appearing and vanishing under us
                    holds = 'different'
                if holds == 'same':
                    if freshen(directory, name):
                        return StreamedPayload(candidate, index)
                    # A TTL prune took it just before the touch: publish ours in its place.
                    publish_sidecar(directory, name, index, identity)
                    if link_exclusive(directory, temp, target):
                        return StreamedPayload(candidate, index)
                    raise OSError(errno.ENOENT, 'the payload was pruned while it was written again')
        finally:
            remove_quietly(directory, temp)
        raise _full()

    def _with_payload(
        self,
        handle: str,
        use: Callable[[int, Dir, list[str]], _T],
        upstream_use: Callable[[int, Dir, list[str]], _T] | None = None,
    ) -> _T:
        """Open the payload for `handle` (no symlinks, regular files only) and pass its descriptor to `use`.

        A handle this store does not hold, in the layout of upstream pydantic-ai-harness's `LocalFileStore`
        (`<run id>/<tool call id>.<retry>`), opens that file instead, with `upstream_use` when given.
        """
        try:
            return self._with_own_payload(handle, use)
        except HandleNotFoundError:
            names = upstream_names(handle)
            if names is None:
                raise
            return with_upstream_file(self.root_path, names, upstream_use or use)

    def _with_own_payload(self, handle: str, use: Callable[[int, Dir, list[str]], _T]) -> _T:
        handle = as_handle(handle)
        if names_for_handle(handle) is None:
            raise HandleNotFoundError(NOT_FOUND)
        root = open_root(self.root_path, create=False)
        directory: Dir | None = None
        try:
            names = names_for_handle(resolved(root, handle))
            if names is None:  # pragma: no cover - an alias only ever holds a handle the store wrote
                raise HandleNotFoundError(NOT_FOUND)
            try:
                directory = walk(root, names, create=False)
                fd = directory.open(names[-1] + PAYLOAD_SUFFIX, os.O_RDONLY | O_NONBLOCK)
            except HandleNotFoundError:
                raise
            except OSError:
                # Missing, a symlink (ELOOP), not a directory, permission: all look the same to the caller.
                raise HandleNotFoundError(NOT_FOUND) from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise HandleNotFoundError(NOT_FOUND)
                if not USE_DIR_FD:  # pragma: no cover - Windows: belt and braces against links
                    real = os.path.realpath(os.path.join(directory.path, names[-1] + PAYLOAD_SUFFIX))
                    if os.path.commonpath([real, os.path.realpath(self.root_path)]) != os.path.realpath(self.root_path):
                        raise HandleNotFoundError(NOT_FOUND)
                return use(fd, directory, names)
            finally:
                os.close(fd)
        finally:
            if directory is not None and directory is not root:
                directory.close()
            root.close()

    def _list_sync(self, prefix: str) -> list[StoredPayload]:
        found: list[StoredPayload] = []
        self._in_root(lambda root: _collect_payloads(root, [], prefix, found), None)
        return sorted(found, key=lambda payload: payload.handle)

    def _delete_sync(self, handle: str) -> bool:
        handle = as_handle(handle)
        if names_for_handle(handle) is None:
            return False
        return self._in_root(lambda root: _delete_in(root, resolved(root, handle)), False)

    def _maybe_schedule_prune(self) -> None:
        if self._ttl is not None:
            schedule_prune(self.root_path, self._ttl)


def _collect_payloads(directory: Dir, trail: list[str], prefix: str, found: list[StoredPayload]) -> None:
    """Add to `found` every payload under `directory` (at `trail`) whose handle starts with `prefix`."""
    for entry in directory.entries():
        name = entry.name
        if name.startswith('.') or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False) and len(trail) < MAX_SEGMENTS - 1:
            try:
                child = directory.child(name, create=False)
            except OSError:
                continue
            try:
                _collect_payloads(child, [*trail, name], prefix, found)
            finally:
                child.close()
        elif name.endswith(PAYLOAD_SUFFIX) and entry.is_file(follow_symlinks=False):
            handle = handle_for_names([*trail, name[: -len(PAYLOAD_SUFFIX)]])
            if handle is None or not handle.startswith(prefix):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append(StoredPayload(handle=handle, size=info.st_size, modified=info.st_mtime))


def _delete_in(root: Dir, handle: str) -> bool:
    """Delete the payload of the full `handle` with its sidecar and alias; whether a payload was there."""
    names = names_for_handle(handle)
    if names is None:  # pragma: no cover - an alias only ever holds a handle the store wrote
        return False
    drop_alias(root, handle)
    try:
        directory = walk(root, names, create=False)
    except OSError:
        return False
    try:
        try:
            # Only a regular file is ours to delete: never a planted link, directory or device.
            if not stat.S_ISREG(directory.lstat(names[-1] + PAYLOAD_SUFFIX).st_mode):
                return False
            directory.unlink(names[-1] + PAYLOAD_SUFFIX)
        except OSError:
            return False
        try:
            directory.unlink(names[-1] + INDEX_SUFFIX)
        except FileNotFoundError:
            pass
        return True
    finally:
        if directory is not root:
            directory.close()


def _is_path_or_none(value: object) -> bool:
    return value is None or isinstance(value, (str, os.PathLike))


def _names(handle: str) -> list[str]:
    names = names_for_handle(handle)
    if names is None:  # pragma: no cover - handle_for_key only produces handles whose names fit
        raise ValueError('LocalFileStore: this key cannot be stored')
    return names


def _full() -> ValueError:
    return ValueError(
        f'LocalFileStore: {MAX_CANDIDATES:,} different payloads are already stored under this key; '
        'not stored (delete or prune old payloads)'
    )


STUCK_CALLS = 8
"""Calls a store root may have left running in worker threads after their callers gave up (a frozen or hung
filesystem). Past it, a call fails at once instead of leaving one more thread (and its payload) waiting on the
kernel; as the stuck calls return, calls are made again."""

_STUCK: dict[str, int] = {}
_STUCK_LOCK = threading.Lock()


async def _in_thread(root: str, function: Callable[[], _T]) -> _T:
    """`function` in a worker thread, abandoned when its caller is cancelled.

    A caller's deadline (`Spill.timeout`) must hold even when the kernel blocks the I/O (a frozen or hung filesystem);
    a write left running still publishes atomically, or not at all. Such calls are counted per root, and past
    `STUCK_CALLS` of them the store refuses new calls rather than pile up threads.
    """
    with _STUCK_LOCK:
        stuck = _STUCK.get(root, 0)
    if stuck >= STUCK_CALLS:
        raise OSError(
            errno.EBUSY, f'the store root has not answered {stuck} earlier calls (a frozen or hung filesystem)'
        )
    state = {'started': False, 'done': False, 'abandoned': False}

    def run() -> _T:
        with _STUCK_LOCK:
            state['started'] = True
        try:
            return function()
        finally:
            with _STUCK_LOCK:
                state['done'] = True
                if state['abandoned']:
                    left = _STUCK[root] - 1
                    if left:
                        _STUCK[root] = left
                    else:
                        del _STUCK[root]

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with _STUCK_LOCK:
            if state['started'] and not state['done']:
                state['abandoned'] = True
                _STUCK[root] = _STUCK.get(root, 0) + 1
        raise
