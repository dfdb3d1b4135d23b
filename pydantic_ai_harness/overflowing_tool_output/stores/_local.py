"""`LocalFileStore`: one file per payload under an owner-only root, published atomically and never replaced."""

from __future__ import annotations

import errno
import io
import os
import secrets
import stat
import struct
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Literal, TypeVar, cast

import anyio.to_thread

from ..._gil import hand_over
from ._line_index import LineIndex, LineIndexBuilder, build_line_index
from ._paths import (
    MAX_CANDIDATES,
    MAX_SEGMENTS,
    candidate_handles,
    handle_for_key,
    handle_for_names,
    is_short_handle,
    names_for_handle,
    short_handles,
)
from ._protocol import HandleNotFoundError, StoredPayload, StreamedPayload
from ._ttl import normalize_ttl

__all__ = ('LocalFileStore', 'StoreCleanupWarning', 'StoreRootError')

_T = TypeVar('_T')

_O_NOFOLLOW: int = getattr(os, 'O_NOFOLLOW', 0)
_O_DIRECTORY: int = getattr(os, 'O_DIRECTORY', 0)
_O_CLOEXEC: int = getattr(os, 'O_CLOEXEC', 0)
_O_NONBLOCK: int = getattr(os, 'O_NONBLOCK', 0)
_O_BINARY: int = getattr(os, 'O_BINARY', 0)
_USE_DIR_FD = {os.open, os.mkdir, os.rename, os.unlink, os.rmdir, os.stat} <= os.supports_dir_fd and (
    os.scandir in os.supports_fd
)
"""POSIX: every path below the root is resolved one component at a time, relative to an open directory."""

_PAYLOAD_SUFFIX = '.out'
_INDEX_SUFFIX = '.idx'
_TEMP_PREFIX = '.tmp-'
_LOCK_NAME = '.prune-lock'
_ALIASES = '.aliases'
"""Directory of the short-handle aliases: one file per short id, holding the full handle (never listed as a payload)."""
_MAX_ALIAS_FILE = 4096
_NOT_FOUND = 'no stored payload under this handle'

INLINE_INDEX_BYTES = 1 << 20
"""Payloads up to this size are line-indexed inside `write`; larger ones by a background thread."""

_READ_BLOCK = 4 << 20
_MAX_INDEX_FILE = 256 << 20
_TEMP_FILE_GRACE = 3600.0
"""A temp file younger than this is never pruned: it may belong to a write in flight."""

_WRITE_ATTEMPTS = 3
_INDEX_IDENTITY = struct.Struct('<QqQ')
"""Sidecar header: the payload's inode, mtime_ns and size, so a stale sidecar is never trusted."""


class StoreRootError(OSError):
    """The store root is unsafe (a symlink, owned by another user, group/other accessible) or unusable.

    The message never contains the path: read it from `LocalFileStore.root` when you need it.
    """


class StoreCleanupWarning(UserWarning):
    """TTL pruning of a [`LocalFileStore`][pydantic_ai_harness.overflowing_tool_output.LocalFileStore] failed in part.

    Pruning never raises into an agent run: its failures are reported with this warning class.
    """


