"""Redaction as the capability applies it: every return type, and off the event loop for large returns."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic_ai import Agent, BinaryContent, ToolReturn, models
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, SecretRedaction
from pydantic_ai_harness.overflowing_tool_output._redaction._withhold import _loads_in_steps

from ._loop_lag import watch_loop

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.reliability

GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'


def leaked(secret: str, data: str | bytes) -> bool:
    """Whether any 8 characters of `secret` in a row are still readable in `data`."""
    needle = secret if isinstance(data, str) else secret.encode()
    return any(needle[i : i + 8] in data for i in range(len(secret) - 7))  # pyright: ignore[reportOperatorIssue]


async def sent_parts(result: object, tmp_path: Path) -> tuple[list[ModelRequestPart], OverflowingToolOutput[Any]]:
    """One real run whose tool returns `result`; the parts of the request the model was sent next, and the capability."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[ToolCallPart('env', {})] if len(seen) == 1 else [TextPart('done')])

    capability = OverflowingToolOutput[Any](store=LocalFileStore(base_dir=tmp_path), redact_secrets=SecretRedaction())
    agent = Agent(FunctionModel(respond), capabilities=[capability])
    agent.tool_plain(name='env')(lambda: result)
    await agent.run('go')
    return [part for message in seen[1] if isinstance(message, ModelRequest) for part in message.parts], capability


async def run_one(result: object, tmp_path: Path) -> tuple[ToolReturnPart, OverflowingToolOutput[Any]]:
    """One real run whose tool returns `result`; the tool return the model was sent, and the capability."""
    parts, capability = await sent_parts(result, tmp_path)
    [part] = [part for part in parts if isinstance(part, ToolReturnPart)]
    return part, capability


@pytest.mark.anyio
async def test_a_small_bytes_return_reaches_the_model_masked(tmp_path: Path) -> None:
    env = f'HOME=/root\nGITHUB_TOKEN={GITHUB}\nPATH=/usr/bin\n'.encode()
    part, _ = await run_one(env, tmp_path)
    assert isinstance(part.content, bytes)
    assert part.content == b'HOME=/root\nGITHUB_TOKEN=[secret withheld: GitHub Token]\nPATH=/usr/bin\n'
    assert not leaked(GITHUB, part.model_response_str())
    assert not leaked(GITHUB, base64.b64decode(part.model_response_str()))


@pytest.mark.anyio
async def test_a_large_bytes_return_is_stored_masked(tmp_path: Path) -> None:
    env = (f'GITHUB_TOKEN={GITHUB}\n' + 'X=1\n' * 15_000).encode()  # 60 KB: spilled
    part, capability = await run_one(env, tmp_path)
    assert isinstance(part.metadata, dict) and part.metadata['secrets_withheld'] == {'GitHub Token': 1}
    stored = await capability._resolved_store.read(part.metadata['overflow_handle'])
    assert not leaked(GITHUB, stored)
    assert stored.count(b'X=1\n') == 15_000


@pytest.mark.anyio
async def test_bytes_that_are_not_utf8_text_keep_their_other_bytes(tmp_path: Path) -> None:
    data = b'caf\xe9 latin-1 line\n' + f'token={GITHUB}\n'.encode() + b'\xff\xfe end\n'
    part, _ = await run_one(data, tmp_path)
    assert part.content == b'caf\xe9 latin-1 line\ntoken=[secret withheld: GitHub Token]\n\xff\xfe end\n'


@pytest.mark.anyio
async def test_binary_data_is_passed_on_as_it_is(tmp_path: Path) -> None:
    data = b'\x89PNG\r\n\x1a\n\x00\x00' + GITHUB.encode() + b'\x00' * 10
    part, _ = await run_one(data, tmp_path)
    assert part.content == data  # a NUL early on: data, not text


@pytest.mark.anyio
async def test_text_with_a_stray_nul_is_masked_as_the_text_it_is_shown_as(tmp_path: Path) -> None:
    """`find -print0` output with a Latin-1 name: an early NUL and invalid UTF-8, but text by the decision the preview
    and the query tools make, so they show it as text: it is masked as text, in the preview and in the store."""
    data = b'./caf\xe9.txt\x00' + f'./.env GITHUB_TOKEN={GITHUB}\x00'.encode() + b'./src/module.py\x00' * 4_000
    part, capability = await run_one(data, tmp_path)
    assert isinstance(part.metadata, dict) and part.metadata['secrets_withheld'] == {'GitHub Token': 1}
    assert 'returned binary data' not in str(part.content) and not leaked(GITHUB, str(part.content))
    assert not leaked(GITHUB, await capability._resolved_store.read(part.metadata['overflow_handle']))


@pytest.mark.anyio
async def test_text_binary_content_is_masked(tmp_path: Path) -> None:
    part, _ = await run_one(BinaryContent(data=f'key: {GITHUB}\n'.encode(), media_type='text/plain'), tmp_path)
    assert isinstance(part.content, BinaryContent)
    assert part.content.data == b'key: [secret withheld: GitHub Token]\n'


@pytest.mark.anyio
async def test_masking_a_10_mb_structured_return_does_not_hold_the_loop(tmp_path: Path) -> None:
    rows = [{'id': i, 'note': 'ordinary row text ' * 4, 'owner': f'user{i}'} for i in range(100_000)]
    rows[50_000]['note'] = f'token {GITHUB}'
    assert len(json.dumps(rows)) > 10_000_000
    async with watch_loop() as lag:
        part, capability = await run_one(rows, tmp_path)
    assert isinstance(part.metadata, dict) and part.metadata['secrets_withheld'] == {'GitHub Token': 1}
    stored = await capability._resolved_store.read(part.metadata['overflow_handle'])
    assert not leaked(GITHUB, stored)
    print(f'\n10 MB structured return masked in a run: loop lag {lag.worst * 1000:.0f} ms')
    assert lag.worst < 0.1, f'the event loop was held {lag.worst * 1000:.0f} ms'


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=40,
    ),
    indent=st.sampled_from([None, 2]),
)
def test_the_stepwise_parse_of_masked_json_reads_what_json_loads_reads(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    assert _loads_in_steps(text) == json.loads(text)


@pytest.mark.parametrize('bad', ['[1,2', '{"a" 1}', '[1 2]', '{"a":1,}', '[1]x', '', '{1: 2}'])
def test_the_stepwise_parse_refuses_what_json_loads_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        _loads_in_steps(bad)


@pytest.mark.anyio
async def test_a_token_split_mid_token_across_two_content_parts_is_withheld(tmp_path: Path) -> None:
    head, tail = GITHUB[:12], GITHUB[12:]
    envelope = ToolReturn(return_value='see content', content=[f'export GITHUB_TOKEN={head}', f'{tail}\nnext'])
    returns, _ = await sent_parts(envelope, tmp_path)
    sent = ''.join(str(part.content) for part in returns if isinstance(part, ToolReturnPart | UserPromptPart))
    assert 'export GITHUB_TOKEN=[secret withheld: GitHub Token]' in sent
    assert not leaked(GITHUB[:12], sent) and not leaked(GITHUB[12:], sent)
