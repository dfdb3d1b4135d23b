"""What the capability reports about its work: typed events, log records, span attributes, a per-run report."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry import trace
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CapabilityEvent, ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.tools import RunContext

from .._caller import warn_at_caller
from .._typing import is_list, is_mapping

__all__ = (
    'AgedInRun',
    'OverflowAged',
    'OverflowReduced',
    'OverflowReport',
    'OverflowRunSummary',
    'OverflowingToolOutputWarning',
    'aged_in_run',
    'file_handles',
    'logger',
    'overflow_report',
    'report',
    'report_aged',
    'report_run',
    'warn',
)

logger = logging.getLogger('pydantic_ai_harness.overflowing_tool_output')
"""Each reduction is logged here at INFO; fallbacks at WARNING (they also raise a warning)."""

VALUE_PREFIX = 'overflow'
CONTENT_PREFIX = 'overflow_content'
"""Metadata keys on a reduced `ToolReturnPart` are `<prefix>_action`, `_size_before`, `_size_after`, `_handle`, `_bytes`."""

AGED_PREFIX = 'overflow_aged'
"""Metadata keys on an aged `ToolReturnPart`: `_handle`, `_key` (when it was written for aging), `_size_before`,
`_size_after` (characters), `_run` and `_step` (the run and the request that aged it: one broken cache prefix)."""

FILE_HANDLES = 'file_handles'
"""`<prefix>_file_handles`: `[handle, key]` of each document of a list stored apart (`_media._file_items`), in list
order; `<prefix>_handle` names the first of them only."""

FILE_HANDLES_READ = 1_000
"""The most entries of one part's `<prefix>_file_handles` read (metadata is untrusted: it may be any length)."""


def file_handles(metadata: Mapping[str, object], prefix: str) -> list[tuple[object, object]]:
    """The `(handle, key)` entries of `<prefix>_file_handles` in `metadata`, shapes checked, at most
    `FILE_HANDLES_READ` of them (their values are the caller's to check).
    """
    entries = metadata.get(f'{prefix}_{FILE_HANDLES}')
    if not is_list(entries):
        return []
    return [(entry[0], entry[1]) for entry in entries[:FILE_HANDLES_READ] if is_list(entry) and len(entry) == 2]


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
class OverflowAged(CapabilityEvent, namespace='overflowing_tool_output'):
    """Emitted each time a batch of old tool returns left the context as stubs (see `Aging`).

    Each batch changes the request from its first stub on: a provider's prompt cache is rebuilt from there once.
    """

    aged: int = 0
    """How many returns became stubs in this batch."""

    tokens_before: int = 0
    """Their tokens before."""

    tokens_after: int = 0
    """The tokens of their stubs."""

    handles: list[str] = field(default_factory=list[str])
    """The handles the stubs name, oldest return first."""

    prefix_breaks: int = 0
    """Batches so far in this run, this one included: the requests whose cached prefix aging broke."""


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

    aged: int = 0
    """How many old tool returns this run moved out of the context (see `Aging`)."""

    prefix_breaks: int = 0
    """How many of the run's requests changed earlier messages by aging them (one per batch)."""

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

    aged: int = 0
    """How many old tool returns were moved out of the context as stubs (see `Aging`)."""

    aged_chars_before: int = 0
    """Their characters before."""

    aged_chars_after: int = 0
    """The characters of their stubs."""

    prefix_breaks: int = 0
    """How many requests aged returns (one batch each): each changed the requests after it from its first stub on,
    so a provider's prompt cache was rebuilt from there once."""

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
    aged = aged_before = aged_after = 0
    by_action: dict[str, int] = {}
    handles: list[str] = []
    seen: set[str] = set()
    batches: set[tuple[object, object]] = set()
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
                listed = [metadata.get(f'{prefix}_handle'), *(entry[0] for entry in file_handles(metadata, prefix))]
                for handle in listed:
                    if isinstance(handle, str) and handle not in seen:
                        seen.add(handle)
                        handles.append(handle)
            if f'{AGED_PREFIX}_step' in metadata:
                aged += 1
                aged_before += _int(metadata.get(f'{AGED_PREFIX}_size_before'))
                aged_after += _int(metadata.get(f'{AGED_PREFIX}_size_after'))
                batches.add((_key(metadata.get(f'{AGED_PREFIX}_run')), _key(metadata.get(f'{AGED_PREFIX}_step'))))
                aged_handle = metadata.get(f'{AGED_PREFIX}_handle')
                if isinstance(aged_handle, str) and aged_handle not in seen:
                    seen.add(aged_handle)
                    handles.append(aged_handle)
    return OverflowReport(
        reduced, by_action, chars_before, chars_after, tuple(handles), aged, aged_before, aged_after, len(batches)
    )


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
    """Warn developers, filed under the code that ran the agent, and log for operators where logging is configured.

    One report on a console: with no logging configured, Python's last-resort handler would print the log record
    beside the warning. With handlers configured, every fallback is logged (the warning shows once per place under
    Python's default filter); test suites that turn warnings into errors see each one.
    """
    if logger.hasHandlers():
        logger.warning(message)
    warn_at_caller(message, OverflowingToolOutputWarning)


