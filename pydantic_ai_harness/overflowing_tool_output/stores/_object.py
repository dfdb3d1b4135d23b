"""`ObjectStore`: spilled payloads in S3, GCS, Azure Blob (or local/memory) through `obstore` (extra `s3`)."""

from __future__ import annotations

import asyncio
import struct
import time
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import anyio.to_thread
import obstore
from obstore.store import LocalStore, ObjectStore as ObstoreBackend

from ._line_index import INLINE_INDEX_BYTES, LineIndex, LineIndexBuilder, build_line_index
from ._paths import (
    MAX_CANDIDATES,
    MAX_WRITTEN_HANDLE_LENGTH,
    as_handle,
    candidate_handles,
    is_short_handle,
    short_handles,
)
from ._protocol import HandleNotFoundError, StoreCleanupWarning, StoredPayload
from ._remote import (
    ALIAS_MARKER,
    INDEX_MARKER,
    NOT_FOUND,
    PAYLOAD_MARKER,
    KeyLayout,
    StoreBackendError,
    is_valid_handle,
    prepared_write,
)
from ._ttl import normalize_ttl

__all__ = ('EXPIRES_AT_ATTRIBUTE', 'ObjectStore')

EXPIRES_AT_ATTRIBUTE = 'expires-at'
"""The object metadata key holding a payload's expiry time (ISO 8601, UTC); `x-amz-meta-expires-at` on S3."""

_INDEX_MAGIC = b'PAIOIDX1'
_INDEX_HEADER = struct.Struct('<8sQH')
"""Index objects are `magic, payload size, e-tag length`, the payload e-tag, then `LineIndex.to_bytes()`."""

_LEAF_SUFFIX = '@'
"""Ends every object name: handles never contain `@`, so the object for `run/call/0` never collides with the
directory `run/call/0/` that `run/call/0/content` needs on file-system backends."""


MAX_PREFIX_LENGTH = 1024 - len(f'/{PAYLOAD_MARKER}/') - MAX_WRITTEN_HANDLE_LENGTH - len(_LEAF_SUFFIX)
"""Longest `prefix` (238 characters): every object path then fits the 1,024-byte key limit of S3, GCS and Azure."""

_TOMBSTONE = b'\x00'
"""Starts what a deleted payload's alias object holds (then the handle it stood for)."""

_LIST_CHUNK = 1000
_STREAM_CHUNK = 4 << 20
_ORPHAN_INDEX_GRACE = 3600.0
"""An index object whose payload is missing is only pruned when older than this (its payload may be in flight)."""


