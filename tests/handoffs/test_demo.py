from __future__ import annotations

import pytest

from examples.demo_handoffs import run_delegation_demo

pytestmark = pytest.mark.anyio


async def test_delegation_demo_runs_without_an_api_key() -> None:
    lines: list[str] = []
    await run_delegation_demo(lines.append)
    text = '\n'.join(lines)
    assert 'remove_all_tools: the conversation text only (3 messages, 3 parts, one per row)' in text
    assert text.count('<CONVERSATION HISTORY>') == 2
    assert 'transfer_to_billing -> {"assistant": "billing"}' in text
