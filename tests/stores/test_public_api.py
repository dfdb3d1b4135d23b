"""The stores package's public names: a change here is a change of the public API."""

from __future__ import annotations

from inline_snapshot import snapshot

from pydantic_ai_harness.overflowing_tool_output import stores


def test_stores_all_is_pinned() -> None:
    assert stores.__all__ == snapshot(
        (
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
    )
    for name in stores.__all__:
        assert getattr(stores, name).__module__.startswith('pydantic_ai_harness.overflowing_tool_output.stores.')


def test_the_optional_stores_are_importable_by_name() -> None:
    # Left out of `__all__` so a star import does not need redis or obstore; still importable by name.
    assert stores.RedisStore.__name__ == 'RedisStore'
    assert stores.ObjectStore.__name__ == 'ObjectStore'
