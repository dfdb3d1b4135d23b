"""Spills into the run's workspace (`ctx.workspace`), where the agent's own file and shell tools can reach them.

A spilled payload becomes a file in a directory of its own inside the workspace (`.overflow/` by default), and
its handle is that file's path relative to the working directory, so `read_tool_result(handle)` and
`grep -n ... <handle>` read the very same bytes. Everything goes through the `Workspace` API, so any backend
works (a local directory, a container, a VM) and a second process attached to the same workspace reads the
same handles.

Whether a run's spills may go there is decided per write, from what the workspace says about itself: it must
be attached, writable, keep the file inside its working directory (symlinks resolved), and not give the file's
location more authority than the workspace gives its files in general (tool output is data: a place the
operator marked as trusted must not receive it). Otherwise the spill goes to the configured store and the
reason is logged.
"""

from __future__ import annotations

import logging
import posixpath
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import anyio
from pydantic_ai.tools import RunContext
from pydantic_ai.workspaces import UnavailableWorkspace, Workspace, WorkspaceBackend
from pydantic_ai.workspaces.unavailable import NO_WORKSPACE

from ._paths import MAX_HANDLE_LENGTH, MAX_SEGMENTS, candidate_handles, handle_for_key, short_handles
from ._protocol import HandleNotFoundError, OverflowStore
from ._upstream_workspace import UpstreamWorkspaceSpills, upstream_workspace_names

__all__ = ('WorkspaceSpill', 'WorkspaceSpillRefused', 'WorkspaceStore', 'route_for_run', 'store_for_run')

logger = logging.getLogger('pydantic_ai_harness.overflowing_tool_output')

_SUFFIXES = ('.txt', '.json', '.bin')
"""The file extensions a spill gets, from a look at its bytes: what `jq`, editors and `file` expect."""

_STAMPS = '.stamps'
"""Inside the spill directory: one file per top-level group (a run), holding the time of its latest write."""

_NAME = re.compile(r'[a-z0-9_~-]+')
"""A file name `names_for_handle` can produce; anything else in a handle is refused before any I/O."""

GITIGNORE = b'*\n'
"""Written as `.gitignore` into a spill directory the store creates: git ignores everything in it, itself included."""

_RANK = {'none': 0, 'user': 1, 'operator': 2}

_LAST_PRUNE: dict[tuple[str, str], float] = {}
"""(workspace id, spill directory) -> when this process last pruned it (monotonic), to rate-limit pruning."""


class WorkspaceSpillRefused(Exception):
    """The workspace cannot take this spill; the message says why (it is logged, never shown to the model)."""


def _validate_directory(directory: object) -> str:
    if not isinstance(directory, str) or not directory:
        raise ValueError('WorkspaceSpill.directory must be a non-empty relative path such as ".overflow"')
    normal = posixpath.normpath(directory)
    if (
        posixpath.isabs(directory)
        or '\\' in directory
        or '\x00' in directory
        or normal != directory.rstrip('/')
        or normal in ('.', '..')
        or normal.startswith('../')
    ):
        raise ValueError(
            f'WorkspaceSpill.directory must be a normalized path inside the working directory, such as ".overflow" '
            f'(no leading "/", no "..", no "." segments), got {directory!r}'
        )
    return normal


