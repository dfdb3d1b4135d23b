"""The public names of each package, pinned: a name added, renamed or dropped is a decision, made here."""

from __future__ import annotations

from inline_snapshot import snapshot

import pydantic_ai_harness
from pydantic_ai_harness import overflowing_tool_output


def test_the_top_level_package_exports() -> None:
    assert sorted(pydantic_ai_harness.__all__) == snapshot(['__version__'])


def test_overflowing_tool_output_exports() -> None:
    assert sorted(overflowing_tool_output.__all__) == snapshot(
        [
            'Action',
            'Aging',
            'Band',
            'DEFAULT_SUMMARY_PROMPT',
            'DeletableStore',
            'GREP_TOOL_NAME',
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
            'PROVIDER_IMAGE_LIMITS',
            'Passthrough',
            'PayloadTooLargeError',
            'ProviderImageLimits',
            'QueryLimits',
            'READ_TOOL_NAME',
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
        ]
    )


def test_every_exported_name_is_importable() -> None:
    for module in (pydantic_ai_harness, overflowing_tool_output):
        for name in module.__all__:
            assert getattr(module, name) is not None, f'{module.__name__}.{name}'
