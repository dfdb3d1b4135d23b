"""What the capability reports about its work: typed events, log records, span attributes, a per-run report."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry import trace
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CapabilityEvent, ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.tools import RunContext

from .._typing import is_mapping

__all__ = (
    'OverflowReduced',
    'OverflowReport',
    'OverflowRunSummary',
    'OverflowingToolOutputWarning',
    'logger',
    'overflow_report',
    'report',
    'warn',
)

logger = logging.getLogger('pydantic_ai_harness.overflowing_tool_output')
"""Each reduction is logged here at INFO; fallbacks at WARNING (they also raise a warning)."""

VALUE_PREFIX = 'overflow'
CONTENT_PREFIX = 'overflow_content'
"""Metadata keys on a reduced `ToolReturnPart` are `<prefix>_action`, `_size_before`, `_size_after`, `_handle`, `_bytes`."""


class OverflowingToolOutputWarning(UserWarning):
    """Emitted when a reduction could not run as configured and a fallback was used instead."""


@dataclass(kw_only=True)
class OverflowReduced(CapabilityEvent, namespace='overflowing_tool_output'):
    """Emitted each time a tool return (or its `content`) was reduced.

    Seen by `agent.run_stream_events(...)`, `event_stream_handler`s and `on_event` listeners.
    """

    unit: Literal['return_value', 'content'] = 'return_value'
    """Which part of the tool return was reduced."""

    action: str = ''
    """The action that produced the result: `'spill'`, `'truncate'`, `'summarize'`, ..."""

    fallback_path: list[str] = field(default_factory=list[str])
    """Every action tried, in order, e.g. `['Spill', 'Truncate']` when the store failed."""

    measured: int = 0
    """The size the bands compared (characters, bytes for binary, or tokens with `over_tokens`)."""

    chars_before: int = 0
    """Characters (bytes for binary) of the output as the tool returned it."""

    chars_after: int = 0
    """Characters of what the model sees instead."""

    handle: str | None = None
    """Where the full output was stored, when it was: the handle the model was shown."""

    key: str | None = None
    """The key the output was written under, `<run id>/<tool call id>/<retry>`, when it was stored. A listing
    (`ListableStore.list`, the CLI) shows it as the store files it: characters unsafe in a key escaped, and a key
    written twice (a reused tool call id) suffixed; `ResolvableStore.resolve(handle)` gives that exact form."""


@dataclass(kw_only=True)
class OverflowRunSummary(CapabilityEvent, namespace='overflowing_tool_output'):
    """Emitted once at the end of a run that reduced anything: totals for the whole run."""

    reduced: int = 0
    """How many tool returns (or contents) were reduced."""

    chars_before: int = 0
    """Their characters before reduction."""

    chars_after: int = 0
    """Their characters after."""

    handles: list[str] = field(default_factory=list[str])
    """Every handle written in the run."""

    @property
    def chars_saved(self) -> int:
        """Characters no longer sent to the model, on every later request of the run."""
        return self.chars_before - self.chars_after

    @property
    def tokens_saved(self) -> int:
        """The same, in estimated tokens (~4 characters per token)."""
        return self.chars_saved // 4


@dataclass(frozen=True)
class OverflowReport:
    """What the capability did in a run, read back from the message history (`result.all_messages()`)."""

    reduced: int
    """How many tool returns (or contents) were reduced."""

    by_action: Mapping[str, int]
    """Counts per action, e.g. `{'spill': 3, 'truncate': 1}`."""

    chars_before: int
    """Characters (bytes for binary) the tools returned, for the reduced ones."""

    chars_after: int
    """Characters the model was shown instead."""

    handles: tuple[str, ...]
    """Every handle written."""

    @property
    def chars_saved(self) -> int:
        """Characters kept out of the context, on every later request of the run."""
        return self.chars_before - self.chars_after

    @property
    def tokens_saved(self) -> int:
        """The same, in estimated tokens (~4 characters per token)."""
        return self.chars_saved // 4


def overflow_report(messages: Iterable[ModelMessage]) -> OverflowReport:
    """Summarize the reductions recorded in a message history (works on stored or deserialized histories too).

    ```python
    from pydantic_ai_harness.overflowing_tool_output import overflow_report

    report = overflow_report([])
    assert report.reduced == 0
    ```
    """
    reduced = chars_before = chars_after = 0
    by_action: dict[str, int] = {}
    handles: list[str] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if not isinstance(part, ToolReturnPart):
                continue
            metadata: object = part.metadata
            if not is_mapping(metadata):
                continue
            for prefix in (VALUE_PREFIX, CONTENT_PREFIX):
                action = metadata.get(f'{prefix}_action')
                if not isinstance(action, str):
                    continue
                reduced += 1
                by_action[action] = by_action.get(action, 0) + 1
                chars_before += _int(metadata.get(f'{prefix}_size_before'))
                chars_after += _int(metadata.get(f'{prefix}_size_after'))
                handle = metadata.get(f'{prefix}_handle')
                if isinstance(handle, str):
                    handles.append(handle)
    return OverflowReport(reduced, by_action, chars_before, chars_after, tuple(handles))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def record_on_span(event: OverflowReduced) -> None:
    """Put the reduction on the current span (the tool's span when pydantic-ai instrumentation is on)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    prefix = 'pydantic_ai_harness.overflow' if event.unit == 'return_value' else 'pydantic_ai_harness.overflow_content'
    attributes: dict[str, str | int | list[str]] = {
        f'{prefix}.action': event.action,
        f'{prefix}.fallback_path': event.fallback_path,
        f'{prefix}.measured': event.measured,
        f'{prefix}.chars_before': event.chars_before,
        f'{prefix}.chars_after': event.chars_after,
    }
    if event.handle is not None:
        attributes[f'{prefix}.handle'] = event.handle
    if event.key is not None:
        attributes[f'{prefix}.key'] = event.key
    span.set_attributes(attributes)


def log_reduction(tool_name: str, event: OverflowReduced) -> None:
    """One INFO record per reduction, with the numbers in `extra` for structured logging."""
    logger.info(
        'reduced the %s of %s: %s (%s), %d -> %d characters%s',
        event.unit,
        tool_name,
        event.action,
        ' -> '.join(event.fallback_path),
        event.chars_before,
        event.chars_after,
        f', stored as {event.handle}' if event.handle else '',
        extra={
            'overflow_tool_name': tool_name,
            'overflow_unit': event.unit,
            'overflow_action': event.action,
            'overflow_fallback_path': event.fallback_path,
            'overflow_chars_before': event.chars_before,
            'overflow_chars_after': event.chars_after,
            'overflow_handle': event.handle,
            'overflow_key': event.key,
        },
    )


def warn(message: str) -> None:
    """Log a fallback for operators and warn developers (once per message under Python's default filter)."""
    # Logged every time, for operators; the warning is for developers and test suites that turn warnings into errors.
    logger.warning(message)
    warnings.warn(message, OverflowingToolOutputWarning, stacklevel=3)


async def report(ctx: RunContext[Any], tool_name: str, event: OverflowReduced) -> None:
    """Tell the application: a typed event on the run's stream, a log record, attributes on the tool's span."""
    log_reduction(tool_name, event)
    record_on_span(event)
    try:
        await ctx.emit(event)
    except UserError:
        pass  # a hook called outside an agent run (tests, direct use) has no event stream
