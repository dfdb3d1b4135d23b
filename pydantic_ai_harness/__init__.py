"""Context-economy capabilities for Pydantic AI agents.

- [`pydantic_ai_harness.overflowing_tool_output`][pydantic_ai_harness.overflowing_tool_output]: reduce an
  oversized tool return once, when it is produced (truncate, spill to a store, summarize).
- [`pydantic_ai_harness.handoffs`][pydantic_ai_harness.handoffs]: handoff input filters and nested handoff
  history for agent delegation, ported from the OpenAI Agents SDK.
"""

from __future__ import annotations

from ._clash import upstream_name_error, warn_on_clash

__version__ = '0.1.0'

__all__ = ('__version__',)

# The official `pydantic-ai-harness` installs this import package too: say so when both are installed.
warn_on_clash()


def __getattr__(name: str) -> object:
    # `from pydantic_ai_harness import ToolOutputLimits` (upstream's README) names what to import instead.
    raise upstream_name_error(name) or AttributeError(f'module {__name__!r} has no attribute {name!r}')
