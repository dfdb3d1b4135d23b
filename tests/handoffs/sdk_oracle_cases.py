"""The OpenAI Agents SDK side of the oracle: each case run by the SDK itself, on its own `ScriptedModel`.

Run in a virtual environment holding `openai-agents` (see `_sdk_oracle.py`, which builds one): `python
sdk_oracle_cases.py` prints one JSON object, by case, with what each agent's model was sent (its instructions and its
input items, in call order) and who answered (`result.last_agent.name`, `result.final_output`). Nothing reaches the
network: the models are scripted and tracing is off. `test_sdk_oracle.py` runs the same scripts through this library
on `FunctionModel`s and compares.

This file imports `agents`, which the project's own environment does not hold: pytest never imports it (its name
does not start with `test_`), and pyright is told the import is expected to be missing.
"""

# pyright: reportMissingImports=false, reportMissingModuleSource=false
from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool, handoff, set_tracing_disabled
from agents.extensions import handoff_filters
from agents.testing import ScriptedModel, assistant_message, function_call

set_tracing_disabled(True)

PROMPT = 'INV-2026-0912 still shows unpaid, we transferred last week'
"""The seed's triage example: the user's message."""

MANAGER_PROMPT = 'Can CUST-0418 get the Q4 distributor discount, and is INV-2026-0912 still open?'
"""The seed's as-tools manager: the user's message."""


@function_tool
def get_invoice(invoice_no: str) -> str:
    """Return status, due date and open amount for one invoice."""
    return f'{invoice_no}: unpaid, due 2026-11-30, open 1,250.00 EUR'


@function_tool
def get_price_list(customer_code: str) -> str:
    """Return the price list and discount tier assigned to a customer."""
    return f'{customer_code}: distributor tier, Q4 discount 12%'


def _calls(model: Any) -> list[dict[str, Any]]:
    return [{'instructions': call.system_instructions, 'input': call.input} for call in model.calls]


def _record(result: Any, models: dict[str, Any]) -> dict[str, Any]:
    return {
        'last_agent': result.last_agent.name,
        'output': result.final_output,
        'calls': {name: _calls(model) for name, model in models.items()},
    }


def _triage(finance_model: Any, triage_steps: list[Any], **handoff_options: Any) -> tuple[Any, Any]:
    finance = Agent(name='Finance agent', instructions='You answer invoice status.', model=finance_model)
    triage_model = ScriptedModel(triage_steps)
    target = handoff(finance, **handoff_options) if handoff_options else finance
    triage = Agent(
        name='Helpdesk triage',
        instructions='Route invoices and payments to finance.',
        model=triage_model,
        tools=[get_invoice],
        handoffs=[target],
    )
    return triage, triage_model


TRIAGE_STEPS = [
    [function_call('get_invoice', {'invoice_no': 'INV-2026-0912'}, call_id='call_inv')],
    [assistant_message('Passing you to finance.'), function_call('transfer_to_finance_agent', {}, call_id='call_h1')],
]
"""The triage agent's turns: look the invoice up, then say so and hand off to finance."""


async def handoff_case(run_config: Any = None, **handoff_options: Any) -> dict[str, Any]:
    """The seed's triage example: triage looks the invoice up and hands off to finance, which answers."""
    finance_model = ScriptedModel([[assistant_message('The payment arrived today; INV-2026-0912 is now paid.')]])
    triage, triage_model = _triage(finance_model, list(TRIAGE_STEPS), **handoff_options)
    result = await Runner.run(triage, PROMPT, run_config=run_config or RunConfig())
    return _record(result, {'triage': triage_model, 'finance': finance_model})


