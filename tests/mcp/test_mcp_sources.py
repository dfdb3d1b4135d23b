"""MCP servers as a source of oversized output: a real FastMCP server over stdio and over streamable HTTP.

Each case goes through `pydantic_ai.mcp.MCPToolset` into an agent with `OverflowingToolOutput`, and a scripted
model pages back into whatever was spilled.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import PythonStdioTransport
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Truncate,
    TruncationStrategy,
)
from pydantic_ai_harness.overflowing_tool_output._media import IMAGES_KEY

from .conftest import SERVER
from .mcp_server import NEEDLE, PNG

pytestmark = pytest.mark.anyio

TRANSPORTS = ['stdio', 'http']


def toolset_for(transport: str, http_url: str, *, read_timeout: float = 60) -> MCPToolset[Any]:
    # A stdio server stops with the run (keep_alive=False): a kept-alive one outlives the test and is only stopped
    # when its transport is collected, in whatever later test that happens ("subprocess is still running").
    source = PythonStdioTransport(SERVER, keep_alive=False) if transport == 'stdio' else http_url
    return MCPToolset(source, read_timeout=read_timeout, init_timeout=30)


def parts_after_call(messages: list[ModelMessage]) -> list[Any]:
    """The parts of the request that answered the first tool call (its return, or its retry prompt)."""
    return list(messages[2].parts) if len(messages) > 2 and isinstance(messages[2], ModelRequest) else []


def pager(tool: str, follow: Callable[[str], list[ToolCallPart]] | None = None) -> FunctionModel:
    """Call `tool`; when its output was spilled, make the calls `follow(handle)` returns; then answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, {})])
        if len(messages) == 3 and follow is not None:
            (part,) = [p for p in messages[2].parts if isinstance(p, ToolReturnPart)]
            metadata = part.metadata or {}
            images = metadata.get(IMAGES_KEY)
            handle = images[0]['handle'] if images else metadata.get('overflow_handle')
            if isinstance(handle, str):
                return ModelResponse(parts=follow(handle))
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


def find_needle(handle: str) -> list[ToolCallPart]:
    return [
        ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'needle-7f3a'}),
        ToolCallPart('read_tool_result', {'handle': handle, 'offset': 40_000, 'limit': 3}),
    ]


async def run_agent(model: FunctionModel, toolset: MCPToolset[Any], store: Path) -> list[ModelMessage]:
    agent = Agent(
        model, toolsets=[toolset], capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=store / 'store'))]
    )
    result = await agent.run('go')
    return result.all_messages()


def returns_of(messages: list[ModelMessage], tool: str) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == tool
    ]


@pytest.mark.parametrize('transport', TRANSPORTS)
async def test_a_large_text_is_spilled_and_pageable(transport: str, http_url: str, tmp_path: Path) -> None:
    messages = await run_agent(pager('big_log', find_needle), toolset_for(transport, http_url), tmp_path)
    (spilled,) = returns_of(messages, 'big_log')
    assert spilled.metadata is not None and spilled.metadata['overflow_action'] == 'spill'
    assert spilled.metadata['overflow_bytes'] > 3_800_000
    preview = str(spilled.content)
    assert len(preview) < 6_000 and f'40001| {NEEDLE}' in preview  # the error line is in the preview itself
    (grep,) = returns_of(messages, 'grep_tool_result')
    assert '1 matching line' in str(grep.content) and f'>40001| {NEEDLE}' in str(grep.content)
    (read,) = returns_of(messages, 'read_tool_result')
    assert f'40001| {NEEDLE}' in str(read.content) and 'Next page' in str(read.content)


