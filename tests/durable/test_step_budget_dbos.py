"""`step_budget` under DBOS: its reductions are durable steps, so a replay or a recovery reduces the same way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS, SetWorkflowID

from ._dbos_app import start
from ._step_budget_app import BUDGET, CALLS, COUNTER_ENV, CRASH_ENV, build, plain_output, register, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

REPO_ROOT = Path(__file__).resolve().parents[2]
SPILL_STEP = 'budget_agent__capability__overflowing_tool_output.overflow_spill_write'


def check(output: str) -> None:
    shown = json.loads(output)
    assert len(shown) == CALLS
    reduced = [n for n, text in enumerate(shown) if text.startswith('[Step budget:')]
    assert reduced == [1, 5, 9]  # the three large results
    assert sum(len(text) for text in shown) <= BUDGET


async def test_the_reductions_are_durable_steps_and_a_recorded_run_returns_the_same(
    db_url: str, tmp_path: Path
) -> None:
    expected = await plain_output(build, tmp_path / 'plain' / 'store', run_id='wf-budget:1')
    start(db_url)
    run_agent = register(tmp_path / 'store')
    DBOS.launch()
    with SetWorkflowID('wf-budget'):
        output = await run_agent('go')
    check(output)
    assert output == expected  # the same reductions, notes and handles as without an engine
    steps = [step['function_name'] for step in await DBOS.list_workflow_steps_async('wf-budget')]
    assert steps.count(SPILL_STEP) == 3
    assert writes(os.environ[COUNTER_ENV]) == 3
    with SetWorkflowID('wf-budget'):
        assert await run_agent('go') == output
    assert writes(os.environ[COUNTER_ENV]) == 3


async def test_a_crash_after_the_reductions_recovers_without_writing_them_again(db_url: str, tmp_path: Path) -> None:
    expected = await plain_output(build, tmp_path / 'plain' / 'store', run_id='wf-budget-crash:1')
    with anyio.fail_after(60):
        child = await anyio.run_process(
            [
                sys.executable,
                '-m',
                'tests.durable._step_budget_app',
                db_url,
                str(tmp_path / 'store'),
                'wf-budget-crash',
            ],
            check=False,
            cwd=REPO_ROOT,
            env={**os.environ, CRASH_ENV: '1'},
        )
    assert child.returncode == 17, child.stderr.decode()[-3000:]
    assert writes(os.environ[COUNTER_ENV]) == 3  # the step was reduced before the crash

    start(db_url)  # a new process: launching recovers the pending workflow
    register(tmp_path / 'store')
    DBOS.launch()
    output = await (await DBOS.retrieve_workflow_async('wf-budget-crash')).get_result()
    check(output)
    assert output == expected
    assert writes(os.environ[COUNTER_ENV]) == 3  # the recorded spill steps were reused, not written again