@dataclass(frozen=True)
class WorkspaceSpill:
    """How spills use the run's workspace; pass `workspace=None` to the capability to never use it.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, WorkspaceSpill

    capability = OverflowingToolOutput(workspace=WorkspaceSpill(directory='.cache/overflow'))
    ```
    """

    directory: str = '.overflow'
    """Where spills go, relative to the workspace's working directory; it holds nothing else."""

    query_tools: Literal['always', 'fallback_only'] = 'always'
    """When to offer `read_tool_result` / `grep_tool_result`.

    `'always'` (the default) keeps them: about 840 tokens of tool definitions on every request (cl100k), for
    numbered pages with exact next-page calls, linear-time regex search under a time budget and output that
    never floods the context, which a shell's `grep` or `cat` does not promise. `'fallback_only'` offers them
    only once a spill of the conversation went to the configured store (a read-only or unavailable workspace,
    a failed write), which nothing else can read: for agents with their own file and shell tools on the
    workspace.
    """

    timeout: float = 10.0
    """Seconds a workspace write may take before the spill goes to the configured store instead."""

    cleanup_after: timedelta | None = None
    """Delete a run's spills from the workspace once its latest spill is older than this (checked on writes, at
    most every few minutes, by any process using the workspace). `None`: keep them."""

    def __post_init__(self) -> None:
        object.__setattr__(self, 'directory', _validate_directory(self.directory))
        if self.query_tools not in ('always', 'fallback_only'):
            raise ValueError(
                f"WorkspaceSpill.query_tools must be 'always' or 'fallback_only', got {self.query_tools!r}"
            )
        if not _is_positive_number(self.timeout):
            raise ValueError(f'WorkspaceSpill.timeout must be a positive number of seconds, got {self.timeout!r}')
        if not _is_positive_timedelta_or_none(self.cleanup_after):
            raise ValueError(f'WorkspaceSpill.cleanup_after must be a positive timedelta, got {self.cleanup_after!r}')

    def owns(self, handle: str) -> bool:
        """Whether `handle` names a spill in the workspace (rather than one in the configured store)."""
        return handle.startswith(f'{self.directory}/')


def _is_positive_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _is_positive_timedelta_or_none(value: object) -> bool:
    return value is None or (isinstance(value, timedelta) and value > timedelta(0))


def _suffix_for(data: bytes) -> str:
    """`.bin` for binary, `.json` for what looks like a JSON document, `.txt` for the rest (a cheap look)."""
    head = data[:8192]
    if b'\x00' in head:
        return '.bin'
    try:
        # A multi-byte character cut at the end of the sample is not a reason to call it binary.
        head.decode('utf-8') if len(data) <= len(head) else head[:-3].decode('utf-8')
    except UnicodeDecodeError:
        return '.bin'
    first, last = data.lstrip()[:1], data.rstrip()[-1:]
    if (first, last) in ((b'{', b'}'), (b'[', b']')):
        return '.json'
    return '.txt'


def _as_workspace(value: object) -> Workspace:
    """`value` as the `Workspace` a `WorkspaceStore` writes through: a bare backend is wrapped in one."""
    if isinstance(value, Workspace):
        return value
    if isinstance(value, WorkspaceBackend):
        return Workspace(value)
    raise TypeError(
        'WorkspaceStore.workspace must be a pydantic-ai Workspace, such as ctx.workspace or '
        f'Workspace(LocalWorkspaceBackend(path)), got {type(value).__name__}'
    )


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip('/') + '/')


