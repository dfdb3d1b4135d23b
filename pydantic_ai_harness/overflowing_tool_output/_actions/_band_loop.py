"""The band and fallback loop: a return (or a failure text) measured, its band picked, its action run and, where
the action cannot, its `then` fallbacks, until one reduces it or none is left.

Every action answers `reduce(unit)` (`_action`; each lives in a module of its own name: `_truncate`, `_spill`,
`_summarize`): it gets an `ActionContext` (`_unit`) and answers a `Reduced` or the reason it could not; the loop
never asks which action it holds. The capability builds one loop over
its configuration and calls it from `after_tool_execute` and from the request-time rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import RunContext, ToolDefinition, ToolSelector, matches_tool_selector

from .._events import report, warn
from .._media._file_items import holds_documents, reduce_file_items
from .._media._setting import ImageBand
from .._media._steps import DurableMedia, MediaStep, media_step, with_stored_images
from .._offload import large_container, large_text, off_loop
from .._redaction._withhold import SecretWithholding
from .._rendering._render import Rendered, measure, render_content, render_value
from .._rendering._text_wrapper import render_return, wrapped_text
from ..stores import OverflowStore
from ..stores._workspace import WorkspaceSpill
from ._action import action_chain
from ._bands import Band, context_of, pick_band, uses_context
from ._summary_run import SummaryRun
from ._unit import (
    ActionContext,
    Reduced,
    UnitName,
    Writer,
    estimate_tokens_of,
    is_tool_return,
    left_as_is,
    not_smaller,
    reassemble,
    reduced_event,
    unit_key,
)

__all__ = ('BandLoop',)

_TOKENIZE_ON_LOOP_CHARS = 32 * 1024
"""A text longer than this is counted by a user's tokenizer in a worker thread (tens of ms and more on the loop)."""


_MEDIA_WRITE_TIMEOUT = 30.0
"""Seconds a media step's store writes may take when the band's actions set no spill timeout."""


def _stores(band: Band) -> bool:
    """Whether the band's actions store the original (a `Spill`, a `Summarize` keeping it), so the media step may
    too.
    """
    return any(action.writes_store for action in action_chain(band.action))


def _step_timeout(band: Band) -> float:
    """The write timeout of the band's first spilling action, else `_MEDIA_WRITE_TIMEOUT`."""
    return next(
        (timeout for action in action_chain(band.action) if (timeout := action.spill_timeout) is not None),
        _MEDIA_WRITE_TIMEOUT,
    )


class RunWriter(Protocol):
    """The capability's durable store write for a run: `(handle, '')`, or `(None, why not)`."""

    def __call__(
        self, ctx: RunContext[Any], key: str, data: bytes, timeout: float
    ) -> Awaitable[tuple[str | None, str]]:
        """Write `data` under `key` within `timeout` seconds."""
        ...


