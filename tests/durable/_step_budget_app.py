"""A run with a step budget under DBOS, shared by the test process and a child process that crashes mid-run.

Run as `python -m tests.durable._step_budget_app DB_URL STORE_DIR COUNTER_FILE WORKFLOW_ID` to start the workflow
in a child; with `OVERFLOW_DURABLE_CRASH=1` that child dies in its final model request, after the step budget
has reduced the returns of the first step (so after their store writes).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, StepBudget

from ._dbos_app import register_output, run_child

CALLS = 12
BUDGET = 12_000
CRASH_ENV = 'OVERFLOW_DURABLE_CRASH'
COUNTER_ENV = 'OVERFLOW_STEP_BUDGET_WRITES'


def _count_write(key: str) -> None:
    counter = os.environ.get(COUNTER_ENV)
    if counter:
        with open(counter, 'a', encoding='utf-8') as file:
            file.write(key + '\n')


class CountingStore(LocalFileStore):
    """A real `LocalFileStore` that appends a line to `$OVERFLOW_STEP_BUDGET_WRITES` for every write."""

    async def write(self, key: str, data: bytes) -> str:
        _count_write(key)
        return await super().write(key, data)


async def plain_output(build_agent: Callable[[Path], Agent[None, str]], store_dir: Path, run_id: str) -> str:
    """A run without an engine (its writes not counted), under the run id DBOS will use, for comparison."""
    counter = os.environ.pop(COUNTER_ENV)
    try:
        return (await build_agent(store_dir).run('go', run_id=run_id)).output
    finally:
        os.environ[COUNTER_ENV] = counter


@dataclass
class BesidePlain:
    """An agent run without an engine, then under DBOS."""

    plain: str
    """The output without an engine."""

    output: str
    """The output of the workflow's first run."""

    again: Callable[[], Awaitable[str]]
    """Runs the workflow again under the same id: a recorded run, replayed."""


async def run_beside_plain(
    build_agent: Callable[..., Agent[None, str]], db_url: str, tmp_path: Path, name: str
) -> BesidePlain:
    """`build_agent(store_dir, *durability)` run without an engine (`plain_output`), then under DBOS as the workflow
    `wf-{name}` (DBOS started on `db_url` and launched here), both stores under `tmp_path`."""
    from dbos import DBOS, SetWorkflowID

    from ._dbos_app import start

    plain = await plain_output(build_agent, tmp_path / 'plain' / 'store', run_id=f'wf-{name}:1')
    start(db_url)
    run_agent = register_output(build_agent(tmp_path / 'store', DBOSDurability()), f'{name}_run')
    DBOS.launch()

    async def again() -> str:
        with SetWorkflowID(f'wf-{name}'):
            return await run_agent('go')

    return BesidePlain(plain, await again(), again)


def writes(counter: str | Path) -> int:
    path = Path(counter)
    return len(path.read_text(encoding='utf-8').splitlines()) if path.exists() else 0


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('fetch', {'n': n}, tool_call_id=f'call_{n}') for n in range(CALLS)])
    if os.environ.get(CRASH_ENV) == '1':
        os._exit(17)  # dies after the step was reduced and its spills written, before the answer
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    shown = [part.model_response_str() for part in request.parts if isinstance(part, ToolReturnPart)]
    return ModelResponse(parts=[TextPart(json.dumps(shown))])


async def fetch(n: int) -> str:
    await anyio.sleep((CALLS - n) / 500)  # the later calls finish first
    return f'result {n}\n' + 'line of text\n' * (300 if n % 4 == 1 else 60)


def build(store_dir: str | Path, *durability: Any) -> Agent[None, str]:
    capability = OverflowingToolOutput(step_budget=StepBudget(max_size=BUDGET), store=CountingStore(base_dir=store_dir))
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name='budget_agent',
        tools=[fetch],
        capabilities=[capability, *durability],
    )


def register(store_dir: str | Path) -> Callable[[str], Awaitable[str]]:
    return register_output(build(store_dir, DBOSDurability()), 'budget_run')


if __name__ == '__main__':
    anyio.run(run_child, sys.argv[1], sys.argv[3], partial(register, sys.argv[2]))
