"""Delegation demo: a triage agent hands a refund request to a billing agent, on a scripted model (no API key).

Shows what the billing agent's model is shown: the raw history, the history without tools (`remove_all_tools`),
and the nested summary (`nest_handoff_history`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import delegate, remove_all_tools


def _describe(messages: list[ModelMessage]) -> list[str]:
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart | TextPart | ThinkingPart):
                text = str(part.content)
            elif isinstance(part, BaseToolCallPart):
                text = f'{part.tool_name}({part.args_as_json_str()})'
            elif isinstance(part, BaseToolReturnPart):
                text = f'{part.tool_name} -> {part.model_response_str()}'
            else:
                text = part.part_kind
            for number, line in enumerate(text.splitlines() or ['']):
                prefix = f'  {message.kind:<8} {part.part_kind:<12} ' if number == 0 else ' ' * 24
                lines.append(prefix + line)
    return lines


def _triage_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if 'lookup_order' in returned:
        return ModelResponse(
            parts=[
                ThinkingPart('The order is paid, so this is a billing matter.'),
                TextPart('Order 42 is paid. I am passing you to billing.'),
                ToolCallPart('transfer_to_billing', {'reason': 'refund order 42'}, 'call_transfer'),
            ]
        )
    if returned:
        return ModelResponse(parts=[TextPart('Billing has taken care of your refund.')])
    return ModelResponse(parts=[ToolCallPart('lookup_order', {'order_id': 42}, 'call_lookup')])


async def _run_once(**delegate_kwargs: Any) -> list[ModelMessage]:
    shown: list[ModelMessage] = []

    def billing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown.extend(messages)
        return ModelResponse(parts=[TextPart('Refund issued for order 42.')])

    billing = Agent(FunctionModel(billing_model), name='billing')
    triage = Agent(FunctionModel(_triage_model), name='triage', deps_type=type(None))

    @triage.tool_plain
    def lookup_order(order_id: int) -> str:
        """Look an order up."""
        return f'order {order_id}: paid, 59.90 EUR'

    @triage.tool
    async def transfer_to_billing(ctx: RunContext[None], reason: str) -> str:
        """Hand the conversation to billing."""
        return (await delegate(billing, ctx, f'Please handle: {reason}', **delegate_kwargs)).output

    await triage.run('I want a refund for order 42')
    return shown


async def run_delegation_demo(console_print: Callable[[str], None] = print) -> None:
    """Run the triage -> billing delegation three ways and print what the billing agent's model was shown."""
    cases: list[tuple[str, dict[str, Any]]] = [
        ('No filter: the whole history, the delegating call answered with its handoff output', {}),
        ('input_filter=remove_all_tools: the conversation text only', {'input_filter': remove_all_tools}),
        (
            'nest_handoff_history=True: the tool calls folded into summaries, the handoff turn text forwarded',
            {'nest_handoff_history': True},
        ),
    ]
    for title, kwargs in cases:
        shown = await _run_once(**kwargs)
        parts = sum(len(message.parts) for message in shown)
        console_print(f'\n{title} ({len(shown)} messages, {parts} parts, one per row):')
        for line in _describe(shown):
            console_print(line)


if __name__ == '__main__':
    import asyncio

    asyncio.run(run_delegation_demo())
