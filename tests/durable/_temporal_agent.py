"""The Temporal agent, at module level as workers need it, imported passed through the workflow sandbox.

Its store lives in `$OVERFLOW_TEMPORAL_STORE` (the tests set it before importing, so a crashing child worker
and the worker that recovers share one store), or a fresh temporary directory.
"""

from __future__ import annotations

import os
import tempfile
from datetime import timedelta

from pydantic_ai.durable_exec.temporal import TemporalDurability
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig

from ._app import build_agent

STORE_ENV = 'OVERFLOW_TEMPORAL_STORE'
STORE_DIR = os.environ.get(STORE_ENV) or tempfile.mkdtemp(prefix='overflow-temporal-store-')


def _durability() -> TemporalDurability[None]:
    # Short, so an activity whose worker died is retried soon: every activity here takes milliseconds.
    return TemporalDurability(
        activity_config=ActivityConfig(
            start_to_close_timeout=timedelta(seconds=4),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
        )
    )


agent = build_agent(STORE_DIR, _durability())

inline_agent = build_agent(STORE_DIR, _durability(), inline_ops=True, name='overflow_inline_agent')
"""The negative control: the capability's operations overridden by plain methods, so they run in workflow code."""
