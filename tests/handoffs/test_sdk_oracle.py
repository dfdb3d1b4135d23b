"""The OpenAI Agents SDK 0.24.0 as the oracle: the same scripts run by the SDK and by this library, compared.

`sdk_oracle_cases.py` runs each case under the SDK, on its own `ScriptedModel` (in a venv of its own, see
`_sdk_oracle.py`); the functions here run the same script through `handoff()`, `agent_tool()`, `Handoffs` and
`last_agent()` on `FunctionModel`s, as docs/handoffs.md shows. For each case, what every agent's model was sent (its
instructions and its input, item by item) and who answered must be the same.

Both sides are written in one neutral form: role messages as `{'role', 'content'}` (the SDK's output messages by
their text), tool calls as `{'type': 'function_call', 'name', 'call_id', 'arguments'}`, tool outputs as
`{'type': 'function_call_output', 'call_id', 'output'}`. Summary texts are compared byte for byte, with one
documented difference undone: the SDK writes an assistant message it generated as its whole JSON item in a summary
record, this library as `assistant: <text>` (docs/handoffs.md, "Differences").
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import Handoffs, agent_tool, handoff, last_agent, remove_all_tools

from ._sdk_oracle import sdk_results

pytestmark = pytest.mark.anyio

PROMPT = 'INV-2026-0912 still shows unpaid, we transferred last week'
MANAGER_PROMPT = 'Can CUST-0418 get the Q4 distributor discount, and is INV-2026-0912 still open?'
_PREAMBLE = 'For context, here is the conversation so far between the user and the previous agent:'
_RECORD = re.compile(r'^(\d+)\. (\{.*\})$')


class Scripted:
    """A `FunctionModel` answering with `steps` in order (the SDK's `ScriptedModel`), recording every call."""

    def __init__(self, steps: list[list[ModelResponsePart]]) -> None:
        self.steps = list(steps)
        self.calls: list[dict[str, Any]] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append({'instructions': info.instructions, 'input': [i for m in messages for i in _items(m)]})
        return ModelResponse(parts=self.steps.pop(0))


def call(name: str, args: dict[str, Any], call_id: str) -> ToolCallPart:
    """A tool call as the SDK's `function_call(...)` builds it: the item id is the call id."""
    return ToolCallPart(name, args, call_id, id=call_id)


def _items(message: ModelMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            items.append({'role': 'user', 'content': part.content})
        elif isinstance(part, SystemPromptPart):
            items.append({'role': 'system', 'content': part.content})
        elif isinstance(part, TextPart):
            items.append({'role': 'assistant', 'content': part.content})
        elif isinstance(part, ToolCallPart):
            arguments = part.args_as_json_str()
            items.append(
                {'type': 'function_call', 'name': part.tool_name, 'call_id': part.tool_call_id, 'arguments': arguments}
            )
        elif isinstance(part, ToolReturnPart):
            output = part.model_response_str()
            items.append({'type': 'function_call_output', 'call_id': part.tool_call_id, 'output': output})
    return items


def _sdk_summary(text: str) -> str:
    """An SDK summary with each record of an assistant message item written as `assistant: <text>`, as ours."""
    lines: list[str] = []
    for line in text.split('\n'):
        match = _RECORD.match(line)
        item: Any = json.loads(match.group(2)) if match else None
        if match and isinstance(item, dict) and item.get('type') == 'message' and item.get('role') == 'assistant':
            content: Any = item.get('content')
            line = f'{match.group(1)}. assistant: {"".join(c["text"] for c in content)}'
        lines.append(line)
    return '\n'.join(lines)


def _sdk_item(item: dict[str, Any]) -> dict[str, Any]:
    if 'role' in item and item.get('type') in (None, 'message'):
        content: Any = item['content']
        text = content if isinstance(content, str) else ''.join(entry['text'] for entry in content)
        if item['role'] == 'assistant' and text.startswith(_PREAMBLE):
            text = _sdk_summary(text)
        return {'role': item['role'], 'content': text}
    if item['type'] == 'function_call':
        return {
            'type': 'function_call',
            'name': item['name'],
            'call_id': item['call_id'],
            'arguments': item['arguments'],
        }
    assert item['type'] == 'function_call_output', item
    return {'type': 'function_call_output', 'call_id': item['call_id'], 'output': item['output']}


def _sdk(case: str) -> dict[str, Any]:
    record = sdk_results()[case]

    def neutral(run: dict[str, Any]) -> dict[str, Any]:
        calls = {
            agent: [{'instructions': c['instructions'], 'input': [_sdk_item(i) for i in c['input']]} for c in made]
            for agent, made in run['calls'].items()
        }
        return {'last_agent': run['last_agent'], 'output': run['output'], 'calls': calls}

    result = neutral(record)
    if 'next_turn' in record:
        result['next_turn'] = neutral(record['next_turn'])
    return result


def get_invoice(invoice_no: str) -> str:
    """Return status, due date and open amount for one invoice."""
    return f'{invoice_no}: unpaid, due 2026-11-30, open 1,250.00 EUR'


def get_price_list(customer_code: str) -> str:
    """Return the price list and discount tier assigned to a customer."""
    return f'{customer_code}: distributor tier, Q4 discount 12%'


def _record(result: Any, starting: AbstractAgent[Any, Any], models: dict[str, Scripted]) -> dict[str, Any]:
    answered = last_agent(result.all_messages(), starting)
    return {
        'last_agent': answered.name,
        'output': result.output,
        'calls': {name: list(model.calls) for name, model in models.items()},
    }


async def _handoff_case(run_settings: dict[str, Any], **handoff_options: Any) -> dict[str, Any]:
    finance = Scripted([[TextPart('The payment arrived today; INV-2026-0912 is now paid.')]])
    finance_agent = Agent(finance.model, name='Finance agent', instructions='You answer invoice status.')
    triage = Scripted(
        [
            [call('get_invoice', {'invoice_no': 'INV-2026-0912'}, 'call_inv')],
            [TextPart('Passing you to finance.'), call('transfer_to_finance_agent', {}, 'call_h1')],
        ]
    )
    triage_agent = Agent(
        triage.model,
        name='Helpdesk triage',
        instructions='Route invoices and payments to finance.',
        tools=[get_invoice],
        output_type=[str, handoff(finance_agent, **handoff_options)],
        capabilities=[Handoffs(**run_settings)],
    )
    result = await triage_agent.run(PROMPT)
    return _record(result, triage_agent, {'triage': triage, 'finance': finance})


async def _chain_case(nested: bool) -> dict[str, Any]:
    refunds = Scripted([[TextPart('Refund of 1,250.00 EUR issued.')], [TextPart('Within 5 business days.')]])
    refunds_agent = Agent(refunds.model, name='refunds', instructions='You issue refunds.')
    billing = Scripted([[call('transfer_to_refunds', {}, 'call_h2')]])
    billing_agent = Agent(
        billing.model, name='billing', instructions='You answer billing.', output_type=[str, handoff(refunds_agent)]
    )
    triage = Scripted(
        [
            [call('get_invoice', {'invoice_no': 'INV-2026-0912'}, 'call_inv')],
            [TextPart('Passing you on.'), call('transfer_to_billing', {}, 'call_h1')],
        ]
    )
    triage_agent = Agent(
        triage.model,
        name='triage',
        instructions='You route.',
        tools=[get_invoice],
        output_type=[str, handoff(billing_agent)],
        capabilities=[Handoffs(nest_handoff_history=nested)],
    )
    models = {'triage': triage, 'billing': billing, 'refunds': refunds}
    first = await triage_agent.run('I was charged twice for INV-2026-0912')
    record = _record(first, triage_agent, models)
    history = first.all_messages()
    answering = last_agent(history, triage_agent)
    assert answering is refunds_agent  # the agent itself, not its name
    second = await answering.run('When will I get it?', message_history=history)
    record['next_turn'] = _record(second, answering, models)
    return record


async def _text_reply_case() -> dict[str, Any]:
    finance = Scripted([])
    finance_agent = Agent(finance.model, name='Finance agent', instructions='You answer invoice status.')
    triage = Scripted([[TextPart('Please send me the invoice number.')]])
    triage_agent = Agent(
        triage.model,
        name='Helpdesk triage',
        instructions='Route invoices and payments to finance.',
        tools=[get_invoice],
        output_type=[str, handoff(finance_agent)],
        capabilities=[Handoffs()],
    )
    result = await triage_agent.run('Hello, I have a question about an invoice')
    return _record(result, triage_agent, {'triage': triage, 'finance': finance})


async def _as_tool_case() -> dict[str, Any]:
    sales = Scripted([[TextPart('CUST-0418 qualifies: distributor tier, 12% in Q4.')]])
    finance = Scripted([[TextPart('INV-2026-0912 is open: 1,250.00 EUR, due 2026-11-30.')]])
    sales_agent = Agent(sales.model, name='Sales agent', instructions='You answer price lists.')
    finance_agent = Agent(finance.model, name='Finance agent', instructions='You answer invoice status.')
    manager = Scripted(
        [
            [call('get_price_list', {'customer_code': 'CUST-0418'}, 'call_price')],
            [
                call('ask_sales', {'input': 'Does CUST-0418 get the Q4 distributor discount?'}, 'c_s'),
                call('ask_finance', {'input': 'Is INV-2026-0912 still open?'}, 'c_f'),
            ],
            [TextPart('Yes, 12% in Q4; and INV-2026-0912 is still open (1,250.00 EUR).')],
        ]
    )
    manager_agent = Agent(
        manager.model,
        name='Helpdesk manager',
        instructions='You own the reply to the customer.',
        tools=[
            get_price_list,
            agent_tool(sales_agent, tool_name='ask_sales', tool_description='Prices, quotations and discount rules.'),
            agent_tool(
                finance_agent, tool_name='ask_finance', tool_description='Invoice status, due dates and open balance.'
            ),
        ],
    )
    result = await manager_agent.run(MANAGER_PROMPT)
    return _record(result, manager_agent, {'manager': manager, 'sales': sales, 'finance': finance})


async def test_agent_tool_gives_the_agent_only_its_input_as_the_sdks_as_tool() -> None:
    ours = await _as_tool_case()
    assert ours == _sdk('as_tool')
    assert ours['calls']['finance'] == [
        {
            'instructions': 'You answer invoice status.',
            'input': [{'role': 'user', 'content': 'Is INV-2026-0912 still open?'}],
        }
    ]


@pytest.mark.parametrize(
    ('case', 'run_settings', 'handoff_options'),
    [
        ('handoff', {}, {}),
        ('handoff_remove_all_tools', {}, {'input_filter': remove_all_tools}),
        ('handoff_nested', {'nest_handoff_history': True}, {}),
        ('handoff_run_filter', {'input_filter': remove_all_tools}, {}),
    ],
)
async def test_a_handoff_sends_the_receiving_agent_what_the_sdk_sends(
    case: str, run_settings: dict[str, Any], handoff_options: dict[str, Any]
) -> None:
    ours = await _handoff_case(run_settings, **handoff_options)
    assert ours == _sdk(case)
    prompts = [i for i in ours['calls']['finance'][0]['input'] if i.get('role') == 'user']
    assert len(prompts) <= 1  # the user's prompt once (inside the summary when nested), never again


@pytest.mark.parametrize('nested', [False, True], ids=['plain', 'nested'])
async def test_a_chain_of_handoffs_is_answered_and_continued_by_the_last_agent(nested: bool) -> None:
    ours = await _chain_case(nested)
    sdk = _sdk('chain_nested' if nested else 'chain')
    assert ours['last_agent'] == sdk['last_agent'] == 'refunds'
    assert {k: v for k, v in ours.items() if k != 'next_turn'} == {k: v for k, v in sdk.items() if k != 'next_turn'}
    assert ours['next_turn']['last_agent'] == sdk['next_turn']['last_agent'] == 'refunds'
    if not nested:
        # The next turn goes to refunds, on the whole conversation: every hop and the answer, as `to_input_list()`.
        assert ours['next_turn'] == sdk['next_turn']


async def test_a_text_reply_beside_handoffs_is_the_answer_as_in_the_sdk() -> None:
    assert await _text_reply_case() == _sdk('text_reply')


async def test_without_str_in_output_type_a_text_reply_is_refused() -> None:
    """The documented difference: pydantic-ai allows text only when `output_type` holds `str`."""
    finance_agent = Agent(Scripted([]).model, name='Finance agent')
    triage = Scripted([[TextPart('Please send me the invoice number.')]] * 3)
    triage_agent = Agent(triage.model, output_type=[handoff(finance_agent)], retries=2)
    with pytest.raises(UnexpectedModelBehavior, match='Exceeded maximum output retries'):
        await triage_agent.run('Hello')
