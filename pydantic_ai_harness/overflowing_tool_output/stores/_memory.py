"""`MemoryStore`: spilled payloads in a dict of this process, for tests (as httpx ships `MockTransport`).

It meets the whole store contract (never replace a payload, the same handle for the same bytes) and its optional
extensions, counts every call, and can be told to misbehave the ways a real backend does: fail, hang, answer late,
refuse a payload over a size. `base_protocol()` is the same store with only `write` and `read`, as a third-party
backend is often written, so the capability's paths for such a store are tested too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from ._line_index import LineIndex, build_line_index
from ._paths import MAX_CANDIDATES, candidate_handles
from ._protocol import HandleNotFoundError, StoredPayload
from ._remote import PayloadTooLargeError

__all__ = ('MemoryStore',)


@dataclass
class MemoryStore:
    """Spilled payloads in memory, with the call counts and faults a test needs.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import MemoryStore, OverflowingToolOutput

    store = MemoryStore()
    capability = OverflowingToolOutput(store=store)  # later: store.writes, store.payloads
    hung = OverflowingToolOutput(store=MemoryStore(hang=True))  # every write waits until its timeout cancels it
    ```
    """

    payloads: dict[str, bytes] = field(default_factory=dict[str, bytes])
    """The stored payloads by handle (the key itself, or `key~~2`, `~~3` when the key holds other bytes)."""

    fail: Exception | None = None
    """Raised by every write (and every read with `fail_reads`), as a backend that is down raises."""

    fail_reads: bool = False
    """Whether `fail` is raised by reads too."""

    hang: bool = False
    """Every write waits for ever (until a timeout cancels it), as a backend that stopped answering."""

    hang_reads: bool = False
    """Every read waits for ever too."""

    delay: float = 0.0
    """Seconds every call waits before it answers."""

    max_bytes: int | None = None
    """A payload larger than this is refused with `PayloadTooLargeError`."""

    writes: int = field(default=0, init=False)
    """Calls to `write` so far (refused and hung ones included)."""

    reads: int = field(default=0, init=False)
    """Calls that read a payload (`read`, `size`, `read_range`, `line_index`) so far."""

    written_at: dict[str, float] = field(default_factory=dict[str, float], init=False, repr=False)
    """When each payload was written (POSIX seconds), for `list`."""

    async def write(self, key: str, data: bytes) -> str:
        """Store `data` under the first handle of `key` that is free or holds the same bytes; that handle."""
        self.writes += 1
        await self._wait()
        if self.hang:
            await anyio.sleep_forever()
        if self.fail is not None:
            raise self.fail
        if self.max_bytes is not None and len(data) > self.max_bytes:
            raise PayloadTooLargeError(f'MemoryStore: {len(data):,} bytes is over max_bytes ({self.max_bytes:,})')
        for handle in candidate_handles(key):
            held = self.payloads.get(handle)
            if held is None or held == data:
                self.payloads[handle] = bytes(data)
                self.written_at[handle] = time.time()
                return handle
        raise ValueError(f'MemoryStore: {MAX_CANDIDATES:,} different payloads are already stored under this key')

    async def read(self, handle: str) -> bytes:
        """The bytes under `handle`; `HandleNotFoundError` when there are none."""
        return await self._payload(handle)

    async def size(self, handle: str) -> int:
        """The size of the payload under `handle`."""
        return len(await self._payload(handle))

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        """The bytes `[start, end)` of the payload under `handle`, clamped to it."""
        return (await self._payload(handle))[max(0, start) : max(0, end)]

    async def line_index(self, handle: str) -> LineIndex:
        """The line index of the payload under `handle` (built on each call: a test store keeps no sidecar)."""
        return build_line_index(await self._payload(handle))

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        """The payloads whose handle starts with `prefix`, by handle."""
        return [
            StoredPayload(handle, len(data), self.written_at.get(handle, 0.0))
            for handle, data in sorted(self.payloads.items())
            if handle.startswith(prefix)
        ]

    async def delete(self, handle: str) -> bool:
        """Forget the payload under `handle`; whether there was one."""
        self.written_at.pop(handle, None)
        return self.payloads.pop(handle, None) is not None

    def base_protocol(self) -> BaseProtocolStore:
        """This store as a backend with only `write` and `read` (no range reads, index, listing or deleting)."""
        return BaseProtocolStore(self)

    async def _payload(self, handle: str) -> bytes:
        self.reads += 1
        await self._wait()
        if self.hang_reads:
            await anyio.sleep_forever()
        if self.fail is not None and self.fail_reads:
            raise self.fail
        data = self.payloads.get(handle)
        if data is None:
            raise HandleNotFoundError('no stored payload under this handle')
        return data

    async def _wait(self) -> None:
        if self.delay:
            await anyio.sleep(self.delay)


@dataclass(frozen=True)
class BaseProtocolStore:
    """A `MemoryStore` seen through the base protocol only: `write` and `read`."""

    store: MemoryStore
    """The store it reads and writes."""

    async def write(self, key: str, data: bytes) -> str:
        """`MemoryStore.write`."""
        return await self.store.write(key, data)

    async def read(self, handle: str) -> bytes:
        """`MemoryStore.read`."""
        return await self.store.read(handle)
