"""Under DBOS (SQLite, nothing to start), a spill into the workspace is a recorded step, and the handle pages back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip('dbos', reason='DBOS is not installed: pip install "pydantic-ai-harness-context[durable]"')

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from ._support import FACT_CUSTOMER, handle_in, last_return, listing, log_text, tool_returns

pytestmark = [pytest.mark.durable, pytest.mark.anyio]

SPILL_STEP = 'workspace_agent__capability__overflowing_tool_output.overflow_spill_write'


@pytest.fixture
def db_url(tmp_path: Path) -> Iterator[str]:
    DBOS(
        config={
            'name': 'overflow_workspace',
            'system_database_url': f'sqlite:///{tmp_path / "dbos.sqlite"}',
            'notification_listener_polling_interval_sec': 0.05,
        }
    )
    try:
        yield 'ok'
    finally:
        DBOS.destroy(destroy_registry=True)


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart('fetch_log', {})])
    if len(returns) == 1:
        handle = handle_in(str(returns[0].content))
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': FACT_CUSTOMER})])
    return ModelResponse(parts=[TextPart(last_return(messages))])


async def test_a_workspace_spill_is_a_dbos_step(db_url: str, tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    agent = Agent(
        FunctionModel(respond, model_name='scripted'),
        name='workspace_agent',
        capabilities=[
            LocalWorkspace(workspace),
            OverflowingToolOutput(store=LocalFileStore(base_dir=private)),
            DBOSDurability(),
        ],
    )
    agent.tool_plain(name='fetch_log')(log_text)

    @DBOS.workflow(name='workspace_run')
    async def run(prompt: str) -> dict[str, Any]:
        result = await agent.run(prompt)
        return {'output': result.output, 'preview': str(tool_returns(result.all_messages(), 'fetch_log')[0].content)}

    DBOS.launch()
    with SetWorkflowID('wf-workspace'):
        result = await run('go')

    handle = handle_in(result['preview'])
    assert handle.startswith('.overflow/') and (workspace / handle).read_text() == log_text()
    assert f'1 matching line for {FACT_CUSTOMER!r}' in result['output']
    steps = [step['function_name'] for step in await DBOS.list_workflow_steps_async('wf-workspace')]
    assert steps.count(SPILL_STEP) == 1
    assert not private.exists()
    assert [path for path in listing(workspace) if not path.startswith('.overflow')] == []
