"""A paging run with aging under DBOS, shared by the test process and a child process that crashes mid-run.

Run as `python -m tests.durable._aging_app DB_URL STORE_DIR WORKFLOW_ID` to start the workflow in a child; with
`OVERFLOW_DURABLE_CRASH=1` that child dies in its final model request, after old returns were aged (so after their
store writes).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import Aging, OverflowingToolOutput

from ._dbos_app import register_output, run_child
from ._step_budget_app import CRASH_ENV, CountingStore

PAGES = 10


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    fetched = sum(
        isinstance(part, ToolReturnPart)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )
    if fetched < PAGES:
        return ModelResponse(parts=[ToolCallPart('fetch', {'n': fetched}, tool_call_id=f'call_{fetched}')])
    if os.environ.get(CRASH_ENV) == '1':
        os._exit(17)  # dies after old returns were aged and written, before the answer
    shown = [
        part.model_response_str()
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    return ModelResponse(parts=[TextPart(json.dumps(shown))])


async def fetch(n: int) -> str:
    return '\n'.join(f'page {n} line {i}: some words of text to fill the page' for i in range(60))


def build(store_dir: str | Path, *durability: Any) -> Agent[None, str]:
    capability = OverflowingToolOutput(
        store=CountingStore(base_dir=store_dir),
        workspace=None,
        aging=Aging(after_turns=2, min_tokens=100, batch_tokens=1_500),
    )
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name='aging_agent',
        tools=[fetch],
        capabilities=[capability, *durability],
    )


def register(store_dir: str | Path) -> Callable[[str], Awaitable[str]]:
    return register_output(build(store_dir, DBOSDurability()), 'aging_run')


if __name__ == '__main__':
    anyio.run(run_child, sys.argv[1], sys.argv[3], partial(register, sys.argv[2]))
