"""The request-time rules run per attempt, for the model that serves it (`prepare_model_request`).

Under `ModelFallback` the step's model may fail and another, with a smaller window, serve the request: the
window-relative rules (share bands on failure texts, `Aging.batch_share`) use the serving model's numbers, and what
an attempt put in the history stays there for the next attempt.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry, models
from pydantic_ai.capabilities import ModelFallback
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from pydantic_ai_harness.overflowing_tool_output import Aging, Band, LocalFileStore, OverflowingToolOutput, Truncate

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio

STUB = re.compile(r'^\[Moved out of context: the output of `page`')


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def stubs(messages: list[ModelMessage]) -> int:
    return sum(bool(STUB.match(str(p.content))) for p in returns(messages))


class Script:
    """One scripted conversation, served by whichever model gets the attempt; each model records what it was sent."""

    def __init__(self, steps: list[list[ToolCallPart]]) -> None:
        self.steps = steps
        self.sent: dict[str, list[list[ModelMessage]]] = {}

    def model(self, name: str, window: int, *, fails: bool = False) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.sent.setdefault(name, []).append(list(messages))
            if fails:
                raise ModelHTTPError(503, name, 'overloaded')
            step = sum(isinstance(m, ModelResponse) for m in messages)
            return ModelResponse(parts=self.steps[step] if step < len(self.steps) else [TextPart('done')])

        return FunctionModel(respond, model_name=name, profile=ModelProfile(context_window=window))


def agent(script: Script, first: FunctionModel, fallback: FunctionModel, capability: Any) -> Agent[None, str]:
    agent = Agent(first, capabilities=[ModelFallback(fallback), capability])

    @agent.tool_plain
    def page(n: int) -> str:
        return f'page {n}\n' + 'a line of the page\n' * 120  # ~2,300 characters, ~580 tokens

    @agent.tool_plain(retries=3)
    def deploy() -> str:
        raise ModelRetry('deploy failed\n' + 'trace line\n' * 2_000)  # 22,000 characters, ~5,500 tokens

    return agent


async def test_a_share_band_on_a_failure_text_uses_the_window_of_the_model_that_serves_the_attempt(
    tmp_path: Path,
) -> None:
    script = Script([[ToolCallPart('deploy', {})]])
    share = Band(over=1_000_000, action=Truncate(max_chars=1_000), share=0.05)
    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), bands=[share])
    big = script.model('big', 1_000_000, fails=True)  # 5% is 50,000 tokens: the text would pass
    small = script.model('small', 8_000)  # 5% is 400 tokens: the text is cut
    await agent(script, big, small, capability).run('deploy')
    [failure] = [p for p in returns(script.sent['small'][1]) if p.tool_name == 'deploy']
    assert failure.outcome == 'retried'
    assert len(failure.model_response_str()) < 1_200
    [whole] = [p for p in returns(script.sent['big'][1]) if p.tool_name == 'deploy']
    assert len(whole.model_response_str()) > 20_000  # the first attempt, for the big window, left it whole


async def test_aging_takes_the_batch_share_of_the_serving_model(tmp_path: Path) -> None:
    script = Script([[ToolCallPart('page', {'n': n})] for n in range(6)])
    aging = Aging(after_turns=2, min_tokens=100, batch_tokens=8_000, batch_share=0.1)
    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None, aging=aging)
    big = script.model('big', 1_000_000, fails=True)  # batch of min(8,000, 100,000): nothing ages
    small = script.model('small', 8_000)  # batch of min(8,000, 800): the old pages age
    result = await agent(script, big, small, capability).run('read')
    assert stubs(script.sent['small'][-1]) >= 2
    assert stubs(script.sent['big'][2]) == 0  # the first attempt of the step where the small model aged
    assert stubs(result.all_messages()) == stubs(script.sent['small'][-1])


async def test_what_an_attempt_aged_stays_aged_for_the_next_attempt(tmp_path: Path) -> None:
    script = Script([[ToolCallPart('page', {'n': n})] for n in range(6)])
    aging = Aging(after_turns=2, min_tokens=100, batch_tokens=8_000, batch_share=0.1)
    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None, aging=aging)
    small = script.model('small', 8_000, fails=True)  # ages, then fails
    big = script.model('big', 1_000_000)  # would not age, but the history already holds the stubs
    result = await agent(script, small, big, capability).run('read')
    aged_first = next(i for i, sent in enumerate(script.sent['small']) if stubs(sent))
    assert stubs(script.sent['big'][aged_first]) == stubs(script.sent['small'][aged_first]) >= 2
    assert stubs(result.all_messages()) >= 2