@dataclass(frozen=True)
class BandLoop:
    """The capability's bands and actions, applied to one return at a time."""

    bands_for: Callable[[str], tuple[Band, ...]]
    """The bands of a tool, largest threshold first."""

    tool_filter: ToolSelector[Any]
    """Which tools are reduced at all."""

    over_tokens: bool
    """Measure thresholds in tokens instead of characters."""

    tokenizer: Callable[[str], int] | None
    """The token counter, when one is set."""

    strip_ansi: bool
    """Remove ANSI escape sequences from text returns before measuring."""

    store: OverflowStore
    """Where spills go (when the run's workspace does not take them)."""

    workspace: WorkspaceSpill | None
    """Spilling into the run's workspace, when set."""

    write: RunWriter
    """The capability's durable store write."""

    summaries: SummaryRun
    """What a `Summarize` needs from the capability: its prompt, durable operation and per-run locks."""

    withholding: SecretWithholding | None = None
    """Secret redaction, when on: a base64 blob that may hold a secret is withheld (not stored, encoded or not); a
    PDF's text is masked and a file whose text held one is not stored where the model reads."""

    images: ImageBand | None = None
    """The image band: image blobs found in a return are shown to the model beside their markers (at tool execution
    only: a request-time reduction keeps the markers alone)."""

    durable_media: DurableMedia | None = None
    """The capability's durable operations for the media step (fitting an image blob, reading a PDF), so workflow code
    under an engine reads a PDF's pages and shows image blobs without decoding anything in place."""

    def _writer(self, ctx: RunContext[Any]) -> Writer:
        write = self.write

        async def written(key: str, data: bytes, timeout: float) -> tuple[str | None, str]:
            return await write(ctx, key, data, timeout)

        return written

    def measure(self, rendered: Rendered) -> int:
        """The size bands compare against: characters, bytes, or tokens with `over_tokens`."""
        return measure(rendered, over_tokens=self.over_tokens, tokenizer=self.tokenizer)[0]

    async def reduce_result(
        self, ctx: RunContext[Any], call: ToolCallPart, tool_def: ToolDefinition, result: Any
    ) -> Any:
        """The result with its `return_value` and text `content` reduced where their bands say; `result` itself when
        nothing was.
        """
        if not await matches_tool_selector(self.tool_filter, ctx, tool_def):
            return result
        bands = self.bands_for(tool_def.name)
        envelope = result if is_tool_return(result) else None
        value = envelope.return_value if envelope is not None else result
        content = envelope.content if envelope is not None else None
        wrapped = wrapped_text(value)
        rendered_value = await off_loop(
            ctx,
            partial(render_return, value, strip_ansi=self.strip_ansi),
            # (a wrapped text is written as JSON once, to be measured as the model would see it)
            large=(self.strip_ansi and large_text(value))
            or large_container(value)
            or (wrapped is not None and large_text(wrapped[1])),
        )
        # Advice to call the tool again with narrower arguments only fits a tool that takes some.
        takes_arguments = bool(tool_def.parameters_json_schema.get('properties'))
        new_value = await self.reduce_part(
            ctx, call, bands, rendered_value, value, 'return_value', takes_arguments, show_images=True
        )
        new_content = None
        if content is not None:
            rendered = render_content(content)
            if rendered.kind == 'text' and self.strip_ansi:
                rendered = await off_loop(
                    ctx, partial(render_value, rendered.text, strip_ansi=True), large=large_text(rendered.text)
                )
            new_content = await self.reduce_part(
                ctx, call, bands, rendered, content, 'content', takes_arguments, show_images=True
            )
        if new_value is None and new_content is None:
            return result
        return with_stored_images(reassemble(envelope, value, content, new_value, new_content), new_value, new_content)

    async def reduce_unit(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        bands: tuple[Band, ...],
        rendered: Rendered,
        original: object,
        unit: UnitName,
        takes_arguments: bool = True,
        context: tuple[int | None, float | None] | None = None,
        *,
        failure: bool = False,
        media: bool = True,
        show_images: bool = False,
        part: str | None = None,
    ) -> Reduced | None:
        """Pick the unit's band and run its action, falling back along `then` until one reduces it.

        `context` is the serving model's window and its filled fraction, when a request is held for an attempt;
        otherwise the run's model's are read, if the bands need them. `failure`: the unit is a failure's message.
        `media`: a PDF or a text holding base64 blobs is taken apart first (`_media`); off for what that step hands
        back. `show_images`: image blobs are shown beside their markers (`Reduced.shown`, which the caller
        sends). `part`: a file of a list, reduced on its own (`reduce_part`).
        """
        if not bands:
            return left_as_is(rendered, original, call.tool_name)  # `per_tool={name: []}`: nothing is measured
        # A user's tokenizer over a large text is seconds of CPU: counted in a worker thread, once.
        heavy = self.tokenizer is not None and rendered.data is None and rendered.size_chars > _TOKENIZE_ON_LOOP_CHARS
        window, used = context if context is not None and uses_context(bands) else context_of(ctx, bands)
        count = partial(measure, rendered, over_tokens=True, tokenizer=self.tokenizer)
        counted = await off_loop(ctx, count, large=heavy) if self.over_tokens or window is not None else None
        size, tokenizer_error = counted if self.over_tokens and counted is not None else (self.measure(rendered), None)
        if tokenizer_error is not None:
            warn(f'The tokenizer raised {tokenizer_error!r}; measured `{call.tool_name}` with ~4 characters/token')
        tokens = (lambda: counted[0]) if counted is not None else (lambda: count()[0])
        band = pick_band(bands, size, tokens=tokens, window=window, used=used)
        if band is None:
            return left_as_is(rendered, original, call.tool_name)
        if rendered.kind == 'multimodal':
            if band.action.reduces:
                warn(
                    f'The {unit} of `{call.tool_name}` ({size:,} in size) holds files (images, documents) and '
                    'cannot be reduced safely; it was left as is'
                )
            return None  # (a Passthrough asked for no reduction, so there is nothing that could not be done)
        # The header reports tokens: the measured count, or the heuristic (a tokenizer is not run twice).
        tokens = size if self.over_tokens else estimate_tokens_of(rendered)
        action_unit = ActionContext(
            run=ctx,
            call=call,
            unit=unit,
            rendered=rendered,
            tokens=tokens,
            write=self._writer(ctx),
            store=self.store,
            workspace=self.workspace,
            takes_arguments=takes_arguments,
            summaries=self.summaries,
            failure=failure,
            part=part,
        )
        if media and _stores(band):
            images = self.images if show_images else None
            step, reason = await media_step(
                action_unit,
                timeout=_step_timeout(band),
                withholding=self.withholding,
                images=images,
                durable=self.durable_media,
            )
            if reason:
                warn(f'The {unit} of `{call.tool_name}` could not be taken apart ({reason}); reducing it as it is')
            if step is not None:
                return await self._after_media(ctx, call, bands, step, unit, takes_arguments, context, size, part)
        tried: list[str] = []
        for action in action_chain(band.action):
            tried.append(type(action).__name__)
            reduced, reason = await action.reduce(action_unit)
            if reduced is not None and not_smaller(reduced, rendered):
                if not action.summarizes:
                    # A spill preview or a cut of a return barely over a low threshold: the output is the smaller form.
                    return left_as_is(rendered, original, call.tool_name)
                # A summary at least as long as the output is no summary: the fallback decides.
                reduced, reason = None, 'the summary was not shorter than the output'
            if reduced is not None:
                if reduced.handle is None and rendered.wrapper is not None and reduced.value == rendered.text:
                    # A wrapped text whose JSON is over the band, shown whole: only its wrapper was left out.
                    reduced = replace(reduced, action='unwrap')
                key = unit_key(ctx, call, unit, part) if reduced.handle is not None else None  # the full form
                reduced = replace(reduced, size_before=rendered.size_chars, key=key)
                await report(ctx, call.tool_name, reduced_event(call, unit, reduced, tried, size))
                return reduced
            if not action.reduces:
                break
            then = action.then
            what = f'falling back to {type(then).__name__}' if then is not None else 'leaving it as is'
            warn(f'{type(action).__name__} could not reduce the {unit} of `{call.tool_name}`: {reason}; {what}')
        return left_as_is(rendered, original, call.tool_name)

    async def reduce_part(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        bands: tuple[Band, ...],
        rendered: Rendered,
        original: object,
        unit: UnitName,
        takes_arguments: bool = True,
        context: tuple[int | None, float | None] | None = None,
        *,
        show_images: bool = False,
        rest: bool = True,
    ) -> Reduced | None:
        """`reduce_unit` for a tool's return value or content; a list holding documents is first reduced file by file.

        `rest`: what is left of such a list (its text, the documents' text in it) is then reduced as any list is; off
        at request time, where a band over nothing (the step budget's) would store the list's text again whole.
        """
        if bands and rendered.kind == 'multimodal' and holds_documents(original):
            files = await self._file_items(ctx, call, bands, original, unit, takes_arguments, context, rest=rest)
            if files is not None:
                return files
        return await self.reduce_unit(
            ctx, call, bands, rendered, original, unit, takes_arguments, context, show_images=show_images
        )

    async def _file_items(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        bands: tuple[Band, ...],
        items: Any,
        unit: UnitName,
        takes_arguments: bool,
        context: tuple[int | None, float | None] | None,
        *,
        rest: bool,
    ) -> Reduced | None:
        """A list's documents reduced one by one (`_file_items`), then (`rest`) what is left of the list, as any list
        is. Every document stored is named in the metadata (`Reduced.files`), not only the first.
        """

        async def reduce_file(rendered: Rendered, item: object, part: str) -> Reduced | None:
            return await self.reduce_unit(ctx, call, bands, rendered, item, unit, takes_arguments, context, part=part)

        files = await reduce_file_items(items, reduce_file)
        if files is None:
            return None
        if rest:
            left = render_content(files.items) if unit == 'content' else render_value(files.items)
            outer = await self.reduce_unit(
                ctx, call, bands, left, files.items, unit, takes_arguments, context, media=False
            )
            if outer is not None:  # (what is left is text, over its band: reduced as text, the documents' text in it)
                return replace(outer, images=(*files.images(), *outer.images), files=files.handles())
        first = files.stored()
        return Reduced(
            files.items,
            'spill' if first is not None else 'render',
            first.handle if first is not None else None,
            first.nbytes if first is not None else None,
            size_before=files.document_bytes,
            key=first.key if first is not None else None,
            images=files.images(),
            files=files.handles(),
        )

    async def _after_media(
        self,
        ctx: RunContext[Any],
        call: ToolCallPart,
        bands: tuple[Band, ...],
        step: MediaStep,
        unit: UnitName,
        takes_arguments: bool,
        context: tuple[int | None, float | None] | None,
        measured: int,
        part: str | None = None,
    ) -> Reduced:
        """What the media step left (a PDF's text, a text with markers), reduced by the bands in turn, behind its
        header; the original's handle when nothing else was stored.
        """
        size_before = self.measure(step.rendered) if step.rendered is not None else 0
        inner = (
            await self.reduce_unit(
                ctx,
                call,
                bands,
                step.rendered,
                step.rendered.text,
                unit,
                takes_arguments,
                context,
                media=False,
                part=part,
            )
            if step.rendered is not None
            else None
        )
        if inner is not None and isinstance(inner.value, str):
            return replace(inner, value=step.lead(inner.value) + inner.value, images=step.images, shown=step.shown)
        body = step.rendered.text if step.rendered is not None else ''
        reduced = Reduced(
            step.header + body,
            'spill' if step.handle is not None else 'render',
            step.handle,
            step.nbytes,
            size_before=size_before or measured,
            key=unit_key(ctx, call, unit, part),
            images=step.images,
            shown=step.shown,
        )
        await report(ctx, call.tool_name, reduced_event(call, unit, reduced, ['Spill'], measured))
        return reduced
