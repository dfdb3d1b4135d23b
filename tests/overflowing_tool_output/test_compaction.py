"""Lossless compaction through pydantic-ai's own `compact_history` hook, and spills that outlive any compaction.

A model that rejects a request over its window (core's `ModelContextWindowExceededError`) gets the request again,
compacted by `OverflowingToolOutput`: old returns become stubs naming handles, and every fact stays readable. When
another capability compacts (a summarizer, a provider), the handles it took out of the history stay searchable.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext, models
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from pydantic_ai_harness.overflowing_tool_output import (
    LocalFileStore,
    LosslessCompaction,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
)

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio

STUB = re.compile(
    r"^\[Moved out of context: the output of `(\w+)` \(~[\d,]+ tokens\)\. Saved in full.* handle '([^']+)'"
)


def page(n: int) -> str:
    """~2,400 characters (~600 tokens) whose last line holds a fact only this page has."""
    lines = [f'page {n}, line {i}: the quick brown fox jumps over the lazy dog' for i in range(40)]
    return '\n'.join([*lines, f'the secret word of page {n} is word-{n * 7919}'])


def tokens(messages: list[ModelMessage]) -> int:
    """What the scripted provider counts: ~4 characters a token of everything it is sent."""
    total = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                total += len(part.model_response_str())
            else:
                total += len(str(getattr(part, 'content', None) or getattr(part, 'args', None) or ''))
    return total // 4


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


@dataclass
class Session:
    """Fetches `pages` pages one a turn, then reads back the fact of every page through its stub's handle.

    As a provider would, it rejects any request over `window` tokens with core's context-window error.
    """

    pages: int
    window: int
    sent: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    rejected: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if tokens(messages) > self.window:
            self.rejected += 1
            raise ModelContextWindowExceededError('scripted', f'{tokens(messages)} tokens > {self.window}')
        self.sent.append(list(messages))
        done = returns(messages)
        fetched = [p for p in done if p.tool_name == 'fetch_page']
        if len(fetched) < self.pages:
            return ModelResponse(parts=[ToolCallPart('fetch_page', {'n': len(fetched)}, f'page_{len(fetched)}')])
        reads = [p for p in done if p.tool_name == 'read_tool_result']
        if not reads:
            calls = []
            for part in fetched:
                match = STUB.match(str(part.content))
                if match:
                    calls.append(ToolCallPart('read_tool_result', {'handle': match.group(2), 'offset': 41}))
            if calls:
                return ModelResponse(parts=calls)
        visible = '\n'.join(str(p.content) for p in done)
        return ModelResponse(parts=[TextPart(visible)])

    def model(self) -> FunctionModel:
        return FunctionModel(self, model_name='scripted', profile=ModelProfile(context_window=self.window))


def session_agent(session: Session, *capabilities: AbstractCapability[Any]) -> Agent[None, str]:
    agent = Agent(session.model(), capabilities=list(capabilities))

    @agent.tool_plain
    def fetch_page(n: int) -> str:
        return page(n)

    return agent


async def test_a_context_overflow_is_compacted_losslessly_and_sent_again(tmp_path: Path) -> None:
    session = Session(pages=30, window=8_000)
    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None)
    result = await session_agent(session, capability).run('read the pages')
    assert session.rejected >= 1  # the window overflowed, and core compacted and sent the request again
    assert all(tokens(sent) <= session.window for sent in session.sent)
    # Every page's fact is in the answer: read back through a stub's handle, or still in the context.
    for n in range(30):
        assert f'the secret word of page {n} is word-{n * 7919}' in result.output
    assert result.compactions and {record.handler for record in result.compactions} == {'overflowing_tool_output'}
    # The history holds the stubs: a later run continuing it starts from the compacted form.
    stubs = [p for p in returns(result.all_messages()) if STUB.match(str(p.content))]
    assert len(stubs) >= 10


async def test_a_compaction_costs_one_broken_prefix(tmp_path: Path) -> None:
    session = Session(pages=30, window=8_000)
    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None)
    result = await session_agent(session, capability).run('read the pages')
    breaks = 0
    for before, after in zip(session.sent, session.sent[1:]):
        if [repr(m.parts) for m in after[: len(before)]] != [repr(m.parts) for m in before]:
            breaks += 1
    assert breaks == len(result.compactions) >= 1


async def test_when_moving_every_old_return_is_not_enough_the_next_capability_compacts(tmp_path: Path) -> None:
    """A request whose newest turn alone is over the window: the hook says `None`, and a summarizer after it runs."""

    @dataclass
    class LastResort(AbstractCapability[Any]):
        calls: int = 0

        async def compact_history(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
            self.calls += 1
            part = CompactionPart(content='The user asked for a big page; it was too large to keep.')
            last = request.messages[-1]
            assert isinstance(last, ModelRequest)
            small = ModelRequest(parts=[p if not isinstance(p, ToolReturnPart) else _cut(p) for p in last.parts])
            return CompactionResult(messages=[ModelRequest(parts=[part]), small], part=part, handler='last_resort')

    called: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if tokens(messages) > 2_000:
            raise ModelContextWindowExceededError('scripted', 'too long')
        if not called:
            called.append(1)
            return ModelResponse(parts=[ToolCallPart('big', {})])
        return ModelResponse(parts=[TextPart('done')])

    last_resort = LastResort()
    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None, bands=[])
    agent = Agent(
        FunctionModel(respond, profile=ModelProfile(context_window=2_000)), capabilities=[capability, last_resort]
    )

    @agent.tool_plain
    def big() -> str:
        return 'x' * 20_000  # no band reduces it; the newest turn is never moved

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', OverflowingToolOutputWarning)
        result = await agent.run('go')
    assert result.output == 'done'
    assert last_resort.calls == 1
    assert [record.handler for record in result.compactions] == ['last_resort']


def _cut(part: ToolReturnPart) -> ToolReturnPart:
    return ToolReturnPart(part.tool_name, str(part.content)[:100], part.tool_call_id)


@dataclass
class Summarizing(AbstractCapability[Any]):
    """A user's own compaction: everything before the request being answered becomes one summary line."""

    async def compact_history(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
        first = request.messages[0]
        system = [p for p in first.parts if isinstance(p, SystemPromptPart)] if isinstance(first, ModelRequest) else []
        part = CompactionPart(content='Summary: the agent ran its tools; the details were dropped.')
        return CompactionResult(
            messages=[ModelRequest(parts=[*system, part]), request.messages[-1]], part=part, handler='summarizing'
        )


async def test_spills_stay_searchable_after_another_capability_compacts(tmp_path: Path) -> None:
    log = '\n'.join(f'2026-12-06 line {i}: ok' for i in range(20_000)).replace('line 13713: ok', 'line 13713: NEEDLE')
    seen: list[str] = []
    script = iter(['dump_log', 'compact_now', 'grep_tool_result'])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = next(script, None)
        if step == 'grep_tool_result':
            seen.extend(str(p.content) for p in returns(messages) if p.tool_name == 'dump_log')  # what is left of it
            return ModelResponse(parts=[ToolCallPart(step, {'pattern': 'NEEDLE'})])
        if step is not None:
            return ModelResponse(parts=[ToolCallPart(step, {})])
        seen.append(str(returns(messages)[-1].content))
        return ModelResponse(parts=[TextPart('done')])

    capability = OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None)
    agent = Agent(FunctionModel(respond), capabilities=[Summarizing(), capability])

    @agent.tool_plain
    def dump_log() -> str:
        return log

    @agent.tool
    def compact_now(ctx: RunContext[Any]) -> str:
        ctx.request_compaction(reason='manual')
        return 'compaction requested'

    result = await agent.run('find the needle')
    assert [record.handler for record in result.compactions] == ['summarizing']
    # The summary replaced the spill's preview and its handle, yet a search without a handle still finds the line.
    [answer] = seen
    assert 'line 13713: NEEDLE' in answer
    # The ledger persists with the history: a later run continuing it searches the same spill.
    again: list[str] = []

    def later(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages) and returns(messages)[-1].tool_name == 'grep_tool_result':
            again.append(str(returns(messages)[-1].content))
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'pattern': 'NEEDLE'})])

    agent2 = Agent(FunctionModel(later), capabilities=[OverflowingToolOutput(store=LocalFileStore(tmp_path))])
    await agent2.run('again', message_history=result.all_messages())
    assert 'line 13713: NEEDLE' in again[0]


