"""Bands whose threshold is a share of the model's context window, in real agent runs."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from pydantic_ai_harness.overflowing_tool_output import Band, OverflowingToolOutput, Passthrough, Truncate

pytestmark = pytest.mark.anyio

TEXT = 'word ' * 4_000
"""20,000 characters, about 5,000 tokens by the default heuristic."""


def _band(**kwargs: float) -> Band:
    return Band(over=100_000, action=Truncate(max_chars=1_000), share=0.05, **kwargs)


async def _returned(window: int | None, band: Band, *, input_tokens: int = 0) -> str:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            usage = RequestUsage(input_tokens=input_tokens)
            return ModelResponse(parts=[ToolCallPart('read', {})], usage=usage)
        return ModelResponse(parts=[TextPart('done')])

    profile = ModelProfile(context_window=window) if window is not None else None
    agent = Agent(FunctionModel(respond, profile=profile), capabilities=[OverflowingToolOutput(bands=[band])])

    @agent.tool_plain
    def read() -> str:
        return TEXT

    result = await agent.run('go')
    [part] = [p for m in result.all_messages() for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    return str(part.content)


@pytest.mark.parametrize(
    ('window', 'cut'),
    [(8_000, True), (128_000, False), (1_000_000, False)],
)
async def test_a_share_band_follows_the_model_context_window(window: int, cut: bool) -> None:
    # 5% of 8k is 400 tokens: the ~5,000-token return is cut; 5% of 128k (6,400) and of 1M (50,000) let it pass.
    content = await _returned(window, _band())
    assert content.startswith('[truncated:') is cut
    assert (len(content) <= 1_000) is cut


async def test_an_unknown_window_falls_back_to_the_absolute_threshold() -> None:
    assert await _returned(None, _band()) == TEXT  # 20,000 characters are under over=100,000
    small = Band(over=1_000, action=Truncate(max_chars=1_000), share=0.5)
    assert (await _returned(None, small)).startswith('[truncated:')


async def test_tighten_shrinks_the_share_as_the_window_fills() -> None:
    # 128k window, 5%: 6,400 tokens, the return passes; 90% full with tighten=0.9: 6,400 * 0.19 = 1,216, it is cut.
    assert await _returned(128_000, _band(tighten=0.9)) == TEXT
    assert (await _returned(128_000, _band(tighten=0.9), input_tokens=115_200)).startswith('[truncated:')


def test_a_bad_share_or_tighten_is_reported_at_construction() -> None:
    with pytest.raises(ValueError, match=r'Band\.share must be a number in \(0, 1\], got 1\.5'):
        Band(over=1, action=Passthrough(), share=1.5)
    with pytest.raises(ValueError, match=r'Band\.tighten must be a number in \[0, 1\], got -0\.1'):
        Band(over=1, action=Passthrough(), share=0.1, tighten=-0.1)
    with pytest.raises(ValueError, match=r'Band\.tighten needs Band\.share'):
        Band(over=1, action=Passthrough(), tighten=0.5)


def test_a_spec_band_takes_share_and_tighten_and_names_a_bad_one() -> None:
    capability = OverflowingToolOutput.from_spec(
        bands=[{'over': 20_000, 'action': {'Truncate': {}}, 'share': 0.05, 'tighten': 0.5}]
    )
    assert capability.bands_for('any') == (Band(over=20_000, action=Truncate(), share=0.05, tighten=0.5),)
    with pytest.raises(Exception, match=r'bands\[0\]\.share: Band\.share must be'):
        OverflowingToolOutput.from_spec(bands=[{'over': 1, 'action': 'Passthrough', 'share': 2}])