@dataclass
class ObjectStore:
    """Spilled payloads as objects in any `obstore` store: S3 (and compatibles), GCS, Azure, local, memory.

    Each payload is one object under `<prefix>/~p/<handle>@`, next to a small line-index object under
    `<prefix>/~i/<handle>@` and its short alias (what `write` returns) under `<prefix>/~a/<short id>@`. The query tools read windows with ranged GETs, so paging through a 100 MB
    payload moves kilobytes. Every worker (or durable-engine activity) configured with the same bucket
    and prefix reads what any other wrote.

    Expiry: with `cleanup_after`, each payload carries an `expires-at` metadata attribute; reads treat an
    expired payload as not found, and [`prune`][pydantic_ai_harness.overflowing_tool_output.stores._object.ObjectStore.prune]
    deletes it. A bucket lifecycle rule on the prefix is the alternative that needs no process at all.
    Backends without custom metadata (`LocalStore`) use the object's last-modified time plus
    `cleanup_after` instead.

    Errors the model may see never include bucket names, endpoints, paths or credentials.
    """

    store: ObstoreBackend = field(repr=False)
    """The `obstore` store, e.g. `S3Store('bucket', region='eu-west-1')`, `GCSStore(...)`, `AzureStore(...)`,
    `LocalStore(...)` or `MemoryStore()`. Configure retries and timeouts there (`retry_config`,
    `client_options={'timeout': '30s'}`): obstore retries for up to 3 minutes by default."""

    prefix: str = 'pyai-overflow'
    """Path prefix of every object, one per application: letters, digits and `_ . : / -` (no `~`).

    Handles resolve inside the prefix only, so applications sharing a bucket (or with nested prefixes,
    like `app` and `app/eu`) never read each other's payloads.
    """

    cleanup_after: timedelta | float | None = None
    """Payloads expire this long after they were written (see the class docs). `None`: keep them.

    A positive `timedelta` or a positive number of seconds, stored as a `timedelta`; anything else raises at
    construction.
    """

    max_bytes: int | None = None
    """Largest payload accepted; a larger `write` raises `PayloadTooLargeError` (the capability then
    falls back to its `then` action). `None` (the default): no limit of our own."""

    prune_concurrency: int = 8
    """Most metadata requests `prune` runs at once."""

    _attributes_supported: bool = field(default=True, init=False, repr=False, compare=False)
    """Whether the backend stores custom metadata (set to `False` after it refused once, as `LocalStore` does)."""

    _ttl: timedelta | None = field(default=None, init=False, repr=False, compare=False)
    """`cleanup_after` as checked at construction."""

    _keys: KeyLayout = field(init=False, repr=False, compare=False)
    """Where payloads, indexes and aliases live under the prefix."""

    def __post_init__(self) -> None:
        self._keys = KeyLayout.checked(self.prefix, '/', what='ObjectStore prefix', suffix=_LEAF_SUFFIX)
        self.prefix = self._keys.namespace
        if len(self.prefix) > MAX_PREFIX_LENGTH:
            raise ValueError(
                f'ObjectStore prefix is {len(self.prefix)} characters long: use at most {MAX_PREFIX_LENGTH}, '
                'so that every object path fits the 1,024-byte limit of S3, GCS and Azure'
            )
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError('max_bytes must be 0 or more, or None')
        self._ttl = self.cleanup_after = normalize_ttl(self.cleanup_after, 'ObjectStore.cleanup_after')
        if self.prune_concurrency < 1:
            raise ValueError('prune_concurrency must be 1 or more')
        if isinstance(self.store, LocalStore):
            self._attributes_supported = False

    # -- the OverflowStore protocol -------------------------------------------------------------------

    async def write(self, key: str, data: bytes) -> str:
        """Store `data` under a handle derived from `key` (then its line index and alias); return its short alias.

        A stored payload is never replaced: the payload is put only if its object does not exist yet (a
        conditional put, `If-None-Match: *` on S3); when the key's handle already holds different bytes, the
        payload gets the next free candidate handle (`<handle>~~2`, ...), and when it holds the same bytes,
        that handle is returned. Backends without conditional puts get a check before the put, which two
        concurrent writers of one key can still race.

        Raises:
            PayloadTooLargeError: `data` is larger than `max_bytes`.
            StoreBackendError: The object store failed or could not be reached.
        """
        handle, payload = prepared_write(key, data, self.max_bytes, 'ObjectStore')
        attributes = self._expiry_attributes()
        index: LineIndex | None = None

        def build_index() -> LineIndex:
            return build_line_index(payload)

        for position, candidate in enumerate(candidate_handles(handle)):
            path = self._keys.payload(candidate)
            # The first candidate is usually free: put it straight away. Later ones are compared first, so a
            # key that holds many payloads costs a metadata request per candidate, not an upload.
            holds = 'missing' if position == 0 else await self._holds(path, payload)
            for _ in range(3):
                if holds != 'missing':
                    break
                create = self._create(path, payload, attributes)
                if index is None and len(payload) > INLINE_INDEX_BYTES:
                    # Index in a worker thread while the upload runs: a spill costs about one upload.
                    result, index = await asyncio.gather(create, anyio.to_thread.run_sync(build_index))
                else:
                    index = index or build_index()
                    result = await create
                if result is not None:
                    try:
                        await self._put(
                            self._keys.index(candidate), _index_bytes(index, len(payload), result.get('e_tag')), {}
                        )
                    except StoreBackendError:
                        pass  # The payload is stored: readers rebuild a missing index.
                    return await self._aliased(candidate, attributes)
                # Another writer created it first (or it vanished again right after): compare with what is there.
                holds = await self._holds(path, payload)
            if holds == 'same':
                return await self._aliased(candidate, attributes)
        raise ValueError(
            f'ObjectStore: {MAX_CANDIDATES:,} different payloads are already stored under this key; '
            'not stored (prune old payloads)'
        )

    async def read(self, handle: str) -> bytes:
        """The exact bytes stored under `handle`; `HandleNotFoundError` when there are none (or they expired)."""
        path = self._keys.checked_payload(await self.resolve(handle))
        try:
            result = await obstore.get_async(self.store, path)
            self._raise_if_expired(result.attributes, result.meta)
            return bytes(await result.bytes_async())
        except HandleNotFoundError:
            raise
        except Exception as exc:
            raise _translate(exc, 'read') from exc

    # -- optional extensions ---------------------------------------------------------------------------

    async def size(self, handle: str) -> int:
        """The payload size in bytes (one metadata request)."""
        return (await self._head(self._keys.checked_payload(await self.resolve(handle))))['size']

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of the payload, clamped to its size (one ranged GET)."""
        path = self._keys.checked_payload(await self.resolve(handle))
        low = max(0, start)
        if end <= low:
            await self._head(path)
            return b''
        try:
            return bytes(await obstore.get_range_async(self.store, path, start=low, end=end))
        except Exception as exc:
            if _is_not_found(exc):
                raise HandleNotFoundError(NOT_FOUND) from None
            # Most backends refuse a range that starts past the end: clamp it like a file read would.
            if low >= (await self._head(path))['size']:
                return b''
            raise _translate(exc, 'read') from exc

    async def line_index(self, handle: str) -> LineIndex:
        """The payload's line index, from its index object (rebuilt and re-saved when missing or stale)."""
        handle = await self.resolve(handle)
        payload_path = self._keys.checked_payload(handle)
        meta, stored = await asyncio.gather(self._head(payload_path), self._get_optional(self._keys.index(handle)))
        if stored is not None:
            index = _parse_index(stored, meta['size'], meta['e_tag'])
            if index is not None:
                return index
        return await self._rebuild_index(handle)

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        """The stored payloads whose handle starts with `prefix`, sorted by handle (paginated listing).

        Expired payloads are listed until [`prune`][pydantic_ai_harness.overflowing_tool_output.stores._object.ObjectStore.prune]
        (or a lifecycle rule) deletes them, although reads already treat them as not found.
        """
        base = self._keys.base(PAYLOAD_MARKER)
        # List only below the complete handle segments of `prefix` when they are valid, else everything.
        segments = prefix.split('/')[:-1]
        narrowed = '/'.join(segments)
        listing = base + narrowed if narrowed and is_valid_handle(narrowed) else base.rstrip('/')
        found: list[StoredPayload] = []
        try:
            async for page in _pages(self.store, listing):
                for meta in page:
                    handle = self._keys.handle_of(meta['path'])
                    if handle is not None and handle.startswith(prefix):
                        found.append(
                            StoredPayload(handle=handle, size=meta['size'], modified=meta['last_modified'].timestamp())
                        )
        except Exception as exc:
            raise _translate(exc, 'list') from exc
        return sorted(found, key=lambda payload: payload.handle)

    async def delete(self, handle: str) -> bool:
        """Delete the payload under `handle` (short or full) with its index and alias objects; `True` if it existed."""
        handle = await self.resolve(handle)
        if not is_valid_handle(handle):
            return False
        alias = await self._alias_path_of(handle, asyncio.Semaphore(1))
        if alias is not None:
            # A tombstone, not a free id: a short handle the model still holds never names another key's payload.
            tombstone = _TOMBSTONE + handle.encode('utf-8', 'surrogateescape')
            await self._put(alias, tombstone, self._expiry_attributes())
        try:
            await obstore.head_async(self.store, self._keys.payload(handle))
        except Exception as exc:
            if _is_not_found(exc):
                return False
            raise _translate(exc, 'delete') from exc
        await self._delete_paths([self._keys.payload(handle), self._keys.index(handle)], 'delete')
        return True

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Delete expired payloads (and their index objects) now; return how many payloads were deleted.

        A payload is expired when its `expires-at` attribute has passed or, without one, when it is older
        than `cleanup_after`. Pass `older_than` to delete by age alone (no metadata request per object).
        Index objects left without their payload are removed too, and aliases that expired (they carry their
        payload's expiry). Failures are reported with
        [`StoreCleanupWarning`][pydantic_ai_harness.overflowing_tool_output.StoreCleanupWarning], never
        raised. Run it from a scheduled job, or use a bucket lifecycle rule on the prefix instead.
        """
        deleted = 0
        surviving: set[str] = set()
        limiter = asyncio.Semaphore(self.prune_concurrency)
        now = time.time()
        base = self._keys.base(PAYLOAD_MARKER)
        try:
            async for page in _pages(self.store, base.rstrip('/')):
                ours = [(handle, meta) for meta in page if (handle := self._keys.handle_of(meta['path'])) is not None]
                verdicts = await asyncio.gather(
                    *(self._prune_verdict(meta, older_than, now, limiter) for _, meta in ours)
                )
                expired = [handle for (handle, _), verdict in zip(ours, verdicts) if verdict]
                surviving.update(handle for (handle, _), verdict in zip(ours, verdicts) if not verdict)
                if expired:
                    aliases = await asyncio.gather(*(self._alias_path_of(h, limiter) for h in expired))
                    paths = [self._keys.payload(h) for h in expired] + [self._keys.index(h) for h in expired]
                    paths += [path for path in aliases if path is not None]
                    await self._delete_paths(paths, 'prune')
                    deleted += len(expired)
            await self._prune_orphan_indexes(surviving, now)
            await self._prune_aliases(older_than, now, limiter)
        except Exception as exc:  # noqa: BLE001 - pruning must never raise into a run
            _warn(f'ObjectStore pruning stopped early ({type(exc).__name__}); {deleted} payloads deleted so far')
            return deleted
        return deleted

    async def resolve(self, handle: str) -> str:
        """The full handle a short one stands for (`handle` itself when it is no known, live alias)."""
        handle = as_handle(handle)
        if not is_short_handle(handle):
            return handle
        try:
            result = await obstore.get_async(self.store, self._keys.alias(handle))
            if self._is_expired(result.attributes, result.meta):
                return handle
            target = bytes(await result.bytes_async()).decode('utf-8', 'replace')
        except Exception as exc:
            if _is_not_found(exc):
                return handle
            raise _translate(exc, 'read') from exc
        return target if is_valid_handle(target) else handle

    # -- implementation --------------------------------------------------------------------------------

    async def _aliased(self, handle: str, attributes: dict[str, str]) -> str:
        """The short id recorded for the full `handle` just written: the first candidate free or already its own.

        Each alias is a conditional put (never replacing another); a handle whose candidates are all taken keeps
        its full form. The alias expires with its payload.
        """
        target = handle.encode('utf-8', 'surrogateescape')
        for short in short_handles(handle):
            path = self._keys.alias(short)
            if await self._create(path, target, attributes) is not None:
                return short
            if await self._holds(path, target) == 'same':
                return short
            if await self._get_optional(path) == _TOMBSTONE + target:  # Deleted, now written again: its id back.
                await self._put(path, target, attributes)
                return short
        return handle

    async def _alias_path_of(self, handle: str, limiter: asyncio.Semaphore) -> str | None:
        """The path of the full `handle`'s alias object, if it has one (usually its first candidate: one GET).

        Every candidate is looked at: one freed by a prune may stand before the handle's own.
        """
        target = handle.encode('utf-8', 'surrogateescape')
        async with limiter:
            for short in short_handles(handle):
                if await self._get_optional(self._keys.alias(short)) == target:
                    return self._keys.alias(short)
        return None

    def _expiry_attributes(self) -> dict[str, str]:
        ttl = self._ttl
        if ttl is None:
            return {}
        expires = datetime.now(UTC) + ttl
        return {EXPIRES_AT_ATTRIBUTE: expires.isoformat(timespec='milliseconds')}

    def _is_expired(self, attributes: dict[Any, str], meta: obstore.ObjectMeta, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        raw = attributes.get(EXPIRES_AT_ATTRIBUTE)
        if raw is not None:
            try:
                return datetime.fromisoformat(raw).timestamp() <= now
            except ValueError:
                pass  # Someone else's metadata: fall back to the age rule.
        ttl = self._ttl
        if ttl is None:
            return False
        return meta['last_modified'].timestamp() + ttl.total_seconds() <= now

    def _raise_if_expired(self, attributes: dict[Any, str], meta: obstore.ObjectMeta) -> None:
        if self._is_expired(attributes, meta):
            raise HandleNotFoundError(NOT_FOUND)

    async def _put(
        self, path: str, data: bytes, attributes: dict[str, str], *, mode: Literal['create', 'overwrite'] = 'overwrite'
    ) -> obstore.PutResult:
        """Put an object; with `mode='create'`, `_Exists` when one is there (`NotImplementedError`: no such puts)."""
        refused_attributes = False
        if attributes and self._attributes_supported:
            try:
                return await obstore.put_async(self.store, path, data, attributes=attributes, mode=mode)
            except NotImplementedError:
                self._attributes_supported = False  # This backend keeps no custom metadata: age rule only.
                refused_attributes = True
            except Exception as exc:
                raise _translate_put(exc) from exc
        try:
            return await obstore.put_async(self.store, path, data, mode=mode)
        except NotImplementedError:
            if refused_attributes:
                self._attributes_supported = True  # It was the conditional put it refused, not the metadata.
            raise
        except Exception as exc:
            raise _translate_put(exc) from exc

    async def _create(self, path: str, data: bytes, attributes: dict[str, str]) -> obstore.PutResult | None:
        """Put `data` at `path` unless an object is there already (`None` then)."""
        try:
            return await self._put(path, data, attributes, mode='create')
        except _Exists:
            return None
        except NotImplementedError:
            pass  # No conditional puts on this backend: check first (racy between concurrent writers).
        try:
            await obstore.head_async(self.store, path)
            return None
        except Exception as exc:
            if not _is_not_found(exc):
                raise _translate(exc, 'write') from exc
        return await self._put(path, data, attributes)

    async def _holds(self, path: str, data: bytes) -> Literal['missing', 'same', 'different']:
        """Whether the payload object at `path` is missing, holds exactly `data` (and is live), or other bytes."""
        try:
            result = await obstore.get_async(self.store, path)
            if self._is_expired(result.attributes, result.meta) or result.meta['size'] != len(data):
                return 'different'  # An expired payload reads as not found: never hand its handle out again.
            position = 0
            async for chunk in result.stream(min_chunk_size=_STREAM_CHUNK):
                block = bytes(chunk)
                if data[position : position + len(block)] != block:
                    return 'different'
                position += len(block)
        except Exception as exc:
            if _is_not_found(exc):
                return 'missing'
            raise _translate(exc, 'write') from exc
        return 'same' if position == len(data) else 'different'

    async def _head(self, path: str) -> obstore.ObjectMeta:
        """The payload's metadata, or `HandleNotFoundError` when it is missing or expired."""
        try:
            result = await obstore.get_async(self.store, path, options={'head': True})
        except Exception as exc:
            raise _translate(exc, 'read') from exc
        self._raise_if_expired(result.attributes, result.meta)
        return result.meta

    async def _get_optional(self, path: str) -> bytes | None:
        try:
            result = await obstore.get_async(self.store, path)
            return bytes(await result.bytes_async())
        except Exception:  # noqa: BLE001 - a missing or unreadable index is rebuilt from the payload
            return None

    async def _rebuild_index(self, handle: str) -> LineIndex:
        path = self._keys.payload(handle)
        builder = LineIndexBuilder()
        try:
            result = await obstore.get_async(self.store, path)
            self._raise_if_expired(result.attributes, result.meta)
            meta = result.meta
            async for chunk in result.stream(min_chunk_size=_STREAM_CHUNK):
                builder.feed(bytes(chunk))
        except HandleNotFoundError:
            raise
        except Exception as exc:
            raise _translate(exc, 'read') from exc
        index = builder.finish()
        try:
            await self._put(self._keys.index(handle), _index_bytes(index, meta['size'], meta['e_tag']), {})
        except StoreBackendError:
            pass  # The index is an optimisation: this call still has it.
        return index

    async def _prune_verdict(
        self, meta: obstore.ObjectMeta, older_than: timedelta | None, now: float, limiter: asyncio.Semaphore
    ) -> bool:
        if older_than is not None:
            return meta['last_modified'].timestamp() <= now - older_than.total_seconds()
        if not self._attributes_supported:
            return self._is_expired({}, meta, now)
        async with limiter:
            try:
                result = await obstore.get_async(self.store, meta['path'], options={'head': True})
            except Exception as exc:
                if _is_not_found(exc):
                    return False  # Deleted meanwhile.
                raise
        return self._is_expired(result.attributes, result.meta, now)

    async def _prune_aliases(self, older_than: timedelta | None, now: float, limiter: asyncio.Semaphore) -> None:
        """Delete the aliases that expired: they carry their payload's expiry and are written just after it.

        (The alias of a payload pruned here went with it; this pass catches those of payloads deleted otherwise.)
        """
        base = self._keys.base(ALIAS_MARKER)
        async for page in _pages(self.store, base.rstrip('/')):
            ours = [meta for meta in page if meta['path'].startswith(base) and meta['path'].endswith(_LEAF_SUFFIX)]
            verdicts = await asyncio.gather(*(self._prune_verdict(meta, older_than, now, limiter) for meta in ours))
            expired = [meta['path'] for meta, verdict in zip(ours, verdicts) if verdict]
            if expired:
                await self._delete_paths(expired, 'prune')

    async def _prune_orphan_indexes(self, surviving: set[str], now: float) -> int:
        base = self._keys.base(INDEX_MARKER)
        orphans: list[str] = []
        async for page in _pages(self.store, base.rstrip('/')):
            for meta in page:
                handle = self._keys.handle_of(meta['path'], INDEX_MARKER)
                if (
                    handle is not None
                    and handle not in surviving
                    and meta['last_modified'].timestamp() <= now - _ORPHAN_INDEX_GRACE
                ):
                    orphans.append(meta['path'])
        for start in range(0, len(orphans), _LIST_CHUNK):
            await self._delete_paths(orphans[start : start + _LIST_CHUNK], 'prune')
        return len(orphans)

    async def _delete_paths(self, paths: list[str], what: str) -> None:
        try:
            await obstore.delete_async(self.store, paths)
        except Exception as exc:
            if not _is_not_found(exc):
                raise _translate(exc, what) from exc
            # Some backends (local files) refuse a batch with a missing object: delete one by one.
            for path in paths:
                try:
                    await obstore.delete_async(self.store, path)
                except Exception as single:
                    if not _is_not_found(single):
                        raise _translate(single, what) from single


async def _pages(store: ObstoreBackend, prefix: str) -> AsyncIterator[Sequence[obstore.ObjectMeta]]:
    """The objects under `prefix`, a page at a time (the listing ends: object stores list a finite snapshot)."""
    stream = obstore.list(store, prefix, chunk_size=_LIST_CHUNK)  # pyright: ignore[reportUnknownMemberType]
    async for page in stream:
        yield page


def _is_not_found(exc: BaseException) -> bool:
    # obstore raises the built-in FileNotFoundError for missing objects.
    return isinstance(exc, FileNotFoundError)


class _Exists(Exception):
    """A conditional put found an object at its path."""


def _translate_put(exc: BaseException) -> Exception:
    if isinstance(exc, (obstore.exceptions.AlreadyExistsError, obstore.exceptions.PreconditionError)):
        return _Exists()
    if isinstance(exc, obstore.exceptions.NotSupportedError):
        return NotImplementedError()
    return _translate(exc, 'write')


def _translate(exc: BaseException, what: str) -> Exception:
    """A message-safe error: not found for missing objects, else `StoreBackendError` naming the type only."""
    if isinstance(exc, HandleNotFoundError):
        return exc
    if _is_not_found(exc) or isinstance(exc, obstore.exceptions.InvalidPathError):
        return HandleNotFoundError(NOT_FOUND)
    return StoreBackendError(f'ObjectStore: the object store failed during {what} ({type(exc).__name__})')


def _index_bytes(index: LineIndex, size: int, e_tag: str | None) -> bytes:
    tag = (e_tag or '').encode('utf-8')
    return _INDEX_HEADER.pack(_INDEX_MAGIC, size, len(tag)) + tag + index.to_bytes()


def _parse_index(value: bytes, size: int, e_tag: str | None) -> LineIndex | None:
    """The stored index when it belongs to the payload of this `size` and `e_tag`, else `None`."""
    if len(value) < _INDEX_HEADER.size:
        return None
    magic, stored_size, tag_length = _INDEX_HEADER.unpack_from(value)
    tag_end = _INDEX_HEADER.size + tag_length
    if magic != _INDEX_MAGIC or stored_size != size or len(value) < tag_end:
        return None
    stored_tag = value[_INDEX_HEADER.size : tag_end].decode('utf-8', 'replace')
    if stored_tag != (e_tag or ''):
        return None
    try:
        index = LineIndex.from_bytes(value[tag_end:])
    except ValueError:
        return None
    return index if index.size == size else None


def _warn(message: str) -> None:
    warnings.warn(message, StoreCleanupWarning, stacklevel=3)
