"""Where spilled payloads live: the `OverflowStore` protocol, its optional extensions and the stores.

Every name is imported on first use, so `pyai-overflow` (the operator CLI) starts without pydantic-ai, which the
workspace stores need, and importing this package never requires `redis` or `obstore`: `RedisStore` (extra `redis`)
and `ObjectStore` (extra `object-store`) need them only when used
(`from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore`); they are left out of `__all__` so
that a star import does not need them either.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..._clash import warn_on_clash

if TYPE_CHECKING:
    from ._line_index import LineIndex, LineIndexBuilder, build_line_index
    from ._local import LocalFileStore, StoreRootError
    from ._memory import MemoryStore
    from ._object import ObjectStore as ObjectStore
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
    from ._redis import RedisStore as RedisStore
    from ._remote import PayloadTooLargeError, StoreBackendError
    from ._workspace import WorkspaceSpill, WorkspaceSpillRefused, WorkspaceStore

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

_MODULES = {
    'LineIndex': '._line_index',
    'LineIndexBuilder': '._line_index',
    'build_line_index': '._line_index',
    'LocalFileStore': '._local',
    'StoreRootError': '._local',
    'MemoryStore': '._memory',
    'DeletableStore': '._protocol',
    'HandleNotFoundError': '._protocol',
    'LineIndexedStore': '._protocol',
    'ListableStore': '._protocol',
    'OverflowStore': '._protocol',
    'RangeReadableStore': '._protocol',
    'ResolvableStore': '._protocol',
    'StoreCleanupWarning': '._protocol',
    'StoredPayload': '._protocol',
    'StreamedPayload': '._protocol',
    'StreamWritableStore': '._protocol',
    'PayloadTooLargeError': '._remote',
    'StoreBackendError': '._remote',
    'WorkspaceSpill': '._workspace',
    'WorkspaceSpillRefused': '._workspace',
    'WorkspaceStore': '._workspace',
}
"""Name -> the module it is imported from on first use (the names that need no extra)."""

_EXTRAS: dict[str, tuple[str, str, str]] = {
    'RedisStore': ('._redis', 'redis', 'redis>=5'),
    'ObjectStore': ('._object', 'obstore', 'obstore>=0.6'),
}
"""Name -> (module, the third-party package it needs, the requirement that installs it)."""

# Upstream `pydantic-ai-harness` ships no `stores`: this package is ours whichever was installed last.
warn_on_clash()


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = getattr(importlib.import_module(_MODULES[name], __name__), name)
        globals()[name] = value
        return value
    try:
        module_name, package, requirement = _EXTRAS[name]
    except KeyError:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}') from None
    try:
        module = importlib.import_module(module_name, __name__)
    except ModuleNotFoundError as exc:
        if exc.name != package and not (exc.name or '').startswith(f'{package}.'):
            raise
        extra = 'object-store' if package == 'obstore' else package
        raise ImportError(
            f"{name} needs the `{package}` package: pip install '{requirement}' (the `{extra}` extra of "
            'pydantic-ai-harness-context installs it)'
        ) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
