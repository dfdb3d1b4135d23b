"""Economy questions beyond one planted fact: an answer near the line shown, a structural question, parallel calls."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._economy_core import MODELS, Outcome, Scenario, run_scenario
from bench._report import Entry
from examples import _payloads as payloads
from examples._scripted import (
    NOT_FOUND,
    Question,
    part_text,
    provider_call_ids,
    seeded_run_ids,
    tool_definitions_text,
    visible_text,
)
from pydantic_ai_harness.overflowing_tool_output import (
    LocalFileStore,
    OverflowingToolOutput,
    Spill,
    StepBudget,
)

# --- the answer a few lines away from the line shown ------------------------------------------------

TRACEBACK_QUESTION = Question(
    'The CI run is red. Which line of which test file does the failing test break on?',
    [('run_tests', {})],
    'FAILED',
    lambda text: (m := re.search(r'File "(tests/\S+)", line (\d+)', text)) and f'{m[1]}:{m[2]}',
)
"""The demo's question: the answer is in the traceback, 3 lines above the `FAILED` line a preview or grep shows."""


async def measure_nearby(root: Path, count: Callable[[str], int]) -> dict[str, Outcome]:
    """The traceback question on a 50,000-line test log, default configuration, with every scripted model."""
    scenario = Scenario(
        '50,000-line test log, answer in the traceback',
        'run_tests',
        lambda _: payloads.test_log(),
        TRACEBACK_QUESTION,
        payloads.FAILING_LOCATION,
    )
    outcomes: dict[str, Outcome] = {}
    for model_name, model in MODELS.items():
        brain = model([scenario.question], count_tokens=count, seed=3_000)
        capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root / f'nearby-{len(outcomes)}'))
        with seeded_run_ids(3_000):
            outcome = await run_scenario(scenario, capability, brain)
        outcomes[model_name] = replace(outcome, configuration='default', model=model_name)
    return outcomes


def nearby_entries(outcomes: dict[str, Outcome]) -> tuple[list[Entry], str]:
    entries = [
        Entry(
            'economy',
            f'{model}, default: the answer 3 lines above the line shown (traceback question): retrieval calls',
            o.retrievals,
            'calls',
            '<= 2, answer found',
            o.found and o.retrievals <= 2,
            detail=f'{o.tokens:,} tokens; answer {o.answer!r}',
        )
        for model, o in outcomes.items()
    ]
    rows = '\n'.join(
        f'| {model} | {o.retrievals} | {o.tokens:,} | {"yes" if o.found else "**no**"} |'
        for model, o in outcomes.items()
    )
    table = (
        f'The answer a few lines from the line shown, "{TRACEBACK_QUESTION.prompt}" over a 50,000-line test log '
        "(default configuration; the preview and grep show the `FAILED` line, the answer is the traceback's "
        '`File ..., line N` 3 lines above it):\n\n'
        '| model | retrieval calls | input tokens (cl100k) | answer found |\n|---|---:|---:|---|\n' + rows
    )
    return entries, table


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


def _structural_model(strategy: str, trace: _StructuralTrace, count: Callable[[str], int], seed: int) -> FunctionModel:
    """A careful model answering the structural question, by grep and reads, or by one path query."""
    state: dict[str, Any] = {'hits': [], 'ids': []}
    call_ids = provider_call_ids(seed)

    def call(name: str, args: dict[str, Any]) -> ModelResponse:
        trace.retrievals += 1
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=next(call_ids))])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        trace.tokens += sum(count(part_text(part)) for message in messages for part in message.parts)
        trace.tokens += count(tool_definitions_text(info.function_tools))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('list_orders', {}, tool_call_id=next(call_ids))])
        text = visible_text(messages[-1])
        handle = re.search(r"handle '([^']+)'", text) or re.search(r"handle='([^']+)'", text)
        if 'handle' not in state and handle:
            state['handle'] = handle.group(1)
            if strategy == 'path query':
                return call('read_tool_result', {'handle': state['handle'], 'path': "$.data[?@.status=='stuck'].id"})
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
    for seed, strategy in enumerate(('grep and read', 'path query'), start=1_000):
        trace = _StructuralTrace()
        capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root / strategy.replace(' ', '-')))
        agent = Agent(_structural_model(strategy, trace, count, seed), capabilities=[capability])
        agent.tool_plain(name='list_orders')(lambda: document)
        with seeded_run_ids(seed):
            await agent.run(STRUCTURAL_QUESTION)
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
_PARALLEL_HANDLE = re.compile(r"handle '([^']+)'")
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


def _parallel_model(trace: _StructuralTrace, count: Callable[[str], int], seed: int) -> FunctionModel:
    """A careful model: one step of parallel searches, then one grep over the stored results it was not shown in full."""
    call_ids = provider_call_ids(seed)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        trace.tokens += sum(count(part_text(part)) for message in messages for part in message.parts)
        trace.tokens += count(tool_definitions_text(info.function_tools))
        if len(messages) == 1:
            calls = [
                ToolCallPart('search_catalog', {'region': r}, tool_call_id=next(call_ids))
                for r in range(PARALLEL_CALLS)
            ]
            return ModelResponse(parts=calls)
        text = visible_text(messages[-1])
        found = _PARALLEL_ANSWER.search(text)
        if found:
            trace.answer = (1, [found.group(1)])
            return ModelResponse(parts=[TextPart(found.group(1))])
        handles = _PARALLEL_HANDLE.findall(text)
        if handles and trace.retrievals == 0:
            # One stored result: grep it by its handle; several: one grep without a handle searches them all.
            trace.retrievals = 1
            arguments = {'handle': handles[0]} if len(handles) == 1 else {}
            arguments |= {'pattern': 'WIDGET-42', 'max_matches': 1}
            return ModelResponse(parts=[ToolCallPart('grep_tool_result', arguments, tool_call_id=next(call_ids))])
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
        agent = Agent(_parallel_model(trace, count, 2_000 + number), capabilities=[capability])
        agent.tool_plain(name='search_catalog')(regional_catalog)
        with seeded_run_ids(2_000 + number):
            await agent.run(PARALLEL_QUESTION)
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
