"""Fixtures of the DBOS tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A SQLite system database for DBOS in the test's directory; store writes counted in `writes.log` there."""
    from dbos import DBOS

    from ._step_budget_app import COUNTER_ENV

    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / 'writes.log'))
    yield f'sqlite:///{tmp_path / "dbos.sqlite"}'
    DBOS.destroy(destroy_registry=True)
