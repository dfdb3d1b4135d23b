"""Overhead of `OverflowingToolOutput` on tool returns below every threshold (the common case)."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from bench._report import Entry
from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

TITLE = 'Overhead below the threshold'
METHOD = """
An agent on a scripted `FunctionModel` (which answers instantly, so only framework and capability time is
measured) makes 1,000 tool calls; every tool returns a 2,000-character text, below the default
10,000-character band, so nothing is reduced. The figure is the run time with `OverflowingToolOutput()`
divided by the run time without it, in CPU time of the process (so other processes' load does not count).
The two agents alternate over 15 interleaved pairs after a warm-up, and the median of the per-pair ratios is
reported.

Two shapes: one run of 10 steps with 100 parallel calls each (the per-return cost the target is about),
and 100 short runs of one step with 10 calls each, where the per-run cost of advertising the two query
tools (`read_tool_result`, `grep_tool_result`) to the model on every request weighs more. That second
figure is reported for information: with a real model, whose latency is hundreds of milliseconds per
request, both vanish.

To separate what pydantic-ai charges for any capability with a tool hook from what this one adds, each shape
also compares a no-op capability (a hook that returns its input) with no capability, and
`OverflowingToolOutput` with that no-op capability.
"""

PAYLOAD = 'x' * 1_999 + '\n'
PAIRS = 15


def _agent(capabilities: list[Any], steps: int, calls: int) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = len(messages) // 2
        if step < steps:
            return ModelResponse(
                parts=[ToolCallPart('fetch', {'n': n}, tool_call_id=f's{step}c{n}') for n in range(calls)]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond), capabilities=capabilities)

    @agent.tool_plain
    def fetch(n: int) -> str:
        return PAYLOAD

    return agent


async def _time(agent: Agent[None, str], runs: int) -> float:
    gc.collect()
    # CPU time of the whole process (worker threads included): other processes' load does not count.
    started = time.process_time()
    for _ in range(runs):
        await agent.run('go')
    return time.process_time() - started


@dataclass
class NoOpHook(AbstractCapability[Any]):
    """A capability whose tool hook returns its input: what any tool-hook capability costs in pydantic-ai."""

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: dict[str, Any], result: Any
    ) -> Any:
        return result


async def _ratio(
    make: Callable[[list[Any]], Agent[None, str]], runs: int, base: list[Any], other: list[Any]
) -> tuple[float, float, float]:
    """The median, over interleaved pairs, of (time of `other`) / (time of `base`), and both medians."""
    bare = make(base)
    capped = make(other)
    await _time(bare, runs)  # warm-up: imports, schemas, caches
    await _time(capped, runs)
    ratios: list[float] = []
    bare_times: list[float] = []
    capped_times: list[float] = []
    for index in range(PAIRS):
        # Alternate which goes first, so a drift in machine load does not favour either.
        first, second = (bare, capped) if index % 2 == 0 else (capped, bare)
        t_first = await _time(first, runs)
        t_second = await _time(second, runs)
        b, c = (t_first, t_second) if first is bare else (t_second, t_first)
        bare_times.append(b)
        capped_times.append(c)
        ratios.append(c / b)
    return statistics.median(ratios), statistics.median(bare_times), statistics.median(capped_times)


def run() -> list[Entry]:
    def wide(caps: list[Any]) -> Agent[None, str]:
        return _agent(caps, steps=10, calls=100)

    def short(caps: list[Any]) -> Agent[None, str]:
        return _agent(caps, steps=1, calls=10)

    entries: list[Entry] = []
    for label, make, runs, target in (
        ('10 steps x 100 calls', wide, 1, True),
        ('100 runs x 10 calls', short, 100, False),
    ):
        ratio, bare, capped = asyncio.run(_ratio(make, runs, [], [OverflowingToolOutput()]))
        entries.append(
            Entry(
                'overhead',
                f'1,000 tool calls below the threshold ({label}): with vs without the capability',
                ratio,
                'x',
                '<= 1.05x' if target else 'information',
                ratio <= 1.05 or not target,
                detail=f'{bare * 1e3:.0f} ms vs {capped * 1e3:.0f} ms',
            )
        )
        floor, bare, noop = asyncio.run(_ratio(make, runs, [], [NoOpHook()]))
        entries.append(
            Entry(
                'overhead',
                f"the same ({label}): a no-op tool-hook capability vs none (pydantic-ai's own cost of a hook)",
                floor,
                'x',
                'information',
                True,
                detail=f'{bare * 1e3:.0f} ms vs {noop * 1e3:.0f} ms',
            )
        )
        own, noop, capped = asyncio.run(_ratio(make, runs, [NoOpHook()], [OverflowingToolOutput()]))
        entries.append(
            Entry(
                'overhead',
                f'the same ({label}): OverflowingToolOutput vs the no-op capability (the reduction logic itself)',
                own,
                'x',
                'information',
                True,
                detail=f'{noop * 1e3:.0f} ms vs {capped * 1e3:.0f} ms',
            )
        )
    return entries
