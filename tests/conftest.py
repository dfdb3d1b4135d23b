from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from pydantic_ai import models

models.ALLOW_MODEL_REQUESTS = False
# Seed and docs examples build `Agent('openai:gpt-4o')` verbatim; constructing needs a key, and
# `ALLOW_MODEL_REQUESTS = False` guarantees no request is ever sent.
os.environ.setdefault('OPENAI_API_KEY', 'sk-test-not-a-real-key')

USER_TEMP_DIR = tempfile.gettempdir()
"""The temp directory of whoever runs the suite; its `pyai_harness_overflow-<uid>` is their real default root."""

SESSION_TEMP_DIR = tempfile.mkdtemp(prefix='pyai-harness-tests-')
"""A private temp directory for the whole run, removed at its end.

Everything that asks for the temp directory during the run gets this one instead, in this process
(`tempfile.tempdir`) and in every child (`TMPDIR`): pytest's `tmp_path`, servers' data dirs, and
`LocalFileStore()`'s default root. So the suite never writes into the user's default root. Mode 0711
lets the fault test that drops to user `nobody` reach a directory inside it whose name it is given.
"""
os.chmod(SESSION_TEMP_DIR, 0o711)
os.environ['TMPDIR'] = SESSION_TEMP_DIR
tempfile.tempdir = SESSION_TEMP_DIR


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(SESSION_TEMP_DIR, ignore_errors=True)


@pytest.fixture(scope='session')
def anyio_backend() -> str:
    return 'asyncio'