@dataclass
class WorkspaceStore:
    """An [`OverflowStore`][pydantic_ai_harness.overflowing_tool_output.OverflowStore] over a pydantic-ai `Workspace`.

    Payloads are files under `directory` in the workspace, named from the key like
    [`LocalFileStore`][pydantic_ai_harness.overflowing_tool_output.LocalFileStore] names them, with a `.txt`,
    `.json` or `.bin` extension. The handle is the file's path relative to the working directory, so the model
    can pass it to its own tools as it is. `write` raises
    [`WorkspaceSpillRefused`][pydantic_ai_harness.overflowing_tool_output.WorkspaceSpillRefused] when the
    workspace must not take the file (read-only, unavailable, the path leads outside it, or the workspace gives
    that path more authority than its files); reads never leave the working directory.
    """

    workspace: Workspace
    """The workspace, usually `ctx.workspace`.

    A bare backend (`LocalWorkspaceBackend(...)`, the form upstream pydantic-ai-harness documents) is wrapped as
    `Workspace(backend)`; anything else raises `TypeError` at construction.
    """

    directory: str = '.overflow'
    """The spill directory, relative to the working directory."""

    cleanup_after: timedelta | None = None
    """Prune a group of spills (a run's) once its latest write is older than this; `None` keeps them."""

    def __post_init__(self) -> None:
        self.workspace = _as_workspace(self.workspace)
        self.directory = _validate_directory(self.directory)

    def owns(self, handle: str) -> bool:
        """Whether `handle` names a file in this store's directory."""
        return handle.startswith(f'{self.directory}/')

    # -- the OverflowStore protocol -------------------------------------------------------------------

    async def write(self, key: str, data: bytes) -> str:
        """Write `data` to its file in the workspace and return the handle (the file's relative path).

        The file is `<directory>/<short id><extension>`, the short id derived from the key as the other built-in
        stores derive theirs, so the same key and bytes give the same file in every process and on every replay.
        A file already there with other bytes (the key reused, or another key's id) is never replaced: the next
        candidate of the key's handle (`<handle>~~2`, ...) gives another id.
        """
        workspace = self.workspace
        if not workspace.attached:
            backend = workspace.backend
            reason = backend.reason if isinstance(backend, UnavailableWorkspace) else 'no reason given'
            raise WorkspaceSpillRefused(f'the workspace is unavailable: {reason}')
        if workspace.read_only:
            raise WorkspaceSpillRefused('the workspace is read-only')
        payload = data if type(data) is bytes else bytes(data)  # a bytearray or a view
        suffix = _suffix_for(payload)
        root = await workspace.working_dir()
        for candidate in candidate_handles(handle_for_key(key)):
            name = next(short_handles(candidate)) + suffix
            handle = posixpath.join(self.directory, name)
            target = await self._contained(root, handle)
            if target is None:
                raise WorkspaceSpillRefused(f'{handle} leads outside the workspace (through a symlink)')
            holds = await self._holds(target, payload)
            if holds == 'same':
                return handle
            if holds == 'different':
                continue
            await self._check_destination(root, handle, target)
            spill_dir = posixpath.join(root, self.directory)
            created = not await workspace.exists(spill_dir)
            await workspace.write_bytes(target, payload)
            if created:
                await self._ignore_in_git(spill_dir)
            await self._stamp(root, name)
            await self._maybe_prune(root)
            return handle
        raise WorkspaceSpillRefused('every file name for this key holds other bytes')

    async def read(self, handle: str) -> bytes:
        """The exact bytes of the file `handle` names; `HandleNotFoundError` when there is none (or it escapes)."""
        path = await self._path_for(handle)
        try:
            return await self.workspace.read_bytes(path)
        except OSError as exc:  # missing, a directory, not a regular file, not readable: all look the same
            raise HandleNotFoundError('no stored payload under this handle') from exc

    # -- optional extensions ---------------------------------------------------------------------------

    async def delete(self, handle: str) -> bool:
        """Delete the file `handle` names; `True` if it existed."""
        try:
            path = await self._path_for(handle)
            await self.workspace.remove(path)
        except (HandleNotFoundError, OSError):
            return False
        return True

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Delete the groups of spills whose latest write is older than `older_than` (default: `cleanup_after`).

        Returns how many groups went. Failures are logged, never raised.
        """
        limit = older_than if older_than is not None else self.cleanup_after
        if limit is None:
            return 0
        try:
            root = await self.workspace.working_dir()
            return await self._prune(root, time.time() - limit.total_seconds())
        except Exception as exc:  # noqa: BLE001 - pruning never fails a run
            logger.warning('pruning the workspace spill directory failed: %r', exc)
            return 0

    # -- implementation --------------------------------------------------------------------------------

    async def _holds(self, path: str, data: bytes) -> Literal['missing', 'same', 'different']:
        """Whether the file at `path` is missing, holds exactly `data`, or holds something else."""
        if not await self.workspace.exists(path):
            return 'missing'
        try:
            return 'same' if await self.workspace.read_bytes(path) == data else 'different'
        except OSError:
            return 'different'  # a directory, not readable: never ours to reuse

    async def _check_destination(self, root: str, handle: str, target: str) -> None:
        """Refuse a write whose file, symlinks resolved, is not in the spill directory or has more authority.

        Both the path written and the path the bytes land on are checked: a `.overflow` that is a symlink to a
        directory the operator trusts must not turn tool output into trusted text.
        """
        workspace = self.workspace
        real_root = await workspace.realpath(root)
        real = await workspace.realpath(target)
        if not _within(real, posixpath.join(real_root, self.directory)):
            raise WorkspaceSpillRefused(
                f'{handle} leads out of the spill directory {self.directory} (through a symlink): not written there'
            )
        for path in dict.fromkeys((target, real)):
            level = await workspace.authority_of(path)
            if _RANK[level] > _RANK[workspace.authority]:
                raise WorkspaceSpillRefused(
                    f"the workspace gives {handle} authority {level!r}, above its files' {workspace.authority!r}: "
                    'tool output must not be trusted as that'
                )

    async def _contained(self, root: str, relative: str) -> str | None:
        """The absolute path of `relative` when it (symlinks resolved) stays inside `root`, else `None`."""
        target = posixpath.join(root, relative)
        real_root = await self.workspace.realpath(root)
        real = await self.workspace.realpath(target)
        return target if _within(real, real_root) and real != real_root else None

    async def _path_for(self, handle: object) -> str:
        """The absolute path for a handle the model may have mangled, confined to the spill directory."""
        if not isinstance(handle, str) or len(handle) > MAX_HANDLE_LENGTH or not self.owns(handle):
            raise HandleNotFoundError('no stored payload under this handle')
        rest = handle[len(self.directory) + 1 :]
        stem, dot, suffix = rest.rpartition('.')
        segments = stem.split('/') if dot else []
        if (
            f'.{suffix}' not in _SUFFIXES
            or not segments
            or len(segments) > MAX_SEGMENTS
            or not all(_NAME.fullmatch(segment) for segment in segments)
        ):
            raise HandleNotFoundError('no stored payload under this handle')
        if not self.workspace.attached:
            raise HandleNotFoundError('no stored payload under this handle')
        root = await self.workspace.working_dir()
        path = await self._contained(root, handle)
        if path is None:
            raise HandleNotFoundError('no stored payload under this handle')
        return path

    async def _ignore_in_git(self, spill_dir: str) -> None:
        """Write `.gitignore` (`*`) into the spill directory just created, so spills stay out of `git status`.

        Never replaces a file already there; the payload is already safe, so a failure is only logged.
        """
        path = posixpath.join(spill_dir, '.gitignore')
        try:
            if not await self.workspace.exists(path):
                await self.workspace.write_bytes(path, GITIGNORE)
        except Exception as exc:  # noqa: BLE001 - a missing ignore file is no reason to lose the spill
            logger.warning('could not write .gitignore into the workspace spill directory: %r', exc)

    async def _stamp(self, root: str, group: str) -> None:
        """Record when `group` was last written, for TTL pruning; the payload is already safe, so never raise."""
        if self.cleanup_after is None:
            return
        try:
            stamp = await self._contained(root, posixpath.join(self.directory, _STAMPS, group))
            if stamp is not None:
                await self.workspace.write_bytes(stamp, repr(time.time()).encode())
        except Exception as exc:  # noqa: BLE001 - a missed stamp only delays pruning
            logger.warning('could not record the spill time for TTL pruning in the workspace: %r', exc)

    async def _maybe_prune(self, root: str) -> None:
        if self.cleanup_after is None:
            return
        ref = self.workspace.ref
        key = (f'{ref.provider}:{ref.id}' if ref is not None else root, self.directory)
        interval = min(max(self.cleanup_after.total_seconds() / 10, 1.0), 300.0)
        now = time.monotonic()
        if now - _LAST_PRUNE.get(key, float('-inf')) < interval:
            return
        _LAST_PRUNE[key] = now
        try:
            await self._prune(root, time.time() - self.cleanup_after.total_seconds())
        except Exception as exc:  # noqa: BLE001 - pruning never fails a write
            logger.warning('pruning the workspace spill directory failed: %r', exc)

    async def _prune(self, root: str, cutoff: float) -> int:
        stamps = await self._contained(root, posixpath.join(self.directory, _STAMPS))
        if stamps is None or not await self.workspace.exists(stamps):
            return 0
        removed = 0
        for entry in await self.workspace.list_dir(stamps):
            group_name, _, suffix = entry.name.partition('.')
            if entry.is_dir or not _NAME.fullmatch(group_name) or (suffix and f'.{suffix}' not in _SUFFIXES):
                continue  # not a stamp this store wrote
            try:
                written = float((await self.workspace.read_bytes(posixpath.join(stamps, entry.name))).decode())
            except (OSError, ValueError):
                continue
            if written >= cutoff:
                continue
            group = await self._contained(root, posixpath.join(self.directory, entry.name))
            if group is not None and await self.workspace.exists(group):
                await self.workspace.remove(group)
            await self.workspace.remove(posixpath.join(stamps, entry.name))
            removed += 1
        return removed


@dataclass
class RunSpillStore:
    """The store one run's spills are written to: the workspace when it takes them, else the configured store."""

    fallback: OverflowStore
    """The configured store."""

    workspace: WorkspaceStore
    """The run's workspace."""

    timeout: float
    """Seconds the workspace may take before the configured store is used."""

    async def write(self, key: str, data: bytes) -> str:
        """Write to the workspace, or, with the reason logged, to the configured store."""
        deadline: anyio.CancelScope | None = None
        try:
            with anyio.fail_after(self.timeout) as deadline:
                return await self.workspace.write(key, data)
        except WorkspaceSpillRefused as exc:
            reason = str(exc)
        except TimeoutError as exc:
            own = deadline is not None and deadline.cancel_called
            reason = f'the workspace did not finish writing within {self.timeout:g} s' if own else repr(exc)
        except Exception as exc:  # noqa: BLE001 - any workspace failure means: use the configured store
            reason = f'the workspace write failed: {exc!r}'
        logger.warning('spilled to the configured store instead of the workspace: %s', reason)
        return await self.fallback.write(key, data)

    async def read(self, handle: str) -> bytes:
        """Read from wherever `handle` points."""
        if self.workspace.owns(handle):
            return await self.workspace.read(handle)
        return await self.fallback.read(handle)


