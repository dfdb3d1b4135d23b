"""DBOS setup shared by the test process and the child process that crashes mid-run.

Run as `python -m tests.durable._dbos_app DB_URL STORE_DIR WORKFLOW_ID [--inline-ops]` to start the
workflow in a child process; with `OVERFLOW_DURABLE_CRASH=1` that child dies in its last model request.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability

from ._app import build_agent, report

WORKFLOW_NAME = 'overflow_run'


def start(db_url: str) -> None:
    """Create the DBOS instance on a SQLite system database (call `launch` after registering)."""
    # A short polling interval makes `get_result` of a recovered workflow return promptly.
    DBOS(
        config={
            'name': 'overflow_durable',
            'system_database_url': db_url,
            'notification_listener_polling_interval_sec': 0.05,
        }
    )


def register(
    store_dir: str | Path, *, inline_ops: bool = False
) -> tuple[Agent[None, str], Callable[[str], Awaitable[dict[str, Any]]]]:
    """Build the agent under `DBOSDurability` and register the workflow that runs it."""
    agent = build_agent(store_dir, DBOSDurability(), inline_ops=inline_ops)

    @DBOS.workflow(name=WORKFLOW_NAME)
    async def run_agent(prompt: str) -> dict[str, Any]:
        return report(await agent.run(prompt))

    return agent, run_agent


def register_output(agent: Agent[None, str], workflow_name: str) -> Callable[[str], Awaitable[str]]:
    """Register a workflow that runs `agent` and returns its output."""

    @DBOS.workflow(name=workflow_name)
    async def run_agent(prompt: str) -> str:
        return (await agent.run(prompt)).output

    return run_agent


async def run_child(db_url: str, workflow_id: str, register_run: Callable[[], Callable[[str], Awaitable[str]]]) -> None:
    """What a child process does: start DBOS, register the run, launch, and run it under `workflow_id`."""
    start(db_url)
    run_agent = register_run()
    DBOS.launch()
    with SetWorkflowID(workflow_id):
        await run_agent('go')


async def _main(db_url: str, store_dir: str, workflow_id: str, inline_ops: bool) -> None:
    start(db_url)
    _, run_agent = register(store_dir, inline_ops=inline_ops)
    DBOS.launch()
    with SetWorkflowID(workflow_id):
        await run_agent('go')


if __name__ == '__main__':
    anyio.run(_main, sys.argv[1], sys.argv[2], sys.argv[3], '--inline-ops' in sys.argv)
