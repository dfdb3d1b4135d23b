"""The model picks every handle: nothing outside the spill directory is ever read through the query tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import LocalWorkspaceBackend, Workspace

from pydantic_ai_harness.overflowing_tool_output import (
    HandleNotFoundError,
    LocalFileStore,
    OverflowingToolOutput,
    WorkspaceStore,
)

from ._support import tool_returns

pytestmark = pytest.mark.anyio

SECRET = 'top-secret-value-91c2'

HOSTILE = [
    '.overflow/../secret.txt',
    '.overflow/../../secret.txt',
    '.overflow/run/../../secret.txt',
    '.overflow//secret.txt',
    '.overflow/link/0.txt',
    '.overflow/leak.txt',
    '.overflow/run/call/0.txt\x00',
    '.overflow/run/CALL/0.txt',
    '.overflow/run/call/0',
    '.overflow/' + 'a/' * 20 + '0.txt',
    '.overflow/' + 'a' * 2000 + '.txt',
    '/etc/passwd',
]


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A workspace whose spill directory holds links out of it, as a hostile tool or shell command could plant."""
    workspace = tmp_path / 'ws'
    (workspace / '.overflow').mkdir(parents=True)
    (tmp_path / 'secret.txt').write_text(SECRET)
    (tmp_path / 'secrets').mkdir()
    (tmp_path / 'secrets' / '0.txt').write_text(SECRET)
    (workspace / 'secret.txt').write_text(SECRET)
    (workspace / '.overflow' / 'link').symlink_to(tmp_path / 'secrets', target_is_directory=True)
    (workspace / '.overflow' / 'leak.txt').symlink_to(tmp_path / 'secret.txt')
    return workspace


async def test_the_store_refuses_every_hostile_handle(planted: Path) -> None:
    store = WorkspaceStore(Workspace(LocalWorkspaceBackend(planted)))
    for handle in HOSTILE:
        with pytest.raises(HandleNotFoundError):
            await store.read(handle)
        assert await store.delete(handle) is False
    assert (planted.parent / 'secret.txt').read_text() == SECRET
    assert (planted / 'secret.txt').read_text() == SECRET


async def test_the_query_tools_answer_hostile_handles_with_guidance(planted: Path) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            calls = [ToolCallPart('read_tool_result', {'handle': handle}) for handle in HOSTILE]
            calls += [ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'secret'}) for handle in HOSTILE]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond),
        capabilities=[
            LocalWorkspace(planted),
            OverflowingToolOutput(store=LocalFileStore(base_dir=planted.parent / 'private')),
        ],
    )
    result = await agent.run('go')
    answers = [str(part.content) for part in tool_returns(result.all_messages())]
    assert len(answers) == 2 * len(HOSTILE)
    for answer in answers:
        assert SECRET not in answer
        assert answer.startswith('No stored result found under handle')
