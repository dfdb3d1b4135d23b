"""Aging under DBOS: the stubs' writes are durable steps, so a replay or a recovery ages the same way."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS, SetWorkflowID

from ._aging_app import PAGES, build, register, start
from ._step_budget_app import COUNTER_ENV, CRASH_ENV, writes

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

REPO_ROOT = Path(__file__).resolve().parents[2]
WRITE_STEP = 'aging_agent__capability__overflowing_tool_output.overflow_spill_write'


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / 'writes.log'))
    yield f'sqlite:///{tmp_path / "dbos.sqlite"}'
    DBOS.destroy(destroy_registry=True)


def aged(output: str) -> list[int]:
    shown = json.loads(output)
    assert len(shown) == PAGES
    return [n for n, text in enumerate(shown) if text.startswith('[Moved out of context:')]


async def plain_output(tmp_path: Path, run_id: str) -> str:
    """The same run without an engine (its writes not counted), under the run id DBOS will use."""
    counter = os.environ.pop(COUNTER_ENV)
    try:
        return (await build(tmp_path / 'store').run('go', run_id=run_id)).output
    finally:
        os.environ[COUNTER_ENV] = counter


async def test_the_aged_request_is_the_same_under_dbos_and_on_replay(db_url: str, tmp_path: Path) -> None:
    expected = await plain_output(tmp_path / 'plain', run_id='wf-aging:1')
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
    expected = await plain_output(tmp_path / 'plain', run_id='wf-aging-crash:1')
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