@pytest.mark.parametrize('transport', TRANSPORTS)
@pytest.mark.parametrize('tool', ['json_as_text', 'structured'])
async def test_json_is_spilled_one_record_per_line_and_greppable(
    transport: str, tool: str, http_url: str, tmp_path: Path
) -> None:
    def find_declined(handle: str) -> list[ToolCallPart]:
        return [ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': '"declined"', 'context_lines': 2})]

    messages = await run_agent(pager(tool, find_declined), toolset_for(transport, http_url), tmp_path)
    (spilled,) = returns_of(messages, tool)
    assert spilled.metadata is not None and spilled.metadata['overflow_action'] == 'spill'
    assert 'Shape: {records: array[20000] of {id: int, status: str, note: str}' in str(spilled.content)
    (grep,) = returns_of(messages, 'grep_tool_result')
    # One record per line: the matching line is the whole declined record, its id included.
    answer = str(grep.content)
    assert '1 matching line' in answer and f'{{"id":{31337 % 20_000},"status":"declined"' in answer


@pytest.mark.parametrize('transport', TRANSPORTS)
async def test_a_text_and_image_content_list_keeps_both_losslessly(
    transport: str, http_url: str, tmp_path: Path
) -> None:
    # The image is not one Pillow can read (PNG magic, then noise): it is stored byte for byte and named, not sent;
    # the long text beside it is then reduced like any text.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        messages = await run_agent(pager('text_and_image'), toolset_for(transport, http_url), tmp_path)
    (part,) = returns_of(messages, 'text_and_image')
    assert not any('holds files (images, documents)' in str(w.message) for w in caught)
    assert isinstance(part.metadata, dict) and part.metadata['overflow_action'] == 'spill'
    (record,) = part.metadata[IMAGES_KEY]
    assert record['bytes'] == len(PNG) and 'not an image: its bytes are in no format Pillow reads' in str(part.content)
    store = LocalFileStore(base_dir=tmp_path / 'store')
    assert await store.read(record['handle']) == PNG


@pytest.mark.parametrize('transport', TRANSPORTS)
async def test_an_embedded_text_resource_is_spilled_and_pageable(transport: str, http_url: str, tmp_path: Path) -> None:
    messages = await run_agent(pager('embedded_resource', find_needle), toolset_for(transport, http_url), tmp_path)
    (spilled,) = returns_of(messages, 'embedded_resource')
    assert spilled.metadata is not None and spilled.metadata['overflow_action'] == 'spill'
    (grep,) = returns_of(messages, 'grep_tool_result')
    assert f'>40001| {NEEDLE}' in str(grep.content)


@pytest.mark.parametrize('transport', TRANSPORTS)
async def test_an_embedded_blob_is_spilled_verbatim(transport: str, http_url: str, tmp_path: Path) -> None:
    def hex_dump(handle: str) -> list[ToolCallPart]:
        return [ToolCallPart('read_tool_result', {'handle': handle, 'unit': 'bytes', 'offset': 0, 'limit': 32})]

    messages = await run_agent(pager('embedded_blob', hex_dump), toolset_for(transport, http_url), tmp_path)
    (spilled,) = returns_of(messages, 'embedded_blob')
    # Declared image/png but not an image Pillow can read: the image band stores it byte for byte and names it.
    assert isinstance(spilled.metadata, dict)
    (record,) = spilled.metadata[IMAGES_KEY]
    assert record['bytes'] == len(PNG * 4) and 'not an image: its bytes are in no format Pillow reads' in str(
        spilled.content
    )
    handle = record['handle']
    full = (tmp_path / 'store' / '.aliases' / handle).read_text()  # the short handle's full form
    assert (tmp_path / 'store' / f'{full}.out').read_bytes() == PNG * 4
    (dump,) = returns_of(messages, 'read_tool_result')
    assert '89 50 4e 47 0d 0a 1a 0a' in str(dump.content)


@pytest.mark.parametrize('transport', TRANSPORTS)
async def test_a_tool_error_too_large_to_show_is_spilled_like_a_return(
    transport: str, http_url: str, tmp_path: Path
) -> None:
    messages = await run_agent(pager('failing'), toolset_for(transport, http_url), tmp_path)
    (error,) = parts_after_call(messages)
    assert isinstance(error, ToolReturnPart) and error.outcome == 'retried'
    text = str(error.content)
    # 2,000 frames (~100,000 characters, ten times the spill threshold): held to the bands as a return is, and
    # losslessly: the preview names the exception, the store holds every frame.
    assert len(text) < 5_000 and f'RuntimeError: {NEEDLE}' in text
    assert isinstance(error.metadata, dict) and error.metadata['overflow_action'] == 'spill'
    stored = (await LocalFileStore(base_dir=tmp_path / 'store').read(error.metadata['overflow_handle'])).decode()
    assert stored.count('File "service.py"') == 2_000 and f'RuntimeError: {NEEDLE}' in stored


@pytest.mark.parametrize('transport', TRANSPORTS)
async def test_a_server_that_hangs_ends_the_call_with_the_toolsets_error(
    transport: str, start_http_server: Callable[[], str], tmp_path: Path
) -> None:
    # A server of its own: the hung call keeps running in it until the server is stopped.
    toolset = toolset_for(transport, start_http_server() if transport == 'http' else '', read_timeout=2)
    messages = await run_agent(pager('hang'), toolset, tmp_path)
    (error,) = parts_after_call(messages)
    assert isinstance(error, ToolReturnPart) and error.outcome == 'retried'
    assert "Request 'tools/call' timed out" in str(error.content)
    assert error.metadata is None and not (tmp_path / 'store').exists()
    assert isinstance(messages[-1], ModelResponse) and messages[-1].parts == [TextPart('done')]


async def test_a_stdio_server_that_exits_mid_call_ends_the_call_with_the_toolsets_error(tmp_path: Path) -> None:
    # Over stdio the toolset turns the closed connection into a retry prompt: the model sees it and the run goes on.
    messages = await run_agent(pager('die'), toolset_for('stdio', '', read_timeout=5), tmp_path)
    (error,) = parts_after_call(messages)
    assert isinstance(error, ToolReturnPart) and error.outcome == 'retried'
    assert 'Connection closed' in str(error.content)
    assert error.metadata is None and not (tmp_path / 'store').exists()
    assert isinstance(messages[-1], ModelResponse) and messages[-1].parts == [TextPart('done')]


async def test_an_http_server_that_exits_mid_call_ends_the_run_with_the_toolsets_error(
    start_http_server: Callable[[], str], tmp_path: Path
) -> None:
    # Over streamable HTTP the transport's own error propagates out of the run, untouched by the capability.
    toolset = toolset_for('http', start_http_server(), read_timeout=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with pytest.raises(Exception, match='Server disconnected without sending a response') as raised:
            await run_agent(pager('die'), toolset, tmp_path)
    assert type(raised.value).__name__ == 'RemoteProtocolError'
    assert not any(issubclass(w.category, OverflowingToolOutputWarning) for w in caught)


async def test_per_tool_bands_apply_to_mcp_tool_names(tmp_path: Path) -> None:
    capability = OverflowingToolOutput(
        per_tool={'big_log': [Band(over=1_000, action=Truncate(max_chars=2_000, strategy=TruncationStrategy.tail))]},
        store=LocalFileStore(base_dir=tmp_path / 'store'),
    )
    agent = Agent(pager('big_log'), toolsets=[toolset_for('stdio', '')], capabilities=[capability])
    result = await agent.run('go')
    (part,) = returns_of(result.all_messages(), 'big_log')
    assert part.metadata is not None and part.metadata['overflow_action'] == 'truncate'
    assert len(str(part.content)) <= 2_000 and not (tmp_path / 'store').exists()


async def test_an_mcp_result_spilled_into_the_workspace_is_read_with_jq(tmp_path: Path) -> None:
    workspace = tmp_path / 'ws'
    workspace.mkdir()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            part for message in messages for part in getattr(message, 'parts', []) if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=[ToolCallPart('structured', {})])
        if len(returns) == 1:
            path = str((returns[0].metadata or {})['overflow_handle'])
            return ModelResponse(parts=[ToolCallPart('shell', {'command': select_declined(path)})])
        return ModelResponse(parts=[TextPart(str(returns[-1].content))])

    agent = Agent(
        FunctionModel(respond),
        toolsets=[toolset_for('stdio', '')],
        capabilities=[
            LocalWorkspace(workspace),
            OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'store')),
        ],
    )

    @agent.tool
    async def shell(ctx: RunContext[Any], command: str) -> str:
        result = await ctx.workspace.run(command, shell=True, timeout=30)
        return result.stdout + result.stderr

    result = await agent.run('which record was declined?')
    assert result.output.strip() == str(31337 % 20_000)
    assert not (tmp_path / 'store').exists()


def select_declined(path: str) -> str:
    """`jq` selecting the declined record's id; where `jq` is not installed, the same query in Python."""
    if shutil.which('jq') is not None:
        return f'jq \'.records[] | select(.status == "declined") | .id\' {path}'
    script = 'import json,sys; print(*[r["id"] for r in json.load(open(sys.argv[1]))["records"] if r["status"] == "declined"])'
    return f"python3 -c '{script}' {path}"
