"""The summarizer behind `Summarize`: a custom function, or the run's (or a given) model, map-reduce when large."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded, UserError
from pydantic_ai.models import Model
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage, UsageLimits

from ._bands import Summarize
from ._markers import summary_marker

__all__ = ('OverflowConfigurationError', 'Summary', 'SummaryRequest', 'mark_summary', 'split_chunks', 'summarize_text')


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
