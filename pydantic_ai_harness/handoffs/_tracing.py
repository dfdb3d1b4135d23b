"""The OpenTelemetry span of one delegation: who handed to whom, how, through which filter, from which call."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, Literal

from opentelemetry.trace import Span
from pydantic_ai import RunContext
from pydantic_ai.agent import AbstractAgent

from ._config import HandoffConfig

__all__ = ('ATTRIBUTE_PREFIX', 'DelegationMode', 'delegation_span', 'filter_label')

DelegationMode = Literal['handoff', 'tool']
"""How a delegation was made: from an output function (a handoff, the delegate's output ends the run) or a tool."""

ATTRIBUTE_PREFIX = 'pydantic_ai_harness.handoff'
"""The prefix of the delegation span's attributes."""


def filter_label(settings: HandoffConfig) -> str:
    """What rewrote the delegate's history: the filter's name, `nest_handoff_history`, or `none`."""
    chosen = settings.input_filter
    if chosen is not None:
        return str(getattr(chosen, '__qualname__', None) or type(chosen).__qualname__)
    return 'nest_handoff_history' if settings.nest_handoff_history else 'none'


@contextmanager
def delegation_span(
    ctx: RunContext[Any], agent: AbstractAgent[Any, Any], mode: DelegationMode, settings: HandoffConfig
) -> Generator[Span]:
    """A span around one delegation, on the delegating run's tracer, so it sits under the delegating call's span and
    holds the delegate's run span.

    Named `handoff <from> -> <to>` for a handoff (an output function) and `agent tool <from> -> <to>` for a tool,
    with the two agents, the mode, the filter and the delegating call as attributes. A run without instrumentation
    has a no-op tracer, and then there is no span.
    """
    from_name = (ctx.agent.name if ctx.agent is not None else None) or 'agent'
    to_name = agent.name or 'delegate'
    verb = 'handoff' if mode == 'handoff' else 'agent tool'
    attributes = {
        f'{ATTRIBUTE_PREFIX}.from_agent': from_name,
        f'{ATTRIBUTE_PREFIX}.to_agent': to_name,
        f'{ATTRIBUTE_PREFIX}.mode': mode,
        f'{ATTRIBUTE_PREFIX}.input_filter': filter_label(settings),
        f'{ATTRIBUTE_PREFIX}.tool_name': ctx.tool_name or '',
        f'{ATTRIBUTE_PREFIX}.tool_call_id': ctx.tool_call_id or '',
    }
    with ctx.tracer.start_as_current_span(f'{verb} {from_name} -> {to_name}', attributes=attributes) as span:
        yield span
