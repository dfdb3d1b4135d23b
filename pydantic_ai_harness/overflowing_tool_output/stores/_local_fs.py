"""The on-disk layout of `LocalFileStore` and its descriptor I/O: the security-critical code, in one file to audit.

Every path below the root is opened one component at a time relative to an open directory, without following
symlinks (`Dir`); payloads are published by hard-linking a complete temp file into place, so a name is never
replaced and a reader never sees a partial file. A root that is a symlink, another user's, or open to
group/other is refused with `StoreRootError`, whose message never holds the path.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from ._paths import names_for_handle
from ._protocol import HandleNotFoundError

__all__ = (
    'INDEX_SUFFIX',
    'NOT_FOUND',
    'O_NONBLOCK',
    'PAYLOAD_SUFFIX',
    'READ_BLOCK',
    'TEMP_PREFIX',
    'USE_DIR_FD',
    'WRITE_ATTEMPTS',
    'Dir',
    'PayloadFile',
    'StoreRootError',
    'default_root',
    'holds_data',
    'holds_file',
    'link_exclusive',
    'make_root_private',
    'open_root',
    'publish',
    'read_exact',
    'read_small_file',
    'read_whole',
    'remove_quietly',
    'root_problem',
    'stem',
    'temp_name',
    'walk',
    'write_all',
    'write_temp',
)

_O_NOFOLLOW: int = getattr(os, 'O_NOFOLLOW', 0)
_O_DIRECTORY: int = getattr(os, 'O_DIRECTORY', 0)
_O_CLOEXEC: int = getattr(os, 'O_CLOEXEC', 0)
O_NONBLOCK: int = getattr(os, 'O_NONBLOCK', 0)
_O_BINARY: int = getattr(os, 'O_BINARY', 0)
USE_DIR_FD = {os.open, os.mkdir, os.rename, os.unlink, os.rmdir, os.stat} <= os.supports_dir_fd and (
    os.scandir in os.supports_fd
)
"""POSIX: every path below the root is resolved one component at a time, relative to an open directory."""

logger = logging.getLogger('pydantic_ai_harness.overflowing_tool_output')

PAYLOAD_SUFFIX = '.out'
INDEX_SUFFIX = '.idx'
TEMP_PREFIX = '.tmp-'
NOT_FOUND = 'no stored payload under this handle'
READ_BLOCK = 4 << 20
WRITE_ATTEMPTS = 3


class StoreRootError(OSError):
    """The store root is unsafe (a symlink, owned by another user, group/other accessible) or unusable.

    Raised by `LocalFileStore(base_dir=...)` for a root that exists and cannot be made private: that message names
    the setting, the path and its mode. Raised by reads and writes (a root that went bad since), where it may reach
    the model: that message never contains the path (read it from `LocalFileStore.root` when you need it).
    """


class Dir:
    """A directory inside the store root, opened without following symlinks.

    On POSIX it holds a file descriptor and every child is opened relative to it with `O_NOFOLLOW`, so a
    symlink planted anywhere below the root is never followed. Elsewhere it holds a path and refuses
    symlinks with `lstat` checks plus a final `realpath` containment check.
    """

    def __init__(self, fd: int | None, path: str) -> None:
        self.fd = fd
        self.path = path

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        # A directory dropped on an error path (or by a worker thread whose caller gave up) still gives its
        # descriptor back: a long-lived process must not run out of them.
        self.close()

    def _child_path(self, name: str) -> str:
        return os.path.join(self.path, name)

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        flags |= _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
        if self.fd is not None:
            return os.open(name, flags, mode, dir_fd=self.fd)
        path = self._child_path(name)
        if os.path.islink(path):
            raise HandleNotFoundError(NOT_FOUND)
        return os.open(path, flags, mode)

    def child(self, name: str, *, create: bool) -> Dir:
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
            return Dir(fd, self._child_path(name))
        path = self._child_path(name)
        if os.path.islink(path) or not os.path.isdir(path):
            raise NotADirectoryError(name)
        return Dir(None, path)

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

    def touch(self, name: str) -> None:
        """Set the modification time of `name` (never through a symlink) to now."""
        if self.fd is not None and os.utime in os.supports_dir_fd and os.utime in os.supports_follow_symlinks:
            os.utime(name, dir_fd=self.fd, follow_symlinks=False)
        elif not os.path.islink(self._child_path(name)):  # pragma: no cover - platforms without dir_fd
            os.utime(self._child_path(name))

    def rmdir(self, name: str) -> None:
        if self.fd is not None:
            os.rmdir(name, dir_fd=self.fd)
        else:
            os.rmdir(self._child_path(name))

    def entries(self) -> Iterator[os.DirEntry[str]]:
        # `os.scandir(fd)` reads through a duplicate of its own, closed and rewound with the iterator, so ours stays
        # usable and open (a duplicate passed in would never be closed: one descriptor leaked per walk).
        if self.fd is not None:
            with os.scandir(self.fd) as scan:
                yield from scan
        else:
            with os.scandir(self.path) as scan:
                yield from scan

    def fsync(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)


def default_root() -> str:
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
    # A mode open to group/other is no problem: the store makes its own root private before it writes (and says so).
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


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    written = 0
    while written < len(view):
        written += os.write(fd, view[written : written + (64 << 20)])


def read_exact(fd: int, start: int, length: int) -> bytes:
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
            buffer[:] = read_exact(self._fd, low, length)
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

    def __del__(self) -> None:
        # Opened in a worker thread whose caller was cancelled (a query's deadline), nobody else would close it.
        self.close()


def temp_name() -> str:
    return f'{TEMP_PREFIX}{secrets.token_hex(8)}'


def publish(directory: Dir, target: str, data: bytes, *, durable: bool) -> os.stat_result:
    """Write `data` to a fresh temp file in `directory`, then rename it over `target`: all or nothing."""
    temp = temp_name()
    fd = directory.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
            identity = os.fstat(fd)
        finally:
            os.close(fd)
        directory.rename(temp, target)
    except BaseException:
        remove_quietly(directory, temp)
        raise
    return identity


_NO_HARD_LINKS = frozenset(
    code
    for code in (getattr(errno, name, None) for name in ('EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV', 'EMLINK'))
    if code is not None
)
"""What `link` fails with on a filesystem without hard links (FAT, some FUSE and SMB mounts)."""


def stem(handle: str, names: list[str]) -> str:
    candidate = names_for_handle(handle)
    if candidate is None or candidate[:-1] != names[:-1]:  # pragma: no cover - the encoding guarantees both
        raise ValueError('LocalFileStore: this key cannot be stored')
    return candidate[-1]


def _holds(
    directory: Dir, name: str, size: int, ours: Callable[[int, int], bytes]
) -> Literal['missing', 'same', 'different']:
    """Whether the file `name` is missing, holds exactly our `size` bytes, or holds something else (or is not a file).

    `ours(start, length)` reads our bytes; the file is compared with them block by block.
    """
    try:
        fd = directory.open(name, os.O_RDONLY | O_NONBLOCK)
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
            length = min(READ_BLOCK, size - position)
            block = read_exact(fd, position, length)
            if not block or block != ours(position, length):
                return 'different'
            position += len(block)
        return 'same'
    finally:
        os.close(fd)


def holds_data(directory: Dir, name: str, data: bytes) -> Literal['missing', 'same', 'different']:
    """`_holds` against bytes in memory."""
    return _holds(directory, name, len(data), lambda start, length: data[start : start + length])


def holds_file(directory: Dir, name: str, temp: str, size: int) -> Literal['missing', 'same', 'different']:
    """`_holds` against the temp file `temp` (of `size` bytes)."""
    ours = directory.open(temp, os.O_RDONLY)
    try:
        return _holds(directory, name, size, lambda start, length: read_exact(ours, start, length))
    finally:
        os.close(ours)


def link_exclusive(directory: Dir, temp: str, target: str) -> bool:
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
def _locked(directory: Dir) -> Generator[None]:
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


def write_temp(directory: Dir, data: bytes, *, durable: bool) -> tuple[str, os.stat_result]:
    """Write `data` to a fresh temp file in `directory` (removed again if anything fails); its name and identity."""
    temp = temp_name()
    fd = directory.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
            return temp, os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        remove_quietly(directory, temp)
        raise


def remove_quietly(directory: Dir, name: str) -> None:
    """Unlink `name` if it is there (a temp file left by a failed or finished write)."""
    try:
        directory.unlink(name)
    except OSError:
        pass


def read_small_file(directory: Dir, name: str, max_size: int) -> bytes | None:
    """The bytes of the regular file `name`, or `None` when it is missing, not a regular file or over `max_size`."""
    try:
        fd = directory.open(name, os.O_RDONLY | O_NONBLOCK)
    except (OSError, HandleNotFoundError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_size:
            return None
        return read_exact(fd, 0, info.st_size)
    finally:
        os.close(fd)


def walk(root: Dir, names: Sequence[str], *, create: bool) -> Dir:
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


def read_whole(fd: int, _directory: Dir, _names: list[str]) -> bytes:
    """The whole file behind `fd` (a `LocalFileStore._with_payload` use)."""
    with io.FileIO(fd, 'rb', closefd=False) as stream:
        return stream.readall()


def open_root(root: str, *, create: bool) -> Dir:
    """The verified root directory (created with mode 0700 when `create`); `HandleNotFoundError` when it is missing."""
    try:
        return _verified_root(root)
    except FileNotFoundError:
        if not create:
            raise HandleNotFoundError(NOT_FOUND) from None
    try:
        os.makedirs(os.path.dirname(root), mode=0o700, exist_ok=True)
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreRootError(f'the spill store root could not be created ({exc.strerror})') from None
    return _verified_root(root)


_MADE_PRIVATE: set[str] = set()
"""The roots this process made private, each reported once."""


def _made_private(root: str, mode: int) -> None:
    if root not in _MADE_PRIVATE:
        _MADE_PRIVATE.add(root)
        logger.warning(
            'LocalFileStore made its root %s private: its mode was %04o, open to group/other, and is 0700 now '
            '(spilled tool output is readable by its owner only)',
            root,
            mode,
        )


def make_root_private(root: str, setting: str) -> None:
    """At construction: a root that exists is made private (mode 0700) when it is this user's, and reported once;
    one that cannot be (a symlink, not a directory, another user's, a `chmod` that fails) raises `StoreRootError`
    naming `setting`, the path and its mode. A root that does not exist yet is created private on the first write.
    """
    if not USE_DIR_FD:  # pragma: no cover - Windows: no modes to tighten, no owner to compare
        return
    try:
        info = os.lstat(root)
    except OSError:
        return  # missing (created on the first write), or unreadable: `root_problem` names it at the run start
    mode = stat.S_IMODE(info.st_mode)
    problem: str | None = None
    if stat.S_ISLNK(info.st_mode):
        problem = 'is a symlink, which the store refuses'
    elif not stat.S_ISDIR(info.st_mode):
        problem = 'is not a directory'
    elif info.st_uid != os.geteuid():
        problem = f'is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}), so it cannot be made private'
    elif mode & 0o077:
        try:
            fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
            try:
                os.fchmod(fd, 0o700)
            finally:
                os.close(fd)
        except OSError as exc:
            problem = f'is open to group/other and cannot be made private ({exc.strerror})'
        else:
            _made_private(root, mode)
    if problem is not None:
        raise StoreRootError(f'{setting}: {root} (mode {mode:04o}) {problem}; {_ELSEWHERE}')


def _verified_root(root: str) -> Dir:
    if not USE_DIR_FD:  # pragma: no cover - platforms without dir_fd (Windows)
        if os.path.islink(root):
            raise StoreRootError('the spill store root is a symlink; refusing to use it')
        if not os.path.isdir(root):
            raise FileNotFoundError(root)
        return Dir(None, root)
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
        # Ours, opened without following links: made private through the descriptor (it changed since construction).
        try:
            os.fchmod(fd, 0o700)
        except OSError:
            problem = f'is accessible to group/other (mode {stat.S_IMODE(info.st_mode):04o}; it must be 0700)'
        else:
            _made_private(root, stat.S_IMODE(info.st_mode))
    if problem is not None:
        os.close(fd)
        raise StoreRootError(f'the spill store root {problem}; refusing to use it')
    return Dir(fd, root)
