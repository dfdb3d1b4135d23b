"""The delegate keeps itself whole (issue 18): its own system prompts in every mode, continuation, run-wide settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import (
    Delegation,
    HandoffConfig,
    HandoffHistory,
    HandoffInputData,
    Handoffs,
    answered_by,
    default_handoff_history_mapper,
    delegate,
    nest_handoff_history,
    remove_all_tools,
)

pytestmark = pytest.mark.anyio


class Specialist:
    """An agent with a static and a dynamic system prompt and instructions, recording what its model was shown."""

    def __init__(self, name: str = 'billing', answer: str = 'Refund issued.') -> None:
        self.answer = answer
        self.seen: list[list[ModelMessage]] = []
        self.instructions: list[str | None] = []
        self.agent: Agent[str, str] = Agent(
            FunctionModel(self._respond),
            name=name,
            deps_type=str,
            system_prompt=f'You are {name.upper()}. Never refund over 100 EUR.',
            instructions=f'{name} instructions',
        )

        @self.agent.system_prompt(dynamic=True)
        def tier(ctx: RunContext[str]) -> str:
            return f'Customer tier: {ctx.deps}'

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.instructions.append(info.instructions)
        return ModelResponse(parts=[TextPart(self.answer)])

    def system_prompts(self, index: int = -1) -> list[str]:
        return [p.content for m in self.seen[index] for p in m.parts if isinstance(p, SystemPromptPart)]

    def all_text(self, index: int = -1) -> str:
        return '\n'.join(str(getattr(p, 'content', '')) for m in self.seen[index] for p in m.parts)


def triage_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Look an order up, then hand off in a tool, then finish."""
    returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if 'lookup' in returned:
        return ModelResponse(parts=[TextPart('Passing you on.'), ToolCallPart('transfer', {}, 'call_h')])
    if returned:
        return ModelResponse(parts=[TextPart('triage done')])
    return ModelResponse(parts=[ToolCallPart('lookup', {'order': 42}, 'call_l')])


def make_triage(specialist: Specialist, **delegate_kwargs: Any) -> Agent[str, str]:
    triage = Agent(
        FunctionModel(triage_model),
        name='triage',
        deps_type=str,
        system_prompt='You are TRIAGE. Route every request.',
        instructions='triage instructions',
    )

    @triage.tool_plain
    def lookup(order: int) -> str:
        """Look an order up."""
        return f'order {order}: paid'

    @triage.tool
    async def transfer(ctx: RunContext[str]) -> str:
        """Hand off."""
        return (await delegate(specialist.agent, ctx, 'Refund order 42', **delegate_kwargs)).output

    return triage


def lookup(order: int) -> str:
    """Look an order up."""
    return f'order {order}: paid'


def _custom_filter(data: HandoffInputData) -> HandoffInputData:
    return nest_handoff_history(remove_all_tools(data))


MODES: dict[str, dict[str, Any]] = {
    'no filter': {},
    'remove_all_tools': {'input_filter': remove_all_tools},
    'custom filter': {'input_filter': _custom_filter},
    'nested': {'nest_handoff_history': True},
    'nested as user turns': {'nest_handoff_history': True, 'summary_role': 'user'},
    'nested with a mapper': {'nest_handoff_history': True, 'history_mapper': default_handoff_history_mapper},
}


@pytest.mark.parametrize('mode', list(MODES))
async def test_the_delegate_runs_under_its_own_system_prompts_in_every_mode(mode: str) -> None:
    billing = Specialist()
    await make_triage(billing, **MODES[mode]).run('I want a refund', deps='gold')
    assert billing.system_prompts() == ['You are BILLING. Never refund over 100 EUR.', 'Customer tier: gold']
    first = billing.seen[-1][0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)  # at the head
    assert 'TRIAGE' not in billing.all_text()  # not forwarded, not even as a summary record
    assert billing.instructions == ['billing instructions']


@pytest.mark.parametrize('mode', ['no filter', 'nested'])
async def test_the_parent_system_prompt_is_forwarded_only_when_asked(mode: str) -> None:
    billing = Specialist()
    await make_triage(billing, forward_system_prompt=True, **MODES[mode]).run('I want a refund', deps='gold')
    assert billing.system_prompts()[:2] == ['You are BILLING. Never refund over 100 EUR.', 'Customer tier: gold']
    if mode == 'no filter':
        assert billing.system_prompts()[2:] == ['You are TRIAGE. Route every request.']
    else:
        assert '1. system: You are TRIAGE. Route every request.' in billing.all_text()


