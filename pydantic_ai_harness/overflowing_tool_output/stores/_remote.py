"""What the networked stores (`RedisStore`, `ObjectStore`) share: handle checks, namespaces and their errors.

Both stores lay their data out as `<namespace><sep>~p<sep><handle>` (the payload),
`<namespace><sep>~i<sep><handle>` (its line index) and `<namespace><sep>~a<sep><short id>` (the alias the model
sees, holding the full handle); `ObjectStore` appends `@` to every name. A namespace may not contain `~` and a handle is
checked against the alphabet `handle_for_key` produces, so:

- two distinct keys give two distinct handles (`handle_for_key` is injective), hence two distinct names;
- a handle can only name something under its own store's `<namespace><sep>~p<sep>`: if the names of two
  namespaces `A` and `B` overlapped, the longer one would have to contain `<sep>~p<sep>`, and a
  namespace never contains `~`. So a handle cannot reach another application's data, even when one
  namespace is a prefix of the other (`app` and `app:eu`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._paths import handle_for_key, is_valid_handle
from ._protocol import HandleNotFoundError

__all__ = (
    'ALIAS_MARKER',
    'INDEX_MARKER',
    'NOT_FOUND',
    'PAYLOAD_MARKER',
    'KeyLayout',
    'PayloadTooLargeError',
    'StoreBackendError',
    'check_namespace',
    'is_valid_handle',
    'prepared_write',
    'too_large',
)

NOT_FOUND = 'no stored payload under this handle'
"""The one message every unknown, expired or invalid handle gets: it reveals nothing about the backend."""

PAYLOAD_MARKER = '~p'
"""The namespace component under which payloads live."""

INDEX_MARKER = '~i'
"""The namespace component under which line indexes live."""

ALIAS_MARKER = '~a'
"""The namespace component under which short-handle aliases live (each holds the full handle it stands for)."""

_NAMESPACE_CHARS = re.compile(r'[A-Za-z0-9_.:/-]+')


class PayloadTooLargeError(ValueError):
    """A payload is larger than the store's `max_bytes`.

    Raised by `write`; the capability turns it into its `then` fallback (a truncation by default) and
    warns, so the run goes on with a bounded result instead of filling the store.
    """


class StoreBackendError(OSError):
    """The backend (a Redis server, an object store) failed or could not be reached.

    The message names the store and the error type only, never a server address, bucket, path or
    credential: it may end up in front of a model. The original exception is kept as `__cause__`
    for your logs.
    """


def check_namespace(namespace: str, *, separator: str, what: str) -> str:
    """Validate a namespace (Redis key prefix or object path prefix) and return it without edge separators.

    Allowed: letters, digits, `_ . : / -`; no `~` (the marker character), no empty, `.` or `..` component.

    Raises:
        ValueError: The namespace is not allowed (the message says why; it is configuration, not model input).
    """
    cleaned = namespace.strip(separator)
    if not cleaned or _NAMESPACE_CHARS.fullmatch(cleaned) is None:
        raise ValueError(f'{what} {namespace!r} is not valid: use letters, digits and `_ . : / -` (no `~`, no spaces)')
    if any(part in ('', '.', '..') for part in cleaned.split(separator)):
        raise ValueError(f'{what} {namespace!r} is not valid: it has an empty, `.` or `..` component')
    return cleaned


def too_large(size: int, max_bytes: int | None, store: str) -> PayloadTooLargeError | None:
    """The error to raise when a `size`-byte payload exceeds `max_bytes`, else `None`."""
    if max_bytes is None or size <= max_bytes:
        return None
    return PayloadTooLargeError(
        f"{store}: the payload is {size:,} bytes, over this store's max_bytes of {max_bytes:,}; not stored"
    )


@dataclass(frozen=True)
class KeyLayout:
    """Where a networked store keeps what it stores: `<namespace><sep><marker><sep><name><suffix>`.

    `RedisStore` uses `:` and no suffix; `ObjectStore` uses `/` and the suffix `@` (so the object for
    `run/call/0` never collides with the directory `run/call/0/` a file-system backend needs for `run/call/0/x`).
    """

    namespace: str
    """The checked namespace (`check_namespace`)."""

    separator: str
    """Between the namespace, the marker and the name."""

    suffix: str = ''
    """Ends every name."""

    @classmethod
    def checked(cls, namespace: str, separator: str, *, what: str, suffix: str = '') -> KeyLayout:
        """The layout under `namespace`, once `check_namespace` accepted it (a `ValueError` naming `what` if not)."""
        return cls(check_namespace(namespace, separator=separator, what=what), separator, suffix)

    def base(self, marker: str) -> str:
        """The prefix every name under `marker` starts with (`<namespace><sep><marker><sep>`)."""
        return f'{self.namespace}{self.separator}{marker}{self.separator}'

    def payload(self, handle: str) -> str:
        """The name of the payload stored under `handle`."""
        return f'{self.base(PAYLOAD_MARKER)}{handle}{self.suffix}'

    def index(self, handle: str) -> str:
        """The name of the line index of the payload under `handle`."""
        return f'{self.base(INDEX_MARKER)}{handle}{self.suffix}'

    def alias(self, short: str) -> str:
        """The name of the alias `short`, which holds the full handle it stands for."""
        return f'{self.base(ALIAS_MARKER)}{short}{self.suffix}'

    def checked_payload(self, handle: str) -> str:
        """`payload(handle)` for a valid handle; `HandleNotFoundError` for anything else (a model may send it)."""
        if not is_valid_handle(handle):
            raise HandleNotFoundError(NOT_FOUND)
        return self.payload(handle)

    def handle_of(self, name: str, marker: str = PAYLOAD_MARKER) -> str | None:
        """The handle (or short id) a name under `marker` stands for, or `None` when the name is not one of ours."""
        base = self.base(marker)
        if not name.startswith(base) or not name.endswith(self.suffix):
            return None
        handle = name[len(base) : len(name) - len(self.suffix)]
        return handle if is_valid_handle(handle) else None


def prepared_write(key: str, data: bytes, max_bytes: int | None, store: str) -> tuple[str, bytes]:
    """The handle for `key` and `data` as `bytes`, once `data` is known to fit `max_bytes`.

    Raises:
        PayloadTooLargeError: `data` is larger than `max_bytes`.
    """
    payload = bytes(data) if isinstance(data, (bytearray, memoryview)) else data
    error = too_large(len(payload), max_bytes, store)
    if error is not None:
        raise error
    return handle_for_key(key), payload
