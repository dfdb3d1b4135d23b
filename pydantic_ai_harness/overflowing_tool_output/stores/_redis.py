"""`RedisStore`: spilled payloads in Redis, shared by every worker that can reach the server (extra `redis`)."""

from __future__ import annotations

import asyncio
import struct
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import anyio.to_thread
from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import RedisError

from ._line_index import INLINE_INDEX_BYTES, LineIndex, LineIndexBuilder, build_line_index
from ._paths import MAX_CANDIDATES, as_handle, candidate_handles, is_short_handle, short_handles
from ._protocol import HandleNotFoundError, StoredPayload
from ._remote import NOT_FOUND, PAYLOAD_MARKER, KeyLayout, StoreBackendError, is_valid_handle, prepared_write
from ._ttl import normalize_ttl

__all__ = ('DEFAULT_REDIS_MAX_BYTES', 'RedisStore')

_MAX_CONNECTIONS = 100
"""Connections one store opens per event loop, as redis-py's default pool; more concurrent calls wait for one."""

_T = TypeVar('_T')

DEFAULT_REDIS_MAX_BYTES = 64 << 20
"""The default `RedisStore.max_bytes`: 64 MiB (Redis holds everything in memory)."""

_INDEX_HEADER = struct.Struct('<8sd')
_INDEX_MAGIC = b'PAIRIDX1'
"""Index values are `magic, written-at (POSIX seconds)` followed by `LineIndex.to_bytes()`."""

_SCAN_COUNT = 500
_READ_BLOCK = 4 << 20

_GLOB_SPECIAL = frozenset('*?[]\\')

_PROBE_BATCH = 16
"""Candidate handles whose sizes are probed per round trip before a payload is sent."""

_CREATE_SCRIPT = """
local outcome = -1
local expiry = ARGV[3]
local length = redis.call('STRLEN', KEYS[1])
if length == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  if expiry == '' then
    redis.call('SET', KEYS[1], ARGV[1])
    redis.call('SET', KEYS[2], ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', expiry)
    redis.call('SET', KEYS[2], ARGV[2], 'PX', expiry)
  end
  outcome = 1
elseif length == string.len(ARGV[1]) and redis.call('GET', KEYS[1]) == ARGV[1] then
  outcome = 0
  if expiry == '' then
    local remaining = redis.call('PTTL', KEYS[1])
    if remaining > 0 then expiry = tostring(remaining) end
  else
    redis.call('PEXPIRE', KEYS[1], expiry)
    redis.call('PEXPIRE', KEYS[2], expiry)
  end
else
  return {-1, 0}
end
for position = 3, #KEYS do
  local created
  if expiry == '' then
    created = redis.call('SET', KEYS[position], ARGV[4], 'NX')
  else
    created = redis.call('SET', KEYS[position], ARGV[4], 'NX', 'PX', expiry)
  end
  if created then
    return {outcome, position - 2}
  end
  local current = redis.call('GET', KEYS[position])
  if current == ARGV[4] then
    if expiry ~= '' then redis.call('PEXPIRE', KEYS[position], expiry) end
    return {outcome, position - 2}
  end
  if current == '\0' .. ARGV[4] then
    if expiry == '' then
      redis.call('SET', KEYS[position], ARGV[4])
    else
      redis.call('SET', KEYS[position], ARGV[4], 'PX', expiry)
    end
    return {outcome, position - 2}
  end
end
return {outcome, 0}
"""
"""Store a payload and its index under KEYS[1] / KEYS[2] unless KEYS[1] exists, then its alias (ARGV[4], the full
handle) under the first of KEYS[3..] that is free, already holds it, or holds its tombstone (a NUL, then the handle:
what `delete` leaves), with the payload's expiry; atomically (a
script runs alone on the server). The same bytes written again restart the expiry of all three (a replay must not
expire early). Returns `{outcome, alias}`: outcome 1 when stored, 0 when KEYS[1] already held these bytes, -1 when
it holds others; alias the position of the alias key used (1 for KEYS[3]), 0 for none."""


