"""The store contract: the narrow base protocol and the optional extensions the query tools use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._line_index import LineIndex

__all__ = (
    'DeletableStore',
    'HandleNotFoundError',
    'LineIndexedStore',
    'ListableStore',
    'OverflowStore',
    'RangeReadableStore',
    'ResolvableStore',
    'StoreCleanupWarning',
    'StoredPayload',
    'StreamWritableStore',
    'StreamedPayload',
    'payload_size',
)


@runtime_checkable
class OverflowStore(Protocol):
    """Where spilled payloads live: the whole contract a custom backend must meet.

    `write` stores `data` under a store-chosen handle derived from `key` and returns the handle; `read`
    returns the exact bytes written under a handle. Handles are relative, backend-addressable strings
    (never absolute paths): the same handle must resolve in another process that has the same store.

    A handle that is unknown, expired or invalid must raise [`HandleNotFoundError`][pydantic_ai_harness.overflowing_tool_output.HandleNotFoundError]
    (or `KeyError` / `FileNotFoundError`, which the query tools treat the same way).

    A handle never changes its payload. Keys can repeat (the capability's key is
    `<run_id>/<tool_call_id>/<retry>`, and a model or provider may reuse a tool call id within a run), so
    `write` must never overwrite a stored payload with other bytes: when the key's handle already holds
    different bytes, return a distinct handle (the built-in stores try `<handle>~~2`, `<handle>~~3`, ...,
    which no key's handle contains); when it holds the same bytes, return that same handle, so durable
    replays and retries stay idempotent. Check and write in one atomic step (a create-if-absent
    primitive) so that concurrent writers never clobber each other.

    The built-in stores return a short alias of that handle (a 10-character id, recorded with the same
    never-replace rule) and accept either form on read; a custom store may return any handle it likes.
    """

    async def write(self, key: str, data: bytes) -> str:
        """Store `data` under a handle derived from `key` and return it; never replace another payload."""
        ...

    async def read(self, handle: str) -> bytes:
        """Return the exact bytes stored under `handle`."""
        ...


@runtime_checkable
class RangeReadableStore(Protocol):
    """Optional extension: size and byte-range reads, so the query tools stay O(window) on huge payloads."""

    async def size(self, handle: str) -> int:
        """The size in bytes of the payload stored under `handle`."""
        ...

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        """The bytes `[start, end)` of the payload under `handle` (clamped to its size)."""
        ...


@runtime_checkable
class LineIndexedStore(Protocol):
    """Optional extension, on top of `RangeReadableStore`: a line index, so a window at line N costs O(window).

    Build the index once at write time with
    [`build_line_index`][pydantic_ai_harness.overflowing_tool_output.build_line_index] and persist
    `LineIndex.to_bytes()` next to the payload. Without it, the query tools stream the payload once per
    call to find line positions (bounded memory, O(size) time).
    """

    async def line_index(self, handle: str) -> LineIndex:
        """The [`LineIndex`][pydantic_ai_harness.overflowing_tool_output.LineIndex] of the payload under `handle`."""
        ...


@dataclass(frozen=True)
class StreamedPayload:
    """What a [`StreamWritableStore`][pydantic_ai_harness.overflowing_tool_output.StreamWritableStore] wrote: the handle,
    and the line index it built on the way.
    """

    handle: str
    """The handle the payload is read back with (the same rules as `OverflowStore.write`'s)."""

    index: LineIndex
    """The line index of exactly the bytes written, built while they streamed past."""


@runtime_checkable
class StreamWritableStore(Protocol):
    """Optional extension: write a payload from pieces, so a large one is never held in memory as one `bytes`.

    The capability uses it for large text payloads: it encodes the text piece by piece (each piece ends at a line
    end) while scanning it for the preview beside the write. Same contract as `OverflowStore.write`: never replace
    another payload, return the same handle for the same bytes. `pieces` may be iterated in a worker thread, and
    only once. Stores without this method are written with `write(key, data)`.
    """

    async def write_stream(self, key: str, pieces: Iterable[bytes]) -> StreamedPayload:
        """Store the concatenation of `pieces` under a handle derived from `key`; its handle and line index."""
        ...


class PayloadReader(Protocol):
    """One payload opened for a scan: blocking reads (from a worker thread), then `close`."""

    def read_into(self, buffer: bytearray, start: int, end: int) -> None:
        """Make `buffer` the bytes `[start, end)` of the payload, clamped to its size (it is resized to fit)."""
        ...

    def close(self) -> None:
        """Release what the reader holds (idempotent)."""
        ...


@runtime_checkable
class OpenableStore(Protocol):
    """Internal extension (the local stores): open a payload once for the many block reads of one grep call.

    Not exported: a store without it is read through `RangeReadableStore.read_range`, one call per block.
    """

    async def open_reader(self, handle: str) -> PayloadReader:
        """The payload under `handle`, opened; `HandleNotFoundError` when there is none."""
        ...


@dataclass(frozen=True)
class StoredPayload:
    """One payload as listed by a [`ListableStore`][pydantic_ai_harness.overflowing_tool_output.ListableStore]."""

    handle: str
    """The handle the payload is read back with."""

    size: int
    """Its size in bytes."""

    modified: float
    """When it was written, as a POSIX timestamp."""


@runtime_checkable
class ListableStore(Protocol):
    """Optional extension: enumerate stored payloads (used by the operator CLI)."""

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        """The payloads whose handle starts with `prefix`."""
        ...


@runtime_checkable
class DeletableStore(Protocol):
    """Optional extension: delete a payload."""

    async def delete(self, handle: str) -> bool:
        """Delete the payload under `handle`; `True` if something was deleted."""
        ...


@runtime_checkable
class ResolvableStore(Protocol):
    """Optional extension: a store whose `write` returns a short alias tells which full handle it stands for.

    The built-in stores return a short id (`k3x9m2p7qd`) and keep the full handle (`<run id>/<tool call id>/0`)
    under it; their reads accept either. The operator CLI and the query tools use `resolve` to show both.
    """

    async def resolve(self, handle: str) -> str:
        """The full handle `handle` stands for, or `handle` itself when it is not a known alias."""
        ...


class HandleNotFoundError(LookupError):
    """Raised by a store for a handle that is unknown, expired or not valid for it.

    The message never contains a filesystem path: it may be shown to a model.
    """


class StoreCleanupWarning(UserWarning):
    """Pruning a store failed in part (a file it could not delete, a backend error).

    Pruning never raises into an agent run: [`LocalFileStore`][pydantic_ai_harness.overflowing_tool_output.LocalFileStore]
    and `ObjectStore` report its failures with this warning class.
    """


async def payload_size(store: OverflowStore, handle: str) -> int:
    """The bytes `store` holds under `handle` (its `size` where it has one, else the length of a whole read); raises
    as `read` does when there is nothing under it.
    """
    if isinstance(store, RangeReadableStore):
        return await store.size(handle)
    return len(await store.read(handle))