async def test_the_dynamic_system_prompt_stays_the_delegates_own_dynamic_prompt() -> None:
    steps: list[list[str]] = []

    def tool_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        steps.append([p.content for m in messages for p in m.parts if isinstance(p, SystemPromptPart)])
        if len(steps) == 1:
            return ModelResponse(parts=[ToolCallPart('check', {}, 'c')])
        return ModelResponse(parts=[TextPart('checked')])

    count = iter(range(10))
    specialist: Agent[str, str] = Agent(FunctionModel(tool_then_answer), name='checker', deps_type=str)

    @specialist.system_prompt(dynamic=True)
    def step(ctx: RunContext[str]) -> str:
        return f'evaluation {next(count)}'

    @specialist.tool_plain
    def check() -> str:
        """Check."""
        return 'ok'

    triage = Agent(FunctionModel(triage_model), name='triage', deps_type=str)
    triage.tool_plain(lookup)

    @triage.tool
    async def transfer(ctx: RunContext[str]) -> str:
        """Hand off."""
        return (await delegate(specialist, ctx, 'check it', nest_handoff_history=True)).output

    await triage.run('go', deps='x')
    # Rendered once when handed over ('evaluation 0'), then pydantic-ai recognised the part as the agent's own
    # dynamic prompt and re-rendered it when the run started, as for any history.
    assert steps == [['evaluation 1'], ['evaluation 1']]


async def test_handoff_history_gives_the_agent_its_own_system_prompts() -> None:
    earlier = (await make_triage(Specialist()).run('I want a refund', deps='gold')).all_messages()
    billing = Specialist()
    capability = HandoffHistory(nest_handoff_history=True)
    await billing.agent.run('And order 43?', message_history=earlier, deps='silver', capabilities=[capability])
    assert billing.system_prompts() == ['You are BILLING. Never refund over 100 EUR.', 'Customer tier: silver']
    assert 'TRIAGE' not in billing.all_text()


@pytest.mark.parametrize(
    'build',
    [
        lambda: HandoffConfig(forward_system_prompt='yes'),  # pyright: ignore[reportArgumentType]
        lambda: HandoffHistory(nest_handoff_history=True, forward_system_prompt=1),  # pyright: ignore[reportArgumentType]
    ],
)
async def test_forward_system_prompt_must_be_a_bool(build: Any) -> None:
    with pytest.raises(UserError, match='forward_system_prompt must be True or False'):
        build()


# --- continuation ---------------------------------------------------------------------------------------------


def make_router(billing: Specialist) -> Agent[str, str]:
    async def to_billing(ctx: RunContext[str], issue: str) -> str:
        """Hand the conversation to billing: its answer is the run's answer."""
        return (await delegate(billing.agent, ctx, issue)).output

    def router_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {'issue': 'refund order 42'}, 'h')])

    return Agent(FunctionModel(router_model), name='router', deps_type=str, output_type=[to_billing])


async def test_continuation_the_next_user_turn_goes_to_the_specialist() -> None:
    billing = Specialist(answer='Refund of 40 EUR issued for order 42.')
    router = make_router(billing)
    agents: dict[str, Agent[str, str]] = {'router': router, 'billing': billing.agent}
    handoffs = Handoffs(HandoffConfig(nest_handoff_history=True))

    first = await router.run('I want a refund', deps='gold', capabilities=[handoffs])
    history = first.all_messages()
    assert first.output == 'Refund of 40 EUR issued for order 42.'
    # The router's history records the specialist's answer, marked with who gave it.
    last = history[-1]
    assert isinstance(last, ModelResponse) and last.parts == [TextPart('Refund of 40 EUR issued for order 42.')]
    assert answered_by(history) == 'billing'

    # Turn 2: routed to the agent that answered, on the whole conversation.
    next_agent = agents[answered_by(history) or 'router']
    second = await next_agent.run(
        'And when will I get it?',
        message_history=history,
        deps='gold',
        capabilities=[HandoffHistory(nest_handoff_history=True)],
    )
    assert second.output == 'Refund of 40 EUR issued for order 42.'
    assert len(billing.seen) == 2
    text = billing.all_text()
    assert 'assistant: Refund of 40 EUR issued for order 42.' in text  # its own earlier answer, in the summary
    assert billing.system_prompts() == ['You are BILLING. Never refund over 100 EUR.', 'Customer tier: gold']
    prompt = billing.seen[-1][-1].parts[-1]
    assert isinstance(prompt, UserPromptPart) and prompt.content == 'And when will I get it?'
    assert answered_by(second.all_messages()) is None  # billing answered itself this time


