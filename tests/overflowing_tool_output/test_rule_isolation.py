"""One request-time rule failing never unmasks a secret, and a model's bad context window is no failure at all.

Before each model request the capability holds the request to its rules: failure texts (`ModelRetry`,
`ToolFailed`) masked and reduced, the step budget, aging. Redaction fails closed and apart from the others: when
another rule raises, the texts it masked stay masked, and when masking itself raises, the text is withheld.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, ModelRetry, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.tools import RunContext, ToolDefinition

from pydantic_ai_harness.overflowing_tool_output import (
    Aging,
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    SecretRedaction,
    Truncate,
)
from pydantic_ai_harness.overflowing_tool_output._redaction._secrets import Redactor

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio

GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'


def _leaked(text: str) -> bool:
    return any(GITHUB[i : i + 8] in text for i in range(len(GITHUB) - 7))


def _sent_texts(seen: list[list[ModelMessage]]) -> list[str]:
    return [
        part.model_response_str()
        for messages in seen
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def _retrying_agent(capability: OverflowingToolOutput[Any], profile: ModelProfile | None = None):
    """A run whose old `report` return ages while `deploy` fails with a token in its `ModelRetry` text."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = len(seen)
        if step == 1:
            return ModelResponse(parts=[ToolCallPart('report', {})])
        if step in (2, 3, 4):
            return ModelResponse(parts=[ToolCallPart('deploy', {'attempt': step})])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond, profile=profile), capabilities=[capability])

    async def first_step_only(ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolDefinition | None:
        return tool_def if ctx.run_step <= 1 else None  # later requests no longer offer `report`

    @agent.tool_plain(metadata={'reduce': True}, prepare=first_step_only)
    def report() -> str:
        return 'quarterly report line\n' * 500

    @agent.tool_plain(retries=5, metadata={'reduce': True})
    def deploy(attempt: int) -> str:
        raise ModelRetry(f'deploy {attempt} failed: GITHUB_TOKEN={GITHUB} rejected')

    return agent, seen


async def test_a_raising_aging_filter_leaves_the_failure_text_masked(tmp_path: Path) -> None:
    # A filter reading a tool's metadata raises on a tool the request no longer offers (its definition is bare).
    def by_metadata(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        return tool_def.metadata['reduce'] is True  # pyright: ignore[reportOptionalSubscript]

    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=tmp_path),
        tool_filter=by_metadata,
        redact_secrets=SecretRedaction(),
        aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10),
    )
    agent, seen = _retrying_agent(capability)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('go')
    texts = _sent_texts(seen)
    assert sum('deploy 2 failed' in text for text in texts) >= 1
    assert not any(_leaked(text) for text in texts)
    assert any(issubclass(w.category, OverflowingToolOutputWarning) for w in caught)


async def test_masking_that_raises_withholds_the_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fault injected into the detector (as the store faults are): every text it is asked to mask raises.
    def crash(self: Redactor, text: str) -> tuple[str, dict[str, int]]:
        raise RuntimeError('a detector crashed')

    monkeypatch.setattr(Redactor, 'mask', crash)
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path), redact_secrets=SecretRedaction())
    agent, seen = _retrying_agent(capability)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('go')
    texts = _sent_texts(seen)
    assert not any(_leaked(text) for text in texts)
    assert sorted(set(texts)) == snapshot(
        [
            '[The output of `report` is withheld: checking it for secrets failed (RuntimeError).]',
            '{"error":"[The failure text of `deploy` is withheld: checking it for secrets failed (RuntimeError).]"}',
        ]
    )
    assert any('redaction raised' in str(w.message) for w in caught)


@pytest.mark.parametrize('window', [math.inf, math.nan, '128000', -5, 0, True])
async def test_a_bad_context_window_is_reported_once_and_treated_as_unknown(tmp_path: Path, window: object) -> None:
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) <= 3:
            return ModelResponse(parts=[ToolCallPart('dump', {'n': len(seen)})])
        return ModelResponse(parts=[TextPart('done')])

    profile = ModelProfile(context_window=window)  # pyright: ignore[reportArgumentType]
    share = Band(over=50_000, action=Truncate(max_chars=2_000), share=0.05)
    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=tmp_path),
        bands=[share],
        redact_secrets=SecretRedaction(),
        aging=Aging(after_turns=1, min_tokens=10, batch_tokens=10),
    )
    agent = Agent(FunctionModel(respond, profile=profile), capabilities=[capability])

    @agent.tool_plain
    def dump(n: int) -> str:
        return f'GITHUB_TOKEN={GITHUB}\n' + 'row of a dump\n' * 16_500  # 231 KB

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('go')
    texts = _sent_texts(seen)
    assert texts and all(len(text) <= 3_000 for text in texts)  # the band's `over` applies: cut, never sent whole
    assert not any(_leaked(text) for text in texts)
    named = [str(w.message) for w in caught if 'context window' in str(w.message)]
    assert len(named) == 1, [str(w.message) for w in caught]
    assert repr(window) in named[0]


async def test_a_filter_that_raises_on_every_tool_still_masks_every_return(tmp_path: Path) -> None:
    def broken(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        raise KeyError('reduce')

    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=tmp_path), tool_filter=broken, redact_secrets=SecretRedaction()
    )
    agent, seen = _retrying_agent(capability)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        result = await agent.run('go')
    assert result.output == 'done'
    texts = _sent_texts(seen)
    assert any('quarterly report line' in text for text in texts)
    assert sum('deploy 2 failed: GITHUB_TOKEN=[secret withheld: GitHub Token]' in text for text in texts) >= 1
    assert not any(_leaked(text) for text in texts)
