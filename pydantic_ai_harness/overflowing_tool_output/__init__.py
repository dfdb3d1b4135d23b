"""Reduce oversized tool returns once, when they are produced: truncate, spill to a store, or summarize.

See [the guide](../overflowing-tool-output.md) for the concepts and examples.
"""

from __future__ import annotations

from ._bands import Action, Band, Passthrough, Spill, Summarize, SummarizeFunc, Truncate, TruncationStrategy
from ._capability import DEFAULT_SUMMARY_PROMPT, OverflowingToolOutput, OverflowingToolOutputWarning, default_bands
from ._events import OverflowReduced, OverflowReport, OverflowRunSummary, overflow_report
from ._summarize import OverflowConfigurationError
from ._tools import QueryLimits, build_query_toolset
from .stores import (
    DeletableStore,
    HandleNotFoundError,
    LineIndex,
    LineIndexedStore,
    ListableStore,
    LocalFileStore,
    OverflowStore,
    RangeReadableStore,
    StoreCleanupWarning,
    StoredPayload,
    StoreRootError,
    build_line_index,
)

__all__ = (
    'DEFAULT_SUMMARY_PROMPT',
    'Action',
    'Band',
    'DeletableStore',
    'HandleNotFoundError',
    'LineIndex',
    'LineIndexedStore',
    'ListableStore',
    'LocalFileStore',
    'OverflowConfigurationError',
    'OverflowReduced',
    'OverflowReport',
    'OverflowRunSummary',
    'OverflowStore',
    'OverflowingToolOutput',
    'OverflowingToolOutputWarning',
    'Passthrough',
    'QueryLimits',
    'RangeReadableStore',
    'Spill',
    'StoreCleanupWarning',
    'StoreRootError',
    'StoredPayload',
    'Summarize',
    'SummarizeFunc',
    'Truncate',
    'TruncationStrategy',
    'build_line_index',
    'build_query_toolset',
    'default_bands',
    'overflow_report',
)
