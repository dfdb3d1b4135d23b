"""When to offer the query tools: from the first request (the library's choice) or only once something is stored.

Tool definitions are part of the cached prefix of every request. Offering `read_tool_result` / `grep_tool_result`
from the first request keeps that prefix stable for the whole run, at about 380 tokens per request before anything
is stored; offering them only once a result is stored saves those tokens and keeps a model from calling them blind,
at the price of one prefix break when they appear (and one more whenever they leave again). `OfferedOnceStored` is
the second policy, built in the benchmark only, so both can be measured on the scripted scenarios and the real model.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from bench._economy_core import Outcome, cached, run_scenario, scenarios
from bench._economy_session import AGINGS, DEFAULT_AGING, CarefulSession, SessionOutcome, run_session
from examples._scripted import CarefulModel, cl100k_counter, seeded_run_ids
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, overflow_report


@dataclass
class OfferedOnceStored(OverflowingToolOutput[Any]):
    """The capability, with its query tools offered only at requests whose history holds a stored result."""

    def get_toolset(self) -> AbstractToolset[Any] | None:
        toolset = super().get_toolset()
        if toolset is None:
            return None

        def stored(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
            return bool(overflow_report(ctx.messages).handles)

        return toolset.filtered(stored)


POLICIES: dict[str, Callable[..., OverflowingToolOutput[Any]]] = {
    'from the first request': OverflowingToolOutput,
    'once something is stored': OfferedOnceStored,
}
"""The two ways to offer the query tools, by the name the report gives them."""


@dataclass
class OfferOutcome:
    """The economy's eight scenarios and the long session, under one policy, with the careful model."""

    policy: str
    """The policy's name."""
    scenario_tokens: int
    """Input tokens over the eight scenarios (default configuration)."""
    scenario_facts: int
    """Facts found of the eight."""
    session: SessionOutcome
    """The long session with `default + Aging()`."""


async def measure_offer() -> list[OfferOutcome]:
    """Both policies on the scripted scenarios (same seeds as the economy section's default configuration)."""
    count = cached(cl100k_counter())
    results: list[OfferOutcome] = []
    with tempfile.TemporaryDirectory(prefix='offer-') as tmp:
        root = Path(tmp)
        for p_index, (policy, make) in enumerate(POLICIES.items()):
            outcomes: list[Outcome] = []
            for s_index, scenario in enumerate(scenarios()):
                seed = s_index * 100 + 2  # the economy section's seed for the default configuration
                brain = CarefulModel([scenario.question], count_tokens=count, seed=seed)
                capability = make(store=LocalFileStore(base_dir=root / f'{p_index}-{s_index}'))
                with seeded_run_ids(seed):
                    outcomes.append(replace(await run_scenario(scenario, capability, brain), configuration=policy))
            session_capability = make(
                store=LocalFileStore(base_dir=root / f'{p_index}-session'), aging=AGINGS[DEFAULT_AGING]
            )
            session = await run_session(session_capability, CarefulSession, count, seed=8_001)
            results.append(
                OfferOutcome(
                    policy,
                    sum(o.tokens for o in outcomes),
                    sum(o.found for o in outcomes),
                    session,
                )
            )
    return results


def offer_table(results: list[OfferOutcome]) -> str:
    """The policies side by side."""
    rows = [
        (
            '| query tools offered | 8 scenarios: input tokens | facts | long session: input tokens | requests | facts '
            '| prefix breaks |'
        ),
        '|---|---:|---|---:|---:|---|---:|',
    ]
    for r in results:
        s = r.session
        rows.append(
            f'| {r.policy} | {r.scenario_tokens:,} | {r.scenario_facts}/8 | {s.tokens:,} | {s.requests} '
            f'| {s.found}/{s.facts} | {s.breaks} |'
        )
    return '\n'.join(rows)


if __name__ == '__main__':
    print(offer_table(asyncio.run(measure_offer())))