async def report(ctx: RunContext[Any], tool_name: str, event: OverflowReduced) -> None:
    """Tell the application: a typed event on the run's stream, a log record, attributes on the tool's span."""
    log_reduction(tool_name, event)
    record_on_span(event)
    await _emit(ctx, event)


async def _emit(ctx: RunContext[Any], event: CapabilityEvent) -> None:
    """`event` on the run's event stream, when there is one."""
    try:
        await ctx.emit(event)
    except UserError:
        pass  # a hook called outside an agent run (tests, direct use) has no event stream


@dataclass(frozen=True)
class AgedInRun:
    """What one run aged, anywhere in the history (old returns of earlier runs' messages too)."""

    aged: int
    """How many returns it aged."""

    batches: int
    """In how many batches (requests): each broke the cached prefix once."""

    handles: tuple[str, ...]
    """The handles its stubs name, oldest return first."""


def _key(value: object) -> object:
    """A metadata value as a set member: the capability writes strings and ints there, anything else is read as text
    (metadata is the application's and a tool's to set: a list or a dict must not fail the run).
    """
    return value if value is None or isinstance(value, (str, int, float)) else repr(value)[:200]


def aged_in_run(messages: Iterable[ModelMessage], run_id: str | None) -> AgedInRun:
    """What the run `run_id` aged in `messages`."""
    aged = 0
    steps: set[object] = set()
    handles: dict[str, None] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            metadata: object = getattr(part, 'metadata', None)
            if is_mapping(metadata) and metadata.get(f'{AGED_PREFIX}_run') == run_id:
                aged += 1
                steps.add(_key(metadata.get(f'{AGED_PREFIX}_step')))
                if isinstance(handle := metadata.get(f'{AGED_PREFIX}_handle'), str):
                    handles[handle] = None
    return AgedInRun(aged, len(steps), tuple(handles))


async def report_run(ctx: RunContext[Any]) -> None:
    """At the end of a run that reduced or aged anything: its `OverflowRunSummary` event and a log record."""
    made = overflow_report(m for m in ctx.messages if getattr(m, 'run_id', None) == ctx.run_id)
    aged = aged_in_run(ctx.messages, ctx.run_id)
    if not made.reduced and not aged.aged:
        return
    logger.info(
        'run %s: reduced %d tool outputs, %d -> %d characters; aged %d in %d batches',
        ctx.run_id,
        made.reduced,
        made.chars_before,
        made.chars_after,
        aged.aged,
        aged.batches,
    )
    event = OverflowRunSummary(
        reduced=made.reduced,
        chars_before=made.chars_before,
        chars_after=made.chars_after,
        handles=list(dict.fromkeys((*made.handles, *aged.handles))),
        aged=aged.aged,
        prefix_breaks=aged.batches,
    )
    await _emit(ctx, event)


async def report_aged(ctx: RunContext[Any], event: OverflowAged) -> None:
    """Tell the application a batch aged: a typed event on the run's stream and a log record."""
    logger.info(
        'aged %d old tool returns (%d -> %d tokens); batch %d of run %s',
        event.aged,
        event.tokens_before,
        event.tokens_after,
        event.prefix_breaks,
        ctx.run_id,
        extra={'overflow_aged': event.aged, 'overflow_aged_handles': event.handles},
    )
    await _emit(ctx, event)
