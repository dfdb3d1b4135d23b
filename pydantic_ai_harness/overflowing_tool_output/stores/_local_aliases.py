"""The short-id aliases of `LocalFileStore`: one file per short id under `.aliases/`, holding the full handle.

An alias is published like a payload (a temp file hard-linked into place), so it never replaces another one.
"""

from __future__ import annotations

import stat

from ..._gil import hand_over
from ._local_fs import (
    PAYLOAD_SUFFIX,
    TEMP_PREFIX,
    Dir,
    holds_data,
    link_exclusive,
    read_small_file,
    remove_quietly,
    walk,
    write_temp,
)
from ._paths import is_short_handle, names_for_handle, short_handles

__all__ = ('ALIASES', 'alias_of', 'drop_alias', 'link_alias', 'prune_aliases', 'resolved')

ALIASES = '.aliases'
"""Directory of the short-handle aliases: one file per short id, holding the full handle (never listed as a payload)."""

_MAX_ALIAS_FILE = 4096


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
    temp: str | None = None
    try:
        for short in short_handles(handle):
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
        for short in short_handles(handle):
            target = _alias_target(aliases, short)
            if target is None:
                return None
            if target == handle:
                return short
        return None
    finally:
        aliases.close()


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
    """Delete the alias of the full `handle`, if it has one (the candidates before it belong to other handles)."""
    try:
        aliases = root.child(ALIASES, create=False)
    except OSError:
        return
    try:
        for short in short_handles(handle):
            target = _alias_target(aliases, short)
            if target is None:
                return
            if target == handle:
                remove_quietly(aliases, short)
                return
    finally:
        aliases.close()


def prune_aliases(root: Dir, cutoff: float, temp_cutoff: float, errors: list[OSError]) -> None:
    """Delete the aliases whose payload is gone, and those older than `cutoff` whose payload is old too.

    An alias is published after its payload, so a young alias without a payload lost it to this pass or to a
    `delete`; an old alias of a young payload serves a payload written again after a delete, and stays.
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


def _alias_target(aliases: Dir, short: str) -> str | None:
    """The full handle the alias file `short` holds, or `None` when there is no such alias."""
    raw = read_small_file(aliases, short, _MAX_ALIAS_FILE)
    if raw is None:
        return None
    try:
        target = raw.decode('utf-8', errors='surrogatepass')
    except UnicodeDecodeError:
        return None
    return target if names_for_handle(target) is not None else None


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
