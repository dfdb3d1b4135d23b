"""Where spilled payloads live: the `OverflowStore` protocol, its optional extensions and the stores.

`LocalFileStore` needs nothing extra. `RedisStore` (extra `redis`) and `ObjectStore` (extra `s3`) are
imported on first use (`from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore`), so
importing this package never requires `redis` or `obstore`; they are left out of `__all__` so that a star
import does not need them either.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._line_index import LineIndex, LineIndexBuilder, build_line_index
from ._local import LocalFileStore, StoreRootError
from ._memory import MemoryStore
from ._protocol import (
    DeletableStore,
    HandleNotFoundError,
    LineIndexedStore,
    ListableStore,
    OverflowStore,
    RangeReadableStore,
    ResolvableStore,
    StoreCleanupWarning,
    StoredPayload,
    StreamedPayload,
    StreamWritableStore,
)
from ._remote import PayloadTooLargeError, StoreBackendError
from ._workspace import WorkspaceSpill, WorkspaceSpillRefused, WorkspaceStore

if TYPE_CHECKING:
    from ._object import ObjectStore as ObjectStore
    from ._redis import RedisStore as RedisStore

__all__ = (
    'DeletableStore',
    'HandleNotFoundError',
    'LineIndex',
    'LineIndexBuilder',
    'LineIndexedStore',
    'ListableStore',
    'LocalFileStore',
    'MemoryStore',
    'OverflowStore',
    'PayloadTooLargeError',
    'RangeReadableStore',
    'ResolvableStore',
    'StoreBackendError',
    'StoreCleanupWarning',
    'StoreRootError',
    'StoredPayload',
    'StreamWritableStore',
    'StreamedPayload',
    'WorkspaceSpill',
    'WorkspaceSpillRefused',
    'WorkspaceStore',
    'build_line_index',
)

_LAZY: dict[str, tuple[str, str, str]] = {
    'RedisStore': ('._redis', 'redis', 'redis'),
    'ObjectStore': ('._object', 'obstore', 's3'),
}
"""Name -> (module, the third-party package it needs, the extra that installs it)."""


def __getattr__(name: str) -> Any:
    try:
        module_name, package, extra = _LAZY[name]
    except KeyError:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}') from None
    try:
        module = importlib.import_module(module_name, __name__)
    except ModuleNotFoundError as exc:
        if exc.name != package and not (exc.name or '').startswith(f'{package}.'):
            raise
        raise ImportError(
            f'{name} needs the `{package}` package: pip install "pydantic-ai-harness-context[{extra}]"'
        ) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value
