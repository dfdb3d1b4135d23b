"""Where spilled payloads live: the `OverflowStore` protocol, its optional extensions and `LocalFileStore`."""

from __future__ import annotations

from ._line_index import LineIndex, LineIndexBuilder, build_line_index
from ._local import LocalFileStore, StoreCleanupWarning, StoreRootError
from ._protocol import (
    DeletableStore,
    HandleNotFoundError,
    LineIndexedStore,
    ListableStore,
    OverflowStore,
    RangeReadableStore,
    StoredPayload,
)

__all__ = (
    'DeletableStore',
    'HandleNotFoundError',
    'LineIndex',
    'LineIndexBuilder',
    'LineIndexedStore',
    'ListableStore',
    'LocalFileStore',
    'OverflowStore',
    'RangeReadableStore',
    'StoreCleanupWarning',
    'StoreRootError',
    'StoredPayload',
    'build_line_index',
)
