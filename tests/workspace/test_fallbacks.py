"""Every way the workspace can decline a spill: the spill goes to the configured store, the reason is logged,
nothing is written in (or through) the workspace, and the handle still pages back."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import LocalWorkspaceBackend, UnavailableWorkspace, Workspace, WorkspaceBackend

from pydantic_ai_harness.overflowing_tool_output import (
    LocalFileStore,
    OverflowingToolOutput,
    WorkspaceSpill,
    WorkspaceSpillRefused,
    WorkspaceStore,
)
from pydantic_ai_harness.overflowing_tool_output.stores._paths import short_handles

from ._support import FACT_CUSTOMER, handle_in, last_return, listing, log_text, tool_returns

pytestmark = pytest.mark.anyio

LOGGER = 'pydantic_ai_harness.overflowing_tool_output'


def pager() -> FunctionModel:
    """Calls the log tool, then greps the spill with the query tools and answers with what it found."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = tool_returns(messages)
        if not returns:
            return ModelResponse(parts=[ToolCallPart('fetch_log', {})])
        if len(returns) == 1:
            handle = handle_in(str(returns[0].content))
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': FACT_CUSTOMER})])
        return ModelResponse(parts=[TextPart(last_return(messages))])

    return FunctionModel(respond)


async def run_pager(capabilities: list[Any], private: Path, **run: Any) -> tuple[str, str]:
    """Run the pager; return the spill's handle and the model's answer."""
    agent = Agent(pager(), capabilities=[*capabilities, OverflowingToolOutput(store=LocalFileStore(base_dir=private))])
    agent.tool_plain(name='fetch_log')(log_text)
    result = await agent.run('find the failed payment', **run)
    preview = str(tool_returns(result.all_messages(), 'fetch_log')[0].content)
    handle = handle_in(preview)
    if not handle.startswith('.overflow/'):
        assert "That handle is also the file's path" not in preview  # no file line for a spill outside it
    return handle, result.output


def assert_in_private_store(handle: str, answer: str, private: Path) -> None:
    assert not handle.startswith('.overflow')
    full = (private / '.aliases' / handle).read_text()  # The short handle's full form, as the store recorded it.
    assert (private / (full + '.out')).read_bytes().decode() == log_text()
    assert f'1 matching line for {FACT_CUSTOMER!r}' in answer and 'payment failed' in answer


def reasons(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER and 'instead of the workspace' in record.getMessage()
    ]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / 'ws'
    workspace.mkdir()
    (workspace / 'src.py').write_text('print(1)\n')
    return workspace, tmp_path / 'private'


