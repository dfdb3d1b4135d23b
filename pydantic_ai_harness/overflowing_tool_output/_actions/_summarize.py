"""The summarizer behind `Summarize`: a custom function, or the run's (or a given) model, map-reduce when large."""

from __future__ import annotations

import copy
import inspect
import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, cast

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
from ._action import Action, check_int, check_seconds, check_then
from ._summary_run import DurableSummary, RunLocks, SummaryOutcome, SummaryRequest, SummaryRun
from ._truncate import Truncate
from ._unit import ActionContext, Reduced

__all__ = (
    'DEFAULT_SUMMARY_PROMPT',
    'DurableSummary',
    'OverflowConfigurationError',
    'RunLocks',
    'Summarize',
    'SummarizeFunc',
    'Summary',
    'SummaryOutcome',
    'SummaryRequest',
    'SummaryRun',
    'check_model_name',
    'mark_summary',
    'split_chunks',
    'summarize',
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


SummarizeFunc: TypeAlias = Callable[[str, str], str | Awaitable[str]]
"""A custom summarizer: `(tool_name, text) -> summary`, sync or async."""


@dataclass(frozen=True)
class Summarize(Action):
    """Replace the payload with a summary written by a model: one call (or a bounded map-reduce). Lossy.

    With no `model` the run's own model writes the summary. By default the full original is also
    written to the store and the summary names its handle, so nothing is lost.
    """

    model: Model | str | None = None
    """The summarizing model: a `Model` or a model name such as `'openai:gpt-4o-mini'`. `None`: the run's model."""

    summarize: SummarizeFunc | None = None
    """A custom `(tool_name, text) -> summary` function (sync or async) that replaces the built-in prompt."""

    then: Action | None = field(default_factory=Truncate)
    """What to do when no summary can be made (a binary payload, an error, empty output, no budget). By default a
    [`Truncate`][pydantic_ai_harness.overflowing_tool_output.Truncate], as for `Spill`: a failed reduction never
    lets an oversized payload through. `None` lets the original through (with a warning)."""

    max_input_chars: int = 100_000
    """The largest text sent in one chunk request; longer payloads are summarized in chunks, then combined.

    The combining request sends the chunk summaries together, which can be longer than this.
    """

    max_chunks: int = 8
    """The most chunks a payload is split into; text beyond them is covered only by the original in the store."""

    keep_original: bool = True
    """Also write the full original to the store and name its handle in the summary."""

    store_timeout: float = 30.0
    """Seconds the write of the original may take; past it the summary is kept without the original."""

    def __post_init__(self) -> None:
        check_int(self.max_input_chars, 'Summarize.max_input_chars', 1_000)
        check_int(self.max_chunks, 'Summarize.max_chunks', 1)
        if not is_instance(self.keep_original, bool):
            raise TypeError(f'Summarize.keep_original must be True or False, got {self.keep_original!r}')
        check_seconds(self.store_timeout, 'Summarize.store_timeout')
        if self.summarize is not None and not callable(self.summarize):
            raise TypeError('Summarize.summarize must be a callable `(tool_name, text) -> str`')
        if isinstance(self.model, str):
            check_model_name(self.model)
        check_then(self.then, 'Summarize')

    @property
    def writes_store(self) -> bool:
        """With `keep_original`, the original is stored beside the summary."""
        return self.keep_original

    @property
    def summarizes(self) -> bool:
        """A summary is judged on its length."""
        return True

    async def reduce(self, unit: ActionContext) -> tuple[Reduced | None, str]:
        """Replace the unit by a labelled summary, with the capability's prompt, durable operation and locks."""
        if unit.summaries is None:
            return None, 'no summarizer is configured for this reduction'
        return await summarize(self, unit, unit.summaries)


def check_model_name(model: str) -> None:
    """Refuse a model name no provider serves, or one whose provider's package is missing, naming the setting.

    The provider is only looked up, not built: its credentials may still be on their way (set later in the
    environment, say), and are checked by the first request as usual.
    """
    from pydantic_ai.models import infer_model, parse_model_id
    from pydantic_ai.providers import infer_provider_class

    provider, _ = parse_model_id(model)
    try:
        if provider is None:
            infer_model(model)  # a name without a provider: 'test', or a legacy name pydantic-ai still knows
        else:
            infer_provider_class(provider)
    except ImportError as exc:
        raise ImportError(f'Summarize.model={model!r}: {exc}') from None
    except Exception as exc:  # noqa: BLE001 - pydantic-ai says why (unknown model, unknown provider) in its own types
        raise ValueError(f'Summarize.model={model!r} is not a model pydantic-ai knows: {exc}') from None


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
    run: SummaryRun,
) -> tuple[Reduced | None, str]:
    """Replace `unit` by a labelled summary (keeping the original when asked), or `None` and why not.

    `run` holds the capability's prompt, its durable operation (which names `action` by its index) and locks.
    """
    rendered = unit.rendered
    if rendered.kind == 'binary':
        return None, 'binary data cannot be summarized'
    request = SummaryRequest(
        tool_name=unit.call.tool_name, text=rendered.text, prompt_template=run.prompt, lines=count_lines(rendered.text)
    )
    # One summary at a time per run: each checks what the run can afford against the usage of those before it,
    # so parallel tool calls summarized together cannot leave the run without its next request.
    async with run.locks.hold(unit.run.run_id):
        try:
            outcome, usage = await run.durable(unit.run, run.index_of(action), request)
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
