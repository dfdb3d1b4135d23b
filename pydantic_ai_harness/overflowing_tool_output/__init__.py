"""Reduce oversized tool returns once, when they are produced: truncate, spill to a store, or summarize.

See [the guide](../overflowing-tool-output.md) for the concepts and examples.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._clash import require_pydantic_ai

if TYPE_CHECKING:
    from ._aging import Aging
    from ._bands import (
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
    from ._capability import OverflowingToolOutput
    from ._compaction import LosslessCompaction
    from ._events import (
        OverflowAged,
        OverflowingToolOutputWarning,
        OverflowReduced,
        OverflowReport,
        OverflowRunSummary,
        overflow_report,
    )
    from ._names import GREP_TOOL_NAME, READ_TOOL_NAME
    from ._secrets import SecretRedaction
    from ._step_budget import StepBudget
    from ._summarize import DEFAULT_SUMMARY_PROMPT, OverflowConfigurationError
    from ._tools import QueryLimits, build_query_toolset
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
    'READ_TOOL_NAME',
    'Action',
    'Aging',
    'Band',
    'DeletableStore',
    'HandleNotFoundError',
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
    'Aging': '._aging',
    'Action': '._bands',
    'Band': '._bands',
    'Passthrough': '._bands',
    'Spill': '._bands',
    'Summarize': '._bands',
    'SummarizeFunc': '._bands',
    'Truncate': '._bands',
    'TruncationStrategy': '._bands',
    'default_bands': '._bands',
    'OverflowingToolOutput': '._capability',
    'LosslessCompaction': '._compaction',
    'OverflowAged': '._events',
    'OverflowingToolOutputWarning': '._events',
    'OverflowReduced': '._events',
    'OverflowReport': '._events',
    'OverflowRunSummary': '._events',
    'overflow_report': '._events',
    'GREP_TOOL_NAME': '._names',
    'READ_TOOL_NAME': '._names',
    'SecretRedaction': '._secrets',
    'StepBudget': '._step_budget',
    'DEFAULT_SUMMARY_PROMPT': '._summarize',
    'OverflowConfigurationError': '._summarize',
    'QueryLimits': '._tools',
    'build_query_toolset': '._tools',
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
