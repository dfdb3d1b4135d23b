"""The summarizer behind `Summarize`: a custom function, or the run's (or a given) model, map-reduce when large."""

from __future__ import annotations

import copy
import inspect
import string
from collections.abc import AsyncGenerator, Awaitable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

import anyio
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded, UserError
from pydantic_ai.models import Model
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage, UsageLimits

from ..._typing import is_instance
from .._events import warn
from .._rendering._markers import summary_marker
from .._rendering._preview import count_lines
from .._rendering._render import stored_form
from ..stores._paths import handle_for_key, short_handles
from ._bands import Band, Summarize, action_chain
from ._unit import ActionContext, Reduced

__all__ = (
    'DEFAULT_SUMMARY_PROMPT',
    'DurableSummary',
    'OverflowConfigurationError',
    'RunLocks',
    'Summary',
    'SummaryOutcome',
    'SummaryRequest',
    'mark_summary',
    'split_chunks',
    'summarize',
    'summarize_actions',
    'summarize_in_place',
    'summarize_text',
    'validate_summary_prompt',
)

DEFAULT_SUMMARY_PROMPT = (
    'The tool `{tool_name}` returned the output below, which is too long to keep in the conversation. '
    'Summarize it for an AI agent that will carry on with the task using only your summary: keep every error, '
    'failure, number, identifier, file path, decision and conclusion it may need, and say what kind of output it '
    'is; drop repetition and noise. Reply with the summary only.\n\n<tool_output>\n{output}\n</tool_output>'
)
"""The built-in summarization prompt. A custom one must contain `{tool_name}` and `{output}` and no other field."""


def validate_summary_prompt(template: str) -> None:
    """Raise `ValueError` unless `template` has exactly the `{tool_name}` and `{output}` fields."""
    if not is_instance(template, str):
        raise TypeError(f'summary_prompt must be a str, got {type(template).__name__}')
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ValueError(f'summary_prompt is not a valid format template: {exc}') from None
    missing = {'tool_name', 'output'} - fields
    if missing:
        raise ValueError(
            'summary_prompt must contain the placeholders {tool_name} and {output}; missing: '
            + ', '.join(f'{{{name}}}' for name in sorted(missing))
        )
    extra = fields - {'tool_name', 'output'}
    if extra:
        raise ValueError(
            'summary_prompt may only use the placeholders {tool_name} and {output}; unknown: '
            + ', '.join(f'{{{name}}}' for name in sorted(extra))
            + ' (write literal braces as {{ and }})'
        )


class OverflowConfigurationError(UserError):
    """The capability is configured in a way that cannot work (raised, never swallowed)."""


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize and how to label the result."""

    tool_name: str
    """The tool whose output is summarized."""

    text: str
    """The model-visible text of the output."""

    prompt_template: str
    """The validated `summary_prompt`."""

    lines: int
    """Lines in the original."""

    failure: bool = False
    """Whether the original is the message of the tool's failure (`ModelRetry`, `ToolFailed`), not a return."""


@dataclass(frozen=True)
class SummaryOutcome:
    """What the durable summarizer operation reports back; plain data, so it crosses a durable boundary."""

    summary: str | None
    """The summary (not yet labelled), or `None` when there is none."""

    reason: str = ''
    """Why there is no summary."""

    configuration_error: bool = False
    """The configuration cannot work (e.g. no request model): the caller raises, it does not fall back."""

    chunks: int = 1
    """How many parts the output was summarized in."""

    uncovered_chars: int = 0
    """Characters at the end of the output that were too many to summarize."""


@dataclass(frozen=True)
class Summary:
    """A model's (or function's) summary, before it is labelled with `mark_summary`."""

    text: str
    """The summary itself."""

    chunks: int = 1
    """How many parts the output was summarized in."""

    uncovered_chars: int = 0
    """Characters at the end of the output that were too many to summarize."""

    by_model: bool = True
    """Whether a model wrote it (`False`: the action's own `summarize` function)."""


def mark_summary(request: SummaryRequest, summary: Summary, handle: str | None) -> str:
    """The summary as the model sees it: a label saying what it is and where the original is (`handle`), if kept."""
    return (
        summary_marker(
            tool_name=request.tool_name,
            chars=len(request.text),
            lines=request.lines,
            handle=handle,
            chunks=summary.chunks,
            uncovered_chars=summary.uncovered_chars,
            by_model=summary.by_model,
            failure=request.failure,
        )
        + summary.text
    )


