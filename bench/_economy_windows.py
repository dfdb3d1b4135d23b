"""The economy scenarios under an 8k-, a 128k- and a 1M-token context window, with bands relative to the window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bench._economy_core import MODELS, Outcome, run_scenario, scenarios
from bench._report import Entry
from examples._scripted import seeded_run_ids
from pydantic_ai_harness.overflowing_tool_output import Aging, Band, LocalFileStore, OverflowingToolOutput, Spill

WINDOWS: dict[str, int] = {'8k': 8_000, '128k': 128_000, '1M': 1_000_000}
"""The context windows the scenarios run under, in tokens, by the name the report gives them."""

SHARE = 0.05
"""The band's threshold: this share of the context window, in tokens."""

TIGHTEN = 0.5
"""How much the share shrinks as the window fills (`share * (1 - tighten * used)`)."""

PAGES_SCENARIO_TOOL = 'get_page'
"""The tool of the ten-page scenario, whose retrieval calls have their own target."""

MAX_PAGE_RETRIEVALS = 2
"""The target: retrieval calls for the ten-page scenario, with every model under every window."""


def relative_bands(root: Path, aging: Aging | None = None) -> OverflowingToolOutput[None]:
    """Spill a return over 5% of the window (tightening to 2.5% as it fills); 10,000 characters if it is unknown."""
    band = Band(over=10_000, action=Spill(), share=SHARE, tighten=TIGHTEN)
    return OverflowingToolOutput(bands=[band], store=LocalFileStore(base_dir=root), aging=aging)


@dataclass(frozen=True)
class WindowOutcome:
    """One scenario run with one model under one context window."""

    window: str
    """The window's name (`'8k'`, ...)."""

    window_tokens: int
    """Its size in tokens."""

    outcome: Outcome
    """What the run cost and whether it found the fact."""


async def measure_windows(root: Path, count: Callable[[str], int]) -> list[WindowOutcome]:
    """Every scenario with every model under every window, with the context-relative band."""
    outcomes: list[WindowOutcome] = []
    for w_index, (window, tokens) in enumerate(WINDOWS.items()):
        for s_index, scenario in enumerate(scenarios()):
            seed = 5_000 + w_index * 100 + s_index
            for model_name, model in MODELS.items():
                brain = model([scenario.question], count_tokens=count, seed=seed)
                capability = relative_bands(root / f'{window}-{s_index}-{len(outcomes)}')
                with seeded_run_ids(seed):
                    outcome = await run_scenario(scenario, capability, brain, context_window=tokens)
                outcome = replace(outcome, configuration=f'share={SHARE}, tighten={TIGHTEN}', model=model_name)
                outcomes.append(WindowOutcome(window, tokens, outcome))
    return outcomes


def window_entries(outcomes: list[WindowOutcome]) -> tuple[list[Entry], str]:
    """Facts found, and the ten-page scenario's retrieval calls, per window and model; the table of totals."""
    pages = next(s.name for s in scenarios() if s.tool == PAGES_SCENARIO_TOOL)
    groups: dict[tuple[str, str], list[WindowOutcome]] = {}
    for w in outcomes:
        groups.setdefault((w.window, w.outcome.model), []).append(w)
    entries: list[Entry] = []
    rows: list[str] = []
    for (window, model), group in groups.items():
        runs = [w.outcome for w in group]
        found = sum(o.found for o in runs)
        tokens = sum(o.tokens for o in runs)
        calls = sum(o.retrievals for o in runs)
        peak = max(o.peak for o in runs)
        over = sum(o.peak > w.window_tokens for o, w in zip(runs, group))
        [paged] = [o for o in runs if o.scenario == pages]
        entries.append(
            Entry(
                'economy',
                f'{model}, {window}-token window, context-relative band: facts found',
                found,
                f'of {len(runs)}',
                f'{len(runs)} of {len(runs)}',
                found == len(runs),
                detail=f'{tokens:,} input tokens, {calls} retrieval calls; largest request {peak:,} tokens',
            )
        )
        entries.append(
            Entry(
                'economy',
                f'{model}, {window}-token window: ten 300 KB pages, retrieval calls',
                paged.retrievals,
                'calls',
                f'<= {MAX_PAGE_RETRIEVALS}, fact found',
                paged.found and paged.retrievals <= MAX_PAGE_RETRIEVALS,
                detail=f'{paged.tokens:,} input tokens over {paged.requests} requests',
            )
        )
        rows.append(
            f'| {window} | {model} | {tokens:,} | {calls} | {found}/{len(runs)} | {peak:,} ({peak / group[0].window_tokens:.1%}) '
            f'| {over} | {paged.tokens:,} | {paged.retrievals} | {"yes" if paged.found else "**no**"} |'
        )
    table = (
        f'The same 8 scenarios under three context windows, with one band relative to the window: '
        f'`Band(over=10_000, action=Spill(), share={SHARE}, tighten={TIGHTEN})` (spill a return of more than '
        f'{SHARE:.0%} of the window, in tokens, down to {SHARE * (1 - TIGHTEN):.1%} as the window fills; '
        'the model reports its window through its profile, as `ModelProfile(context_window=...)`). Every payload '
        'of the 8 scenarios is over 100,000 tokens (a 300 KB page: about 118,000), more than 5% of even the 1M '
        'window, so each is stored under every window and the figures differ only by their handles; the windows '
        'part ways in the long session below, whose returns are 2-8 KB:\n\n'
        '| window | model | input tokens, 8 scenarios (cl100k) | retrieval calls | facts found '
        '| largest request (share of the window) | scenarios whose largest request exceeds the window '
        '| ten pages: input tokens | ten pages: retrieval calls | ten pages: fact found |\n'
        '|---|---|---:|---:|---|---:|---:|---:|---:|---|\n' + '\n'.join(rows)
    )
    return entries, table
