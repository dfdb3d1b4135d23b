"""Reduce oversized tool returns once, when they are produced: truncate, spill to a store, or summarize.

See [the guide](../overflowing-tool-output.md) for the concepts and examples.
"""

from __future__ import annotations

from ._bands import Action, Band, Passthrough, Spill, Summarize, SummarizeFunc, Truncate, TruncationStrategy
from ._capability import DEFAULT_SUMMARY_PROMPT, OverflowingToolOutput, OverflowingToolOutputWarning, default_bands
from ._summarize import OverflowConfigurationError
from .stores import (
    DeletableStore,
    HandleNotFoundError,
    ListableStore,
    LocalFileStore,
    OverflowStore,
    RangeReadableStore,
    StoredPayload,
)

__all__ = (
    'DEFAULT_SUMMARY_PROMPT',
    'Action',
    'Band',
    'DeletableStore',
    'HandleNotFoundError',
    'ListableStore',
    'LocalFileStore',
    'OverflowConfigurationError',
    'OverflowStore',
    'OverflowingToolOutput',
    'OverflowingToolOutputWarning',
    'Passthrough',
    'RangeReadableStore',
    'Spill',
    'StoredPayload',
    'Summarize',
    'SummarizeFunc',
    'Truncate',
    'TruncationStrategy',
    'default_bands',
)