async def test_the_delegation_says_who_answered_and_gives_the_messages_to_carry_on_with() -> None:
    billing = Specialist(answer='Done.')
    delegations: list[Delegation[str]] = []
    triage = Agent(FunctionModel(triage_model), name='triage', deps_type=str)
    triage.tool_plain(lookup)

    @triage.tool
    async def transfer(ctx: RunContext[str]) -> str:
        """Hand off."""
        delegation = await delegate(billing.agent, ctx, 'Refund order 42', nest_handoff_history=True)
        delegations.append(delegation)
        return delegation.output

    result = await triage.run('refund', deps='gold')
    [delegation] = delegations
    assert delegation.agent is billing.agent and delegation.agent_name == 'billing'
    assert delegation.tool_call_id == 'call_h' and delegation.output == 'Done.'
    # Agent as tool: the parent's history records the answer as the tool's return.
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returns if p.tool_name == 'transfer'] == ['Done.']
    # Carry on with the specialist on its own conversation.
    await billing.agent.run('Thanks, one more thing', message_history=delegation.messages(), deps='gold')
    assert [type(m).__name__ for m in billing.seen[-1]][-2:] == ['ModelResponse', 'ModelRequest']
    assert billing.seen[-1][-2].parts == [TextPart('Done.')]


# --- run-wide settings ----------------------------------------------------------------------------------------


async def test_a_run_wide_setting_is_picked_up_by_three_delegations() -> None:
    specialists = [Specialist(name) for name in ('billing', 'shipping', 'returns')]

    def three_handoffs(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart('to_billing', {}, 'h1')])
        following = {'to_billing': 'to_shipping', 'to_shipping': 'to_returns'}.get(returned[0])
        if following:
            return ModelResponse(parts=[ToolCallPart(following, {}, f'h_{following}')])
        return ModelResponse(parts=[TextPart('all done')])

    def hand_off_to(agent: Agent[str, str]) -> Callable[[RunContext[str]], Awaitable[str]]:
        async def hand_off(ctx: RunContext[str]) -> str:
            return (await delegate(agent, ctx, 'take over')).output

        return hand_off

    tools = [Tool(hand_off_to(s.agent), takes_ctx=True, name=f'to_{s.agent.name}') for s in specialists]
    triage = Agent(FunctionModel(three_handoffs), name='triage', deps_type=str, tools=tools)

    run_wide = Handoffs(HandoffConfig(nest_handoff_history=True, summary_role='user'))
    await triage.run('Help with my order', deps='gold', capabilities=[run_wide])
    for specialist in specialists:
        [seen] = specialist.seen
        first = seen[0]
        assert isinstance(first, ModelRequest)
        summaries = [
            p for p in first.parts if isinstance(p, UserPromptPart) and 'CONVERSATION HISTORY' in str(p.content)
        ]
        assert len(summaries) == 1, specialist.agent.name
    # Without the capability, the same delegations forward the raw history.
    raw = Specialist()
    await make_triage(raw).run('refund', deps='gold')
    assert 'CONVERSATION HISTORY' not in raw.all_text()


async def test_per_call_arguments_and_config_win_over_the_run_wide_setting() -> None:
    per_call = Specialist()
    run_wide = Handoffs(HandoffConfig(nest_handoff_history=True))
    await make_triage(per_call, nest_handoff_history=False).run('refund', deps='g', capabilities=[run_wide])
    assert 'CONVERSATION HISTORY' not in per_call.all_text()
    own_config = Specialist()
    await make_triage(own_config, config=HandoffConfig()).run('refund', deps='g', capabilities=[run_wide])
    assert 'CONVERSATION HISTORY' not in own_config.all_text()


async def test_the_run_wide_setting_reaches_a_delegate_that_delegates_again() -> None:
    final = Specialist('final')
    middle = Agent(FunctionModel(triage_model), name='middle', deps_type=str)
    middle.tool_plain(lookup)

    @middle.tool
    async def transfer(ctx: RunContext[str]) -> str:
        """Hand off again."""
        return (await delegate(final.agent, ctx, 'second hop')).output

    triage = Agent(
        FunctionModel(triage_model),
        name='triage',
        deps_type=str,
        capabilities=[Handoffs(HandoffConfig(nest_handoff_history=True))],
    )
    triage.tool_plain(lookup)

    @triage.tool(name='transfer')
    async def first_hop(ctx: RunContext[str]) -> str:
        """Hand off."""
        return (await delegate(middle, ctx, 'first hop')).output

    await triage.run('refund', deps='g')
    assert final.all_text().count('<CONVERSATION HISTORY>') == 2  # nested at hop 2 too: summary, then handoff turn


def test_handoffs_needs_a_handoff_config() -> None:
    with pytest.raises(TypeError, match='Handoffs.config must be a HandoffConfig'):
        Handoffs({'nest_handoff_history': True})  # pyright: ignore[reportArgumentType]
