"""The object store's calls to obstore that need no store state: listing a page at a time, deleting paths (one by
one where a backend refuses a batch with a missing object), pruning orphaned indexes and expired aliases, and the
translation of obstore's errors into the store protocol's (message-safe: the type is named, never the text).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import obstore
from obstore.store import ObjectStore as ObstoreBackend

from ._protocol import HandleNotFoundError
from ._remote import ALIAS_MARKER, INDEX_MARKER, NOT_FOUND, KeyLayout, StoreBackendError

__all__ = (
    'LEAF_SUFFIX',
    'LIST_CHUNK',
    'Exists',
    'compare_stored',
    'delete_paths',
    'get_optional',
    'is_expired',
    'is_not_found',
    'pages',
    'prune_aliases',
    'prune_orphan_indexes',
    'raise_if_expired',
    'translate',
    'translate_put',
)

LEAF_SUFFIX = '@'
"""Ends every object name: handles never contain `@`, so the object for `run/call/0` never collides with the
directory `run/call/0/` that `run/call/0/content` needs on file-system backends."""

LIST_CHUNK = 1000
"""Objects listed (and deleted) per request."""

STREAM_CHUNK = 4 << 20
"""Bytes per chunk when a stored object is compared with a write."""

EXPIRES_AT_ATTRIBUTE = 'expires-at'
"""The object metadata key holding a payload's expiry time (ISO 8601, UTC); `x-amz-meta-expires-at` on S3."""

ORPHAN_INDEX_GRACE = 3600.0
"""An index object whose payload is missing is only pruned when older than this (its payload may be in flight)."""


async def delete_paths(store: ObstoreBackend, paths: list[str], what: str) -> None:
    """Delete `paths`; a missing one is no error."""
    try:
        await obstore.delete_async(store, paths)
    except Exception as exc:
        if not is_not_found(exc):
            raise translate(exc, what) from exc
        # Some backends (local files) refuse a batch with a missing object: delete one by one.
        for path in paths:
            try:
                await obstore.delete_async(store, path)
            except Exception as single:
                if not is_not_found(single):
                    raise translate(single, what) from single


async def prune_orphan_indexes(store: ObstoreBackend, keys: KeyLayout, surviving: set[str], now: float) -> int:
    """Delete the index objects older than the grace period whose payload is not in `surviving`; how many."""
    base = keys.base(INDEX_MARKER)
    orphans: list[str] = []
    async for page in pages(store, base.rstrip('/')):
        for meta in page:
            handle = keys.handle_of(meta['path'], INDEX_MARKER)
            if (
                handle is not None
                and handle not in surviving
                and meta['last_modified'].timestamp() <= now - ORPHAN_INDEX_GRACE
            ):
                orphans.append(meta['path'])
    for start in range(0, len(orphans), LIST_CHUNK):
        await delete_paths(store, orphans[start : start + LIST_CHUNK], 'prune')
    return len(orphans)


async def prune_aliases(
    store: ObstoreBackend, keys: KeyLayout, expired: Callable[[obstore.ObjectMeta], Awaitable[bool]]
) -> None:
    """Delete the aliases that `expired` says expired: they carry their payload's expiry and are written just after it.

    (The alias of a payload pruned here went with it; this pass catches those of payloads deleted otherwise.)
    """
    base = keys.base(ALIAS_MARKER)
    async for page in pages(store, base.rstrip('/')):
        ours = [meta for meta in page if meta['path'].startswith(base) and meta['path'].endswith(LEAF_SUFFIX)]
        verdicts = await asyncio.gather(*(expired(meta) for meta in ours))
        gone = [meta['path'] for meta, verdict in zip(ours, verdicts) if verdict]
        if gone:
            await delete_paths(store, gone, 'prune')


async def pages(store: ObstoreBackend, prefix: str) -> AsyncIterator[Sequence[obstore.ObjectMeta]]:
    """The objects under `prefix`, a page at a time (the listing ends: object stores list a finite snapshot)."""
    stream = obstore.list(store, prefix, chunk_size=LIST_CHUNK)  # pyright: ignore[reportUnknownMemberType]
    async for page in stream:
        yield page


def is_not_found(exc: BaseException) -> bool:
    """Whether obstore said the object is missing (it raises the built-in `FileNotFoundError`)."""
    return isinstance(exc, FileNotFoundError)


class Exists(Exception):
    """A conditional put found an object at its path."""


def translate_put(exc: BaseException) -> Exception:
    """A put's error: `Exists` for a conditional put that found an object, `NotImplementedError` where the backend
    has no such puts, else as `translate`.
    """
    if isinstance(exc, (obstore.exceptions.AlreadyExistsError, obstore.exceptions.PreconditionError)):
        return Exists()
    if isinstance(exc, obstore.exceptions.NotSupportedError):
        return NotImplementedError()
    return translate(exc, 'write')


def translate(exc: BaseException, what: str) -> Exception:
    """A message-safe error: not found for missing objects, else `StoreBackendError` naming the type only."""
    if isinstance(exc, HandleNotFoundError):
        return exc
    if is_not_found(exc) or isinstance(exc, obstore.exceptions.InvalidPathError):
        return HandleNotFoundError(NOT_FOUND)
    return StoreBackendError(f'ObjectStore: the object store failed during {what} ({type(exc).__name__})')


def is_expired(
    attributes: dict[Any, str], meta: obstore.ObjectMeta, ttl: timedelta | None, now: float | None = None
) -> bool:
    """Whether an object expired: its `expires-at` attribute passed or, without one, it is older than `ttl`."""
    now = time.time() if now is None else now
    raw = attributes.get(EXPIRES_AT_ATTRIBUTE)
    if raw is not None:
        try:
            return datetime.fromisoformat(raw).timestamp() <= now
        except ValueError:
            pass  # Someone else's metadata: fall back to the age rule.
    if ttl is None:
        return False
    return meta['last_modified'].timestamp() + ttl.total_seconds() <= now


def raise_if_expired(attributes: dict[Any, str], meta: obstore.ObjectMeta, ttl: timedelta | None) -> None:
    """`HandleNotFoundError` for an expired object: it reads as missing."""
    if is_expired(attributes, meta, ttl):
        raise HandleNotFoundError(NOT_FOUND)


async def compare_stored(
    store: ObstoreBackend, path: str, data: bytes, ttl: timedelta | None
) -> Literal['missing', 'same', 'different']:
    """Whether the payload object at `path` is missing, holds exactly `data` (and is live), or other bytes."""
    try:
        result = await obstore.get_async(store, path)
        if is_expired(result.attributes, result.meta, ttl) or result.meta['size'] != len(data):
            return 'different'  # An expired payload reads as not found: never hand its handle out again.
        position = 0
        async for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
            block = bytes(chunk)
            if data[position : position + len(block)] != block:
                return 'different'
            position += len(block)
    except Exception as exc:
        if is_not_found(exc):
            return 'missing'
        raise translate(exc, 'write') from exc
    return 'same' if position == len(data) else 'different'


async def get_optional(store: ObstoreBackend, path: str) -> bytes | None:
    """The object's bytes, or `None` when it is missing or unreadable (an index: rebuilt from its payload)."""
    try:
        result = await obstore.get_async(store, path)
        return bytes(await result.bytes_async())
    except Exception:  # noqa: BLE001 - a missing or unreadable index is rebuilt from the payload
        return None
