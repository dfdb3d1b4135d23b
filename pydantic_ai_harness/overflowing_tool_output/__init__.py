"""Reduce oversized tool returns once, when they are produced: truncate, spill to a store, or summarize.

See [the guide](../overflowing-tool-output.md) for the concepts and examples.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._clash import require_pydantic_ai

if TYPE_CHECKING:
    from ._actions._bands import (
        Action,
        Band,
        Passthrough,
        Spill,
        Summarize,
        SummarizeFunc,
        Truncate,
        TruncationStrategy,
        default_bands,
    )
    from ._actions._summarize import DEFAULT_SUMMARY_PROMPT, OverflowConfigurationError
    from ._capability import OverflowingToolOutput
    from ._events import (
        OverflowAged,
        OverflowingToolOutputWarning,
        OverflowReduced,
        OverflowReport,
        OverflowRunSummary,
        overflow_report,
    )
    from ._media import PROVIDER_IMAGE_LIMITS, ImageBand, ProviderImageLimits
    from ._query_tools._names import GREP_TOOL_NAME, READ_TOOL_NAME
    from ._query_tools._tools import QueryLimits, build_query_toolset
    from ._redaction._secrets import SecretRedaction
    from ._request._aging import Aging
    from ._request._compaction import LosslessCompaction
    from ._request._step_budget import StepBudget
    from .stores import (
        DeletableStore,
        HandleNotFoundError,
        LineIndex,
        LineIndexedStore,
        ListableStore,
        LocalFileStore,
        MemoryStore,
        ObjectStore as ObjectStore,
        OverflowStore,
        PayloadTooLargeError,
        RangeReadableStore,
        RedisStore as RedisStore,
        ResolvableStore,
        StoreBackendError,
        StoreCleanupWarning,
        StoredPayload,
        StoreRootError,
        StreamedPayload,
        StreamWritableStore,
        WorkspaceSpill,
        WorkspaceSpillRefused,
        WorkspaceStore,
        build_line_index,
    )


__all__ = (
    'DEFAULT_SUMMARY_PROMPT',
    'GREP_TOOL_NAME',
    'PROVIDER_IMAGE_LIMITS',
    'READ_TOOL_NAME',
    'Action',
    'Aging',
    'Band',
    'DeletableStore',
    'HandleNotFoundError',
    'ImageBand',
    'LineIndex',
    'LineIndexedStore',
    'ListableStore',
    'LocalFileStore',
    'LosslessCompaction',
    'MemoryStore',
    'OverflowAged',
    'OverflowConfigurationError',
    'OverflowReduced',
    'OverflowReport',
    'OverflowRunSummary',
    'OverflowStore',
    'OverflowingToolOutput',
    'OverflowingToolOutputWarning',
    'Passthrough',
    'PayloadTooLargeError',
    'ProviderImageLimits',
    'QueryLimits',
    'RangeReadableStore',
    'ResolvableStore',
    'SecretRedaction',
    'Spill',
    'StepBudget',
    'StoreBackendError',
    'StoreCleanupWarning',
    'StoreRootError',
    'StoredPayload',
    'StreamWritableStore',
    'StreamedPayload',
    'Summarize',
    'SummarizeFunc',
    'Truncate',
    'TruncationStrategy',
    'WorkspaceSpill',
    'WorkspaceSpillRefused',
    'WorkspaceStore',
    'build_line_index',
    'build_query_toolset',
    'default_bands',
    'overflow_report',
)


_MODULES: dict[str, str] = {
    'Aging': '._request._aging',
    'Action': '._actions._bands',
    'Band': '._actions._bands',
    'Passthrough': '._actions._bands',
    'Spill': '._actions._bands',
    'Summarize': '._actions._bands',
    'SummarizeFunc': '._actions._bands',
    'Truncate': '._actions._bands',
    'TruncationStrategy': '._actions._bands',
    'default_bands': '._actions._bands',
    'OverflowingToolOutput': '._capability',
    'ImageBand': '._media',
    'PROVIDER_IMAGE_LIMITS': '._media',
    'ProviderImageLimits': '._media',
    'LosslessCompaction': '._request._compaction',
    'OverflowAged': '._events',
    'OverflowingToolOutputWarning': '._events',
    'OverflowReduced': '._events',
    'OverflowReport': '._events',
    'OverflowRunSummary': '._events',
    'overflow_report': '._events',
    'GREP_TOOL_NAME': '._query_tools._names',
    'READ_TOOL_NAME': '._query_tools._names',
    'SecretRedaction': '._redaction._secrets',
    'StepBudget': '._request._step_budget',
    'DEFAULT_SUMMARY_PROMPT': '._actions._summarize',
    'OverflowConfigurationError': '._actions._summarize',
    'QueryLimits': '._query_tools._tools',
    'build_query_toolset': '._query_tools._tools',
    'DeletableStore': '.stores',
    'HandleNotFoundError': '.stores',
    'LineIndex': '.stores',
    'LineIndexedStore': '.stores',
    'ListableStore': '.stores',
    'LocalFileStore': '.stores',
    'MemoryStore': '.stores',
    'OverflowStore': '.stores',
    'PayloadTooLargeError': '.stores',
    'RangeReadableStore': '.stores',
    'ResolvableStore': '.stores',
    'StoreBackendError': '.stores',
    'StoreCleanupWarning': '.stores',
    'StoredPayload': '.stores',
    'StoreRootError': '.stores',
    'StreamedPayload': '.stores',
    'StreamWritableStore': '.stores',
    'WorkspaceSpill': '.stores',
    'WorkspaceSpillRefused': '.stores',
    'WorkspaceStore': '.stores',
    'build_line_index': '.stores',
    'RedisStore': '.stores',
    'ObjectStore': '.stores',
}
"""Name -> the module it is imported from on first use.

Nothing is imported with the package: `import pydantic_ai_harness.overflowing_tool_output` stays cheap for the
operator CLI (`pyai-overflow`, which must not import pydantic-ai), and `RedisStore` / `ObjectStore` need their
extras only when used.
"""


def __getattr__(name: str) -> Any:
    try:
        module = _MODULES[name]
    except KeyError:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}') from None
    require_pydantic_ai()  # an ImportError naming the cause and the fix, where pydantic-ai's own would name neither
    value = getattr(importlib.import_module(module, __name__), name)
    if name in __all__:
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
