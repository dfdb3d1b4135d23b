"""`ObjectStore`: spilled payloads in S3, GCS, Azure Blob (or local/memory) through `obstore` (extra `s3`)."""

from __future__ import annotations

import asyncio
import struct
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Literal

import anyio.to_thread
import obstore
from obstore.store import LocalStore, ObjectStore as ObstoreBackend

from ._line_index import INLINE_INDEX_BYTES, LineIndex, LineIndexBuilder, build_line_index
from ._object_ops import (
    EXPIRES_AT_ATTRIBUTE,
    LEAF_SUFFIX,
    STREAM_CHUNK,
    Exists,
    compare_stored,
    delete_paths,
    get_optional,
    is_expired,
    is_not_found,
    pages,
    prune_aliases,
    prune_orphan_indexes,
    raise_if_expired,
    translate,
    translate_put,
)
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
    NOT_FOUND,
    PAYLOAD_MARKER,
    KeyLayout,
    StoreBackendError,
    is_valid_handle,
    prepared_write,
)
from ._ttl import normalize_ttl

__all__ = ('EXPIRES_AT_ATTRIBUTE', 'ObjectStore')


_INDEX_MAGIC = b'PAIOIDX1'
_INDEX_HEADER = struct.Struct('<8sQH')
"""Index objects are `magic, payload size, e-tag length`, the payload e-tag, then `LineIndex.to_bytes()`."""


MAX_PREFIX_LENGTH = 1024 - len(f'/{PAYLOAD_MARKER}/') - MAX_WRITTEN_HANDLE_LENGTH - len(LEAF_SUFFIX)
"""Longest `prefix` (238 characters): every object path then fits the 1,024-byte key limit of S3, GCS and Azure."""

_TOMBSTONE = b'\x00'
"""Starts what a deleted payload's alias object holds (then the handle it stood for)."""


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
        self._keys = KeyLayout.checked(self.prefix, '/', what='ObjectStore prefix', suffix=LEAF_SUFFIX)
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
            holds = 'missing' if position == 0 else await compare_stored(self.store, path, payload, self._ttl)
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
                holds = await compare_stored(self.store, path, payload, self._ttl)
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
            raise_if_expired(result.attributes, result.meta, self._ttl)
            return bytes(await result.bytes_async())
        except HandleNotFoundError:
            raise
        except Exception as exc:
            raise translate(exc, 'read') from exc

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
            if is_not_found(exc):
                raise HandleNotFoundError(NOT_FOUND) from None
            # Most backends refuse a range that starts past the end: clamp it like a file read would.
            if low >= (await self._head(path))['size']:
                return b''
            raise translate(exc, 'read') from exc

    async def line_index(self, handle: str) -> LineIndex:
        """The payload's line index, from its index object (rebuilt and re-saved when missing or stale)."""
        handle = await self.resolve(handle)
        payload_path = self._keys.checked_payload(handle)
        meta, stored = await asyncio.gather(
            self._head(payload_path), get_optional(self.store, self._keys.index(handle))
        )
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
            async for page in pages(self.store, listing):
                for meta in page:
                    handle = self._keys.handle_of(meta['path'])
                    if handle is not None and handle.startswith(prefix):
                        found.append(
                            StoredPayload(handle=handle, size=meta['size'], modified=meta['last_modified'].timestamp())
                        )
        except Exception as exc:
            raise translate(exc, 'list') from exc
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
            if is_not_found(exc):
                return False
            raise translate(exc, 'delete') from exc
        await delete_paths(self.store, [self._keys.payload(handle), self._keys.index(handle)], 'delete')
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
            async for page in pages(self.store, base.rstrip('/')):
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
                    await delete_paths(self.store, paths, 'prune')
                    deleted += len(expired)
            await prune_orphan_indexes(self.store, self._keys, surviving, now)
            await prune_aliases(
                self.store, self._keys, partial(self._prune_verdict, older_than=older_than, now=now, limiter=limiter)
            )
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
            if is_expired(result.attributes, result.meta, self._ttl):
                return handle
            target = bytes(await result.bytes_async()).decode('utf-8', 'replace')
        except Exception as exc:
            if is_not_found(exc):
                return handle
            raise translate(exc, 'read') from exc
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
            if await compare_stored(self.store, path, target, self._ttl) == 'same':
                return short
            if await get_optional(self.store, path) == _TOMBSTONE + target:  # Deleted, now written again: its id back.
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
                if await get_optional(self.store, self._keys.alias(short)) == target:
                    return self._keys.alias(short)
        return None

    def _expiry_attributes(self) -> dict[str, str]:
        ttl = self._ttl
        if ttl is None:
            return {}
        expires = datetime.now(UTC) + ttl
        return {EXPIRES_AT_ATTRIBUTE: expires.isoformat(timespec='milliseconds')}

    async def _put(
        self, path: str, data: bytes, attributes: dict[str, str], *, mode: Literal['create', 'overwrite'] = 'overwrite'
    ) -> obstore.PutResult:
        """Put an object; with `mode='create'`, `Exists` when one is there (`NotImplementedError`: no such puts)."""
        refused_attributes = False
        if attributes and self._attributes_supported:
            try:
                return await obstore.put_async(self.store, path, data, attributes=attributes, mode=mode)
            except NotImplementedError:
                self._attributes_supported = False  # This backend keeps no custom metadata: age rule only.
                refused_attributes = True
            except Exception as exc:
                raise translate_put(exc) from exc
        try:
            return await obstore.put_async(self.store, path, data, mode=mode)
        except NotImplementedError:
            if refused_attributes:
                self._attributes_supported = True  # It was the conditional put it refused, not the metadata.
            raise
        except Exception as exc:
            raise translate_put(exc) from exc

    async def _create(self, path: str, data: bytes, attributes: dict[str, str]) -> obstore.PutResult | None:
        """Put `data` at `path` unless an object is there already (`None` then)."""
        try:
            return await self._put(path, data, attributes, mode='create')
        except Exists:
            return None
        except NotImplementedError:
            pass  # No conditional puts on this backend: check first (racy between concurrent writers).
        try:
            await obstore.head_async(self.store, path)
            return None
        except Exception as exc:
            if not is_not_found(exc):
                raise translate(exc, 'write') from exc
        return await self._put(path, data, attributes)

    async def _head(self, path: str) -> obstore.ObjectMeta:
        """The payload's metadata, or `HandleNotFoundError` when it is missing or expired."""
        try:
            result = await obstore.get_async(self.store, path, options={'head': True})
        except Exception as exc:
            raise translate(exc, 'read') from exc
        raise_if_expired(result.attributes, result.meta, self._ttl)
        return result.meta

    async def _rebuild_index(self, handle: str) -> LineIndex:
        path = self._keys.payload(handle)
        builder = LineIndexBuilder()
        try:
            result = await obstore.get_async(self.store, path)
            raise_if_expired(result.attributes, result.meta, self._ttl)
            meta = result.meta
            async for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
                builder.feed(bytes(chunk))
        except HandleNotFoundError:
            raise
        except Exception as exc:
            raise translate(exc, 'read') from exc
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
            return is_expired({}, meta, self._ttl, now)
        async with limiter:
            try:
                result = await obstore.get_async(self.store, meta['path'], options={'head': True})
            except Exception as exc:
                if is_not_found(exc):
                    return False  # Deleted meanwhile.
                raise
        return is_expired(result.attributes, result.meta, self._ttl, now)


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
