"""A delegate's final answer is held to the bounds of a tool return (issue 31, section 6, case 3), in real runs.

`Handoffs` records an output-function handoff's answer in the run's history, as an assistant turn, so the next turn
knows who said what. Nothing reduced it: a 5 MB answer made the next turn's request 5,144,212 characters, with
`OverflowingToolOutput` and aging on (aging takes tool returns only). Now the answer is reduced as a return of the
handoff's call would be, by the delegating agent's `OverflowingToolOutput` (spilled, with a handle its model
reads), or, without one, cut to `HandoffConfig.max_record_chars`, saying so. The run's output stays whole.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from pydantic_ai_harness.handoffs import Delegation, HandoffConfig, Handoffs, answered_by, delegate
from pydantic_ai_harness.overflowing_tool_output import Aging, LocalFileStore, OverflowingToolOutput, SecretRedaction

from ._helpers import Recorder

pytestmark = pytest.mark.anyio

LINES = 100_000


def five_mb_answer() -> str:
    """What a research delegate answers: 5 MB of findings."""
    return '\n'.join(f'finding {n:07d}: the order ships from warehouse {n % 17}' for n in range(LINES))


def request_chars(messages: list[ModelMessage]) -> int:
    """The size of what a model request carries, serialized."""
    return len(ModelMessagesTypeAdapter.dump_json(messages))


class Router:
    """The delegating agent's model: hands off on the first turn; on the next, reads the handle its history names
    (the last line) and answers with it."""

    def __init__(self) -> None:
        self.requests: list[list[ModelMessage]] = []
        self.read_back: list[str] = []
        self.model = FunctionModel(self.respond)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        last = messages[-1].parts
        answers = [p for p in last if isinstance(p, ToolReturnPart) and p.tool_name == 'read_tool_result']
        if answers:
            self.read_back.append(answers[0].model_response_str())
            return ModelResponse(parts=[TextPart('read it')])
        names = [handle for m in messages for p in m.parts if isinstance(p, TextPart) for handle in handles(p.content)]
        if names and len(messages) > 1:
            args = {'handle': names[-1], 'limit': 1, 'from_end': True}
            return ModelResponse(parts=[ToolCallPart('read_tool_result', args, 'c_read')])
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {}, 'h')])


def handles(text: str) -> list[str]:
    return re.findall(r"under handle '([^']+)'", text)


def router_agent(router: Router, answer: str, *capabilities: Any) -> Agent[None, str]:
    specialist = Agent(Recorder(answer).model, name='research')

    async def to_research(ctx: RunContext[None]) -> str:
        """Hand the conversation to research."""
        return (await delegate(specialist, ctx, 'Find everything')).output

    return Agent(router.model, name='router', output_type=[to_research, str], capabilities=list(capabilities))


async def test_a_5_mb_answer_is_spilled_and_read_back_on_the_next_turn(tmp_path: Path) -> None:
    answer = five_mb_answer()
    router = Router()
    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path), aging=Aging())
    agent = router_agent(router, answer, Handoffs(), overflow)

    first = await agent.run('Research everything about my order')
    assert first.output == answer  # the run's output is the answer, whole
    history = first.all_messages()
    assert answered_by(history) == 'research'
    recorded = history[-1]
    assert isinstance(recorded, ModelResponse)
    [part] = recorded.parts
    assert isinstance(part, TextPart) and len(part.content) < 10_000
    assert len(handles(part.content)) == 1

    second = await agent.run('What was the last finding?', message_history=history)
    assert second.output == 'read it'
    assert max(request_chars(request) for request in router.requests[1:]) < 50_000  # measured before: 5,144,212
    [page] = router.read_back
    assert f'finding {LINES - 1:07d}: the order ships from warehouse' in page


async def test_without_overflowing_tool_output_the_answer_is_cut_to_max_record_chars() -> None:
    router = Router()
    agent = router_agent(router, five_mb_answer(), Handoffs(max_record_chars=2_000))
    result = await agent.run('Research everything about my order')
    assert len(result.output) > 5_000_000
    [part] = result.all_messages()[-1].parts
    assert isinstance(part, TextPart)
    assert len(part.content) <= 2_000
    assert part.content[-160:] == snapshot("""\
