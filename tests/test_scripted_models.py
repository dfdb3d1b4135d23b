"""The scripted models of the demo and the economy benchmark, in real agent runs: honest, deterministic, as specified."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench import (
    _economy_core as economy,
    _economy_questions as questions,
    _economy_session as session,
    _economy_windows as windows,
    _session_payloads as session_payloads,
    bench_economy,
)
from examples import _payloads as payloads
from examples._scripted import (
    NOT_FOUND,
    CarefulModel,
    ClaudeCodeModel,
    Question,
    ScriptedModel,
    cl100k_counter,
    on_line,
    provider_call_ids,
    seeded_run_ids,
)
from pydantic_ai_harness.overflowing_tool_output import Aging, Band, LocalFileStore, OverflowingToolOutput, Truncate

pytestmark = pytest.mark.anyio

TRACEBACK = questions.TRACEBACK_QUESTION

DEPLOY_LOG_FAILURE = 'deploy to eu-west-3 halted'
DEPLOY_REASON = 'quota exceeded for instance type m7g.large'


@pytest.fixture(autouse=True)
def _no_tokenizer_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken copies even a bundled encoding into a cache dir; an empty value turns that off.
    monkeypatch.setenv('TIKTOKEN_CACHE_DIR', '')


def deploy_log(lines: int = 30_000) -> str:
    """A deploy log whose failure line names no reason (nor looks important): the reason comes 4 lines below it."""
    rows = [f'[{i:06d}] step {i % 97} ok' for i in range(lines)]
    at = lines // 2
    rows[at : at + 5] = [
        f'[{at:06d}] {DEPLOY_LOG_FAILURE}',
        f'[{at + 1:06d}] collecting diagnostics',
        f'[{at + 2:06d}] diagnostics collected',
        f'[{at + 3:06d}] rolling back',
        f'[{at + 4:06d}] reason: {DEPLOY_REASON}',
    ]
    return '\n'.join(rows) + '\n'


DEPLOY_QUESTION = Question(
    'Why did the deploy fail?',
    [('read_log', {})],
    'halted',
    on_line('reason:', r'reason: (.+)$'),
)


async def run_agent(
    brain: ScriptedModel,
    tool: str,
    output: Any,
    capability: OverflowingToolOutput[Any] | None,
    seed: int = 1,
) -> list[ModelMessage]:
    agent = Agent(brain.model(), capabilities=[capability] if capability else [])
    agent.tool_plain(name=tool)(lambda: output)
    with seeded_run_ids(seed):
        result = await agent.run('\n'.join(q.prompt for q in brain.questions))
    return result.all_messages()


def calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    return [p for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)]


def returns(messages: list[ModelMessage]) -> list[str]:
    return [p.model_response_str() for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def spill(tmp_path: Path) -> OverflowingToolOutput[Any]:
    return OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'store'))


async def test_claude_code_model_reads_a_50_line_window_from_a_line_number_the_preview_showed(tmp_path: Path) -> None:
    brain = ClaudeCodeModel([TRACEBACK])
    messages = await run_agent(brain, 'run_tests', payloads.test_log(), spill(tmp_path))

    assert brain.trace.answers == [payloads.FAILING_LOCATION]
    preview = returns(messages)[0]
    failed_line = int(re.search(r'^(\d+)\| FAILED ', preview, re.MULTILINE)[1])  # pyright: ignore[reportOptionalSubscript]
    handle = re.search(r"handle '([^']+)'", preview)[1]  # pyright: ignore[reportOptionalSubscript]
    assert 'File "tests/api/test_checkout.py"' not in preview  # the answer was not in view: it had to read
    # One read, no grep: the shown line number minus a few lines, 50 lines, the preview's handle verbatim.
    [_, read] = calls(messages)
    assert read.tool_name == 'read_tool_result'
    assert read.args_as_dict() == {'handle': handle, 'offset': failed_line - 5, 'limit': 50}
    assert brain.trace.retrieval_calls == 1
    # offset is the first line shown, so the window starts where the model asked.
    assert f'lines {failed_line - 5}-{failed_line + 44} of' in returns(messages)[1]


async def test_claude_code_model_reads_around_a_grep_hit_whose_line_lacks_the_fact(tmp_path: Path) -> None:
    brain = ClaudeCodeModel([DEPLOY_QUESTION])
    messages = await run_agent(brain, 'read_log', deploy_log(), spill(tmp_path))

    assert brain.trace.answers == [DEPLOY_REASON]
    [_, grep, read] = calls(messages)
    hit = int(re.search(r'^>\s*(\d+)\| ', returns(messages)[1], re.MULTILINE)[1])  # pyright: ignore[reportOptionalSubscript]
    assert grep.args_as_dict()['pattern'] == 'halted'
    assert read.args_as_dict()['offset'] == hit - 5
    assert read.args_as_dict()['limit'] == 50
    assert brain.trace.retrieval_calls == 2


async def test_careful_model_reads_from_the_offset_grep_suggests_as_given(tmp_path: Path) -> None:
    brain = CarefulModel([TRACEBACK])
    messages = await run_agent(brain, 'run_tests', payloads.test_log(), spill(tmp_path))

    assert brain.trace.answers == [payloads.FAILING_LOCATION]
    [_, grep, read] = calls(messages)
    assert grep.tool_name == 'grep_tool_result'
    suggested = int(re.search(r'read around it: .*?offset=(\d+)', returns(messages)[1])[1])  # pyright: ignore[reportOptionalSubscript]
    assert read.args_as_dict()['offset'] == suggested  # not 5 lines above the suggestion


@pytest.mark.parametrize('model', [CarefulModel, ClaudeCodeModel])
async def test_scripted_models_answer_not_found_when_the_stored_output_lacks_the_fact(
    tmp_path: Path, model: type[ScriptedModel]
) -> None:
    brain = model([DEPLOY_QUESTION])
    log = deploy_log().replace(DEPLOY_LOG_FAILURE, 'deploy to eu-west-3 done').replace('reason:', 'note:')
    await run_agent(brain, 'read_log', log, spill(tmp_path))

    assert brain.trace.answers == [NOT_FOUND]
    assert brain.trace.retrieval_calls == 1  # one grep that found nothing, then an honest answer


@pytest.mark.parametrize('model', [CarefulModel, ClaudeCodeModel])
async def test_scripted_models_answer_not_found_when_truncation_cut_the_fact(model: type[ScriptedModel]) -> None:
    brain = model([TRACEBACK])
    capability = OverflowingToolOutput(bands=[Band(over=10_000, action=Truncate())])
    messages = await run_agent(brain, 'run_tests', payloads.test_log(), capability)

    assert brain.trace.answers == [NOT_FOUND]
    assert brain.trace.retrieval_calls == 0  # nothing stored, so nothing to page back into
    assert [c.tool_name for c in calls(messages)] == ['run_tests']


@pytest.mark.parametrize('model', [CarefulModel, ClaudeCodeModel])
async def test_scripted_models_answer_from_the_output_when_it_is_shown_in_full(model: type[ScriptedModel]) -> None:
    brain = model([DEPLOY_QUESTION])
    await run_agent(brain, 'read_log', deploy_log(200), None)

    assert brain.trace.answers == [DEPLOY_REASON]
    assert brain.trace.retrieval_calls == 0


async def test_tool_definitions_are_counted_apart_from_the_messages(tmp_path: Path) -> None:
    with_capability = CarefulModel([DEPLOY_QUESTION], count_tokens=cl100k_counter())
    await run_agent(with_capability, 'read_log', deploy_log(), spill(tmp_path))
    bare = CarefulModel([DEPLOY_QUESTION], count_tokens=cl100k_counter())
    await run_agent(bare, 'read_log', deploy_log(200), None)

    trace = with_capability.trace
    assert trace.message_tokens + trace.tool_definition_tokens == trace.input_tokens
    # The query tools are sent with each of the requests, and are most of the definitions.
    assert trace.requests == 4
    assert trace.tool_definition_tokens > trace.query_tool_definition_tokens > trace.tool_definition_tokens * 0.8
    assert trace.query_tool_definition_tokens % trace.requests == 0
    assert bare.trace.query_tool_definition_tokens == 0
    assert 0 < bare.trace.tool_definition_tokens < trace.tool_definition_tokens


def test_call_ids_look_like_a_providers_and_repeat_with_their_seed() -> None:
    first = provider_call_ids(7)
    ids = [next(first) for _ in range(50)]
    again = provider_call_ids(7)
    assert [next(again) for _ in range(50)] == ids
    assert all(re.fullmatch(r'call_[A-Za-z0-9]{24}', i) for i in ids)
    assert len(set(ids)) == 50
    assert next(provider_call_ids(8)) != ids[0]


async def test_seeded_run_ids_are_pydantic_ais_own_uuid7_run_ids_and_repeat() -> None:
    async def run_id() -> str:
        agent = Agent(CarefulModel([DEPLOY_QUESTION]).model())
        agent.tool_plain(name='read_log')(lambda: deploy_log(10))
        return (await agent.run('why?')).run_id

    with seeded_run_ids(5):
        first = [await run_id(), await run_id()]
    with seeded_run_ids(5):
        again = [await run_id(), await run_id()]
    assert first == again
    assert first[0] != first[1]
    assert all(uuid.UUID(i).version == 7 and str(uuid.UUID(i)) == i for i in first)
    # Outside the context pydantic-ai's own random generator is back.
    assert await run_id() not in first
    with seeded_run_ids(6):
        assert await run_id() != first[0]


@pytest.mark.parametrize('model', ['careful', 'Claude Code-style'])
async def test_an_economy_scenario_finds_its_fact_and_repeats_exactly(tmp_path: Path, model: str) -> None:
    [scenario] = [s for s in economy.scenarios() if s.tool == 'read_source']
    count = economy.cached(cl100k_counter())

    async def once(root: Path) -> economy.Outcome:
        brain = economy.MODELS[model]([scenario.question], count_tokens=count, seed=3)
        capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root))
        with seeded_run_ids(3):
            return await economy.run_scenario(scenario, capability, brain)

    first, second = await once(tmp_path / 'a'), await once(tmp_path / 'b')
    assert first.found and first.answer == str(payloads.RETRY_LIMIT)
    assert first == second
    assert 0 < first.query_tool_definition_tokens < first.tool_definition_tokens < first.tokens


async def test_the_nearby_answer_bench_finds_it_with_both_models(tmp_path: Path) -> None:
    outcomes = await questions.measure_nearby(tmp_path, economy.cached(cl100k_counter()))
    entries, table = questions.nearby_entries(outcomes)

    assert {model: (o.found, o.retrievals) for model, o in outcomes.items()} == {
        'careful': (True, 2),  # grep, then the suggested read
        'Claude Code-style': (True, 1),  # a read from the line number the preview showed
    }
    assert all(e.ok for e in entries)
    assert '| Claude Code-style | 1 |' in table


async def test_tool_definition_costs_name_every_query_tool() -> None:
    costs = await bench_economy.tool_definition_costs(cl100k_counter())
    assert set(costs) == {'read_tool_result', 'grep_tool_result'}
    assert all(50 < tokens < 1_000 for tokens in costs.values())


PAGE_QUESTION = Question(
    'What does WIDGET-42 cost?',
    [('get_page', {'page': page}) for page in range(1, 11)],
    'WIDGET-42',
    on_line('WIDGET-42', r'WIDGET-42 costs ([\d.]+ EUR)'),
)


@pytest.mark.parametrize('model', [CarefulModel, ClaudeCodeModel])
async def test_scripted_models_fetch_every_page_then_search_them_all_at_once(
    tmp_path: Path, model: type[ScriptedModel]
) -> None:
    brain = model([PAGE_QUESTION])
    agent = Agent(brain.model(), capabilities=[spill(tmp_path)])
    agent.tool_plain(name='get_page')(payloads.catalog_page)
    with seeded_run_ids(2):
        messages = (await agent.run(PAGE_QUESTION.prompt)).all_messages()

    assert brain.trace.answers == ['129.50 EUR']
    made = calls(messages)
    # No preview names the widget: the ten pages first, then one search without a handle shows the fact.
    assert [c.tool_name for c in made] == ['get_page'] * 10 + ['grep_tool_result']
    assert 'handle' not in made[-1].args_as_dict()
    assert brain.trace.retrieval_calls == 1


@pytest.mark.parametrize(('model', 'limit'), [(CarefulModel, 12), (ClaudeCodeModel, 50)])
async def test_scripted_models_read_around_a_match_by_the_handle_the_search_names(
    tmp_path: Path, model: type[ScriptedModel], limit: int
) -> None:
    question = Question(
        DEPLOY_QUESTION.prompt,
        [('read_log', {'part': part}) for part in (1, 2)],
        DEPLOY_QUESTION.search,
        DEPLOY_QUESTION.extract,
    )
    brain = model([question])
    agent = Agent(brain.model(), capabilities=[spill(tmp_path)])
    parts = {
        1: deploy_log().replace(DEPLOY_LOG_FAILURE, 'deploy to eu-west-1 done').replace('reason:', 'note:'),
        2: deploy_log(),
    }
    agent.tool_plain(name='read_log')(lambda part: parts[part])
    with seeded_run_ids(4):
        messages = (await agent.run(question.prompt)).all_messages()

    assert brain.trace.answers == [DEPLOY_REASON]
    _, _, grep, read = calls(messages)
    assert grep.args_as_dict() == ({'pattern': 'halted', 'max_matches': 5} if limit == 12 else {'pattern': 'halted'})
    handle_of_part_2 = re.search(r"handle '([^']+)'", returns(messages)[1])
    assert handle_of_part_2 is not None
    assert read.args_as_dict()['handle'] == handle_of_part_2.group(1)
    assert read.args_as_dict()['limit'] == limit
    assert brain.trace.retrieval_calls == 2


async def test_prefix_breaks_count_the_requests_whose_earlier_messages_changed() -> None:
    sent: list[session.Snapshot] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(session.snapshot(messages, info))
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < 4:
            return ModelResponse(parts=[ToolCallPart('look', {'n': step}, tool_call_id=f'c{step}')])
        return ModelResponse(parts=[TextPart('done')])

    def age_the_first_return_from_the_fourth_request(messages: list[ModelMessage]) -> list[ModelMessage]:
        if sum(isinstance(m, ModelResponse) for m in messages) < 3:
            return messages
        first = messages[2]
        assert isinstance(first, ModelRequest)
        stub = [replace(p, content='[aged]') if isinstance(p, ToolReturnPart) else p for p in first.parts]
        return [*messages[:2], replace(first, parts=stub), *messages[3:]]

    agent = Agent(FunctionModel(respond), capabilities=[ProcessHistory(age_the_first_return_from_the_fourth_request)])
    agent.tool_plain(name='look')(lambda n: f'result {n} ' * 50)
    await agent.run('go')

    assert len(sent) == 5
    # The fourth request changed the first return: its prefix broke once; the fifth starts with the fourth whole.
    assert session.prefix_breaks(sent) == 1


async def test_the_long_session_finds_every_fact_in_61_requests_without_breaking_a_prefix(tmp_path: Path) -> None:
    count = economy.cached(cl100k_counter())
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))
    outcome = await session.run_session(capability, session.CarefulSession, count, seed=1)

    assert (outcome.found, outcome.facts, outcome.requests, outcome.breaks) == (6, 6, 61, 0)
    assert outcome.retrievals == 0  # every return is below the band, so every fact is still in view
    assert outcome.answers == [answer for _, answer in session_payloads.FACTS]


async def test_the_long_session_with_aging_reads_every_fact_back_and_repeats_exactly(tmp_path: Path) -> None:
    count = economy.cached(cl100k_counter())

    async def once(name: str, aging: Aging | None) -> session.SessionOutcome:
        capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / name), aging=aging)
        return await session.run_session(capability, session.ClaudeCodeSession, count, seed=1)

    without, aged, again = await once('without', None), await once('aged', Aging()), await once('again', Aging())

    assert (aged.found, aged.facts) == (6, 6)
    assert aged.retrievals == 6  # each fact left the context, and one search without a handle found it
    assert aged.tokens <= without.tokens * session.MAX_AGED_SHARE
    assert 0 < aged.breaks <= aged.requests // 10
    assert aged.reported_breaks == aged.breaks  # the capability's count and the one from the requests sent agree
    # The books are kept by the text sent, so replaced (aged) parts are counted anew and a session repeats exactly.
    assert (again.tokens, again.breaks, again.answers) == (aged.tokens, aged.breaks, aged.answers)


async def test_under_an_8k_window_the_share_band_stores_every_session_return(tmp_path: Path) -> None:
    count = economy.cached(cl100k_counter())
    capability = windows.relative_bands(tmp_path)
    outcome = await session.run_session(capability, session.CarefulSession, count, seed=1, context_window=8_000)

    # 5% of 8,000 tokens is 400: every 2-8 KB return is stored, so facts not in a preview are searched for.
    assert (outcome.found, outcome.facts) == (6, 6)
    assert outcome.retrievals > 0
    assert outcome.tokens < 500_000  # about a quarter of the session with every return in full
    assert outcome.over_window > 0  # the previews alone outgrow the window: aging has to keep it in


def test_the_token_chart_labels_show_no_markdown() -> None:
    """docs/benchmarks-tokens.png: a scenario named with a code span (`find`) is labelled without backticks."""
    from bench._economy_core import scenarios

    labels = {scenario.name: bench_economy.tick_label(scenario.name) for scenario in scenarios()}
    assert labels['`find` listing, 120k paths'] == 'find listing'
    assert all('`' not in label for label in labels.values())
