from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The test's own payloads moved out of the collector's reach, so a collection pause is not timed."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