order ships from warehouse 2
finding 0000037:  [... record cut: the first 1881 of 5041173 characters are shown; the rest was not kept (no store to save it in).]\
""")


async def test_the_default_bound_is_20000_characters_and_none_keeps_the_answer_whole() -> None:
    default, whole = Router(), Router()
    cut = await router_agent(default, 'x' * 30_000, Handoffs()).run('Go')
    kept = await router_agent(whole, 'x' * 30_000, Handoffs(HandoffConfig(max_record_chars=None))).run('Go')
    [cut_part], [kept_part] = cut.all_messages()[-1].parts, kept.all_messages()[-1].parts
    assert isinstance(cut_part, TextPart) and isinstance(kept_part, TextPart)
    assert len(cut_part.content) <= 20_000 and '[... record cut: the first' in cut_part.content
    assert kept_part.content == 'x' * 30_000  # as the OpenAI Agents SDK keeps it


async def test_a_short_answer_is_recorded_as_it_is(tmp_path: Path) -> None:
    router = Router()
    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path))
    result = await router_agent(router, 'Refund issued.', Handoffs(), overflow).run('Go')
    assert result.all_messages()[-1].parts == [TextPart('Refund issued.')]


async def test_a_delegate_that_cannot_read_the_spilled_answer_is_told_so(tmp_path: Path) -> None:
    """The next turn delegates on: a specialist reducing into another store sees the recorded answer's handle
    marked as one it cannot read, as a spilled tool return is."""
    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path / 'parent'))
    first = await router_agent(Router(), five_mb_answer(), Handoffs(), overflow).run('Research everything')

    reader = Recorder()
    elsewhere = OverflowingToolOutput(store=LocalFileStore(tmp_path / 'other'))
    specialist = Agent(reader.model, name='specialist', capabilities=[elsewhere])

    def ask_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) and p.tool_name == 'ask' for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('ask', {}, 'c_ask')])

    follow_up = Agent(FunctionModel(ask_once), name='router', deps_type=type(None), capabilities=[overflow])

    @follow_up.tool
    async def ask(ctx: RunContext[None]) -> str:
        """Ask the specialist."""
        return (await delegate(specialist, ctx, 'Which warehouse ships the last order?')).output

    await follow_up.run('Ask the specialist', message_history=first.all_messages())
    [answer] = [
        p.content
        for m in reader.last
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, TextPart) and 'returned too much to show' in p.content
    ]
    assert answer.endswith(
        'cannot be read by this agent: it has no read_tool_result or grep_tool_result over the '
        'store it is in. Work from the preview above, or ask the agent that handed over.]'
    )


async def test_the_capability_given_to_the_run_reduces_the_answer_too(tmp_path: Path) -> None:
    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path))
    result = await router_agent(Router(), five_mb_answer(), Handoffs()).run('Go', capabilities=[overflow])
    [part] = result.all_messages()[-1].parts
    assert isinstance(part, TextPart) and len(part.content) < 10_000 and len(handles(part.content)) == 1


async def test_a_tool_filter_that_leaves_the_handoff_out_leaves_the_answer_whole(tmp_path: Path) -> None:
    """As it would leave a return of that tool: the capability's configuration decides."""

    def function_tools_only(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        return tool_def.kind != 'output'

    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path), tool_filter=function_tools_only)
    result = await router_agent(Router(), 'y' * 30_000, Handoffs(), overflow).run('Go')
    assert result.all_messages()[-1].parts == [TextPart('y' * 30_000)]


async def test_the_answer_is_masked_as_a_return_would_be(tmp_path: Path) -> None:
    redaction = SecretRedaction(preset='none', patterns={'Ticket Key': 'TKT-[0-9A-F]{16}'})
    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path), redact_secrets=redaction)
    answer = 'Use ticket TKT-0123456789ABCDEF to track it.'
    result = await router_agent(Router(), answer, Handoffs(), overflow).run('Go')
    assert result.output == answer  # the run's output is the delegate's, as it answered
    assert result.all_messages()[-1].parts == snapshot(
        [TextPart(content='Use ticket [secret withheld: Ticket Key] to track it.')]
    )


async def test_the_delegation_keeps_the_whole_answer(tmp_path: Path) -> None:
    answer = five_mb_answer()
    specialist = Agent(Recorder(answer).model, name='research')
    delegations: list[Delegation[str]] = []

    async def to_research(ctx: RunContext[None]) -> str:
        """Hand the conversation to research."""
        delegations.append(await delegate(specialist, ctx, 'Find everything'))
        return delegations[-1].output

    router = Router()
    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path))
    agent = Agent(router.model, name='router', output_type=[to_research, str], capabilities=[Handoffs(), overflow])
    await agent.run('Go')
    [delegation] = delegations
    assert delegation.output == answer
    assert delegation.messages()[-1].parts == [TextPart(answer)]


async def test_a_delegate_reduces_its_own_handoffs_answer_with_the_capability_it_inherits(tmp_path: Path) -> None:
    """Two hops: the middle agent has no `OverflowingToolOutput`, inherits the parent's, and hands off in turn."""
    middle = router_agent(Router(), five_mb_answer(), Handoffs())  # hands off to research, records its answer
    seen: list[Delegation[str]] = []

    def ask_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) and p.tool_name == 'ask' for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('ask', {}, 'c_ask')])

    overflow = OverflowingToolOutput(store=LocalFileStore(tmp_path))
    parent = Agent(FunctionModel(ask_once), name='parent', deps_type=type(None), capabilities=[overflow])

    @parent.tool
    async def ask(ctx: RunContext[None]) -> str:
        """Ask the middle agent."""
        seen.append(await delegate(middle, ctx, 'Research it'))
        return 'asked'

    await parent.run('Go')
    [delegation] = seen
    assert len(delegation.output) > 5_000_000
    recorded = delegation.messages()[-1]
    assert isinstance(recorded, ModelResponse) and answered_by([recorded]) == 'research'
    [part] = recorded.parts
    assert isinstance(part, TextPart) and len(part.content) < 10_000 and len(handles(part.content)) == 1
