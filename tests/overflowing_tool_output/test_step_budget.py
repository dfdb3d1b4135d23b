"""`step_budget`: the returns of one model response together stay within a budget, the same way every time."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.capabilities import PrefixTools
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Spill,
    StepBudget,
    Truncate,
)
from pydantic_ai_harness.overflowing_tool_output._request._step_budget import StepReturn, plan_step, step_note

pytestmark = pytest.mark.anyio


# --- the plan ---------------------------------------------------------------------------------------------


def test_the_plan_takes_the_largest_first_and_breaks_ties_by_call_order() -> None:
    returns = [StepReturn(0, 500, True), StepReturn(1, 900, True), StepReturn(2, 900, True), StepReturn(3, 100, True)]
    assert plan_step(returns, 2_400) == []
    assert plan_step(returns, 1_500) == [1]
    assert plan_step(returns, 700) == [1, 2]
    assert plan_step(returns, 50) == [1, 2, 0, 3]
    assert plan_step(list(reversed(returns)), 700) == [1, 2]  # the input order does not matter


def test_the_plan_never_picks_what_may_not_be_reduced() -> None:
    returns = [StepReturn(0, 5_000, False), StepReturn(1, 300, True)]
    assert plan_step(returns, 1_000) == [1]
    assert plan_step([StepReturn(0, 5_000, False)], 1_000) == []


def test_the_note_says_what_happened_and_why() -> None:
    note = step_note(calls=12, total=480_000, budget=100_000, size=60_000, action='truncated', unit='characters')
    assert note == snapshot(
        '[Step budget: the 12 tool results of this step came to 480000 characters, over the budget of 100000; this one (60000 characters, one of the largest) was truncated.]\n'
    )


@pytest.mark.parametrize(
    ('kwargs', 'error'),
    [
        ({'max_size': 0}, 'step_budget.max_size must be a positive int, got 0'),
        ({'max_size': True}, 'step_budget.max_size must be a positive int, got True'),
        ({'max_size': 10.5}, 'step_budget.max_size must be a positive int, got 10.5'),
        (
            {'max_size': 100, 'action': 'Spill'},
            "step_budget.action must be an action (Spill, Truncate, Summarize) or None, got 'Spill'",
        ),
    ],
)
def test_bad_settings_are_refused_at_construction(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises((ValueError, TypeError)) as caught:
        StepBudget(**kwargs)
    assert str(caught.value) == error


def test_a_step_budget_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match='step_budget must be a StepBudget or None, got int'):
        OverflowingToolOutput(step_budget=40_000)  # pyright: ignore[reportArgumentType]


# --- in agent runs ----------------------------------------------------------------------------------------


def parallel_model(count: int, seen: list[list[ModelMessage]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart('fetch', {'n': i}, tool_call_id=f'call_{i}') for i in range(count)]
            )
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


def returns_sent(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    return [part for part in request.parts if isinstance(part, ToolReturnPart)]


def body(n: int) -> str:
    """50 of the 1,000 results are large (8,000 characters), the rest small: each below the 10,000 band."""
    return f'result {n}: ' + ('x' * 8_000 if n % 20 == 7 else 'ok' * 40)


async def run_thousand(tmp_path: Path, seed: int) -> tuple[list[ToolReturnPart], list[ToolReturnPart]]:
    seen: list[list[ModelMessage]] = []
    rng = random.Random(seed)
    delays = [rng.random() / 200 for _ in range(1_000)]
    capability = OverflowingToolOutput(
        step_budget=StepBudget(max_size=150_000), store=LocalFileStore(base_dir=tmp_path / f'store-{seed}')
    )
    agent = Agent(parallel_model(1_000, seen), capabilities=[capability])

    @agent.tool_plain
    async def fetch(n: int) -> str:
        await anyio.sleep(delays[n])  # the calls finish in a different order with every seed
        return body(n)

    result = await agent.run('fetch them all', run_id='run-1')
    persisted = [m for m in result.all_messages() if isinstance(m, ModelRequest)][-1]
    return returns_sent(seen[-1]), [p for p in persisted.parts if isinstance(p, ToolReturnPart)]


async def test_a_thousand_parallel_calls_fit_by_reducing_the_largest(tmp_path: Path) -> None:
    sent, persisted = await run_thousand(tmp_path, seed=1)
    assert len(sent) == 1_000
    assert sum(len(part.model_response_str()) for part in sent) <= 150_000
    reduced = [part for part in sent if part.model_response_str().startswith('[Step budget:')]
    reduced_ids = {int(part.tool_call_id.split('_')[1]) for part in reduced}
    large = {n for n in range(1_000) if n % 20 == 7}
    assert reduced_ids <= large and len(reduced_ids) >= 40
    # Only the largest: every large result left as it was is no larger than any that was reduced.
    assert max(len(body(n)) for n in large - reduced_ids) <= min(len(body(n)) for n in reduced_ids)
    first = reduced[0].model_response_str()
    total = sum(len(body(n)) for n in range(1_000))
    assert first.startswith(
        f'[Step budget: the 1000 tool results of this step came to {total} characters, over the budget of 150000; '
        'this one ('
    )
    assert 'characters, one of the largest) was stored in full, with a preview here.]\n' in first
    assert 'handle' in first
    assert all(part.metadata and part.metadata['overflow_step_budget'] == 150_000 for part in reduced)
    # The history keeps what the model was sent.
    assert [p.model_response_str() for p in persisted] == [p.model_response_str() for p in sent]


async def test_the_same_returns_are_reduced_whatever_order_the_calls_finish_in(tmp_path: Path) -> None:
    first, _ = await run_thousand(tmp_path, seed=1)
    second, _ = await run_thousand(tmp_path, seed=2)
    assert [p.tool_call_id for p in first] == [p.tool_call_id for p in second]
    assert [p.model_response_str() for p in first] == [p.model_response_str() for p in second]


async def test_per_tool_bands_apply_first_and_empty_bands_are_never_reduced(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart('huge', {}, tool_call_id='h'),
                    ToolCallPart('pinned', {}, tool_call_id='p'),
                    ToolCallPart('medium', {}, tool_call_id='m1'),
                    ToolCallPart('medium', {}, tool_call_id='m2'),
                ]
            )
        return ModelResponse(parts=[TextPart('done')])

    capability = OverflowingToolOutput(
        per_tool={'pinned': [], 'huge': [Band(over=20_000, action=Truncate(max_chars=1_000))]},
        bands=[Band(over=50_000, action=Spill())],
        step_budget=StepBudget(max_size=20_000, action=Truncate(max_chars=2_000)),
        store=LocalFileStore(base_dir=tmp_path),
    )
    agent = Agent(FunctionModel(respond), capabilities=[capability])
    agent.tool_plain(name='huge')(lambda: 'h' * 100_000)
    agent.tool_plain(name='pinned')(lambda: 'p' * 12_000)
    agent.tool_plain(name='medium')(lambda: 'm' * 6_000)
    await agent.run('go')
    by_id = {part.tool_call_id: part.model_response_str() for part in returns_sent(seen[-1])}
    assert len(by_id['h']) <= 1_000 and not by_id['h'].startswith('[Step budget')  # its own band, once
    assert by_id['p'] == 'p' * 12_000  # empty bands: never reduced
    step_total = len(by_id['h']) + 12_000 + 2 * 6_000  # the huge return counts as its own band left it
    assert by_id['m1'].startswith(f'[Step budget: the 4 tool results of this step came to {step_total} characters')
    assert 'was truncated.]' in by_id['m1']
    # Reducing m1 alone was planned, but what it became (~2,200 with the note) still left the step over: m2 too.
    assert 'was truncated.]' in by_id['m2']
    assert sum(len(text) for text in by_id.values()) <= 20_000


async def test_a_step_within_budget_is_left_exactly_as_it_was(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    capability = OverflowingToolOutput(
        step_budget=StepBudget(max_size=1_000_000), store=LocalFileStore(base_dir=tmp_path)
    )
    agent = Agent(parallel_model(20, seen), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda n: body(n))
    await agent.run('go')
    assert [p.model_response_str() for p in returns_sent(seen[-1])] == [body(n) for n in range(20)]
    assert list(tmp_path.rglob('*')) == []


async def test_a_step_that_cannot_fit_reduces_everything_it_may_and_says_so(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    capability = OverflowingToolOutput(
        bands=[Band(over=10_000, action=Spill(preview_chars=300))],
        step_budget=StepBudget(max_size=1_000),
        store=LocalFileStore(base_dir=tmp_path),
    )
    agent = Agent(parallel_model(30, seen), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda n: f'line {n}\n' * 400)
    await agent.run('go')
    sent = returns_sent(seen[-1])
    assert all(part.model_response_str().startswith('[Step budget:') for part in sent)
    assert len(list(tmp_path.rglob('*'))) >= 30


async def test_a_failing_store_falls_back_and_the_run_goes_on(tmp_path: Path) -> None:
    class Failing:
        async def write(self, key: str, data: bytes) -> str:
            raise OSError('disk full')

        async def read(self, handle: str) -> bytes:
            raise KeyError(handle)

    seen: list[list[ModelMessage]] = []
    capability = OverflowingToolOutput(
        bands=[Band(over=10_000, action=Spill(then=Truncate(max_chars=500)))],
        step_budget=StepBudget(max_size=5_000),
        store=Failing(),
    )
    agent = Agent(parallel_model(5, seen), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda n: 'y' * 3_000)
    with pytest.warns(Warning, match='could not reduce'):
        await agent.run('go')
    sent = returns_sent(seen[-1])
    assert sum('was truncated.]' in part.model_response_str() for part in sent) >= 2
    del tmp_path


async def test_the_budget_counts_tokens_when_the_bands_do(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    capability = OverflowingToolOutput(
        over_tokens=True,
        tokenizer=lambda text: len(text.split()),  # one token per word
        bands=[Band(over=10_000, action=Truncate(max_chars=300))],
        step_budget=StepBudget(max_size=1_500),
        store=LocalFileStore(base_dir=tmp_path),
    )
    agent = Agent(parallel_model(4, seen), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda n: 'word ' * (1_000 if n == 1 else 200))
    await agent.run('go')
    sent = [part.model_response_str() for part in returns_sent(seen[-1])]
    assert sent[1].startswith(
        '[Step budget: the 4 tool results of this step came to 1600 tokens, over the budget of 1500; '
        'this one (1000 tokens, one of the largest) was truncated.]\n'
    )
    assert [text.startswith('[Step budget') for text in sent] == [False, True, False, False]


@pytest.mark.parametrize(
    ('band', 'budget'),
    [(2_000, None), (12_000, StepBudget(max_size=3_000))],
    ids=['a band their answers are over', 'a step budget they are over'],
)
async def test_renamed_query_tools_are_still_exempt_from_the_bands_and_the_step_budget(
    tmp_path: Path, band: int, budget: StepBudget | None
) -> None:
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('fetch', {})])
        if len(messages) == 3:
            preview = returns_sent(messages)[0]
            assert isinstance(preview.metadata, dict)
            handle = preview.metadata['overflow_handle']
            calls = [('x_read_tool_result', {'handle': handle, 'offset': n}) for n in (1, 201)]
            return ModelResponse(parts=[ToolCallPart(name, args) for name, args in calls])
        return ModelResponse(parts=[TextPart('done')])

    capability = OverflowingToolOutput(
        bands=[Band(over=band, action=Spill(preview_chars=300))],
        step_budget=budget,
        store=LocalFileStore(base_dir=tmp_path),
    )
    # `PrefixTools` renames the query tools (`x_read_tool_result`) and drops their toolset id: the capability
    # still knows them by the mark on their definitions.
    agent = Agent(FunctionModel(respond), capabilities=[PrefixTools(capability, prefix='x')])
    agent.tool_plain(name='fetch')(lambda: ''.join(f'record {n:05d} ' + 'z' * 30 + '\n' for n in range(1, 501)))
    await agent.run('go')
    reads = returns_sent(seen[-1])
    assert [part.tool_name for part in reads] == ['x_read_tool_result', 'x_read_tool_result']
    for part, first in zip(reads, (1, 201)):
        text = part.model_response_str()
        assert len(text) > 3_000 and not part.metadata  # neither spilled again nor cut by the step budget
        assert f'{first}| record {first:05d} ' in text and f'{first + 199}| record {first + 199:05d} ' in text
