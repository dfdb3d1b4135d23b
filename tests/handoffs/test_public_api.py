"""The public names of `pydantic_ai_harness.handoffs`: a change here is a change of the public API."""

from __future__ import annotations

from pathlib import Path

from inline_snapshot import snapshot

from pydantic_ai_harness import handoffs


def test_public_names_are_pinned() -> None:
    assert handoffs.__all__ == snapshot(
        (
            'Delegation',
            'HandoffConfig',
            'HandoffHistory',
            'HandoffHistoryMapper',
            'HandoffInputData',
            'HandoffInputFilter',
            'Handoffs',
            'SummaryRole',
            'agent_tool',
            'answered_by',
            'default_handoff_history_mapper',
            'delegate',
            'get_conversation_history_wrappers',
            'handoff',
            'handoff_input_from_context',
            'last_agent',
            'nest_handoff_history',
            'remove_all_tools',
            'reset_conversation_history_wrappers',
            'result_by_reference',
            'set_conversation_history_wrappers',
        )
    )


def test_every_public_name_is_documented_in_the_guide() -> None:
    guide = (Path(__file__).resolve().parents[2] / 'docs' / 'handoffs.md').read_text(encoding='utf-8')
    assert [name for name in handoffs.__all__ if f'`{name}`' not in guide and f'{name}]' not in guide] == []
