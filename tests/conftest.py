from __future__ import annotations

import os

import pytest
from pydantic_ai import models

models.ALLOW_MODEL_REQUESTS = False
# Seed and docs examples build `Agent('openai:gpt-4o')` verbatim; constructing needs a key, and
# `ALLOW_MODEL_REQUESTS = False` guarantees no request is ever sent.
os.environ.setdefault('OPENAI_API_KEY', 'sk-test-not-a-real-key')


@pytest.fixture(scope='session')
def anyio_backend() -> str:
    return 'asyncio'