_DROP_ALIAS_SCRIPT = """
for position = 1, #KEYS do
  if redis.call('GET', KEYS[position]) == ARGV[1] then
    local remaining = redis.call('PTTL', KEYS[position])
    if remaining > 0 then
      redis.call('SET', KEYS[position], '\0' .. ARGV[1], 'PX', remaining)
    else
      redis.call('SET', KEYS[position], '\0' .. ARGV[1])
    end
    return 1
  end
end
return 0
"""
"""Turn the alias of the full handle ARGV[1] (the one of its candidate keys KEYS that holds it) into a tombstone
with the same expiry, so its short id never goes to another handle; only the same handle written again takes it."""


@dataclass
class RedisStore:
    """Spilled payloads in Redis: every worker of a service reads what any other wrote.

    Each payload is one Redis string under `<namespace>:~p:<handle>`, next to its line index under
    `<namespace>:~i:<handle>` and its short alias under `<namespace>:~a:<short id>` (what `write` returns);
    all three are written by one server-side script with the same expiry, so a reader never sees one
    without the others, and a stored payload or alias is never replaced by another. The
    query tools read windows with `GETRANGE`, so paging through a 100 MB payload moves kilobytes, not
    megabytes. The server must allow scripts (`EVALSHA`, `SCRIPT LOAD`) for the store's user.

    Construct it from a URL (the store opens and owns its connections, one pool per event loop; call
    `aclose()` when done) or from your own `redis.asyncio.Redis` client (it must not use
    `decode_responses=True`). Errors the
    model may see never include the server address or credentials.
    """

    url: str | None = field(default=None, repr=False)
    """A `redis://` / `rediss://` / `unix://` URL. Default (with no `client`): `redis://localhost:6379/0`."""

    client: Redis | None = field(default=None, repr=False, compare=False)
    """A client to use instead of `url` (you keep ownership: `aclose()` does not close it)."""

    namespace: str = 'pyai-overflow'
    """Prefix of every key, one per application: letters, digits and `_ . : / -` (no `~`).

    Handles resolve inside the namespace only, so applications sharing a server (or a namespace that
    starts with another, like `app` and `app:eu`) never read each other's payloads.
    """

    cleanup_after: timedelta | float | None = None
    """Expire payloads (and their indexes) this long after they were written, natively (`SET ... PX`).

    A positive `timedelta` or a positive number of seconds, stored as a `timedelta`; anything else raises at
    construction.

    `None` (the default) keeps them until deleted or evicted. Note that a Redis `maxmemory-policy` other
    than `noeviction` may evict payloads earlier; a read then reports the handle as not found.
    """

    max_bytes: int | None = DEFAULT_REDIS_MAX_BYTES
    """Largest payload accepted; a larger `write` raises `PayloadTooLargeError` (the capability then
    falls back to its `then` action, a truncation by default). `None` for no limit of our own (Redis
    refuses values over its `proto-max-bulk-len`, 512 MB by default)."""

    socket_timeout: float = 30.0
    """Seconds one command may take on a connection this store opens from `url` (and to connect, capped
    at 5 s). Ignored when you pass a `client`."""

    _owned: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Redis] = field(
        default_factory=weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Redis],
        init=False,
        repr=False,
        compare=False,
    )
    """The clients opened from `url`, one per event loop (asyncio connections cannot move between loops)."""

    _ttl: timedelta | None = field(default=None, init=False, repr=False, compare=False)
    """`cleanup_after` as checked at construction."""

    _keys: KeyLayout = field(init=False, repr=False, compare=False)
    """Where payloads, indexes and aliases live in the namespace."""

    def __post_init__(self) -> None:
        self._keys = KeyLayout.checked(self.namespace, ':', what='RedisStore namespace')
        self.namespace = self._keys.namespace
        if self.url is not None and self.client is not None:
            raise ValueError('pass either url or client to RedisStore, not both')
        if self.client is not None and self.client.get_encoder().decode_responses:
            raise ValueError('RedisStore needs a client without decode_responses=True: payloads are bytes')
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError('max_bytes must be 0 or more, or None')
        self._ttl = self.cleanup_after = normalize_ttl(self.cleanup_after, 'RedisStore.cleanup_after')

    # -- the OverflowStore protocol -------------------------------------------------------------------

    async def write(self, key: str, data: bytes) -> str:
        """Store `data` under a handle derived from `key` (payload, index and alias atomically); return its short id.

        A stored payload is never replaced: when the key's handle already holds different bytes, the payload
        gets the next free candidate handle (`<handle>~~2`, ...); when it holds the same bytes, that handle is
        kept and nothing is written. The short id returned is the payload's alias (see `short_handles`); reads
        accept it or the full handle. The check and the writes are one server-side script, so concurrent
        writers in any process never clobber each other.

        Raises:
            PayloadTooLargeError: `data` is larger than `max_bytes`.
            StoreBackendError: The server failed or could not be reached.
        """
        handle, payload = prepared_write(key, data, self.max_bytes, 'RedisStore')
        if len(payload) > INLINE_INDEX_BYTES:
            index = await anyio.to_thread.run_sync(lambda: build_line_index(payload))
        else:
            index = build_line_index(payload)
        index_value = _INDEX_HEADER.pack(_INDEX_MAGIC, time.time()) + index.to_bytes()
        expiry = self._expiry_ms()
        return await self._call(lambda client: self._create(client, handle, payload, index_value, expiry), 'write')

    async def read(self, handle: str) -> bytes:
        """The exact bytes stored under `handle`; `HandleNotFoundError` when there are none (or they expired)."""
        key = self._keys.checked_payload(await self.resolve(handle))
        value = await self._call(lambda client: client.get(key), 'read')
        if value is None:
            raise HandleNotFoundError(NOT_FOUND)
        return _as_bytes(value)

    # -- optional extensions ---------------------------------------------------------------------------

    async def size(self, handle: str) -> int:
        """The payload size in bytes (`STRLEN`)."""
        key = self._keys.checked_payload(await self.resolve(handle))
        exists, length = await self._transaction(lambda pipe: (pipe.exists(key), pipe.strlen(key)), 'size')
        if not exists:
            raise HandleNotFoundError(NOT_FOUND)
        return int(length)

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of the payload, clamped to its size (`GETRANGE`)."""
        key = self._keys.checked_payload(await self.resolve(handle))
        low = max(0, start)
        if end <= low:
            exists = await self._call(lambda client: client.exists(key), 'read')
            if not exists:
                raise HandleNotFoundError(NOT_FOUND)
            return b''
        exists, chunk = await self._transaction(
            lambda pipe: (pipe.exists(key), pipe.getrange(key, low, end - 1)), 'read'
        )
        if not exists:
            raise HandleNotFoundError(NOT_FOUND)
        return bytes(chunk)

    async def line_index(self, handle: str) -> LineIndex:
        """The payload's line index, stored with it at write time (rebuilt and re-saved if it went missing)."""
        handle = await self.resolve(handle)
        payload_key = self._keys.checked_payload(handle)
        index_key = self._keys.index(handle)
        exists, length, stored = await self._transaction(
            lambda pipe: (pipe.exists(payload_key), pipe.strlen(payload_key), pipe.get(index_key)), 'read'
        )
        if not exists:
            raise HandleNotFoundError(NOT_FOUND)
        index = _parse_index(stored)
        if index is not None and index.size == int(length):
            return index
        return await self._rebuild_index(handle, int(length))

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        """The stored payloads whose handle starts with `prefix`, sorted by handle (`SCAN`, bounded batches).

        `modified` is the write time recorded in the payload's index (0.0 if the index is gone).
        """
        base = self._keys.base(PAYLOAD_MARKER)
        match = f'{base}{_glob_escape(prefix)}*'

        async def scan(client: Redis) -> list[StoredPayload]:
            found: list[StoredPayload] = []
            cursor = 0
            while True:
                reply: tuple[int, list[bytes | str]] = await client.scan(  # pyright: ignore[reportUnknownMemberType]
                    cursor, match=match, count=_SCAN_COUNT
                )
                cursor, keys = reply
                named = (self._keys.handle_of(_as_bytes(raw).decode('utf-8', 'replace')) for raw in keys)
                handles = [handle for handle in named if handle is not None and handle.startswith(prefix)]
                if handles:
                    async with client.pipeline(transaction=False) as pipe:
                        for handle in handles:
                            pipe.strlen(self._keys.payload(handle))
                            pipe.getrange(self._keys.index(handle), 0, _INDEX_HEADER.size - 1)
                        replies: list[Any] = await pipe.execute()
                    for position, handle in enumerate(handles):
                        length, header = replies[2 * position], replies[2 * position + 1]
                        if not length and not header:
                            continue  # Expired between SCAN and STRLEN.
                        found.append(StoredPayload(handle=handle, size=int(length), modified=_written_at(header)))
                if cursor == 0:
                    return found

        payloads = await self._call(scan, 'list')
        unique = {payload.handle: payload for payload in payloads}  # SCAN may return a key twice.
        return sorted(unique.values(), key=lambda payload: payload.handle)

    async def delete(self, handle: str) -> bool:
        """Delete the payload under `handle` (short or full) with its index and alias; `True` if the payload existed."""
        handle = await self.resolve(handle)
        if not is_valid_handle(handle):
            return False
        deleted, _ = await self._transaction(
            lambda pipe: (pipe.delete(self._keys.payload(handle)), pipe.delete(self._keys.index(handle))), 'delete'
        )
        alias_keys = [self._keys.alias(short) for short in short_handles(handle)]
        await self._call(
            lambda client: client.register_script(_DROP_ALIAS_SCRIPT)(keys=alias_keys, args=[handle], client=client),
            'delete',
        )
        return bool(deleted)

    async def resolve(self, handle: str) -> str:
        """The full handle a short one stands for (`handle` itself when it is no known alias)."""
        handle = as_handle(handle)
        if not is_short_handle(handle):
            return handle
        alias_key = self._keys.alias(handle)
        stored = await self._call(lambda client: client.get(alias_key), 'read')
        if stored is None:
            return handle
        target = _as_bytes(stored).decode('utf-8', 'replace')
        return target if is_valid_handle(target) else handle

    async def aclose(self) -> None:
        """Close the connections this store opened from `url` in the running event loop.

        A `client` you passed stays open. Call it in every event loop that used the store (usually there
        is one), before that loop ends.
        """
        owned = self._owned.pop(asyncio.get_running_loop(), None)
        if owned is not None:
            await owned.aclose()

    # -- implementation --------------------------------------------------------------------------------

    def _expiry_ms(self) -> int | None:
        if self._ttl is None:
            return None
        return max(1, int(self._ttl.total_seconds() * 1000))

    def _redis(self) -> Redis:
        if self.client is not None:
            return self.client
        loop = asyncio.get_running_loop()
        client = self._owned.get(loop)
        if client is None:
            # A client made in another event loop cannot be used in this one: each loop gets its own.
            # redis-py's default pool refuses a connection past 100 (`MaxConnectionsError`): a worker spilling more
            # returns at once would send the rest to their fallback. A blocking pool makes them wait for one.
            pool = BlockingConnectionPool.from_url(  # pyright: ignore[reportUnknownMemberType]
                self.url or 'redis://localhost:6379/0',
                max_connections=_MAX_CONNECTIONS,
                timeout=self.socket_timeout,
                socket_timeout=self.socket_timeout,
                socket_connect_timeout=min(5.0, self.socket_timeout),
            )
            client = Redis.from_pool(pool)
            self._owned[loop] = client
        return client

    async def _call(self, operation: Callable[[Redis], Awaitable[_T]], what: str) -> _T:
        try:
            return await operation(self._redis())
        except (RedisError, OSError) as exc:
            raise StoreBackendError(
                f'RedisStore: the Redis server failed during {what} ({type(exc).__name__})'
            ) from exc

    async def _transaction(self, queue: Callable[[Any], object], what: str) -> list[Any]:
        """Run the commands `queue` adds to a `MULTI` pipeline; their replies, in order."""

        async def run(client: Redis) -> list[Any]:
            async with client.pipeline(transaction=True) as pipe:
                queue(pipe)
                return await pipe.execute()

        return await self._call(run, what)

    async def _create(self, client: Redis, handle: str, payload: bytes, index_value: bytes, expiry: int | None) -> str:
        """Store under the first candidate of `handle` that is free or holds the same bytes; that candidate."""
        script = client.register_script(_CREATE_SCRIPT)
        candidates = list(candidate_handles(handle))
        for start in range(0, len(candidates), _PROBE_BATCH):
            batch = candidates[start : start + _PROBE_BATCH]
            # One round trip to skip the candidates that hold a payload of another size without sending ours.
            async with client.pipeline(transaction=False) as pipe:
                for candidate in batch:
                    pipe.exists(self._keys.payload(candidate))
                    pipe.strlen(self._keys.payload(candidate))
                probes: list[Any] = await pipe.execute()
            for position, candidate in enumerate(batch):
                exists, length = probes[2 * position], probes[2 * position + 1]
                if exists and int(length) != len(payload):
                    continue
                shorts = list(short_handles(candidate))
                keys = [self._keys.payload(candidate), self._keys.index(candidate), *map(self._keys.alias, shorts)]
                args = [payload, index_value, '' if expiry is None else str(expiry), candidate]
                # redis-py leaves the script's reply untyped (8.x infers `Awaitable[Any]`): check its shape.
                reply: object = await script(keys=keys, args=args, client=client)
                match reply:
                    case [int() as outcome, int() as alias]:
                        if outcome >= 0:
                            return shorts[alias - 1] if alias > 0 else candidate
                    case _:
                        raise StoreBackendError(
                            f'RedisStore: the create script answered {reply!r:.80}, not two integers'
                        )
        raise ValueError(
            f'RedisStore: {MAX_CANDIDATES:,} different payloads are already stored under this key; '
            'not stored (delete old payloads or set cleanup_after)'
        )

    async def _rebuild_index(self, handle: str, size: int) -> LineIndex:
        builder = LineIndexBuilder()
        position = 0
        payload_key = self._keys.payload(handle)
        while position < size:
            end = min(size, position + _READ_BLOCK)
            block = await self.read_range(handle, position, end)
            if not block:
                break
            builder.feed(block)
            position += len(block)
        index = builder.finish()
        value = _INDEX_HEADER.pack(_INDEX_MAGIC, time.time()) + index.to_bytes()
        try:
            # Same remaining lifetime as the payload (PTTL is -1 without expiry, -2 when it just expired).
            remaining = await self._call(lambda client: client.pttl(payload_key), 'index')
            if int(remaining) == -1:
                await self._call(lambda client: client.set(self._keys.index(handle), value), 'index')
            elif int(remaining) > 0:
                await self._call(lambda client: client.set(self._keys.index(handle), value, px=int(remaining)), 'index')
        except StoreBackendError:
            pass  # The index is an optimisation: this call still has it.
        return index


def _parse_index(value: object) -> LineIndex | None:
    if not isinstance(value, bytes) or len(value) < _INDEX_HEADER.size:
        return None
    magic, _ = _INDEX_HEADER.unpack_from(value)
    if magic != _INDEX_MAGIC:
        return None
    try:
        return LineIndex.from_bytes(value[_INDEX_HEADER.size :])
    except ValueError:
        return None


def _written_at(header: object) -> float:
    if isinstance(header, bytes) and len(header) == _INDEX_HEADER.size:
        magic, written = _INDEX_HEADER.unpack(header)
        if magic == _INDEX_MAGIC:
            return float(written)
    return 0.0


def _as_bytes(value: bytes | str) -> bytes:
    # Only a client with decode_responses=True returns str, and the store refuses such a client.
    return value if isinstance(value, bytes) else value.encode('utf-8', 'surrogateescape')


def _glob_escape(text: str) -> str:
    return ''.join(f'\\{char}' if char in _GLOB_SPECIAL else char for char in text)