def store_for_run(fallback: OverflowStore, ctx: RunContext[Any], spill: WorkspaceSpill | None) -> OverflowStore:
    """The store a run's spills are written to: `fallback` itself, or a `RunSpillStore` that tries the workspace."""
    if spill is None or ctx.workspace.backend is NO_WORKSPACE:
        return fallback  # no workspace at all, the common case: nothing to try, nothing to report
    workspace = WorkspaceStore(ctx.workspace, spill.directory, spill.cleanup_after)
    return RunSpillStore(fallback, workspace, spill.timeout)


def route_for_run(fallback: OverflowStore, spill: WorkspaceSpill) -> Callable[[RunContext[Any], str], OverflowStore]:
    """For the query tools: the store that holds `handle` in this run (the workspace for its own handles)."""

    def route(ctx: RunContext[Any], handle: str) -> OverflowStore:
        if upstream_workspace_names(handle) is not None:
            return UpstreamWorkspaceSpills(ctx.workspace)  # a saved upstream history's spill, where upstream put it
        if isinstance(fallback, WorkspaceStore) and fallback.owns(handle):
            return fallback  # The configured store is itself a workspace (its own, not the run's).
        if spill.owns(handle):
            return WorkspaceStore(ctx.workspace, spill.directory, spill.cleanup_after)
        return fallback

    return route
