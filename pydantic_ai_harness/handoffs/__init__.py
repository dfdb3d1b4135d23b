"""Handoff input filters and nested handoff history for Pydantic AI delegation, ported from the OpenAI Agents SDK.

- [`remove_all_tools`][pydantic_ai_harness.handoffs.remove_all_tools] strips every tool artefact from the history a
  delegate receives.
- [`nest_handoff_history`][pydantic_ai_harness.handoffs.nest_handoff_history] collapses it into one summary message.
- [`delegate`][pydantic_ai_harness.handoffs.delegate] runs an agent from a delegating tool or output function on the
  conversation so far, filtered as a handoff.
- [`HandoffHistory`][pydantic_ai_harness.handoffs.HandoffHistory] does the same for history passed with
  `message_history=`.
- [`Handoffs`][pydantic_ai_harness.handoffs.Handoffs] holds run-wide settings for every `delegate()` of a run.
- [`handoff`][pydantic_ai_harness.handoffs.handoff] and [`agent_tool`][pydantic_ai_harness.handoffs.agent_tool] build
  a handoff (an output tool) and an agent as a tool in one call, in the OpenAI Agents SDK's shape.
"""

from __future__ import annotations

from .._clash import require_pydantic_ai, require_shared_files, warn_on_clash

# Upstream `pydantic-ai-harness` ships no `handoffs`: this subpackage is ours whichever was installed last, so it
# names the cause and the fix before an import below fails without them: on a name the pydantic-ai that upstream's
# pin installs lacks (`CapabilityLoadDeltaPart`), or on the `__init__.py` files uninstalling upstream deleted; and
# it warns when upstream is installed too.
require_pydantic_ai()
require_shared_files()
warn_on_clash()

from ._by_reference import result_by_reference
from ._capability import HandoffHistory
from ._chain import last_agent
from ._config import HandoffConfig, SummaryRole
from ._data import HandoffHistoryMapper, HandoffInputData, HandoffInputFilter
from ._delegation import Delegation, delegate
from ._filters import remove_all_tools
from ._history import handoff_input_from_context
from ._nesting import default_handoff_history_mapper, nest_handoff_history
from ._run_settings import Handoffs, answered_by
from ._sdk import agent_tool, handoff
from ._transcript import (
    get_conversation_history_wrappers,
    reset_conversation_history_wrappers,
    set_conversation_history_wrappers,
)

__all__ = (
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