class _Dir:
    """A directory inside the store root, opened without following symlinks.

    On POSIX it holds a file descriptor and every child is opened relative to it with `O_NOFOLLOW`, so a
    symlink planted anywhere below the root is never followed. Elsewhere it holds a path and refuses
    symlinks with `lstat` checks plus a final `realpath` containment check.
    """

    def __init__(self, fd: int | None, path: str) -> None:
        self.fd = fd
        self.path = path

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _child_path(self, name: str) -> str:
        return os.path.join(self.path, name)

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        flags |= _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
        if self.fd is not None:
            return os.open(name, flags, mode, dir_fd=self.fd)
        path = self._child_path(name)
        if os.path.islink(path):
            raise HandleNotFoundError(_NOT_FOUND)
        return os.open(path, flags, mode)

    def child(self, name: str, *, create: bool) -> _Dir:
        if create:
            try:
                if self.fd is not None:
                    os.mkdir(name, 0o700, dir_fd=self.fd)
                else:
                    os.mkdir(self._child_path(name), 0o700)
            except FileExistsError:
                pass
        if self.fd is not None:
            fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=self.fd)
            if not stat.S_ISDIR(os.fstat(fd).st_mode):  # pragma: no cover - O_DIRECTORY already ensures it
                os.close(fd)
                raise NotADirectoryError(name)
            return _Dir(fd, self._child_path(name))
        path = self._child_path(name)
        if os.path.islink(path) or not os.path.isdir(path):
            raise NotADirectoryError(name)
        return _Dir(None, path)

    def rename(self, source: str, target: str) -> None:
        if self.fd is not None:
            os.rename(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        else:
            os.replace(self._child_path(source), self._child_path(target))

    def link(self, source: str, target: str) -> None:
        """Publish `source` as `target` too; `FileExistsError` when `target` exists (never replaced)."""
        if self.fd is not None and os.link in os.supports_dir_fd:
            os.link(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        else:
            os.link(self._child_path(source), self._child_path(target))

    def unlink(self, name: str) -> None:
        if self.fd is not None:
            os.unlink(name, dir_fd=self.fd)
        else:
            os.unlink(self._child_path(name))

    def lstat(self, name: str) -> os.stat_result:
        if self.fd is not None:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        return os.lstat(self._child_path(name))

    def rmdir(self, name: str) -> None:
        if self.fd is not None:
            os.rmdir(name, dir_fd=self.fd)
        else:
            os.rmdir(self._child_path(name))

    def entries(self) -> Iterator[os.DirEntry[str]]:
        # `os.scandir(fd)` consumes a duplicate of the descriptor, so ours stays usable.
        if self.fd is not None:
            with os.scandir(os.dup(self.fd)) as scan:
                yield from scan
        else:
            with os.scandir(self.path) as scan:
                yield from scan

    def fsync(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)


def _default_root() -> str:
    getuid = getattr(os, 'getuid', None)
    if getuid is not None:
        owner = str(getuid())
    else:  # pragma: no cover - Windows
        import getpass

        owner = ''.join(ch if ch.isalnum() else '_' for ch in getpass.getuser())
    return os.path.join(tempfile.gettempdir(), f'pyai_harness_overflow-{owner}')


def root_problem(root: str) -> str | None:
    """Why a `LocalFileStore` at `root` could not write now, naming the directory and the fix; `None` if it could."""
    try:
        info = os.lstat(root)
    except (FileNotFoundError, NotADirectoryError):
        return _uncreatable_root(root)
    except OSError as exc:
        return f'the LocalFileStore root {root} cannot be examined ({exc.strerror}); {_ELSEWHERE}'
    if stat.S_ISLNK(info.st_mode):
        return f'the LocalFileStore root {root} is a symlink, which the store refuses; {_ELSEWHERE}'
    if not stat.S_ISDIR(info.st_mode):
        return f'the LocalFileStore root {root} is not a directory; {_ELSEWHERE}'
    geteuid = getattr(os, 'geteuid', None)
    if geteuid is not None and info.st_uid != geteuid():
        return (
            f'the LocalFileStore root {root} is owned by uid {info.st_uid}, not by this user (uid {geteuid()}); '
            f'{_ELSEWHERE}'
        )
    if _USE_DIR_FD and info.st_mode & 0o077:
        return (
            f'the LocalFileStore root {root} has mode {stat.S_IMODE(info.st_mode):04o} but must be 0700 (owner '
            f'only); fix it with `chmod 700 {root}`, or {_ELSEWHERE}'
        )
    if _read_only_mount(root):
        return f'the LocalFileStore root {root} is on a read-only file system; remount it read-write, or {_ELSEWHERE}'
    if not os.access(root, os.W_OK | os.X_OK):
        return (
            f'the LocalFileStore root {root} is not writable by this user; make it writable (`chmod 700 {root}`; '
            f'`lsattr -d {root}` shows an immutable flag), or {_ELSEWHERE}'
        )
    return None


_ELSEWHERE = (
    'pass LocalFileStore(base_dir=...) a directory only this user can use (the store creates it with mode 0700)'
)


def _read_only_mount(path: str) -> bool:
    statvfs = getattr(os, 'statvfs', None)
    if statvfs is None:  # pragma: no cover - Windows
        return False
    try:
        return bool(statvfs(path).f_flag & getattr(os, 'ST_RDONLY', 1))
    except OSError:
        return False


def _uncreatable_root(root: str) -> str | None:
    """The problem with a root that does not exist yet: `None` when its nearest existing ancestor lets us create it."""
    ancestor = os.path.dirname(root)
    while ancestor and not os.path.lexists(ancestor):
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent
    if not os.path.isdir(ancestor):
        return f'the LocalFileStore root {root} cannot be created: {ancestor} is not a directory; {_ELSEWHERE}'
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return (
            f'the LocalFileStore root {root} does not exist and cannot be created: {ancestor} is not writable by this '
            f'user; create it with `mkdir -m 700 {root}`, or {_ELSEWHERE}'
        )
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    written = 0
    while written < len(view):
        written += os.write(fd, view[written : written + (64 << 20)])


def _read_exact(fd: int, start: int, length: int) -> bytes:
    if length <= 0:
        return b''
    pread = getattr(os, 'pread', None)
    if pread is None:  # pragma: no cover - Windows
        os.lseek(fd, start, os.SEEK_SET)
        return os.read(fd, length)
    first: bytes = pread(fd, length, start)
    if len(first) == length or not first:
        return first
    pieces = [first]
    got = len(first)
    while got < length:
        piece: bytes = pread(fd, length - got, start + got)
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b''.join(pieces)


class PayloadFile:
    """A stored payload held open (its own descriptor, checked like every read): `read` ranges, then `close`."""

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self.size = size

    def read_into(self, buffer: bytearray, start: int, end: int) -> None:
        """Make `buffer` the bytes `[start, end)`, clamped to the payload (blocking: call it from a worker thread).

        Reading into the same buffers again and again spares a scan the page faults of a fresh block each time.
        """
        if self._fd < 0:
            raise ValueError('the payload file is closed')
        low, high = max(0, start), min(self.size, end)
        length = max(0, high - low)
        preadv = getattr(os, 'preadv', None)
        if preadv is None:  # pragma: no cover - platforms without preadv (Windows)
            buffer[:] = _read_exact(self._fd, low, length)
            return
        if len(buffer) != length:
            buffer[length:] = b''
            buffer.extend(bytes(length - len(buffer)))
        got = 0
        with memoryview(buffer) as view:
            while got < length:
                read = preadv(self._fd, [view[got:]], low + got)
                if not read:
                    break
                got += read
        if got < length:  # the file is shorter than it was when opened: show what is there
            buffer[got:] = b''

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _temp_name() -> str:
    return f'{_TEMP_PREFIX}{secrets.token_hex(8)}'


def _sidecar_bytes(index: LineIndex, identity: os.stat_result) -> bytes:
    return _INDEX_IDENTITY.pack(identity.st_ino, identity.st_mtime_ns, identity.st_size) + index.to_bytes()


def _publish(directory: _Dir, target: str, data: bytes, *, durable: bool) -> os.stat_result:
    """Write `data` to a fresh temp file in `directory`, then rename it over `target`: all or nothing."""
    temp = _temp_name()
    fd = directory.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
            identity = os.fstat(fd)
        finally:
            os.close(fd)
        directory.rename(temp, target)
    except BaseException:
        try:
            directory.unlink(temp)
        except OSError:
            pass
        raise
    return identity


_NO_HARD_LINKS = frozenset(
    code
    for code in (getattr(errno, name, None) for name in ('EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV', 'EMLINK'))
    if code is not None
)
"""What `link` fails with on a filesystem without hard links (FAT, some FUSE and SMB mounts)."""


def _stem(handle: str, names: list[str]) -> str:
    candidate = names_for_handle(handle)
    if candidate is None or candidate[:-1] != names[:-1]:  # pragma: no cover - the encoding guarantees both
        raise ValueError('LocalFileStore: this key cannot be stored')
    return candidate[-1]


def _holds(
    directory: _Dir, name: str, size: int, ours: Callable[[int, int], bytes]
) -> Literal['missing', 'same', 'different']:
    """Whether the file `name` is missing, holds exactly our `size` bytes, or holds something else (or is not a file).

    `ours(start, length)` reads our bytes; the file is compared with them block by block.
    """
    try:
        fd = directory.open(name, os.O_RDONLY | _O_NONBLOCK)
    except FileNotFoundError:
        return 'missing'
    except (OSError, HandleNotFoundError):
        return 'different'  # A planted link, a directory, no permission: never ours to reuse.
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            return 'different'
        position = 0
        while position < size:
            length = min(_READ_BLOCK, size - position)
            block = _read_exact(fd, position, length)
            if not block or block != ours(position, length):
                return 'different'
            position += len(block)
        return 'same'
    finally:
        os.close(fd)


def _holds_data(directory: _Dir, name: str, data: bytes) -> Literal['missing', 'same', 'different']:
    """`_holds` against bytes in memory."""
    return _holds(directory, name, len(data), lambda start, length: data[start : start + length])


def _holds_file(directory: _Dir, name: str, temp: str, size: int) -> Literal['missing', 'same', 'different']:
    """`_holds` against the temp file `temp` (of `size` bytes)."""
    ours = directory.open(temp, os.O_RDONLY)
    try:
        return _holds(directory, name, size, lambda start, length: _read_exact(ours, start, length))
    finally:
        os.close(ours)


def _link_exclusive(directory: _Dir, temp: str, target: str) -> bool:
    """Publish `temp` as `target` unless `target` exists; whether it was published."""
    try:
        directory.link(temp, target)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    # No hard links here: check and rename under an exclusive lock on the directory (held across processes).
    with _locked(directory):
        try:
            directory.lstat(target)
            return False
        except FileNotFoundError:
            pass
        directory.rename(temp, target)
        return True


@contextmanager
def _locked(directory: _Dir) -> Generator[None]:
    """Hold `flock` on a directory's descriptor for the block (no lock where that is unsupported)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    if directory.fd is None:  # pragma: no cover - platforms without dir_fd
        yield
        return
    fcntl.flock(directory.fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(directory.fd, fcntl.LOCK_UN)


@dataclass
class _IndexJob:
    store: LocalFileStore
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
            self._pending[(job.store.root_path, tuple(job.names))] = job.done
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
                job.store.write_sidecar(job.names, build_line_index(job.data), job.identity)
            except Exception:  # noqa: BLE001, S110 - the sidecar is an optimisation: readers rebuild it
                pass
            finally:
                with self._lock:
                    key = (job.store.root_path, tuple(job.names))
                    if self._pending.get(key) is job.done:
                        del self._pending[key]
                job.done.set()


_INDEXER = _BackgroundIndexer()


@dataclass
class _PruneState:
    last_started: float = float('-inf')
    thread: threading.Thread | None = None


_PRUNE_LOCK = threading.Lock()
_PRUNE_STATES: dict[str, _PruneState] = {}


@dataclass
class LocalFileStore:
    """Spilled payloads as files under an owner-only directory, kept until you prune them.

    Each payload is one file (plus a small line-index sidecar), written to a temp file and hard-linked
    into place, so a crash never leaves a partial payload under a handle and a stored payload is never
    replaced. Its full handle is the key itself when it is plain (`run/call_1/0`), escaped otherwise
    (long segments keep a readable prefix and a hash); `write` returns a short alias of it (`p7jrrmpjr4`,
    recorded in `.aliases/`), and reads accept either. No handle contains a filesystem path.

    The root is created with mode 0700 and refused (with
    [`StoreRootError`][pydantic_ai_harness.overflowing_tool_output.StoreRootError]) when it is a symlink,
    owned by another user, or accessible to group/other. Reads open every path component relative to the
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

    def __post_init__(self) -> None:
        self.cleanup_after = normalize_ttl(self.cleanup_after, 'LocalFileStore.cleanup_after')
        if self.base_dir is not None and not isinstance(self.base_dir, (str, os.PathLike)):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f'LocalFileStore.base_dir must be a path (str or os.PathLike) or None, got {self.base_dir!r}'
            )
        self.root_path = os.path.abspath(os.fspath(self.base_dir)) if self.base_dir is not None else _default_root()

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
        stored = await _in_thread(lambda: self._write_sync(handle, payload))
        self._maybe_schedule_prune()
        return stored

    async def write_stream(self, key: str, pieces: Iterable[bytes]) -> StreamedPayload:
        """Store the concatenation of `pieces` like `write` does, line-indexing it as it goes.

        The pieces are written to the temp file and indexed one at a time in a worker thread, so the payload is
        never held as one `bytes` and its sidecar is published with it (no background indexing afterwards).
        """
        handle = handle_for_key(key)

        stored = await _in_thread(lambda: self._write_stream_sync(handle, pieces))
        self._maybe_schedule_prune()
        return stored

    async def read(self, handle: str) -> bytes:
        """The exact bytes stored under `handle`; `HandleNotFoundError` when there are none."""
        return await _in_thread(lambda: self._with_payload(handle, _read_whole))

    # -- optional extensions ---------------------------------------------------------------------------

    async def size(self, handle: str) -> int:
        """The payload size in bytes."""
        return await _in_thread(lambda: self._with_payload(handle, lambda fd, _d, _n: os.fstat(fd).st_size))

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of the payload, clamped to its size."""

        def read(fd: int, _directory: _Dir, _names: list[str]) -> bytes:
            size = os.fstat(fd).st_size
            low, high = max(0, start), min(size, end)
            return _read_exact(fd, low, high - low)

        return await _in_thread(lambda: self._with_payload(handle, read))

    async def open_reader(self, handle: str) -> PayloadFile:
        """The payload under `handle` opened once, for the many block reads of one scan (close it after)."""

        def opened(fd: int, _directory: _Dir, _names: list[str]) -> PayloadFile:
            return PayloadFile(os.dup(fd), os.fstat(fd).st_size)

        return await _in_thread(lambda: self._with_payload(handle, opened))

    async def line_index(self, handle: str) -> LineIndex:
        """The payload's line index: from its sidecar, or rebuilt (and re-saved) when that is missing or stale."""
        return await _in_thread(lambda: self._with_payload(handle, self._line_index_sync))

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        """The stored payloads whose handle starts with `prefix`, sorted by handle."""
        return await _in_thread(lambda: self._list_sync(prefix))

    async def delete(self, handle: str) -> bool:
        """Delete the payload under `handle` (short or full) with its sidecar and alias; `True` if it existed."""
        return await _in_thread(lambda: self._delete_sync(handle))

    async def resolve(self, handle: str) -> str:
        """The full handle a short one stands for (`handle` itself when it is no known alias)."""
        return await _in_thread(lambda: self._resolve_sync(handle))

    async def alias(self, handle: str) -> str | None:
        """The short handle recorded for the full `handle` (what `write` returned), or `None` when it has none."""
        return await _in_thread(lambda: self._alias_sync(handle))

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Delete payloads older than `older_than` (default: `cleanup_after`) now; return how many.

        Failures are reported with `StoreCleanupWarning`, never raised. Returns 0 when there is no age
        limit; waits for a pruner already running on the same root (in any process) to finish first.
        """
        limit = older_than if older_than is not None else self._ttl()
        if limit is None:
            return 0
        return await _in_thread(lambda: self._prune_sync(limit, _warn_or_raise, wait_for_lock=True))

    # -- implementation --------------------------------------------------------------------------------

    def _open_root(self, *, create: bool) -> _Dir:
        root = self.root_path
        try:
            directory = self._verified_root(root)
        except FileNotFoundError:
            if not create:
                raise HandleNotFoundError(_NOT_FOUND) from None
            parent = os.path.dirname(root)
            try:
                os.makedirs(parent, mode=0o700, exist_ok=True)
                os.mkdir(root, 0o700)
            except FileExistsError:
                pass
            except OSError as exc:
                raise StoreRootError(f'the spill store root could not be created ({exc.strerror})') from None
            directory = self._verified_root(root)
        return directory

    @staticmethod
    def _verified_root(root: str) -> _Dir:
        if not _USE_DIR_FD:  # pragma: no cover - platforms without dir_fd (Windows)
            if os.path.islink(root):
                raise StoreRootError('the spill store root is a symlink; refusing to use it')
            if not os.path.isdir(root):
                raise FileNotFoundError(root)
            return _Dir(None, root)
        try:
            fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if os.path.islink(root):
                raise StoreRootError('the spill store root is a symlink; refusing to use it') from None
            raise StoreRootError(f'the spill store root is not a usable directory ({exc.strerror})') from None
        info = os.fstat(fd)
        problem: str | None = None
        if info.st_uid != os.geteuid():
            problem = 'is owned by another user'
        elif info.st_mode & 0o077:
            problem = f'is accessible to group/other (mode {stat.S_IMODE(info.st_mode):04o}; it must be 0700)'
        if problem is not None:
            os.close(fd)
            raise StoreRootError(f'the spill store root {problem}; refusing to use it')
        return _Dir(fd, root)

    def _alias_in(self, root: _Dir, handle: str) -> str:
        """The short id recorded for the full `handle` just written: the first candidate free or already its own.

        Each alias is published like a payload (a temp file hard-linked into place), so it never replaces another
        one; a handle whose candidates are all taken keeps its full form.
        """
        try:
            aliases = root.child(_ALIASES, create=False)
        except FileNotFoundError:
            aliases = root.child(_ALIASES, create=True)
        try:
            return self._link_alias(aliases, handle)
        finally:
            aliases.close()

    def _link_alias(self, aliases: _Dir, handle: str) -> str:
        target = handle.encode('utf-8', errors='surrogatepass')
        temp: str | None = None
        try:
            for short in short_handles(handle):
                if temp is None:
                    temp = self._write_temp(aliases, target)[0]
                # Link first: the alias is usually new, and a link never replaces what another writer put there.
                if _link_exclusive(aliases, temp, short) or _holds_data(aliases, short, target) == 'same':
                    if self.durable:
                        aliases.fsync()
                    return short
        finally:
            if temp is not None:
                try:
                    aliases.unlink(temp)
                except OSError:
                    pass
        return handle

    def _alias_sync(self, handle: str) -> str | None:
        try:
            root = self._open_root(create=False)
        except HandleNotFoundError:
            return None
        try:
            aliases = root.child(_ALIASES, create=False)
        except OSError:
            return None
        finally:
            root.close()
        try:
            for short in short_handles(handle):
                target = _alias_target(aliases, short)
                if target is None:
                    return None
                if target == handle:
                    return short
            return None
        finally:
            aliases.close()

    def _resolve_sync(self, handle: str) -> str:
        try:
            root = self._open_root(create=False)
        except HandleNotFoundError:
            return handle
        try:
            return _resolved(root, handle)
        finally:
            root.close()

    def _write_sync(self, handle: str, data: bytes) -> str:
        """Publish `data` under the first free candidate of `handle`, record its alias; the alias (the short handle)."""
        names = names_for_handle(handle)
        if names is None:  # pragma: no cover - handle_for_key only produces handles whose names fit
            raise ValueError('LocalFileStore: this key cannot be stored')
        for attempt in range(_WRITE_ATTEMPTS):
            root = self._open_root(create=True)
            directory: _Dir | None = None
            try:
                # Every candidate handle differs from `handle` in its last segment only: one directory for all.
                directory = _walk(root, names, create=True)
                return self._alias_in(root, self._publish_payload(directory, handle, names, data))
            except FileNotFoundError:
                # A concurrent pruner removed an empty directory between our mkdir and our open: retry.
                if attempt == _WRITE_ATTEMPTS - 1:
                    raise
            finally:
                if directory is not None and directory is not root:
                    directory.close()
                root.close()
        raise AssertionError('unreachable')  # pragma: no cover

    def _publish_payload(self, directory: _Dir, handle: str, names: list[str], data: bytes) -> str:
        """Publish `data` under the first candidate of `handle` that is free or holds the same bytes.

        The payload is written to a temp file once, then hard-linked to the candidate's name: a link never
        replaces an existing file, so two writers (threads or processes) can never clobber each other's
        payload, and a reader only ever sees a complete file.
        """
        temp: str | None = None
        identity: os.stat_result | None = None
        try:
            for candidate in candidate_handles(handle):
                stem = _stem(candidate, names)
                target = stem + _PAYLOAD_SUFFIX
                for _ in range(_WRITE_ATTEMPTS):
                    holds = _holds_data(directory, target, data)
                    if holds != 'missing':
                        break
                    if temp is None or identity is None:
                        temp, identity = self._write_temp(directory, data)
                    if len(data) <= INLINE_INDEX_BYTES:
                        # Small payloads: the sidecar lands before the payload, so it is there from the first read.
                        index = _sidecar_bytes(build_line_index(data), identity)
                        _publish(directory, stem + _INDEX_SUFFIX, index, durable=False)
                    if _link_exclusive(directory, temp, target):
                        if self.durable:
                            directory.fsync()
                        if len(data) > INLINE_INDEX_BYTES:
                            candidate_names = [*names[:-1], stem]
                            _INDEXER.submit(_IndexJob(self, candidate_names, data, identity, threading.Event()))
                        return candidate
                    # Another writer published this name first: compare with what it wrote.
                else:  # pragma: no cover - the name kept appearing and vanishing under us
                    holds = 'different'
                if holds == 'same':
                    return candidate
        finally:
            if temp is not None:
                try:
                    directory.unlink(temp)
                except OSError:
                    pass
        raise ValueError(
            f'LocalFileStore: {MAX_CANDIDATES:,} different payloads are already stored under this key; '
            'not stored (delete or prune old payloads)'
        )

    def _write_stream_sync(self, handle: str, pieces: Iterable[bytes]) -> StreamedPayload:
        names = names_for_handle(handle)
        if names is None:  # pragma: no cover - handle_for_key only produces handles whose names fit
            raise ValueError('LocalFileStore: this key cannot be stored')
        for attempt in range(_WRITE_ATTEMPTS):
            root = self._open_root(create=True)
            directory: _Dir | None = None
            try:
                try:
                    directory = _walk(root, names, create=True)
                    temp = _temp_name()
                    fd = directory.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileNotFoundError:
                    # A concurrent pruner removed an empty directory between our mkdir and our open: retry. Only
                    # here: the pieces can be read once, and once the temp file exists the directory stays.
                    if attempt == _WRITE_ATTEMPTS - 1:
                        raise
                    continue
                identity, index = self._stream_into(directory, temp, fd, pieces)
                written = self._publish_streamed(directory, handle, names, temp, identity, index)
                return StreamedPayload(self._alias_in(root, written.handle), written.index)
            finally:
                if directory is not None and directory is not root:
                    directory.close()
                root.close()
        raise AssertionError('unreachable')  # pragma: no cover

    def _stream_into(
        self, directory: _Dir, temp: str, fd: int, pieces: Iterable[bytes]
    ) -> tuple[os.stat_result, LineIndex]:
        """Write and line-index `pieces` into the open temp file `temp` (removed again if anything fails)."""
        builder = LineIndexBuilder()
        try:
            try:
                for piece in pieces:
                    _write_all(fd, piece)
                    builder.feed(piece)
                if self.durable:
                    os.fsync(fd)
                return os.fstat(fd), builder.finish()
            finally:
                os.close(fd)
        except BaseException:
            try:
                directory.unlink(temp)
            except OSError:
                pass
            raise

    def _publish_streamed(
        self, directory: _Dir, handle: str, names: list[str], temp: str, identity: os.stat_result, index: LineIndex
    ) -> StreamedPayload:
        """Publish the written temp file under the first candidate of `handle` free or holding the same bytes."""
        try:
            for candidate in candidate_handles(handle):
                stem = _stem(candidate, names)
                target = stem + _PAYLOAD_SUFFIX
                for _ in range(_WRITE_ATTEMPTS):
                    holds = _holds_file(directory, target, temp, identity.st_size)
                    if holds != 'missing':
                        break
                    # The index is complete already: the sidecar lands before the payload, there from the first read.
                    _publish(directory, stem + _INDEX_SUFFIX, _sidecar_bytes(index, identity), durable=False)
                    if _link_exclusive(directory, temp, target):
                        if self.durable:
                            directory.fsync()
                        return StreamedPayload(candidate, index)
                    # Another writer published this name first: compare with what it wrote.
                else:  # pragma: no cover - the name kept appearing and vanishing under us
                    holds = 'different'
                if holds == 'same':
                    return StreamedPayload(candidate, index)
        finally:
            try:
                directory.unlink(temp)
            except OSError:
                pass
        raise ValueError(
            f'LocalFileStore: {MAX_CANDIDATES:,} different payloads are already stored under this key; '
            'not stored (delete or prune old payloads)'
        )

    def _write_temp(self, directory: _Dir, data: bytes) -> tuple[str, os.stat_result]:
        temp = _temp_name()
        fd = directory.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                _write_all(fd, data)
                if self.durable:
                    os.fsync(fd)
                return temp, os.fstat(fd)
            finally:
                os.close(fd)
        except BaseException:
            try:
                directory.unlink(temp)
            except OSError:
                pass
            raise

    def write_sidecar(self, names: list[str], index: LineIndex, identity: os.stat_result) -> None:
        """Persist a line index next to the payload for `names` (used by the background indexer)."""
        root = self._open_root(create=False)
        try:
            directory = _walk(root, names, create=False)
            try:
                _publish(directory, names[-1] + _INDEX_SUFFIX, _sidecar_bytes(index, identity), durable=False)
            finally:
                if directory is not root:
                    directory.close()
        finally:
            root.close()

    def _with_payload(self, handle: str, use: Callable[[int, _Dir, list[str]], _T]) -> _T:
        """Open the payload for `handle` (no symlinks, regular files only) and pass its descriptor to `use`."""
        if names_for_handle(handle) is None:
            raise HandleNotFoundError(_NOT_FOUND)
        root = self._open_root(create=False)
        directory: _Dir | None = None
        try:
            names = names_for_handle(_resolved(root, handle))
            if names is None:  # pragma: no cover - an alias only ever holds a handle the store wrote
                raise HandleNotFoundError(_NOT_FOUND)
            try:
                directory = _walk(root, names, create=False)
                fd = directory.open(names[-1] + _PAYLOAD_SUFFIX, os.O_RDONLY | _O_NONBLOCK)
            except HandleNotFoundError:
                raise
            except OSError:
                # Missing, a symlink (ELOOP), not a directory, permission: all look the same to the caller.
                raise HandleNotFoundError(_NOT_FOUND) from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise HandleNotFoundError(_NOT_FOUND)
                if not _USE_DIR_FD:  # pragma: no cover - Windows: belt and braces against links
                    real = os.path.realpath(os.path.join(directory.path, names[-1] + _PAYLOAD_SUFFIX))
                    if os.path.commonpath([real, os.path.realpath(self.root_path)]) != os.path.realpath(self.root_path):
                        raise HandleNotFoundError(_NOT_FOUND)
                return use(fd, directory, names)
            finally:
                os.close(fd)
        finally:
            if directory is not None and directory is not root:
                directory.close()
            root.close()

    def _line_index_sync(self, fd: int, directory: _Dir, names: list[str]) -> LineIndex:
        identity = os.fstat(fd)
        index = _load_sidecar(directory, names[-1] + _INDEX_SUFFIX, identity)
        if index is None:
            # A background indexer may be finishing this very payload: waiting is cheaper than redoing it.
            _INDEXER.wait(self.root_path, names, timeout=10.0)
            index = _load_sidecar(directory, names[-1] + _INDEX_SUFFIX, identity)
        if index is not None:
            return index
        builder = LineIndexBuilder()
        position = 0
        while position < identity.st_size:
            block = _read_exact(fd, position, _READ_BLOCK)
            if not block:
                break
            builder.feed(block)
            position += len(block)
        index = builder.finish()
        try:
            _publish(directory, names[-1] + _INDEX_SUFFIX, _sidecar_bytes(index, identity), durable=False)
        except OSError:
            pass  # Read-only or full disk: the index still serves this call.
        return index

    def _list_sync(self, prefix: str) -> list[StoredPayload]:
        found: list[StoredPayload] = []
        try:
            root = self._open_root(create=False)
        except HandleNotFoundError:
            return found

        def visit(directory: _Dir, trail: list[str]) -> None:
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
                        visit(child, [*trail, name])
                    finally:
                        child.close()
                elif name.endswith(_PAYLOAD_SUFFIX) and entry.is_file(follow_symlinks=False):
                    handle = handle_for_names([*trail, name[: -len(_PAYLOAD_SUFFIX)]])
                    if handle is None or not handle.startswith(prefix):
                        continue
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    found.append(StoredPayload(handle=handle, size=info.st_size, modified=info.st_mtime))

        try:
            visit(root, [])
        finally:
            root.close()
        return sorted(found, key=lambda payload: payload.handle)

    def _delete_sync(self, handle: str) -> bool:
        if names_for_handle(handle) is None:
            return False
        try:
            root = self._open_root(create=False)
        except HandleNotFoundError:
            return False
        try:
            handle = _resolved(root, handle)
            names = names_for_handle(handle)
            if names is None:  # pragma: no cover - an alias only ever holds a handle the store wrote
                return False
            _drop_alias(root, handle)
            try:
                directory = _walk(root, names, create=False)
            except OSError:
                return False
            try:
                try:
                    # Only a regular file is ours to delete: never a planted link, directory or device.
                    if not stat.S_ISREG(directory.lstat(names[-1] + _PAYLOAD_SUFFIX).st_mode):
                        return False
                    directory.unlink(names[-1] + _PAYLOAD_SUFFIX)
                except OSError:
                    return False
                try:
                    directory.unlink(names[-1] + _INDEX_SUFFIX)
                except FileNotFoundError:
                    pass
                return True
            finally:
                if directory is not root:
                    directory.close()
        finally:
            root.close()

    # -- TTL pruning -----------------------------------------------------------------------------------

    def _ttl(self) -> timedelta | None:
        return cast('timedelta | None', self.cleanup_after)  # normalized in __post_init__

    def _maybe_schedule_prune(self) -> None:
        limit = self._ttl()
        if limit is None:
            return
        # Rate limit: a tenth of the TTL, between one second and five minutes.
        interval = min(max(limit.total_seconds() / 10, 1.0), 300.0)
        with _PRUNE_LOCK:
            state = _PRUNE_STATES.setdefault(self.root_path, _PruneState())
            now = time.monotonic()
            if (state.thread is not None and state.thread.is_alive()) or now - state.last_started < interval:
                return
            state.last_started = now
            state.thread = threading.Thread(
                target=self._prune_in_background, args=(limit,), name='pyai-harness-overflow-prune', daemon=True
            )
            state.thread.start()

    def _prune_in_background(self, limit: timedelta) -> None:
        try:
            self._prune_sync(limit, _warn_quietly, wait_for_lock=False)
        except BaseException as exc:  # noqa: BLE001  # pragma: no cover - _prune_sync catches everything
            _warn_quietly(f'spill store pruning failed: {type(exc).__name__}')

    def _prune_sync(self, limit: timedelta, warn: Callable[[str], None], *, wait_for_lock: bool) -> int:
        """Delete payloads (and their sidecars) older than `limit`, stale temp files, and emptied directories."""
        try:
            root = self._open_root(create=False)
        except HandleNotFoundError:
            return 0
        except Exception as exc:  # noqa: BLE001 - pruning must never raise into a run
            warn(f'spill store pruning skipped: {exc}')
            return 0
        errors: list[OSError] = []
        deleted = 0
        lock_fd: int | None = None
        try:
            lock_fd = _try_lock(root, blocking=wait_for_lock)
            if lock_fd == -1:
                return 0  # Another process is pruning this root right now.
            now = time.time()
            cutoff = now - limit.total_seconds()
            temp_cutoff = min(cutoff, now - _TEMP_FILE_GRACE)
            deleted = _prune_directory(root, cutoff, temp_cutoff, errors, depth=0)
            _prune_aliases(root, cutoff, temp_cutoff, errors)
        except Exception as exc:  # noqa: BLE001 - pruning must never raise into a run
            warn(f'spill store pruning stopped early: {type(exc).__name__}: {exc}')
        finally:
            if lock_fd is not None and lock_fd >= 0:
                os.close(lock_fd)
            root.close()
        if errors:
            first = errors[0]
            warn(
                f'spill store pruning could not remove {len(errors)} entries '
                f'(first error: {type(first).__name__}: {first.strerror})'
            )
        return deleted


def _read_small_file(directory: _Dir, name: str, max_size: int) -> bytes | None:
    """The bytes of the regular file `name`, or `None` when it is missing, not a regular file or over `max_size`."""
    try:
        fd = directory.open(name, os.O_RDONLY | _O_NONBLOCK)
    except (OSError, HandleNotFoundError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_size:
            return None
        return _read_exact(fd, 0, info.st_size)
    finally:
        os.close(fd)


def _alias_target(aliases: _Dir, short: str) -> str | None:
    """The full handle the alias file `short` holds, or `None` when there is no such alias."""
    raw = _read_small_file(aliases, short, _MAX_ALIAS_FILE)
    if raw is None:
        return None
    try:
        target = raw.decode('utf-8', errors='surrogatepass')
    except UnicodeDecodeError:
        return None
    return target if names_for_handle(target) is not None else None


def _resolved(root: _Dir, handle: str) -> str:
    """The full handle for `handle`: its alias's target when it is a short id with an alias, else `handle` itself."""
    if not is_short_handle(handle):
        return handle
    try:
        aliases = root.child(_ALIASES, create=False)
    except OSError:
        return handle
    try:
        return _alias_target(aliases, handle) or handle
    finally:
        aliases.close()


def _drop_alias(root: _Dir, handle: str) -> None:
    """Delete the alias of the full `handle`, if it has one (the candidates before it belong to other handles)."""
    try:
        aliases = root.child(_ALIASES, create=False)
    except OSError:
        return
    try:
        for short in short_handles(handle):
            target = _alias_target(aliases, short)
            if target is None:
                return
            if target == handle:
                try:
                    aliases.unlink(short)
                except OSError:
                    pass
                return
    finally:
        aliases.close()


def _prune_aliases(root: _Dir, cutoff: float, temp_cutoff: float, errors: list[OSError]) -> None:
    """Delete the aliases whose payload is gone, and those older than `cutoff` whose payload is old too.

    An alias is published after its payload, so a young alias without a payload lost it to this pass or to a
    `delete`; an old alias of a young payload serves a payload written again after a delete, and stays.
    """
    try:
        aliases = root.child(_ALIASES, create=False)
    except OSError:
        return
    try:
        for entry in list(aliases.entries()):
            hand_over()  # A million aliases: a long loop in a background thread, beside the event loop.
            try:
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if entry.name.startswith(_TEMP_PREFIX):
                    if info.st_mtime < temp_cutoff:
                        aliases.unlink(entry.name)
                    continue
                target = _alias_target(aliases, entry.name)
                names = names_for_handle(target) if target is not None else None
                written = _payload_mtime(root, names) if names is not None else float('-inf')
                if written == float('-inf') or max(info.st_mtime, written) < cutoff:
                    aliases.unlink(entry.name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                errors.append(exc)
    finally:
        aliases.close()


def _walk(root: _Dir, names: Sequence[str], *, create: bool) -> _Dir:
    """Open the directory holding the file for `names`; closes intermediate descriptors (the caller closes the one
    returned, unless it is `root`).
    """
    directory = root
    try:
        for name in names[:-1]:
            child = directory.child(name, create=create)
            if directory is not root:
                directory.close()
            directory = child
    except BaseException:
        if directory is not root:
            directory.close()
        raise
    return directory


def _payload_mtime(root: _Dir, names: list[str]) -> float:
    """The modification time of the payload for `names`, or minus infinity when it is missing."""
    try:
        directory = _walk(root, names, create=False)
    except OSError:
        return float('-inf')
    try:
        return directory.lstat(names[-1] + _PAYLOAD_SUFFIX).st_mtime
    except OSError:
        return float('-inf')
    finally:
        if directory is not root:
            directory.close()


def _read_whole(fd: int, _directory: _Dir, _names: list[str]) -> bytes:
    with io.FileIO(fd, 'rb', closefd=False) as stream:
        return stream.readall()


def _load_sidecar(directory: _Dir, name: str, identity: os.stat_result) -> LineIndex | None:
    data = _read_small_file(directory, name, _MAX_INDEX_FILE)
    if data is None:
        return None
    if len(data) < _INDEX_IDENTITY.size:
        return None
    inode, mtime_ns, size = _INDEX_IDENTITY.unpack_from(data)
    if (inode, mtime_ns, size) != (identity.st_ino, identity.st_mtime_ns, identity.st_size):
        return None
    try:
        index = LineIndex.from_bytes(data[_INDEX_IDENTITY.size :])
    except ValueError:
        return None
    return index if index.size == identity.st_size else None


def _try_lock(root: _Dir, *, blocking: bool) -> int | None:
    """Take the cross-process prune lock: its fd, -1 if another pruner holds it, `None` where unsupported."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    fd = root.open(_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return -1
    return fd


def _prune_directory(directory: _Dir, cutoff: float, temp_cutoff: float, errors: list[OSError], depth: int) -> int:
    deleted = 0
    for entry in list(directory.entries()):
        name = entry.name
        try:
            if entry.is_symlink() or name == _LOCK_NAME or (depth == 0 and name == _ALIASES):
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if depth >= MAX_SEGMENTS:
                    continue
                child = directory.child(name, create=False)
                try:
                    deleted += _prune_directory(child, cutoff, temp_cutoff, errors, depth + 1)
                finally:
                    child.close()
                if info.st_mtime < cutoff:
                    try:
                        directory.rmdir(name)  # Only succeeds when empty; a writer racing us retries.
                    except OSError:
                        pass
            elif stat.S_ISREG(info.st_mode):
                deleted += _prune_file(directory, name, info, cutoff, temp_cutoff)
        except FileNotFoundError:
            continue  # Raced with a writer or another deletion.
        except OSError as exc:
            errors.append(exc)
    return deleted


def _prune_file(directory: _Dir, name: str, info: os.stat_result, cutoff: float, temp_cutoff: float) -> int:
    if name.startswith(_TEMP_PREFIX):
        if info.st_mtime < temp_cutoff:
            directory.unlink(name)
        return 0
    if name.endswith(_PAYLOAD_SUFFIX):
        if info.st_mtime >= cutoff:
            return 0
        directory.unlink(name)
        try:
            directory.unlink(name[: -len(_PAYLOAD_SUFFIX)] + _INDEX_SUFFIX)
        except FileNotFoundError:
            pass
        return 1
    if name.endswith(_INDEX_SUFFIX) and info.st_mtime < cutoff:
        try:
            os.close(directory.open(name[: -len(_INDEX_SUFFIX)] + _PAYLOAD_SUFFIX, os.O_RDONLY | _O_NONBLOCK))
        except FileNotFoundError:
            directory.unlink(name)  # An orphaned sidecar.
    return 0


def _warn_or_raise(message: str) -> None:
    warnings.warn(message, StoreCleanupWarning, stacklevel=3)


def _warn_quietly(message: str) -> None:
    # In a background thread a warning filter set to "error" would raise here: never let that escape.
    try:
        warnings.warn(message, StoreCleanupWarning, stacklevel=2)
    except Exception:  # noqa: BLE001, S110 - nobody could handle it in this thread
        pass


async def _in_thread(function: Callable[[], _T]) -> _T:
    # Abandon on cancel: a caller's deadline (`Spill.timeout`) must hold even when the kernel blocks the I/O (a
    # frozen or hung filesystem). A write left running still publishes atomically, or not at all.
    return await anyio.to_thread.run_sync(function, abandon_on_cancel=True)
