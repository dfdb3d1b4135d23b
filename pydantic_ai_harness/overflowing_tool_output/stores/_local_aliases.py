"""The short-id aliases of `LocalFileStore`: one file per short id under `.aliases/`, holding the full handle.

An alias is published like a payload (a temp file hard-linked into place), so it never replaces another handle's.
A deleted payload's alias becomes a tombstone (a NUL, then the handle it stood for) rather than a free id, so a
handle the model still holds never comes to name another payload: only the same handle written again takes its id
back, and pruning removes tombstones once they are older than its age limit (with the aliases of the payloads it
prunes: past the age limit, a handle names nothing). Every lookup scans all the candidates
of a handle (at most seven), so a hole left by pruning never hides the alias behind it.
"""

from __future__ import annotations

import stat
from typing import Literal

from ..._gil import hand_over
from ._local_fs import (
    PAYLOAD_SUFFIX,
    TEMP_PREFIX,
    Dir,
    holds_data,
    link_exclusive,
    publish,
    read_small_file,
    remove_quietly,
    walk,
    write_temp,
)
from ._paths import is_short_handle, names_for_handle, short_handles

__all__ = ('ALIASES', 'alias_of', 'all_aliases', 'drop_alias', 'link_alias', 'prune_aliases', 'resolved')

ALIASES = '.aliases'
"""Directory of the short-handle aliases: one file per short id, holding the full handle (never listed as a payload)."""

_MAX_ALIAS_FILE = 4096
_TOMBSTONE = b'\x00'
"""Starts the content of a deleted payload's alias (no handle starts with NUL)."""


def link_alias(root: Dir, handle: str, *, durable: bool) -> str:
    """The short id recorded for the full `handle` just written: the first candidate free or already its own.

    A handle whose candidates are all taken keeps its full form.
    """
    try:
        aliases = root.child(ALIASES, create=False)
    except FileNotFoundError:
        aliases = root.child(ALIASES, create=True)
    try:
        return _link_in(aliases, handle, durable=durable)
    finally:
        aliases.close()


def _link_in(aliases: Dir, handle: str, *, durable: bool) -> str:
    target = handle.encode('utf-8', errors='surrogatepass')
    shorts = list(short_handles(handle))
    for short in shorts:
        kind, owner = _alias_state(aliases, short)
        if owner == handle:
            if kind == 'tombstone':  # The same handle written again after a delete: its id comes back.
                publish(aliases, short, target, durable=durable)
            return short
    temp: str | None = None
    try:
        for short in shorts:
            if temp is None:
                temp = write_temp(aliases, target, durable=durable)[0]
            # Link first: the alias is usually new, and a link never replaces what another writer put there.
            if link_exclusive(aliases, temp, short) or holds_data(aliases, short, target) == 'same':
                if durable:
                    aliases.fsync()
                return short
    finally:
        if temp is not None:
            remove_quietly(aliases, temp)
    return handle


def alias_of(root: Dir, handle: str) -> str | None:
    """The short id recorded for the full `handle`, or `None` when it has none."""
    try:
        aliases = root.child(ALIASES, create=False)
    except OSError:
        return None
    try:
        return next(
            (short for short in short_handles(handle) if _alias_state(aliases, short) == ('live', handle)), None
        )
    finally:
        aliases.close()


def all_aliases(root: Dir) -> dict[str, str]:
    """Every full handle with a live alias, mapped to its short id (what `alias_of` gives it), in one pass over
    `.aliases/` (a listing of many payloads opens the directory once, not once per payload).
    """
    try:
        aliases = root.child(ALIASES, create=False)
    except OSError:
        return {}
    found: dict[str, set[str]] = {}
    try:
        for entry in aliases.entries():
            if is_short_handle(entry.name):  # not a temp file
                kind, target = _alias_state(aliases, entry.name)
                if kind == 'live' and target is not None:
                    found.setdefault(target, set()).add(entry.name)
    finally:
        aliases.close()
    return {
        handle: short
        for handle, shorts in found.items()
        if (short := next((s for s in short_handles(handle) if s in shorts), None)) is not None
    }


def resolved(root: Dir, handle: str) -> str:
    """The full handle for `handle`: its alias's target when it is a short id with an alias, else `handle` itself."""
    if not is_short_handle(handle):
        return handle
    try:
        aliases = root.child(ALIASES, create=False)
    except OSError:
        return handle
    try:
        return _alias_target(aliases, handle) or handle
    finally:
        aliases.close()


def drop_alias(root: Dir, handle: str) -> None:
    """Turn the alias of the full `handle` (if it has one) into a tombstone, so its id goes to no other handle."""
    try:
        aliases = root.child(ALIASES, create=False)
    except OSError:
        return
    try:
        for short in short_handles(handle):
            if _alias_state(aliases, short) == ('live', handle):
                _bury(aliases, short, handle)
    finally:
        aliases.close()


def prune_aliases(root: Dir, cutoff: float, temp_cutoff: float, errors: list[OSError]) -> None:
    """Delete the aliases whose payload is gone, those older than `cutoff` whose payload is old too, and the
    tombstones older than `cutoff`.

    An alias is published after its payload, so a young alias without a payload lost it to this pass; an old
    alias of a young payload serves a payload written again after a delete, and stays.
    """
    try:
        aliases = root.child(ALIASES, create=False)
    except OSError:
        return
    try:
        for entry in list(aliases.entries()):
            hand_over()  # A million aliases: a long loop in a background thread, beside the event loop.
            try:
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if entry.name.startswith(TEMP_PREFIX):
                    if info.st_mtime < temp_cutoff:
                        aliases.unlink(entry.name)
                    continue
                kind, target = _alias_state(aliases, entry.name)
                if kind != 'live':
                    if info.st_mtime < cutoff:
                        aliases.unlink(entry.name)  # A tombstone (or a stray file) past the age limit.
                    continue
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


def _alias_target(aliases: Dir, short: str) -> str | None:
    """The full handle the live alias `short` stands for, or `None` when there is none (or only a tombstone)."""
    kind, target = _alias_state(aliases, short)
    return target if kind == 'live' else None


def _alias_state(aliases: Dir, short: str) -> tuple[Literal['missing', 'live', 'tombstone', 'other'], str | None]:
    """What the alias file `short` holds: nothing, a live alias or a tombstone (with its handle), or something else."""
    raw = read_small_file(aliases, short, _MAX_ALIAS_FILE)
    if raw is None:
        return 'missing', None
    kind: Literal['live', 'tombstone'] = 'live'
    if raw.startswith(_TOMBSTONE):
        kind, raw = 'tombstone', raw[len(_TOMBSTONE) :]
    try:
        target = raw.decode('utf-8', errors='surrogatepass')
    except UnicodeDecodeError:
        return 'other', None
    return (kind, target) if names_for_handle(target) is not None else ('other', None)


def _bury(aliases: Dir, short: str, handle: str) -> None:
    """Replace the alias `short` with a tombstone of `handle` (its id then goes to that handle only)."""
    publish(aliases, short, _TOMBSTONE + handle.encode('utf-8', errors='surrogatepass'), durable=False)


def _payload_mtime(root: Dir, names: list[str]) -> float:
    """The modification time of the payload for `names`, or minus infinity when it is missing."""
    try:
        directory = walk(root, names, create=False)
    except OSError:
        return float('-inf')
    try:
        return directory.lstat(names[-1] + PAYLOAD_SUFFIX).st_mtime
    except OSError:
        return float('-inf')
    finally:
        if directory is not root:
            directory.close()