async def test_a_read_only_workspace(dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    workspace, private = dirs
    with caplog.at_level(logging.WARNING, LOGGER):
        handle, answer = await run_pager([LocalWorkspace(workspace, read_only=True)], private)
    assert_in_private_store(handle, answer, private)
    assert reasons(caplog) == ['spilled to the configured store instead of the workspace: the workspace is read-only']
    assert listing(workspace) == ['src.py']


async def test_an_unavailable_workspace(dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    _, private = dirs
    with caplog.at_level(logging.WARNING, LOGGER):
        handle, answer = await run_pager([], private, workspace=UnavailableWorkspace('the sandbox was shut down'))
    assert_in_private_store(handle, answer, private)
    unavailable = 'the workspace is unavailable: the sandbox was shut down'
    assert reasons(caplog) == [f'spilled to the configured store instead of the workspace: {unavailable}']


async def test_no_workspace_at_all_is_the_quiet_common_case(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    _, private = dirs
    with caplog.at_level(logging.DEBUG, LOGGER):
        handle, answer = await run_pager([], private)
    assert_in_private_store(handle, answer, private)
    assert reasons(caplog) == []


async def test_authority_rules_that_trust_the_spill_directory_more_than_the_workspace(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # The operator marked `.overflow` as trusted in a workspace of user files: tool output must not land there.
    workspace, private = dirs
    trusted = LocalWorkspace(workspace, authority='user', path_authority={'.overflow': 'operator'})
    with caplog.at_level(logging.WARNING, LOGGER):
        handle, answer = await run_pager([trusted], private)
    assert_in_private_store(handle, answer, private)
    (reason,) = reasons(caplog)
    assert "authority 'operator', above its files' 'user'" in reason
    assert listing(workspace) == ['src.py']


async def test_authority_that_marks_the_spill_directory_as_data_is_fine(dirs: tuple[Path, Path]) -> None:
    workspace, private = dirs
    marked = LocalWorkspace(workspace, path_authority={'.overflow': 'none'})
    handle, answer = await run_pager([marked], private)
    assert handle.startswith('.overflow/') and (workspace / handle).read_text() == log_text()
    assert 'payment failed' in answer and not private.exists()


async def test_a_spill_directory_that_leads_outside_the_workspace(
    tmp_path: Path, dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # Something in the workspace (the agent's own shell, a cloned repository) planted `.overflow` as a symlink.
    workspace, private = dirs
    outside = tmp_path / 'outside'
    outside.mkdir()
    (workspace / '.overflow').symlink_to(outside)
    with caplog.at_level(logging.WARNING, LOGGER):
        handle, answer = await run_pager([LocalWorkspace(workspace)], private)
    assert_in_private_store(handle, answer, private)
    (reason,) = reasons(caplog)
    assert 'leads outside the workspace' in reason
    assert listing(outside) == []


async def test_a_symlink_deeper_in_the_spill_directory(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    workspace, _ = dirs
    outside = tmp_path / 'outside'
    outside.mkdir()
    (workspace / '.overflow').mkdir()
    store = WorkspaceStore(Workspace(LocalWorkspaceBackend(workspace)))
    assert await store.write('run-2/call/0', b'tool output') == f'.overflow/{next(short_handles("run-2/call/0"))}.txt'
    # A link planted where the next spill's file will be: not written through.
    (outside / 'target.txt').write_text('untouched')
    (workspace / '.overflow' / f'{next(short_handles("run-3/call/0"))}.txt').symlink_to(outside / 'target.txt')
    with pytest.raises(WorkspaceSpillRefused, match='leads outside the workspace'):
        await store.write('run-3/call/0', b'tool output')
    assert listing(outside) == ['target.txt'] and (outside / 'target.txt').read_text() == 'untouched'


async def test_a_failing_write(dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    # `.overflow` is a regular file, so the spill's parent directories cannot be created.
    workspace, private = dirs
    (workspace / '.overflow').write_text('not a directory\n')
    with caplog.at_level(logging.WARNING, LOGGER):
        handle, answer = await run_pager([LocalWorkspace(workspace)], private)
    assert_in_private_store(handle, answer, private)
    (reason,) = reasons(caplog)
    assert 'the workspace write failed: NotADirectoryError' in reason
    assert (workspace / '.overflow').read_text() == 'not a directory\n'


class HangingWrites(LocalWorkspaceBackend):
    """A local workspace whose writes never finish (a frozen network filesystem, a stuck sandbox)."""

    async def write_bytes(self, path: str, data: bytes) -> None:
        await anyio.sleep_forever()


class Hanging(LocalWorkspace[Any]):
    def get_workspace(self, ctx: Any, *, ref: Any) -> WorkspaceBackend | None:
        return HangingWrites(self.working_dir)


async def test_a_write_that_hangs_falls_back_after_the_timeout(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    workspace, private = dirs
    agent = Agent(
        pager(),
        capabilities=[
            Hanging(workspace),
            OverflowingToolOutput(store=LocalFileStore(base_dir=private), workspace=WorkspaceSpill(timeout=0.2)),
        ],
    )
    agent.tool_plain(name='fetch_log')(log_text)
    with caplog.at_level(logging.WARNING, LOGGER):
        result = await agent.run('go')
    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_log')[0].content))
    assert_in_private_store(handle, result.output, private)
    assert reasons(caplog) == [
        'spilled to the configured store instead of the workspace: the workspace did not finish writing within 0.2 s'
    ]


async def test_workspace_none_keeps_spills_in_the_configured_store(dirs: tuple[Path, Path]) -> None:
    workspace, private = dirs
    agent = Agent(
        pager(),
        capabilities=[
            LocalWorkspace(workspace),
            OverflowingToolOutput(store=LocalFileStore(base_dir=private), workspace=None),
        ],
    )
    agent.tool_plain(name='fetch_log')(log_text)
    result = await agent.run('go')
    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_log')[0].content))
    assert_in_private_store(handle, result.output, private)
    assert listing(workspace) == ['src.py']


async def test_prune_deletes_only_groups_older_than_the_ttl(tmp_path: Path) -> None:
    workspace = tmp_path / 'ws'
    workspace.mkdir()
    store = WorkspaceStore(Workspace(LocalWorkspaceBackend(workspace)), cleanup_after=timedelta(hours=1))
    old_run = await store.write('old-run/call/0', b'old')
    solo = await store.write('solo', b'[1, 2]')
    fresh = await store.write('new-run/call/0', b'new')
    assert solo == f'.overflow/{next(short_handles("solo"))}.json'  # One file per spill, named by its short id.
    stamps = workspace / '.overflow' / '.stamps'
    (stamps / old_run.split('/')[-1]).write_text('0.0')
    (stamps / solo.split('/')[-1]).write_text('0.0')
    # A group of the layout before short handles (a directory of one run's spills) is pruned the same way.
    (workspace / '.overflow' / 'old-run' / 'call').mkdir(parents=True)
    (workspace / '.overflow' / 'old-run' / 'call' / '0.txt').write_text('older')
    (stamps / 'old-run').write_text('0.0')
    (stamps / 'not-a-number').write_text('yesterday')  # a stamp this store cannot read is left alone
    assert await store.prune() == 3
    assert not (workspace / old_run).exists() and not (workspace / solo).exists()
    assert not (workspace / '.overflow' / 'old-run').exists()
    assert (workspace / fresh).read_bytes() == b'new'
    assert sorted(path.name for path in stamps.iterdir()) == [fresh.split('/')[-1], 'not-a-number']
    assert await WorkspaceStore(Workspace(LocalWorkspaceBackend(workspace))).prune() == 0  # no TTL: nothing to do


async def test_a_stamp_that_cannot_be_written_does_not_fail_the_spill(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = tmp_path / 'ws'
    (workspace / '.overflow').mkdir(parents=True)
    (workspace / '.overflow' / '.stamps').write_text('a file where the stamps directory should be')
    store = WorkspaceStore(Workspace(LocalWorkspaceBackend(workspace)), cleanup_after=timedelta(hours=1))
    with caplog.at_level(logging.WARNING, LOGGER):
        handle = await store.write('run/call/0', b'payload')
    assert (workspace / handle).read_bytes() == b'payload'
    assert any('could not record the spill time' in record.getMessage() for record in caplog.records)


async def test_a_key_reused_for_other_bytes_never_overwrites_a_workspace_spill(tmp_path: Path) -> None:
    workspace = tmp_path / 'ws'
    workspace.mkdir()
    store = WorkspaceStore(Workspace(LocalWorkspaceBackend(workspace)))
    key = '019adc3e-8f21-7c4b-9a6e-5d0f2b7c8e13/call_Xq3vR8bN2mKp7LwT9yZc/0'
    first = await store.write(key, b'one\n')
    assert first == f'.overflow/{next(short_handles(key))}.txt' and len(first) == 24
    assert await store.write(key, b'one\n') == first  # a durable replay: the same file, untouched
    other = await store.write(key, b'two\n')
    assert other == f'.overflow/{next(short_handles(key + "~~2"))}.txt'
    assert [await store.read(first), await store.read(other)] == [b'one\n', b'two\n']
