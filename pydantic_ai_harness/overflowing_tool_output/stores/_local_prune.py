"""TTL pruning of `LocalFileStore`: old payloads with their sidecars and aliases, stale temp files, emptied directories.

Pruning runs at most once at a time per root (a `flock` across processes) and never raises into a run: its
failures become `StoreCleanupWarning`s.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from ._local_aliases import ALIASES, prune_aliases
from ._local_fs import INDEX_SUFFIX, O_NONBLOCK, PAYLOAD_SUFFIX, TEMP_PREFIX, Dir, open_root
from ._paths import MAX_SEGMENTS, handle_for_names
from ._protocol import HandleNotFoundError, StoreCleanupWarning

__all__ = ('last_pruner', 'prune_in_background', 'prune_root', 'schedule_prune', 'warn_or_raise')

_LOCK_NAME = '.prune-lock'
_TEMP_FILE_GRACE = 3600.0
"""A temp file younger than this is never pruned: it may belong to a write in flight."""


@dataclass
class _PruneState:
    last_started: float = float('-inf')
    thread: threading.Thread | None = None


_PRUNE_LOCK = threading.Lock()
_PRUNE_STATES: dict[str, _PruneState] = {}


def schedule_prune(root_path: str, limit: timedelta) -> threading.Thread | None:
    """Start a background prune of `root_path` unless one runs or one started recently; the thread it started."""
    # Rate limit: a tenth of the TTL, between one second and five minutes.
    interval = min(max(limit.total_seconds() / 10, 1.0), 300.0)
    with _PRUNE_LOCK:
        state = _PRUNE_STATES.setdefault(root_path, _PruneState())
        now = time.monotonic()
        if (state.thread is not None and state.thread.is_alive()) or now - state.last_started < interval:
            return None
        state.last_started = now
        state.thread = threading.Thread(
            target=prune_in_background, args=(root_path, limit), name='pyai-harness-overflow-prune', daemon=True
        )
        state.thread.start()
        return state.thread


def last_pruner(root_path: str) -> threading.Thread | None:
    """The background pruner most recently started for `root_path` (tests join it)."""
    with _PRUNE_LOCK:
        state = _PRUNE_STATES.get(root_path)
        return state.thread if state is not None else None


def prune_in_background(root_path: str, limit: timedelta) -> None:
    """`prune_root` for a background thread: every failure becomes a warning nobody has to handle."""
    try:
        prune_root(root_path, limit, _warn_quietly, wait_for_lock=False)
    except BaseException as exc:  # noqa: BLE001  # pragma: no cover - prune_root catches everything
        _warn_quietly(f'spill store pruning failed: {type(exc).__name__}')


def prune_root(root_path: str, limit: timedelta, warn: Callable[[str], None], *, wait_for_lock: bool) -> int:
    """Delete payloads (and their sidecars) older than `limit`, stale temp files, and emptied directories."""
    try:
        root = open_root(root_path, create=False)
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
        deleted = _prune_directory(root, cutoff, temp_cutoff, errors, trail=[])
        prune_aliases(root, cutoff, temp_cutoff, errors)
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


def _try_lock(root: Dir, *, blocking: bool) -> int | None:
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


def _prune_directory(directory: Dir, cutoff: float, temp_cutoff: float, errors: list[OSError], trail: list[str]) -> int:
    """Prune one directory of the root (`trail`: its names below the root). Only what `list` shows as a payload is
    a payload to prune, with its sidecar; temp files of interrupted writes go after a grace period. Anything else a
    user or a tool put there (a dot-file, a name no handle has) is left alone, so a dry run's count is the count.
    """
    deleted = 0
    for entry in list(directory.entries()):
        name = entry.name
        try:
            if entry.is_symlink() or name == _LOCK_NAME or (not trail and name == ALIASES):
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if len(trail) >= MAX_SEGMENTS - 1 or name.startswith('.'):
                    continue  # deeper than any handle, or not a handle's directory: not ours
                child = directory.child(name, create=False)
                try:
                    below = _prune_directory(child, cutoff, temp_cutoff, errors, [*trail, name])
                finally:
                    child.close()
                deleted += below
                # An old directory, or one this pass emptied (its mtime is that of its last file, maybe younger, or
                # of a sidecar rewritten on a read): a fresh empty one may be a writer's, about to be filled.
                if below or info.st_mtime < cutoff:
                    try:
                        directory.rmdir(name)  # Only succeeds when empty; a writer racing us retries.
                    except OSError:
                        pass
            elif stat.S_ISREG(info.st_mode):
                deleted += _prune_file(directory, name, trail, info, cutoff, temp_cutoff)
        except FileNotFoundError:
            continue  # Raced with a writer or another deletion.
        except OSError as exc:
            errors.append(exc)
    return deleted


def _prune_file(
    directory: Dir, name: str, trail: list[str], info: os.stat_result, cutoff: float, temp_cutoff: float
) -> int:
    if name.startswith(TEMP_PREFIX):
        if info.st_mtime < temp_cutoff:
            directory.unlink(name)
        return 0
    for suffix in (PAYLOAD_SUFFIX, INDEX_SUFFIX):
        if name.endswith(suffix) and not name.startswith('.'):
            stem = name[: -len(suffix)]
            break
    else:
        return 0
    if info.st_mtime >= cutoff or handle_for_names([*trail, stem]) is None:
        return 0  # young, or a file no handle names (the store never wrote it): left alone
    if name.endswith(PAYLOAD_SUFFIX):
        if directory.lstat(name).st_mtime >= cutoff:
            return 0  # written again (a replay restarts its age) since the walk read it: kept
        directory.unlink(name)
        try:
            directory.unlink(stem + INDEX_SUFFIX)
        except FileNotFoundError:
            pass
        return 1
    try:
        os.close(directory.open(stem + PAYLOAD_SUFFIX, os.O_RDONLY | O_NONBLOCK))
    except FileNotFoundError:
        directory.unlink(name)  # An orphaned sidecar.
    return 0


def warn_or_raise(message: str) -> None:
    """Report a pruning failure to the caller of `prune` (a filter set to "error" makes it raise there)."""
    warnings.warn(message, StoreCleanupWarning, stacklevel=3)


def _warn_quietly(message: str) -> None:
    # In a background thread a warning filter set to "error" would raise here: never let that escape.
    try:
        warnings.warn(message, StoreCleanupWarning, stacklevel=2)
    except Exception:  # noqa: BLE001, S110 - nobody could handle it in this thread
        pass
