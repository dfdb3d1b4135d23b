"""`OverflowingToolOutput` under DBOS, on its default SQLite system database: no server, nothing to start.

The spill write and the summary are DBOS steps, so a replay or a recovery after a crash reuses their
recorded results: the store is written and the summarizer called once, whatever happens to the process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS, SetWorkflowID
from pydantic_ai.durable_exec.dbos import DBOSDurability

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutputWarning

from ._app import COUNTER_DIR_ENV, CRASH_ENV, LOG_LINE_42, SUMMARY_TEXT, build_agent, counts, report
from ._dbos_app import register, start

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

REPO_ROOT = Path(__file__).resolve().parents[2]
SPILL_STEP = 'overflow_agent__capability__overflowing_tool_output.overflow_spill_write'
SUMMARIZE_STEP = 'overflow_agent__capability__overflowing_tool_output.overflow_summarize'
CHILD_TIMEOUT = 30


@dataclass
class Paths:
    db_url: str
    store: Path
    counters: Path


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    counters = tmp_path / 'counters'
    counters.mkdir()
    monkeypatch.setenv(COUNTER_DIR_ENV, str(counters))
    yield Paths(f'sqlite:///{tmp_path / "dbos.sqlite"}', tmp_path / 'store', counters)
    DBOS.destroy(destroy_registry=True)


async def plain_report(tmp_path: Path, run_id: str) -> dict[str, Any]:
    """The same run without any engine (its side effects are not counted), under the run id DBOS will use."""
    os.environ.pop(COUNTER_DIR_ENV)
    try:
        return report(await build_agent(tmp_path / 'plain-store').run('go', run_id=run_id))
    finally:
        os.environ[COUNTER_DIR_ENV] = str(tmp_path / 'counters')


def check_output(output: str) -> None:
    spill, read, summary = output.split('\n---\n')
    assert spill.startswith('[`build_log` returned too much to show')
    assert "Saved in full under handle '" in spill
    assert LOG_LINE_42 in read  # the model paged back into the spilled log through the store
    assert summary.startswith('[Summary, written by a model, of what `test_report` returned')
    assert "The full original is saved under handle '" in summary
    assert summary.endswith(SUMMARY_TEXT)


async def step_names(workflow_id: str) -> list[str]:
    return [step['function_name'] for step in await DBOS.list_workflow_steps_async(workflow_id)]


async def test_run_completes_with_spill_and_summary_as_steps(paths: Paths, tmp_path: Path) -> None:
    expected = await plain_report(tmp_path, run_id='wf-complete:1')
    start(paths.db_url)
    _, run_agent = register(paths.store)
    DBOS.launch()

    with SetWorkflowID('wf-complete'):
        result = await run_agent('go')

    check_output(result['output'])
    # Same output, same usage as without an engine: the summary's request is counted once (3 agent requests + 1).
    assert result == expected
    assert result['requests'] == 4
    assert counts(paths.counters) == {
        'model': 3,
        'store_write': 2,  # the spilled log and the summarized report's original
        'summarize': 1,
        'tool_build_log': 1,
        'tool_test_report': 1,
    }
    steps = await step_names('wf-complete')
    assert steps.count(SPILL_STEP) == 2
    assert steps.count(SUMMARIZE_STEP) == 1

    # Calling the workflow again with the same id returns the recorded result and runs nothing.
    with SetWorkflowID('wf-complete'):
        assert await run_agent('go') == result
    assert counts(paths.counters)['store_write'] == 2
    assert counts(paths.counters)['summarize'] == 1


async def run_child_that_crashes(paths: Paths, workflow_id: str, *extra: str) -> None:
    with anyio.fail_after(CHILD_TIMEOUT):
        child = await anyio.run_process(
            [sys.executable, '-m', 'tests.durable._dbos_app', paths.db_url, str(paths.store), workflow_id, *extra],
            check=False,
            cwd=REPO_ROOT,
            env={**os.environ, CRASH_ENV: '1'},
        )
    assert child.returncode == 17, child.stderr.decode()[-3000:]


async def test_crash_recovery_does_not_repeat_spill_or_summary(paths: Paths) -> None:
    await run_child_that_crashes(paths, 'wf-crash')
    assert counts(paths.counters) == {
        'model': 3,  # the process died inside the third request
        'store_write': 2,
        'summarize': 1,
        'tool_build_log': 1,
        'tool_test_report': 1,
    }

    # A new process: launching DBOS recovers the pending workflow from SQLite.
    start(paths.db_url)
    register(paths.store)
    DBOS.launch()
    result = await (await DBOS.retrieve_workflow_async('wf-crash')).get_result()

    check_output(result['output'])
    assert result['requests'] == 4  # recorded usage folded once, the summary's included
    assert counts(paths.counters) == {
        'model': 4,  # the two recorded requests came back from SQLite; only the interrupted one ran again
        'store_write': 2,  # recorded steps: not written again
        'summarize': 1,  # recorded step: not summarized again
        # DBOS runs plain function tools in workflow code, not as steps, so they run again.
        'tool_build_log': 2,
        'tool_test_report': 2,
    }
    steps = await step_names('wf-crash')
    assert steps.count(SPILL_STEP) == 2
    assert steps.count(SUMMARIZE_STEP) == 1


async def test_negative_control_without_durable_operations_repeats_side_effects(paths: Paths) -> None:
    """The same crash with the operations overridden by plain methods: the recovery writes and summarizes again.

    This shows the recovery test above detects a missing `@durable_operation`.
    """
    await run_child_that_crashes(paths, 'wf-inline', '--inline-ops')
    start(paths.db_url)
    register(paths.store, inline_ops=True)
    DBOS.launch()
    result = await (await DBOS.retrieve_workflow_async('wf-inline')).get_result()

    check_output(result['output'])
    assert counts(paths.counters)['store_write'] == 4
    assert counts(paths.counters)['summarize'] == 2
    assert SPILL_STEP not in await step_names('wf-inline')


@dataclass
class HangingStore(LocalFileStore):
    """A real store whose writes never finish (a stuck network mount, say)."""

    async def write(self, key: str, data: bytes) -> str:
        await anyio.sleep_forever()
        raise AssertionError('unreachable')


@dataclass
class FullDiskStore(LocalFileStore):
    """A real store whose writes fail."""

    async def write(self, key: str, data: bytes) -> str:
        raise OSError(28, 'No space left on device')


@pytest.mark.parametrize(
    ('store_type', 'reason'),
    [(HangingStore, 'did not finish writing within 0.2 s'), (FullDiskStore, 'No space left on device')],
)
async def test_a_failing_or_hanging_store_falls_back_inside_the_step(
    paths: Paths, store_type: type[LocalFileStore], reason: str
) -> None:
    """The step returns the failure as its recorded result, bounded by `Spill.timeout`: the run truncates."""
    start(paths.db_url)
    agent = build_agent(paths.store, DBOSDurability(), store=store_type(base_dir=paths.store), spill_timeout=0.2)

    @DBOS.workflow(name='overflow_failing_store')
    async def run_agent(prompt: str) -> dict[str, Any]:
        return report(await agent.run(prompt))

    DBOS.launch()
    with pytest.warns(OverflowingToolOutputWarning, match=reason), SetWorkflowID('wf-store'):
        with anyio.fail_after(10):
            result = await run_agent('go')

    assert '[truncated: the middle' in result['output']
    spill_steps = [
        step for step in await DBOS.list_workflow_steps_async('wf-store') if step['function_name'] == SPILL_STEP
    ]
    assert len(spill_steps) == 1
    recorded: Any = spill_steps[0]['output']  # the step's journaled `CapabilityOperationResult`
    handle, recorded_reason = recorded.value
    assert handle is None
    assert reason in recorded_reason