async def test_a_compaction_setting_is_checked_at_construction() -> None:
    with pytest.raises(ValueError, match='compaction.headroom'):
        LosslessCompaction(headroom=1.5)
    with pytest.raises(TypeError, match='compaction must be a LosslessCompaction'):
        OverflowingToolOutput(compaction=0.2)  # pyright: ignore[reportArgumentType]
    assert OverflowingToolOutput.from_spec(compaction={'headroom': 0.3}).compaction == LosslessCompaction(headroom=0.3)
    assert OverflowingToolOutput.from_spec(compaction=False).compaction is None


async def test_handles_survive_compaction_after_compaction(tmp_path: Path) -> None:
    """Two summaries in a row: the second carries the first one's ledger forward, so both spills stay searchable."""
    logs = {
        name: '\n'.join(f'{name} line {i}: ok' for i in range(20_000)).replace('line 4242: ok', 'line 4242: NEEDLE')
        for name in ('alpha', 'beta')
    }
    script = iter(['alpha', 'compact_now', 'beta', 'compact_now', 'grep_tool_result'])
    answers: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = next(script, None)
        if step == 'grep_tool_result':
            return ModelResponse(parts=[ToolCallPart(step, {'pattern': 'NEEDLE', 'max_matches': 5})])
        if step is not None:
            return ModelResponse(
                parts=[ToolCallPart('dump' if step in logs else step, {'name': step} if step in logs else {})]
            )
        answers.append(str(returns(messages)[-1].content))
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond), capabilities=[Summarizing(), OverflowingToolOutput(store=LocalFileStore(tmp_path))]
    )

    @agent.tool_plain
    def dump(name: str) -> str:
        return logs[name]

    @agent.tool
    def compact_now(ctx: RunContext[Any]) -> str:
        ctx.request_compaction(reason='manual')
        return 'compaction requested'

    result = await agent.run('go')
    assert [record.handler for record in result.compactions] == ['summarizing', 'summarizing']
    assert 'alpha line 4242: NEEDLE' in answers[0] and 'beta line 4242: NEEDLE' in answers[0]


def test_the_ledger_and_what_it_remembers_are_bounded() -> None:
    from pydantic_ai_harness.overflowing_tool_output._request._ledger import _CONVERSATIONS, LEDGER_LIMIT, HandleLedger

    def history(handles: int, tag: str) -> list[ModelMessage]:
        return [
            ModelRequest(
                parts=[
                    ToolReturnPart(
                        't',
                        'preview',
                        f'{tag}{i}',
                        metadata={'overflow_action': 'spill', 'overflow_handle': f'{tag}{i}'},
                    )
                    for i in range(handles)
                ]
            )
        ]

    ledger = HandleLedger()
    for conversation in range(_CONVERSATIONS + 500):
        ledger.remember(str(conversation), history(3, f'c{conversation}-'))
    assert len(ledger) == _CONVERSATIONS
    ledger.remember('big', history(LEDGER_LIMIT + 1_000, 'big-'))
    part = CompactionPart(content='summary')
    assert ledger.settle('big', [ModelRequest(parts=[part])]) == LEDGER_LIMIT
    assert part.metadata is not None
    assert len(part.metadata['overflow_handles']) == LEDGER_LIMIT
    assert part.metadata['overflow_handles'][0][0] == f'big-{LEDGER_LIMIT + 999}'  # the newest first
