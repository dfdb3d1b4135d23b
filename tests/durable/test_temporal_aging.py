"""Aging and the search without a handle under Temporal, on the time-skipping test server."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

pytest.importorskip(
    'temporalio', reason='temporalio is not installed: pip install "pydantic-ai-harness-context[durable]"'
)

from pydantic_ai import RunContext
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from pydantic_ai_harness.overflowing_tool_output._query_tools._handles import CARRIED_BYTES
from pydantic_ai_harness.overflowing_tool_output.temporal import OverflowTemporalRunContext

from ._temporal_aging import FACT
from ._temporal_aging_workflow import AgingWorkflow, PlainContextAgingWorkflow
from .test_temporal import TEST_SERVER

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

WORKFLOWS = [AgingWorkflow, PlainContextAgingWorkflow]


@pytest.fixture
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), plugins=[PydanticAIPlugin()]
    )
    async with environment:
        yield environment


async def run(env: WorkflowEnvironment, workflow: type[AgingWorkflow | PlainContextAgingWorkflow]) -> tuple[str, bool]:
    task_queue = f'aging-{uuid.uuid4()}'
    async with Worker(env.client, task_queue=task_queue, workflows=WORKFLOWS):
        handle = await env.client.start_workflow(
            workflow.run,
            args=['go', f'run-{uuid.uuid4()}'],
            id=f'aging-{uuid.uuid4()}',
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=30),
        )
        output = await handle.result()
    replay = await Replayer(workflows=WORKFLOWS, plugins=[PydanticAIPlugin()]).replay_workflow(
        await handle.fetch_history()
    )
    return output, replay.replay_failure is None


async def test_old_returns_age_in_the_workflow_and_one_search_finds_a_fact_in_them(env: WorkflowEnvironment) -> None:
    output, replayed = await run(env, AgingWorkflow)
    stubs, answer = output.split('\n', 1)
    assert int(stubs.removesuffix(' stubs')) >= 4  # the old pages were aged in the workflow, written by activities
    assert FACT in answer  # found in an aged page by a search without a handle, run in an activity
    assert replayed  # the same aging decisions and handles on replay


async def test_without_the_handles_the_search_tells_the_model_to_pass_one(
    env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    output, replayed = await run(env, PlainContextAgingWorkflow)
    assert FACT not in output
    assert "cannot see this conversation's stored results here. Pass the handle" in output
    assert 'run_context_type=OverflowTemporalRunContext' in caplog.text
    assert replayed


def test_the_carried_handles_are_the_newest_thousand_at_about_100_bytes_each() -> None:
    """What `OverflowTemporalRunContext` adds to each activity's payload is bounded, as the docs say."""
    run_id = str(uuid.uuid4())
    messages = [
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'fetch_page',
                    'preview',
                    f'call_{n:024d}',
                    metadata={'overflow_handle': f'h{n:09d}', 'overflow_key': f'{run_id}/call_{n:024d}/0'},
                )
            ]
        )
        for n in range(1_500)
    ]
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), messages=list[ModelMessage](messages))
    carried = OverflowTemporalRunContext.serialize_run_context(ctx)['overflow_handles']
    assert len(carried) == 1_000
    assert [item[0] for item in carried[:2]] == ['h000001499', 'h000001498']  # newest first
    assert len(json.dumps(carried)) <= 110 * len(carried)
    restored = OverflowTemporalRunContext.deserialize_run_context({'run_id': 'r', 'overflow_handles': carried}, None)
    assert vars(restored)['overflow_handles'] == carried


@pytest.mark.parametrize('id_length', [24, 1_000, 100_000])
def test_the_carried_handles_stay_within_their_byte_budget_whatever_the_call_ids(id_length: int) -> None:
    """Call ids are the provider's: 1,000 characters each carried 1.07 MB into every activity's input."""
    run_id = str(uuid.uuid4())
    messages = [
        ModelRequest(
            parts=[
                ToolReturnPart(
                    f'tool_{n}',
                    'preview',
                    f'call_{n:0{id_length}d}',
                    metadata={'overflow_handle': f'h{n:09d}', 'overflow_key': f'{run_id}/call_{n:0{id_length}d}/0'},
                )
            ]
        )
        for n in range(1_500)
    ]
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), messages=list[ModelMessage](messages))
    carried = OverflowTemporalRunContext.serialize_run_context(ctx)['overflow_handles']
    assert len(json.dumps(carried)) <= CARRIED_BYTES
    assert [item[0] for item in carried[:2]] == ['h000001499', 'h000001498']  # newest first, the handles all kept
    assert len(carried) == 1_000  # a key too long to carry is left out; its handle is not
    assert all(item[2] is None for item in carried) == (id_length > 200)