def _chain(nested: bool) -> tuple[Any, dict[str, Any], RunConfig]:
    refunds_model = ScriptedModel(
        [[assistant_message('Refund of 1,250.00 EUR issued.')], [assistant_message('Within 5 business days.')]]
    )
    refunds = Agent(name='refunds', instructions='You issue refunds.', model=refunds_model)
    billing_model = ScriptedModel([[function_call('transfer_to_refunds', {}, call_id='call_h2')]])
    billing = Agent(name='billing', instructions='You answer billing.', model=billing_model, handoffs=[refunds])
    triage_model = ScriptedModel(
        [
            [function_call('get_invoice', {'invoice_no': 'INV-2026-0912'}, call_id='call_inv')],
            [assistant_message('Passing you on.'), function_call('transfer_to_billing', {}, call_id='call_h1')],
        ]
    )
    triage = Agent(
        name='triage', instructions='You route.', model=triage_model, tools=[get_invoice], handoffs=[billing]
    )
    models = {'triage': triage_model, 'billing': billing_model, 'refunds': refunds_model}
    return triage, models, RunConfig(nest_handoff_history=nested)


async def chain_case(nested: bool) -> dict[str, Any]:
    """triage -> billing -> refunds; then the next user turn goes to `result.last_agent` on `to_input_list()`."""
    triage, models, config = _chain(nested)
    first = await Runner.run(triage, 'I was charged twice for INV-2026-0912', run_config=config)
    record = _record(first, models)
    follow_up = [*first.to_input_list(), {'role': 'user', 'content': 'When will I get it?'}]
    second = await Runner.run(first.last_agent, follow_up, run_config=config)
    record['next_turn'] = _record(second, models)
    return record


async def text_reply_case() -> dict[str, Any]:
    """An agent with handoffs answers in plain text: allowed, and it is the last agent."""
    finance_model = ScriptedModel([])
    triage, triage_model = _triage(finance_model, [[assistant_message('Please send me the invoice number.')]])
    result = await Runner.run(triage, 'Hello, I have a question about an invoice')
    return _record(result, {'triage': triage_model, 'finance': finance_model})


async def as_tool_case() -> dict[str, Any]:
    """The seed's as-tools manager: it asks sales and finance (agents as tools) in one turn, then answers."""
    sales_model = ScriptedModel([[assistant_message('CUST-0418 qualifies: distributor tier, 12% in Q4.')]])
    finance_model = ScriptedModel([[assistant_message('INV-2026-0912 is open: 1,250.00 EUR, due 2026-11-30.')]])
    sales = Agent(name='Sales agent', instructions='You answer price lists.', model=sales_model)
    finance = Agent(name='Finance agent', instructions='You answer invoice status.', model=finance_model)
    manager_model = ScriptedModel(
        [
            [function_call('get_price_list', {'customer_code': 'CUST-0418'}, call_id='call_price')],
            [
                function_call('ask_sales', {'input': 'Does CUST-0418 get the Q4 distributor discount?'}, call_id='c_s'),
                function_call('ask_finance', {'input': 'Is INV-2026-0912 still open?'}, call_id='c_f'),
            ],
            [assistant_message('Yes, 12% in Q4; and INV-2026-0912 is still open (1,250.00 EUR).')],
        ]
    )
    manager = Agent(
        name='Helpdesk manager',
        instructions='You own the reply to the customer.',
        model=manager_model,
        tools=[
            get_price_list,
            sales.as_tool(tool_name='ask_sales', tool_description='Prices, quotations and discount rules.'),
            finance.as_tool(tool_name='ask_finance', tool_description='Invoice status, due dates and open balance.'),
        ],
    )
    result = await Runner.run(manager, MANAGER_PROMPT)
    return _record(result, {'manager': manager_model, 'sales': sales_model, 'finance': finance_model})


async def main() -> dict[str, Any]:
    """Every case, by name."""
    return {
        'handoff': await handoff_case(),
        'handoff_remove_all_tools': await handoff_case(input_filter=handoff_filters.remove_all_tools),
        'handoff_nested': await handoff_case(RunConfig(nest_handoff_history=True)),
        'handoff_run_filter': await handoff_case(RunConfig(handoff_input_filter=handoff_filters.remove_all_tools)),
        'chain': await chain_case(nested=False),
        'chain_nested': await chain_case(nested=True),
        'text_reply': await text_reply_case(),
        'as_tool': await as_tool_case(),
    }


if __name__ == '__main__':
    json.dump(asyncio.run(main()), sys.stdout, default=str)
