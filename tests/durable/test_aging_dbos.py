"""Aging under DBOS: the stubs' writes are durable steps, so a replay or a recovery ages the same way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS, SetWorkflowID

from ._aging_app import PAGES, build, register
from ._dbos_app import start
from ._step_budget_app import COUNTER_ENV, CRASH_ENV, plain_output, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

REPO_ROOT = Path(__file__).resolve().parents[2]
WRITE_STEP = 'aging_agent__capability__overflowing_tool_output.overflow_spill_write'


def aged(output: str) -> list[int]:
    shown = json.loads(output)
    assert len(shown) == PAGES
    return [n for n, text in enumerate(shown) if text.startswith('[Moved out of context:')]


async def test_the_aged_request_is_the_same_under_dbos_and_on_replay(db_url: str, tmp_path: Path) -> None:
    expected = await plain_output(build, tmp_path / 'plain' / 'store', run_id='wf-aging:1')
    start(db_url)
    run_agent = register(tmp_path / 'store')
    DBOS.launch()
    with SetWorkflowID('wf-aging'):
        output = await run_agent('go')
    stubs = aged(output)
    assert stubs == list(range(len(stubs))) and len(stubs) >= 4  # the oldest pages, in batches
    assert output == expected  # the same stubs and handles as without an engine
    steps = [step['function_name'] for step in await DBOS.list_workflow_steps_async('wf-aging')]
    assert steps.count(WRITE_STEP) == len(stubs)
    assert writes(os.environ[COUNTER_ENV]) == len(stubs)
    with SetWorkflowID('wf-aging'):
        assert await run_agent('go') == output  # replayed from the record: the same request, nothing written again
    assert writes(os.environ[COUNTER_ENV]) == len(stubs)


async def test_a_crash_after_aging_recovers_without_writing_again(db_url: str, tmp_path: Path) -> None:
    expected = await plain_output(build, tmp_path / 'plain' / 'store', run_id='wf-aging-crash:1')
    with anyio.fail_after(60):
        child = await anyio.run_process(
            [sys.executable, '-m', 'tests.durable._aging_app', db_url, str(tmp_path / 'store'), 'wf-aging-crash'],
            check=False,
            cwd=REPO_ROOT,
            env={**os.environ, CRASH_ENV: '1'},
        )
    assert child.returncode == 17, child.stderr.decode()[-3000:]
    before = writes(os.environ[COUNTER_ENV])
    assert before == len(aged(expected))  # the returns were aged before the crash

    start(db_url)  # a new process: launching recovers the pending workflow
    register(tmp_path / 'store')
    DBOS.launch()
    output = await (await DBOS.retrieve_workflow_async('wf-aging-crash')).get_result()
    assert output == expected
    assert writes(os.environ[COUNTER_ENV]) == before  # the recorded write steps were reused