def split_chunks(text: str, max_chars: int, max_chunks: int) -> tuple[list[str], int]:
    """Split `text` into at most `max_chunks` pieces of at most `max_chars`, on line boundaries when possible.

    Returns the chunks and how many characters did not fit in them.
    """
    chunks: list[str] = []
    start = 0
    while start < len(text) and len(chunks) < max_chunks:
        end = min(start + max_chars, len(text))
        if end < len(text):
            newline = text.rfind('\n', start + max_chars // 2, end)
            if newline != -1:
                end = newline + 1
        chunks.append(text[start:end])
        start = end
    return chunks, len(text) - start


async def summarize_text(
    action: Summarize, request: SummaryRequest, ctx: RunContext[Any]
) -> tuple[Summary | None, str]:
    """Summarize, or say why not. Returns `(summary, '')` or `(None, reason)`; label it with `mark_summary`.

    Raises:
        OverflowConfigurationError: no model can serve a summary (e.g. the run's model is a realtime model).
    """
    chunks, dropped = split_chunks(request.text, action.max_input_chars, action.max_chunks)
    if action.summarize is not None:
        summary, reason = await _call_function(action, request)
        calls = 0
    else:
        model = _summary_model(action, ctx)
        calls = len(chunks) + (1 if len(chunks) > 1 else 0)
        limits = ctx.usage_limits or UsageLimits()
        try:
            # The parent's next request must stay affordable after every summarizer request.
            limits.check_before_request(ctx.usage + RunUsage(requests=calls))
        except UsageLimitExceeded as exc:
            return None, f'the run cannot afford {calls} summarizer request(s): {exc}'
        summary, reason = await _map_reduce(model, request, chunks, ctx, limits)
    if summary is None:
        return None, reason
    return Summary(
        summary.strip(),
        chunks=len(chunks) if calls else 1,
        uncovered_chars=dropped if calls else 0,
        by_model=action.summarize is None,
    ), ''


async def _call_function(action: Summarize, request: SummaryRequest) -> tuple[str | None, str]:
    assert action.summarize is not None
    try:
        result: Any = action.summarize(request.tool_name, request.text)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # noqa: BLE001
        return None, f'the summarize function raised {exc!r}'
    if not isinstance(result, str):
        return None, f'the summarize function returned {type(result).__name__}, not str'
    if not result.strip():
        return None, 'the summarize function returned empty text'
    return result, ''


def _summary_model(action: Summarize, ctx: RunContext[Any]) -> Model[Any] | str:
    if action.model is not None:
        return action.model
    model = ctx.model
    if not isinstance(model, Model):
        raise OverflowConfigurationError(
            f"Summarize() has no model and the run's model ({type(model).__name__}) cannot serve a summary "
            'request; pass Summarize(model=...) with a request/response model'
        )
    return cast('Model[Any]', model)


async def _map_reduce(
    model: Model[Any] | str, request: SummaryRequest, chunks: list[str], ctx: RunContext[Any], limits: UsageLimits
) -> tuple[str | None, str]:
    # Reserve the parent's next request: the sub-runs may use everything but that one.
    reserved = replace(limits, request_limit=limits.request_limit - 1) if limits.request_limit is not None else limits
    agent = Agent(model, output_type=str, name='overflow_summarizer')
    summaries: list[str] = []
    try:
        for index, chunk in enumerate(chunks, start=1):
            label = f' (part {index} of {len(chunks)})' if len(chunks) > 1 else ''
            prompt = request.prompt_template.format(tool_name=request.tool_name + label, output=chunk)
            result = await agent.run(prompt, usage=ctx.usage, usage_limits=reserved)
            if not result.output.strip():
                return None, 'the summarizer model returned no usable text (empty)'
            summaries.append(result.output.strip())
        if len(summaries) == 1:
            return summaries[0], ''
        combined = '\n\n'.join(f'Summary of part {i} of {len(summaries)}:\n{s}' for i, s in enumerate(summaries, 1))
        prompt = request.prompt_template.format(
            tool_name=f'{request.tool_name} (combined part summaries)', output=combined
        )
        result = await agent.run(prompt, usage=ctx.usage, usage_limits=reserved)
    except UsageLimitExceeded as exc:
        return None, f'the usage limits stopped the summarizer: {exc}'
    except UnexpectedModelBehavior as exc:
        # An empty answer fails output validation and exhausts the retries.
        return None, f'the summarizer model returned no usable text ({exc})'
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        return None, f'the summarizer model failed: {exc!r}'
    if not result.output.strip():
        return None, 'the summarizer model returned no usable text (empty)'
    return result.output.strip(), ''


def summarize_actions(band_lists: Iterable[Sequence[Band]]) -> tuple[Summarize, ...]:
    """Every `Summarize` action reachable from the bands (through `then` chains), in a deterministic order.

    Durable summarizer operations address their action by its position here: an int crosses a durable boundary,
    a model or a function does not, and every worker builds the same tuple from the same configuration.
    """
    found: list[Summarize] = []
    for bands in band_lists:
        for band in bands:
            for action in action_chain(band.action):
                if isinstance(action, Summarize) and not any(known is action for known in found):
                    found.append(action)
    return tuple(found)


class RunLocks:
    """One lock per run id, held while that run summarizes; an entry goes once no one holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, anyio.Lock] = {}

    def __len__(self) -> int:
        """How many runs hold or wait for a lock now."""
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, run_id: str | None) -> AsyncGenerator[None]:
        """Hold the lock of `run_id`'s summaries."""
        key = run_id or ''
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(key, None)


class DurableSummary(Protocol):
    """The capability's durable `overflow_summarize` operation."""

    def __call__(
        self, ctx: RunContext[Any], action_index: int, request: SummaryRequest
    ) -> Awaitable[tuple[SummaryOutcome, RunUsage]]: ...


async def summarize_in_place(
    action: Summarize, ctx: RunContext[Any], request: SummaryRequest
) -> tuple[SummaryOutcome, RunUsage]:
    """Summarize `request` with `action`: the outcome and the usage it cost (the body of the durable operation).

    The summarizer counts against a private copy of the run's usage, so the limits still see the run's total; the
    usage is returned rather than added, so it reaches the run exactly once whether this ran in place or in a
    durable unit: the caller adds it.
    """
    own = replace(ctx, usage=copy.deepcopy(ctx.usage))
    before = copy.deepcopy(own.usage)
    try:
        summary, reason = await summarize_text(action, request, own)
    except OverflowConfigurationError as exc:
        return SummaryOutcome(None, str(exc), configuration_error=True), RunUsage()
    if summary is None:
        return SummaryOutcome(None, reason), own.usage - before
    outcome = SummaryOutcome(summary.text, chunks=summary.chunks, uncovered_chars=summary.uncovered_chars)
    return outcome, own.usage - before


async def summarize(
    action: Summarize,
    unit: ActionContext,
    *,
    index: int,
    prompt: str,
    durable: DurableSummary,
    locks: RunLocks,
) -> tuple[Reduced | None, str]:
    """Replace `unit` by a labelled summary (keeping the original when asked), or `None` and why not.

    `index` is the action's position in `summarize_actions`, for the durable operation `durable`.
    """
    rendered = unit.rendered
    if rendered.kind == 'binary':
        return None, 'binary data cannot be summarized'
    request = SummaryRequest(
        tool_name=unit.call.tool_name,
        text=rendered.text,
        prompt_template=prompt,
        lines=count_lines(rendered.text),
        failure=unit.failure,
    )
    # One summary at a time per run: each checks what the run can afford against the usage of those before it,
    # so parallel tool calls summarized together cannot leave the run without its next request.
    async with locks.hold(unit.run.run_id):
        try:
            outcome, usage = await durable(unit.run, index, request)
        except Exception as exc:  # noqa: BLE001 - a durable unit that failed means: no summary, fall back
            return None, f'the summarizer failed: {exc!r}'
        if outcome.configuration_error:
            raise OverflowConfigurationError(outcome.reason)
        unit.run.usage.incr(usage)
    if outcome.summary is None:
        return None, outcome.reason  # nothing was stored: the original is kept only next to a summary
    summary = Summary(outcome.summary, outcome.chunks, outcome.uncovered_chars, by_model=action.summarize is None)
    # Decide before writing: a summary that would not be shorter is no summary, and its original would be
    # stored for nothing (the built-in stores return the first short id of the key's handle).
    expected_handle = next(short_handles(handle_for_key(unit.key))) if action.keep_original else None
    if len(mark_summary(request, summary, expected_handle)) >= len(rendered.text):
        return None, 'the summary was not shorter than the output'
    handle: str | None = None
    nbytes: int | None = None
    if action.keep_original:
        _, data = stored_form(rendered)
        handle, reason = await unit.write(unit.key, data, action.store_timeout)
        if handle is None:
            warn(
                f'The original output of `{unit.call.tool_name}` could not be kept ({reason}); '
                'the summary says so and is used without it'
            )
        else:
            nbytes = len(data)
    marked = mark_summary(request, summary, handle)
    if handle is not None and len(marked) >= len(rendered.text):
        # A custom store's long handle made the label too long: withdraw the original along with the summary.
        await _discard(unit, handle)
        return None, 'the summary was not shorter than the output'
    return Reduced(marked, 'summarize', handle, nbytes), ''


async def _discard(unit: ActionContext, handle: str) -> None:
    """Delete a payload nothing will point to, when the store can delete and this is not workflow code."""
    delete = getattr(unit.store, 'delete', None)
    if unit.run.in_durable_context or delete is None:
        return
    try:
        await delete(handle)
    except Exception as exc:  # noqa: BLE001 - a failed clean-up must not fail the run
        warn(f'A stored original nothing points to could not be deleted: {exc!r}')
