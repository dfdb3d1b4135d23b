"""Forms users bring from upstream pydantic-ai-harness: each works, or fails at construction naming what to write."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.workspaces import LocalWorkspaceBackend

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, WorkspaceStore

from ..workspace._support import FACT_CUSTOMER, handle_in, log_text, tool_returns
from ..workspace.test_fallbacks import pager

pytestmark = pytest.mark.anyio


async def test_a_bare_workspace_backend_is_wrapped_and_spills_stay_lossless(tmp_path: Path) -> None:
    # Upstream's README form: the backend itself, not a `Workspace` around it.
    store = WorkspaceStore(workspace=LocalWorkspaceBackend(tmp_path))  # pyright: ignore[reportArgumentType]
    agent = Agent(pager(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='fetch_log')(log_text)
    result = await agent.run('find the failed payment')

    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_log')[0].content))
    assert handle.startswith('.overflow/')  # Spilled into the workspace, not truncated.
    assert (tmp_path / handle).read_text() == log_text()
    assert f'1 matching line for {FACT_CUSTOMER!r}' in result.output and 'payment failed' in result.output


def test_anything_else_is_refused_at_construction_naming_workspace(tmp_path: Path) -> None:
    with pytest.raises(TypeError) as raised:
        WorkspaceStore(workspace=str(tmp_path))  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == (
        'WorkspaceStore.workspace must be a pydantic-ai Workspace, such as ctx.workspace or '
        'Workspace(LocalWorkspaceBackend(path)), got str'
    )
