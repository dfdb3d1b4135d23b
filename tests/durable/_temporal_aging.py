"""Agents that age old returns under Temporal, then search every stored result without a handle.

`agent` passes the conversation's handles into activities (`OverflowTemporalRunContext`); `plain_context_agent`
uses Temporal's own run context, which carries no messages. At module level, as Temporal workers need them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability, TemporalRunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig

from pydantic_ai_harness.overflowing_tool_output import Aging, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output.temporal import OverflowTemporalRunContext

from ._temporal_agent import STORE_DIR

PAGES = 10
FACT = 'the secret word of page 1 is word-7919'


def page(n: int) -> str:
    lines = [f'page {n}, line {i}: the quick brown fox jumps over the lazy dog' for i in range(50)]
    return '\n'.join([*lines, f'the secret word of page {n} is word-{n * 7919}'])


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    if len(returns) < PAGES:
        return ModelResponse(parts=[ToolCallPart('fetch_page', {'n': len(returns)}, f'call_{len(returns)}')])
    if returns[-1].tool_name != 'grep_tool_result':
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'pattern': 'secret word of page 1 '}, 'grep')])
    stubs = sum(str(p.content).startswith('[Moved out of context:') for p in returns)
    return ModelResponse(parts=[TextPart(f'{stubs} stubs\n{returns[-1].content}')])


async def fetch_page(n: int) -> str:
    return page(n)


def _build(name: str, run_context_type: type[TemporalRunContext[Any]]) -> Agent[Any, str]:
    durability = TemporalDurability[Any](
        activity_config=ActivityConfig(
            start_to_close_timeout=timedelta(seconds=4),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
        ),
        run_context_type=run_context_type,
    )
    capability = OverflowingToolOutput[Any](
        store=LocalFileStore(base_dir=STORE_DIR),
        workspace=None,
        aging=Aging(after_turns=2, min_tokens=100, batch_tokens=1_500),
    )
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name=name,
        tools=[fetch_page],
        capabilities=[capability, durability],
    )


agent = _build('aging_agent', OverflowTemporalRunContext)
plain_context_agent = _build('aging_plain_context_agent', TemporalRunContext)
