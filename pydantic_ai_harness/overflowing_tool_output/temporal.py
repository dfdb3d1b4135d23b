"""`OverflowTemporalRunContext`: the run context a Temporal activity gets, with the conversation's handles.

Temporal runs tools in activities and does not pass them the run's messages (they would ride in every activity's
payload). The query tools need only the handles those messages name: for `grep_tool_result` without a handle (a
search over every stored result of the conversation) and to resolve a mistyped handle. Needs `temporalio`
(`pip install "pydantic-ai-harness-context[durable]"`).
"""

from __future__ import annotations

from typing import Any

from .._clash import require_pydantic_ai, warn_on_clash

# Upstream `pydantic-ai-harness` ships no `temporal` module: ours whichever was installed last.
warn_on_clash()
require_pydantic_ai()

from pydantic_ai.durable_exec.temporal import TemporalRunContext
from pydantic_ai.tools import RunContext

from ._query_tools._handles import CARRIED_HANDLES, handles_to_carry

__all__ = ('OverflowTemporalRunContext',)


class OverflowTemporalRunContext(TemporalRunContext[Any]):
    """`TemporalRunContext` that also carries the handles of the conversation's stored results (the newest 1,000).

    Pass it as `TemporalDurability(run_context_type=OverflowTemporalRunContext)`; without it, a search without a
    handle tells the model to pass one. About 100 bytes per handle (a real run id and call id in its key) go into
    each activity's payload.
    """

    @classmethod
    def serialize_run_context(cls, ctx: RunContext[Any]) -> dict[str, Any]:
        """The fields `TemporalRunContext` carries, and the conversation's handles."""
        return {**super().serialize_run_context(ctx), CARRIED_HANDLES: handles_to_carry(ctx.messages)}
