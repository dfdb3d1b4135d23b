"""Reduce oversized tool returns once, when they are produced: truncate, spill to a store, or summarize.

See [the guide](../overflowing-tool-output.md) for the concepts and examples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import stores as _stores
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
    OverflowStore,
    PayloadTooLargeError,
    RangeReadableStore,
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

if TYPE_CHECKING:
    from .stores import ObjectStore as ObjectStore, RedisStore as RedisStore

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


def __getattr__(name: str) -> Any:
    # `RedisStore` and `ObjectStore` need their extras; they are imported on first use, like in `.stores`.
    if name in ('RedisStore', 'ObjectStore'):
        return getattr(_stores, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
