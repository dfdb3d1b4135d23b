"""`OverflowingToolOutput`: pick a band for each oversized tool return, apply its action, reassemble."""

from __future__ import annotations

import base64
import copy
import dataclasses
import itertools
import string
import threading
import warnings
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import partial
from typing import Any, Literal, TypeVar, cast

import anyio
import pydantic
from pydantic_ai.capabilities import AbstractCapability, durable_operation
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturn, ToolReturnPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import AgentDepsT, RunContext, ToolDefinition, ToolSelector, matches_tool_selector
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage

from .._gil import hand_over
from ._bands import Action, Band, Passthrough, Spill, Summarize, Truncate, pick_band, sorted_bands
from ._checks import check_store, check_tool_filter, unknown_tool_names, uses_store
from ._events import (
    CONTENT_PREFIX,
    VALUE_PREFIX,
    OverflowingToolOutputWarning,
    OverflowReduced,
    OverflowRunSummary,
    log_reduction,
    logger,
    overflow_report,
    record_on_span,
)
from ._json_layout import JsonLayout
from ._markers import NARROWER_ADVICE, SpillSummary, unrenderable_note
from ._preview import (
    ImportantLine,
    ImportantLinesScan,
    binary_preview,
    count_lines,
    shape_sketch,
    text_preview,
)
from ._render import (
    Rendered,
    estimate_tokens,
    has_ansi_codes,
    measure,
    render_content,
    render_value,
    stored_form,
    stored_layout,
)
from ._secrets import Redactor, SecretRedaction
from ._spec import (
    BandSpec,
    StoreSpec,
    parse_bands,
    parse_redaction,
    parse_step_budget,
    parse_store,
    parse_workspace,
)
from ._step_budget import STEP_ACTIONS, StepBudget, StepReturn, plan_step, step_calls, step_note
from ._summarize import OverflowConfigurationError, Summary, SummaryRequest, mark_summary, summarize_text
from ._tools import QUERY_TOOL_NAMES, QUERY_TOOLSET_ID, build_query_toolset
from ._truncate import truncate_rendered
from ._withhold import build_redactor, withhold_secrets
from .stores import LocalFileStore, OverflowStore
from .stores._paths import handle_for_key, short_handles
from .stores._protocol import StreamedPayload, StreamWritableStore
from .stores._workspace import WorkspaceSpill, route_for_run, store_for_run

__all__ = ('DEFAULT_SUMMARY_PROMPT', 'OverflowingToolOutput', 'default_bands')

_T = TypeVar('_T')

_OFF_LOOP_BYTES = 256 * 1024
"""Payloads larger than this are cleaned, indented and previewed in a worker thread (outside durable workflow code),
so one large return never holds up the other tasks of the event loop."""

DEFAULT_THRESHOLD = 10_000
"""The default band's threshold, in characters."""

DEFAULT_SUMMARY_PROMPT = (
    'The tool `{tool_name}` returned the output below, which is too long to keep in the conversation. '
    'Summarize it for an AI agent that will carry on with the task using only your summary: keep every error, '
    'failure, number, identifier, file path, decision and conclusion it may need, and say what kind of output it '
    'is; drop repetition and noise. Reply with the summary only.\n\n<tool_output>\n{output}\n</tool_output>'
)
"""The built-in summarization prompt. A custom one must contain `{tool_name}` and `{output}` and no other field."""


def default_bands() -> list[Band]:
    """The default: spill returns of 10,000 characters or more, truncating if the store fails."""
    return [Band(over=DEFAULT_THRESHOLD, action=Spill(then=Truncate()))]


def validate_summary_prompt(template: str) -> None:
    """Raise `ValueError` unless `template` has exactly the `{tool_name}` and `{output}` fields."""
    if not isinstance(template, str):  # pyright: ignore[reportUnnecessaryIsInstance]
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


UnitName = Literal['return_value', 'content']


@dataclass(frozen=True)
class _Reduced:
    """A unit's replacement and what the metadata should say about it."""

    value: Any
    action: str
    handle: str | None = None
    nbytes: int | None = None
    size_before: int = 0
    key: str | None = None


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


@dataclass
class OverflowingToolOutput(AbstractCapability[AgentDepsT]):
    """Reduce oversized tool returns when they are produced, so the reduced form is what persists in history.

    Tool returns stay in the message history, so an oversized one is paid for again on every later model
    request. This capability intercepts each return in `after_tool_execute`, measures it, and when it is
    large enough runs the action of the matching size band, once:

    - [`Truncate`][pydantic_ai_harness.overflowing_tool_output.Truncate]: clamp to a character budget. Lossy, free.
    - [`Spill`][pydantic_ai_harness.overflowing_tool_output.Spill]: store the full payload, show a preview and a
      handle; the model pages back with `read_tool_result` / `grep_tool_result`. Lossless.
    - [`Summarize`][pydantic_ai_harness.overflowing_tool_output.Summarize]: a model-written summary.
    - [`Passthrough`][pydantic_ai_harness.overflowing_tool_output.Passthrough]: leave it as it is.

    The band with the largest `over` the size reaches wins; smaller returns pass through untouched (the very
    same object). Both `ToolReturn.return_value` and text `ToolReturn.content` are reduced. A failure inside
    the capability never aborts the run: it warns with
    [`OverflowingToolOutputWarning`][pydantic_ai_harness.overflowing_tool_output.OverflowingToolOutputWarning]
    and falls back.

    ```python
    from pydantic_ai import Agent
    from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

    agent = Agent('test', capabilities=[OverflowingToolOutput()])
    ```
    """

    bands: Sequence[Band] = field(default_factory=default_bands)
    """Size bands, in any order. The largest `over` the measured size reaches wins; below all of them, pass through."""

    per_tool: Mapping[str, Sequence[Band]] = field(default_factory=dict[str, Sequence[Band]])
    """Band lists that replace `bands` for the named tools. An empty list means: never reduce that tool."""

    tool_filter: ToolSelector[AgentDepsT] = 'all'
    """Which tools the capability touches at all: `'all'`, names, a metadata dict, or a (sync/async) callable."""

    over_tokens: bool = False
    """Measure thresholds in tokens instead of characters (`Truncate.max_chars` stays in characters)."""

    tokenizer: Callable[[str], int] | None = None
    """A `(text) -> token count` function for `over_tokens`; default: about four characters per token."""

    store: OverflowStore | None = None
    """Where `Spill` puts payloads; default: a [`LocalFileStore`][pydantic_ai_harness.overflowing_tool_output.LocalFileStore]."""

    strip_ansi: bool = False
    """Remove ANSI escape sequences (colours, cursor moves, hyperlinks) from text returns before measuring."""

    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    """The prompt `Summarize` sends; must contain `{tool_name}` and `{output}` and no other placeholder."""

    _: KW_ONLY

    id: str | None = 'overflowing_tool_output'
    """Stable by default, as durable execution requires; two instances in one agent merge (the later wins)."""

    workspace: WorkspaceSpill | None = field(default_factory=WorkspaceSpill)
    """Spill into the run's workspace (`ctx.workspace`) when one is attached and writable, else into `store`.

    The preview then names the file, so the agent's own tools (`grep -n`, `jq`) work on it. `None`: always `store`.
    """

    redact_secrets: SecretRedaction | None = None
    """Opt-in: mask credentials in every return this capability touches, below every band too, before previews,
    truncation, summaries and the store see it. See [`SecretRedaction`][pydantic_ai_harness.overflowing_tool_output.SecretRedaction]."""

    step_budget: StepBudget | None = None
    """A budget across the parallel tool calls of one model response: past it, the largest returns are reduced.
    See [`StepBudget`][pydantic_ai_harness.overflowing_tool_output.StepBudget]."""

    _bands_desc: tuple[Band, ...] = field(init=False, repr=False, compare=False)
    _per_tool_desc: dict[str, tuple[Band, ...]] = field(init=False, repr=False, compare=False)
    _resolved_store: OverflowStore = field(init=False, repr=False, compare=False)
    _summarize_actions: tuple[Summarize, ...] = field(init=False, repr=False, compare=False)
    _summary_locks: dict[str, anyio.Lock] = field(init=False, repr=False, compare=False)
    _reported_root_problem: str | None = field(default=None, init=False, repr=False, compare=False)
    _redactor: Redactor | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._bands_desc = sorted_bands(self.bands, 'bands')
        if not isinstance(self.per_tool, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f'per_tool must be a mapping of tool name to bands, got {type(self.per_tool).__name__}')
        for name in self.per_tool:
            if not isinstance(name, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f'per_tool keys must be tool names (str), got {type(name).__name__} {name!r}')
        self._per_tool_desc = {
            name: sorted_bands(tool_bands, f'per_tool[{name!r}]') for name, tool_bands in self.per_tool.items()
        }
        if self.tokenizer is not None and not callable(self.tokenizer):
            raise TypeError('tokenizer must be a callable `(text: str) -> int`')
        validate_summary_prompt(self.summary_prompt)
        check_tool_filter(self.tool_filter)
        if self.store is not None:
            check_store(self.store)
        self._resolved_store = self.store if self.store is not None else LocalFileStore()
        # Durable summarizer operations address their action by its position here: an int crosses a durable
        # boundary, a model or a function does not, and every worker builds the same tuple from the same config.
        self._summarize_actions = _summarize_actions((self._bands_desc, *self._per_tool_desc.values()))
        self._summary_locks = {}
        self._redactor = build_redactor(self.redact_secrets)
        if self.step_budget is not None and not isinstance(self.step_budget, StepBudget):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f'step_budget must be a StepBudget or None, got {type(self.step_budget).__name__}')
        if self.step_budget is not None and self.step_budget.action is not None:
            step_band = (Band(over=0, action=self.step_budget.action),)
            self._summarize_actions = _summarize_actions((self._bands_desc, *self._per_tool_desc.values(), step_band))

    @classmethod
    def from_spec(
        cls,
        *,
        bands: Sequence[BandSpec] | None = None,
        per_tool: Mapping[str, Sequence[BandSpec]] | None = None,
        tool_filter: Literal['all'] | list[str] | dict[str, Any] = 'all',
        over_tokens: bool = False,
        strip_ansi: bool = False,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        store: StoreSpec | Mapping[str, Any] | None = None,
        id: str | None = 'overflowing_tool_output',
        workspace: bool | Mapping[str, Any] | None = True,
        redact_secrets: bool | Mapping[str, Any] | None = False,
        step_budget: int | Mapping[str, Any] | None = None,
    ) -> OverflowingToolOutput[Any]:
        """Build the capability from plain data, as `Agent.from_spec` / `Agent.from_file` pass it.

        Bands are `{'over': 10000, 'action': 'Spill'}`; an action is its name or `{Name: {field: value}}`,
        e.g. `{'Truncate': {'strategy': 'tail', 'max_chars': 4000}}` or `{'Spill': {'then': 'Truncate'}}`.
        `store` configures the `LocalFileStore` (`base_dir`, `cleanup_after` as seconds or `'6h'`), or names
        a fleet store: `{'RedisStore': {'url': ...}}`, `{'ObjectStore': {'url': 's3://bucket', 'config': ...}}`.
        `workspace` is `true` (the default), `false`, or `WorkspaceSpill`'s fields; `redact_secrets` is `true`
        or `SecretRedaction`'s fields (`keep_original_in` a store spec); `step_budget` a size or
        `{'max_size': ..., 'action': ...}`. A bad value raises `ValueError` naming the field, e.g.
        `bands[1].action.Truncate: Truncate.max_chars must be at least 200 ...`.
        """
        return cls(
            bands=parse_bands(bands, 'bands') if bands is not None else default_bands(),
            per_tool={name: parse_bands(spec, f'per_tool.{name}') for name, spec in (per_tool or {}).items()},
            tool_filter=tool_filter,
            over_tokens=over_tokens,
            strip_ansi=strip_ansi,
            summary_prompt=summary_prompt,
            store=parse_store(store, 'store') if store is not None else None,
            id=id,
            workspace=parse_workspace(workspace, 'workspace'),
            redact_secrets=parse_redaction(redact_secrets, 'redact_secrets'),
            step_budget=parse_step_budget(step_budget, 'step_budget'),
        )

    # --- hooks ---------------------------------------------------------------------------------------

    def get_toolset(self) -> AbstractToolset[AgentDepsT] | None:
        """The query tools the model pages back into spills with; none when no setting can ever store an output.

        Tool definitions are sent with every request, so a configuration that only truncates (or summarizes
        without keeping the original) pays nothing for them. When one can store, they are offered from the first
        request on, so the tool list never changes within a run.
        """
        if not self._can_store():
            return None
        if self.workspace is None:
            store = self._resolved_store  # routed, so the tools see the run's messages (its handles, for near misses)
            return build_query_toolset(store, route=lambda _ctx, _handle: store)
        return _query_toolset(self._resolved_store, self.workspace)

    def _can_store(self) -> bool:
        """Whether any band, per-tool band, fallback or the step budget can put an output in a store."""
        actions: list[Action | None] = [band.action for band in self._bands_desc]
        actions += [band.action for bands in self._per_tool_desc.values() for band in bands]
        if self.step_budget is not None:
            if self.step_budget.action is None:
                return True  # it uses each tool's smallest band, which may be any of them: keep the tools
            actions.append(self.step_budget.action)
        for action in actions:
            while action is not None:
                if isinstance(action, Spill) or (isinstance(action, Summarize) and action.keep_original):
                    return True
                action = None if isinstance(action, Passthrough) else action.then
        return False

    async def prepare_tools(self, ctx: RunContext[AgentDepsT], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        """At a run's first step, warn about settings the run shows to be wrong; the tools are left as they are.

        The first step is the first time the agent's tools are known (toolsets such as MCP servers list them
        per run): each `per_tool` / `tool_filter` name no tool has gets a warning with the closest tool name.
        A `LocalFileStore` root that writes would fail on is reported here too, before the first spill.
        """
        if ctx.run_step <= 1:
            for message in unknown_tool_names(
                self.per_tool, self.tool_filter, (tool.name for tool in tool_defs if tool.name not in QUERY_TOOL_NAMES)
            ):
                _warn(message)
            await self._check_store_root(ctx)
        return tool_defs

    async def _check_store_root(self, ctx: RunContext[AgentDepsT]) -> None:
        """Warn once about an unusable `LocalFileStore` root (the operator's problem, never shown to the model)."""
        store = self._resolved_store
        if ctx.in_durable_context or not isinstance(store, LocalFileStore):
            return  # workflow code does no file I/O; other stores report their failures on write
        if not uses_store((self._bands_desc, *self._per_tool_desc.values())):
            return
        problem = await anyio.to_thread.run_sync(store.root_problem, abandon_on_cancel=True)
        if problem is not None and problem != self._reported_root_problem:
            _warn(f'Spills will fail and fall back to their `then` action: {problem}')
        self._reported_root_problem = problem

    async def after_tool_execute(
        self,
        ctx: RunContext[AgentDepsT],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        """Reduce an oversized result (its `return_value` and text `content`) once, as it is produced."""
        if tool_def.toolset_id == QUERY_TOOLSET_ID:
            return result  # our own query tools: their output is already bounded
        if self._redactor is not None and await matches_tool_selector(self.tool_filter, ctx, tool_def):
            result = await withhold_secrets(
                self._redactor, cast(SecretRedaction, self.redact_secrets), ctx, call, result
            )
        if type(result) is str and self._plainly_below_threshold(result, tool_def.name):
            return result  # the common case, decided without rendering or allocating anything
        try:
            return await self._reduce_result(ctx, call, tool_def, result)
        except OverflowConfigurationError:
            raise  # a configuration that cannot work is the user's to fix, not a run-time fallback
        except OverflowingToolOutputWarning:
            raise  # one of our warnings, raised by a filter set to "error": pass it on as it is, not wrapped again
        except Exception as exc:  # noqa: BLE001 - the run must never die here
            _warn(f'OverflowingToolOutput failed on the result of `{call.tool_name}` and left it as is: {exc!r}')
            return result

    async def after_model_request(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """When the model answers without calling a function tool, emit the run's `OverflowRunSummary`."""
        function_tools = {tool.name for tool in request_context.model_request_parameters.function_tools}
        if any(isinstance(part, ToolCallPart) and part.tool_name in function_tools for part in response.parts):
            return response
        this_run = [m for m in ctx.messages if getattr(m, 'run_id', None) == ctx.run_id]
        report = overflow_report(this_run)
        if report.reduced:
            logger.info(
                'run %s: reduced %d tool outputs, %d -> %d characters',
                ctx.run_id,
                report.reduced,
                report.chars_before,
                report.chars_after,
            )
            summary = OverflowRunSummary(
                reduced=report.reduced,
                chars_before=report.chars_before,
                chars_after=report.chars_after,
                handles=list(report.handles),
            )
            try:
                await ctx.emit(summary)
            except UserError:
                pass  # no event stream to report to
        return response

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Hold the tool returns of the response just answered to `step_budget`, reducing the largest first."""
        if self.step_budget is None:
            return request_context
        try:
            fitted = await self._fit_step(ctx, self.step_budget)
        except OverflowConfigurationError:
            raise
        except Exception as exc:  # noqa: BLE001 - the run must never die here
            _warn(f'OverflowingToolOutput could not apply step_budget and left the step as it was: {exc!r}')
            return request_context
        if fitted is None:
            return request_context
        old, new = fitted
        # Persist the reduced returns in the run's history, and send them in this request.
        ctx.messages[:] = [new if message is old else message for message in ctx.messages]
        return replace(request_context, messages=[new if m is old else m for m in request_context.messages])

    # --- reduction -----------------------------------------------------------------------------------

    def _plainly_below_threshold(self, text: str, tool_name: str) -> bool:
        """Whether a plain string return is below every band of its tool and needs no cleaning: nothing to do.

        Only sizes known without running a tokenizer qualify; everything else takes the full path.
        """
        if self.over_tokens and self.tokenizer is not None:
            return False
        if self.strip_ansi and has_ansi_codes(text):
            return False
        bands = self.bands_for(tool_name)
        if not bands:
            return True
        size = estimate_tokens(text) if self.over_tokens else len(text)
        return size < bands[-1].over

    def bands_for(self, tool_name: str) -> tuple[Band, ...]:
        """The bands that apply to `tool_name`, largest threshold first."""
        return self._per_tool_desc.get(tool_name, self._bands_desc)

    async def _reduce_result(
        self, ctx: RunContext[AgentDepsT], call: ToolCallPart, tool_def: ToolDefinition, result: Any
    ) -> Any:
        if not await matches_tool_selector(self.tool_filter, ctx, tool_def):
            return result
        bands = self.bands_for(tool_def.name)
        envelope: ToolReturn[Any] | None = None
        value: Any = result
        content: Any = None
        if isinstance(result, ToolReturn):
            envelope = cast('ToolReturn[Any]', result)
            value, content = envelope.return_value, envelope.content

        rendered_value = await _off_loop(
            ctx,
            partial(render_value, value, strip_ansi=self.strip_ansi),
            large=(self.strip_ansi and _large_text(value)) or _large_container(value),
        )
        # Advice to call the tool again with narrower arguments only fits a tool that takes some.
        takes_arguments = bool(tool_def.parameters_json_schema.get('properties'))
        new_value = await self._reduce_unit(
            ctx, call, bands, rendered_value, value, 'return_value', takes_arguments=takes_arguments
        )
        new_content = None
        if content is not None:
            rendered = render_content(content)
            if rendered.kind == 'text' and self.strip_ansi:
                rendered = await _off_loop(
                    ctx, partial(render_value, rendered.text, strip_ansi=True), large=_large_text(rendered.text)
                )
            new_content = await self._reduce_unit(
                ctx, call, bands, rendered, content, 'content', takes_arguments=takes_arguments
            )
        if new_value is None and new_content is None:
            return envelope if envelope is not None else value
        return _reassemble(envelope, value, content, new_value, new_content)

    async def _reduce_unit(
        self,
        ctx: RunContext[AgentDepsT],
        call: ToolCallPart,
        bands: tuple[Band, ...],
        rendered: Rendered,
        original: Any,
        unit: UnitName,
        *,
        takes_arguments: bool = True,
    ) -> _Reduced | None:
        size, tokenizer_error = measure(rendered, over_tokens=self.over_tokens, tokenizer=self.tokenizer)
        if tokenizer_error is not None:
            _warn(f'The tokenizer raised {tokenizer_error!r}; measured `{call.tool_name}` with ~4 characters/token')
        band = pick_band(bands, size) if bands else None
        if band is None:
            return self._left_as_is(rendered, original, call.tool_name)
        if rendered.kind == 'multimodal':
            if isinstance(band.action, Passthrough):
                return None  # no reduction was asked for, so there is nothing that could not be done
            _warn(
                f'The {unit} of `{call.tool_name}` ({size:,} in size) holds files (images, documents) and cannot be '
                'reduced safely; it was left as is'
            )
            return None

        action: Action | None = band.action
        tried: list[str] = []
        while action is not None:
            tried.append(type(action).__name__)
            # The header reports tokens: the measured count, or the heuristic (a tokenizer is not run twice).
            tokens = size if self.over_tokens else estimate_tokens_of(rendered)
            reduced, reason = await self._apply(action, ctx, call, rendered, unit, tokens, takes_arguments)
            if reduced is not None and _not_smaller(reduced, rendered):
                if not isinstance(action, Summarize):
                    # A spill preview or a cut of a return barely over a low threshold: the output is the smaller form.
                    return self._left_as_is(rendered, original, call.tool_name)
                # A summary at least as long as the output is no summary: the fallback decides.
                reduced, reason = None, 'the summary was not shorter than the output'
            if reduced is not None:
                key = self._key(ctx, call, unit) if reduced.handle is not None else None  # the full form
                reduced = replace(reduced, size_before=rendered.size_chars, key=key)
                await _report(ctx, call, unit, reduced, tried, size)
                return reduced
            if isinstance(action, Passthrough):
                return self._left_as_is(rendered, original, call.tool_name)
            next_action = action.then
            what = f'falling back to {type(next_action).__name__}' if next_action is not None else 'leaving it as is'
            _warn(f'{type(action).__name__} could not reduce the {unit} of `{call.tool_name}`: {reason}; {what}')
            action = next_action
        return self._left_as_is(rendered, original, call.tool_name)

    def _left_as_is(self, rendered: Rendered, original: Any, tool_name: str) -> _Reduced | None:
        """An unreduced value passes through untouched, except what would break the run or what the user asked to clean.

        For values below every band, and for those a band (or a fallback) passes through.
        """
        if isinstance(original, memoryview):
            return _Reduced(
                bytes(cast('memoryview[int]', original)), 'render'
            )  # pydantic cannot serialize a memoryview; bytes it can
        if rendered.lossy:
            # pydantic-ai cannot serialize this value and the run would crash; send the best-effort rendering.
            _warn(f'`{tool_name}` returned a value that cannot be serialized; sent a best-effort rendering')
            return _Reduced(rendered.text + unrenderable_note(type(original).__name__), 'render')
        if rendered.kind == 'text' and isinstance(original, str) and rendered.text != original:
            return _Reduced(rendered.text, 'strip_ansi', size_before=len(original))
        return None

    async def _apply(
        self,
        action: Action,
        ctx: RunContext[AgentDepsT],
        call: ToolCallPart,
        rendered: Rendered,
        unit: UnitName,
        tokens: int,
        takes_arguments: bool = True,
    ) -> tuple[_Reduced | None, str]:
        """Run one action. Returns the replacement, or `None` and why it could not run."""
        if isinstance(action, Passthrough):
            return None, 'passthrough'
        if isinstance(action, Truncate):
            if rendered.kind == 'binary':
                return None, 'binary data cannot be truncated'
            cut = truncate_rendered(rendered, action.max_chars, action.strategy)
            return _Reduced(cut if takes_arguments else cut.replace(NARROWER_ADVICE, ''), 'truncate'), ''
        if isinstance(action, Spill):
            return await self._spill(action, ctx, call, rendered, unit, tokens)
        return await self._summarize(action, ctx, call, rendered, unit)

    @asynccontextmanager
    async def _run_lock(self, run_id: str | None) -> AsyncGenerator[None]:
        """Hold the lock of `run_id`'s summaries; the entry goes once no one holds or waits for it."""
        key = run_id or ''
        lock = self._summary_locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._summary_locks.pop(key, None)

    def _key(self, ctx: RunContext[AgentDepsT], call: ToolCallPart, unit: UnitName) -> str:
        key = f'{ctx.run_id}/{call.tool_call_id}/{ctx.retry}'
        return f'{key}/content' if unit == 'content' else key

    async def _write(
        self, ctx: RunContext[AgentDepsT], key: str, data: bytes, timeout: float
    ) -> tuple[str | None, str]:
        """Write `data` through the durable `overflow_spill_write` operation; any failure becomes a reason."""
        if not ctx.in_durable_context:
            # Outside a durable run the operation would run in place anyway: skip its text/base64 round trip,
            # which costs several copies of a payload that may be 100 MB.
            return await self._store_write(key, data, timeout, store_for_run(self._resolved_store, ctx, self.workspace))
        # Text crosses a durable boundary as itself (JSON-encoded by some engines, so it counts against their
        # payload limits about once); bytes that are not UTF-8 (binary, lone surrogates) cross as base64.
        try:
            text, data_b64 = data.decode('utf-8'), None
        except UnicodeDecodeError:
            text, data_b64 = None, base64.b64encode(data).decode('ascii')
        try:
            return await self._spill_write(ctx, key, text, data_b64, timeout)
        except Exception as exc:  # noqa: BLE001 - a durable unit that failed is a store failure: fall back
            return None, f'the store write failed: {exc!r}'

    @durable_operation(name='overflow_spill_write')
    async def _spill_write(
        self, ctx: RunContext[AgentDepsT], key: str, text: str | None, data_b64: str | None, timeout: float
    ) -> tuple[str | None, str]:
        """Write one payload (`text` as UTF-8, else `data_b64`) to the store, bounded by `timeout`.

        Returns `(handle, '')` or `(None, reason)`. A durable operation (a DBOS step, a Temporal activity, a
        Prefect task) under a durability capability, so a replay or a recovery reuses the recorded handle
        instead of writing again. The name is persisted by the engines: never change it. Failures are
        returned, not raised, so they are recorded too.
        """
        data = text.encode('utf-8') if text is not None else base64.b64decode(data_b64 or '')
        return await self._store_write(key, data, timeout, store_for_run(self._resolved_store, ctx, self.workspace))

    async def _store_write(
        self, key: str, data: bytes, timeout: float, store: OverflowStore | None = None
    ) -> tuple[str | None, str]:
        """The store write itself (to `store`, default the configured one), bounded by `timeout`.

        Returns `(handle, '')` or `(None, reason)`.
        """
        deadline: anyio.CancelScope | None = None
        try:
            with anyio.fail_after(timeout) as deadline:
                handle = await (store or self._resolved_store).write(key, data)
        except TimeoutError as exc:
            if deadline is None or not deadline.cancel_called:  # the store's own TimeoutError, not our deadline
                return None, f'the store failed: {exc!r}'
            return None, f'the store did not finish writing within {timeout:g} s'
        except Exception as exc:  # noqa: BLE001 - any store failure means: fall back
            return None, f'the store failed: {exc!r}'
        if not isinstance(handle, str) or not handle:  # pyright: ignore[reportUnnecessaryIsInstance]
            return None, f'the store returned {handle!r} instead of a handle string'
        return handle, ''

    async def _fit_step(
        self, ctx: RunContext[AgentDepsT], budget: StepBudget
    ) -> tuple[ModelRequest, ModelRequest] | None:
        """The last request with its largest tool returns reduced until the step fits, or `None` if it fits."""
        found = step_calls(ctx.messages)
        if found is None:
            return None
        request, calls = found
        returns: list[StepReturn] = []
        parts: dict[int, tuple[int, ToolReturnPart, Rendered]] = {}  # position -> (index in request, part, rendered)
        for index, part in enumerate(request.parts):
            if not isinstance(part, ToolReturnPart) or part.tool_call_id not in calls:
                continue
            position = calls[part.tool_call_id][0]
            rendered = render_value(part.content)
            size, _ = measure(rendered, over_tokens=self.over_tokens, tokenizer=self.tokenizer)
            metadata_now: Any = part.metadata
            reduced_already = isinstance(metadata_now, Mapping) and f'{VALUE_PREFIX}_action' in metadata_now
            reducible = (
                part.tool_name not in QUERY_TOOL_NAMES
                and part.outcome == 'success'
                and not reduced_already
                and self._step_action(part.tool_name, budget) is not None
                and await matches_tool_selector(self.tool_filter, ctx, ToolDefinition(name=part.tool_name))
            )
            returns.append(StepReturn(position, size, reducible))
            parts[position] = (index, part, rendered)
        total = sum(item.size for item in returns)
        new_parts = list(request.parts)
        unit = 'tokens' if self.over_tokens else 'characters'
        # Rounds: reduce the largest (assuming each then costs nothing), measure what they became, and go on
        # with the next largest while the step is still over. The order depends on sizes and positions only.
        slots = {item.position: slot for slot, item in enumerate(returns)}
        while plan := plan_step(returns, budget.max_size):
            for position in plan:
                index, part, rendered = parts[position]
                action = cast(Action, self._step_action(part.tool_name, budget))
                call = calls[part.tool_call_id][1]
                reduced = await self._reduce_unit(
                    ctx, call, (Band(over=0, action=action),), rendered, part.content, 'return_value'
                )
                slot = slots[position]
                if reduced is None or reduced.action not in STEP_ACTIONS or not isinstance(reduced.value, str):
                    returns[slot] = replace(returns[slot], reducible=False)
                    continue
                note = step_note(
                    calls=len(returns),
                    total=total,
                    budget=budget.max_size,
                    size=returns[slot].size,
                    action=STEP_ACTIONS.get(reduced.action, reduced.action),
                    unit=unit,
                )
                content = note + reduced.value
                size, _ = measure(render_value(content), over_tokens=self.over_tokens, tokenizer=self.tokenizer)
                returns[slot] = StepReturn(position, size, reducible=False)
                metadata: Any = part.metadata
                notes = {**_notes(VALUE_PREFIX, reduced), 'overflow_step_budget': budget.max_size}
                if metadata is None:
                    metadata = notes
                elif isinstance(metadata, Mapping):
                    metadata = {**cast('Mapping[str, Any]', metadata), **notes}
                new_parts[index] = replace(part, content=content, metadata=metadata)
        if new_parts == list(request.parts):
            return None
        return request, replace(request, parts=new_parts)

    def _step_action(self, tool_name: str, budget: StepBudget) -> Action | None:
        """The action the step budget reduces a return of `tool_name` with: its own, or its smallest band's."""
        if tool_name in self._per_tool_desc and not self._per_tool_desc[tool_name]:
            return None  # `per_tool={name: []}`: never reduce that tool
        if budget.action is not None:
            return budget.action
        bands = self.bands_for(tool_name)
        return bands[-1].action if bands else None

    @durable_operation(name='overflow_summarize')
    async def _summarize_durably(
        self, ctx: RunContext[AgentDepsT], action_index: int, request: SummaryRequest
    ) -> tuple[SummaryOutcome, RunUsage]:
        """Summarize with the `action_index`-th `Summarize` action; returns the outcome and the usage it cost.

        A durable operation named `overflow_summarize` (persisted by the engines: never change it). The usage
        is returned rather than added to the run's here, so it reaches the run exactly once whether this runs
        in place or in a durable unit: the caller adds it.
        """
        action = self._summarize_actions[action_index]
        # The summarizer counts against a private copy of the run's usage, so the limits still see the run's total.
        own = replace(ctx, usage=copy.deepcopy(ctx.usage))
        before = copy.deepcopy(own.usage)
        try:
            summary, reason = await summarize_text(action, request, own)
        except OverflowConfigurationError as exc:
            return SummaryOutcome(None, str(exc), configuration_error=True), RunUsage()
        if summary is None:
            return SummaryOutcome(None, reason), own.usage - before
        return SummaryOutcome(summary.text, chunks=summary.chunks, uncovered_chars=summary.uncovered_chars), (
            own.usage - before
        )

    async def _spill(
        self,
        action: Spill,
        ctx: RunContext[AgentDepsT],
        call: ToolCallPart,
        rendered: Rendered,
        unit: UnitName,
        tokens: int,
    ) -> tuple[_Reduced | None, str]:
        key = self._key(ctx, call, unit)
        if rendered.data is not None:
            handle, reason = await self._write(ctx, key, rendered.data, action.timeout)
            if handle is None:
                return None, reason
            preview = binary_preview(
                call.tool_name, handle, rendered.data, rendered.media_type, **self._workspace_file(handle)
            )
            return _Reduced(preview, 'spill', handle, len(rendered.data)), ''
        if rendered.size_chars <= action.preview_chars:
            # The preview would hold all of it plus its header, so it cannot be smaller: store nothing, and hand
            # back the text itself, which the caller recognises as "not smaller" and leaves as is.
            return _Reduced(rendered.text, 'spill'), ''
        large = rendered.size_chars > _OFF_LOOP_BYTES
        layout = await _off_loop(ctx, partial(stored_layout, rendered), large=large)
        if layout is not None:
            return await self._spill_layout(action, ctx, call, rendered, layout, key, tokens)
        if large and not ctx.in_durable_context:
            # Into the run's workspace when one is attached (a plain write), else the configured store, streamed
            # when it can be. (Durable workflow code may not touch the workspace: there the durable write decides.)
            store = store_for_run(self._resolved_store, ctx, self.workspace)
            if isinstance(store, StreamWritableStore):
                return await self._spill_streamed(store, action, ctx, call, rendered, key, tokens)
        pageable, data, lines = await _off_loop(ctx, partial(_stored_with_lines, rendered), large=large)
        scan = ImportantLinesScan()
        handle, reason = await self._write_scanned(
            ctx, key, data, action.timeout, scan, beside=large and not ctx.in_durable_context
        )
        if handle is None:
            return None, reason
        summary = SpillSummary(
            tool_name=call.tool_name,
            handle=handle,
            chars=len(rendered.text),
            tokens=tokens,
            lines=lines,
            nbytes=len(data),
            **self._workspace_file(handle),
        )
        return await self._preview(ctx, action, rendered, summary, pageable, scan.result()), ''

    async def _write_scanned(
        self,
        ctx: RunContext[AgentDepsT],
        key: str,
        data: bytes,
        timeout: float,
        scan: ImportantLinesScan,
        *,
        beside: bool,
    ) -> tuple[str | None, str]:
        """Write `data` and feed it to `scan`: in a worker thread beside the write when `beside`, else after it.

        The scan releases the GIL (RE2, Hyperscan), so beside the write it costs the step almost nothing.
        """
        if beside:
            async with anyio.create_task_group() as group:
                group.start_soon(_in_worker, partial(scan.feed, data))
                return await self._write(ctx, key, data, timeout)
        written = await self._write(ctx, key, data, timeout)
        await _off_loop(ctx, partial(scan.feed, data), large=len(data) > _OFF_LOOP_BYTES)
        return written

    async def _spill_layout(
        self,
        action: Spill,
        ctx: RunContext[AgentDepsT],
        call: ToolCallPart,
        rendered: Rendered,
        layout: JsonLayout,
        key: str,
        tokens: int,
    ) -> tuple[_Reduced | None, str]:
        """Spill a structured value (or a text that is JSON) in its stored layout, serialized once already.

        The layout's pieces go to the store as they are (streamed when it can), the preview scan beside the write.
        """
        large = layout.size > _OFF_LOOP_BYTES and not ctx.in_durable_context
        store = store_for_run(self._resolved_store, ctx, self.workspace) if large else None
        scan = ImportantLinesScan(count_lines=not isinstance(store, StreamWritableStore))
        handle: str | None = None
        reason = ''
        numbers: list[int] | None = None
        if isinstance(store, StreamWritableStore):
            written: StreamedPayload | None = None
            async with anyio.create_task_group() as group:
                group.start_soon(_in_worker, partial(_scan_pieces, scan, layout.pieces))
                written, reason = await self._store_write_stream(store, key, iter(layout.pieces), action.timeout)
            if written is not None:
                handle = written.handle
                try:
                    numbers = scan.numbers_from_index(scan.chosen(), written.index)
                except ValueError:  # a custom store's index with unusual chunks: count the lines the slow way
                    data = layout.data()
                    numbers = [data.count(b'\n', 0, line.line_start) + 1 for line in scan.chosen()]
        else:
            handle, reason = await self._write_scanned(ctx, key, layout.data(), action.timeout, scan, beside=large)
        if handle is None:
            return None, reason
        summary = SpillSummary(
            tool_name=call.tool_name,
            handle=handle,
            chars=rendered.size_chars,
            tokens=tokens,
            lines=layout.lines,
            nbytes=layout.size,
            json=True,
            **self._workspace_file(handle),
        )
        important = scan.result(numbers)
        shape = await _off_loop(ctx, partial(_shape_of, rendered, layout), large=large)
        build = partial(
            text_preview, summary, None, action.preview_chars, shape=shape, important=important, pieces=layout.pieces
        )
        preview = await _off_loop(ctx, build, large=large)
        return _Reduced(preview, 'spill', summary.handle, summary.nbytes), ''

    async def _spill_streamed(
        self,
        store: StreamWritableStore,
        action: Spill,
        ctx: RunContext[AgentDepsT],
        call: ToolCallPart,
        rendered: Rendered,
        key: str,
        tokens: int,
    ) -> tuple[_Reduced | None, str]:
        """Spill a large text in one pass: encode, write and index it piece by piece, the preview scan beside it."""
        pageable = rendered.text
        scan = ImportantLinesScan(count_lines=False)
        relay = _Relay()
        written: StreamedPayload | None = None
        reason = ''
        async with anyio.create_task_group() as group:
            group.start_soon(_in_worker, partial(relay.encode_and_scan, pageable, scan))
            try:
                written, reason = await self._store_write_stream(store, key, relay.pieces(), action.timeout)
            finally:
                relay.abandon()
        if written is None:
            return None, reason
        index = written.index
        chosen = scan.chosen()
        try:
            numbers = scan.numbers_from_index(chosen, index)
        except ValueError:  # a custom store's index with unusual chunks: count the lines the slow way
            data = pageable.encode('utf-8', 'surrogatepass')
            numbers = [data.count(b'\n', 0, line.line_start) + 1 for line in chosen]
        summary = SpillSummary(
            tool_name=call.tool_name,
            handle=written.handle,
            chars=len(rendered.text),
            tokens=tokens,
            lines=index.line_count,
            nbytes=index.size,
        )
        important = scan.result(numbers)
        return await self._preview(ctx, action, rendered, summary, pageable, important), ''

    async def _preview(
        self,
        ctx: RunContext[AgentDepsT],
        action: Spill,
        rendered: Rendered,
        summary: SpillSummary,
        pageable: str,
        important: tuple[list[ImportantLine], bool],
    ) -> _Reduced:
        build = partial(text_preview, summary, pageable, action.preview_chars, important=important)
        # The head and tail walk only as far as the budget, but a shape sketch or long lines cost more: off the loop.
        preview = await _off_loop(ctx, build, large=summary.nbytes > _OFF_LOOP_BYTES)
        return _Reduced(preview, 'spill', summary.handle, summary.nbytes)

    async def _store_write_stream(
        self, store: StreamWritableStore, key: str, pieces: Iterable[bytes], timeout: float
    ) -> tuple[StreamedPayload | None, str]:
        """`write_stream`, bounded by `timeout`. Returns `(written, '')` or `(None, reason)`."""
        deadline: anyio.CancelScope | None = None
        try:
            with anyio.fail_after(timeout) as deadline:
                written = await store.write_stream(key, pieces)
        except TimeoutError as exc:
            if deadline is None or not deadline.cancel_called:
                return None, f'the store failed: {exc!r}'
            return None, f'the store did not finish writing within {timeout:g} s'
        except Exception as exc:  # noqa: BLE001 - any store failure means: fall back
            return None, f'the store failed: {exc!r}'
        if not isinstance(written, StreamedPayload) or not isinstance(written.handle, str) or not written.handle:  # pyright: ignore[reportUnnecessaryIsInstance]
            return None, f'the store returned {written!r} instead of a StreamedPayload with a handle'
        return written, ''

    def _workspace_file(self, handle: str) -> dict[str, Any]:
        """For a spill that went into the workspace: its path (the handle itself) and whether the query tools are on."""
        if self.workspace is None or not self.workspace.owns(handle):
            return {}
        return {'path': handle, 'query_tools': self.workspace.query_tools == 'always'}

    async def _summarize(
        self, action: Summarize, ctx: RunContext[AgentDepsT], call: ToolCallPart, rendered: Rendered, unit: UnitName
    ) -> tuple[_Reduced | None, str]:
        if rendered.kind == 'binary':
            return None, 'binary data cannot be summarized'
        request = SummaryRequest(
            tool_name=call.tool_name,
            text=rendered.text,
            prompt_template=self.summary_prompt,
            lines=count_lines(rendered.text),
        )
        index = next(i for i, known in enumerate(self._summarize_actions) if known is action)
        # One summary at a time per run: each checks what the run can afford against the usage of those before it,
        # so parallel tool calls summarized together cannot leave the run without its next request.
        async with self._run_lock(ctx.run_id):
            try:
                outcome, usage = await self._summarize_durably(ctx, index, request)
            except Exception as exc:  # noqa: BLE001 - a durable unit that failed means: no summary, fall back
                return None, f'the summarizer failed: {exc!r}'
            if outcome.configuration_error:
                raise OverflowConfigurationError(outcome.reason)
            ctx.usage.incr(usage)
        if outcome.summary is None:
            return None, outcome.reason  # nothing was stored: the original is kept only next to a summary
        summary = Summary(outcome.summary, outcome.chunks, outcome.uncovered_chars, by_model=action.summarize is None)
        key = self._key(ctx, call, unit)
        # Decide before writing: a summary that would not be shorter is no summary, and its original would be
        # stored for nothing (the built-in stores return the first short id of the key's handle).
        expected_handle = next(short_handles(handle_for_key(key))) if action.keep_original else None
        if len(mark_summary(request, summary, expected_handle)) >= len(rendered.text):
            return None, 'the summary was not shorter than the output'
        handle: str | None = None
        nbytes: int | None = None
        if action.keep_original:
            _, data = stored_form(rendered)
            handle, reason = await self._write(ctx, key, data, action.store_timeout)
            if handle is None:
                _warn(
                    f'The original output of `{call.tool_name}` could not be kept ({reason}); '
                    'the summary says so and is used without it'
                )
            else:
                nbytes = len(data)
        marked = mark_summary(request, summary, handle)
        if handle is not None and len(marked) >= len(rendered.text):
            # A custom store's long handle made the label too long: withdraw the original along with the summary.
            await self._discard(ctx, handle)
            return None, 'the summary was not shorter than the output'
        return _Reduced(marked, 'summarize', handle, nbytes), ''

    async def _discard(self, ctx: RunContext[AgentDepsT], handle: str) -> None:
        """Delete a payload nothing will point to, when the store can delete and this is not workflow code."""
        delete = getattr(self._resolved_store, 'delete', None)
        if ctx.in_durable_context or delete is None:
            return
        try:
            await delete(handle)
        except Exception as exc:  # noqa: BLE001 - a failed clean-up must not fail the run
            _warn(f'A stored original nothing points to could not be deleted: {exc!r}')


_OFF_LOOP_STRIP_CHARS = 32 * 1024
"""Texts longer than this are ANSI-stripped in a worker thread: on hostile text (a sequence every two characters)
stripping costs a few microseconds per sequence."""


def _stored_with_lines(rendered: Rendered) -> tuple[str, bytes, int]:
    pageable, data = stored_form(rendered)
    return pageable, data, count_lines(pageable)


_PIECE_CHARS = 1 << 20
"""A streamed spill encodes and writes the text in pieces of about this many characters, each ending at a line end."""

_PIECES_AHEAD = 4
"""At most this many pieces wait for the preview scan: the write never runs more than ~16 MB ahead of it."""


class _Relay:
    """Encodes a text piece by piece in one thread, for a store writing the pieces in another; bounded memory.

    The encoding thread also runs the preview scan of each piece once it has handed it over, so the GIL-bound
    work (encoding; the store's newline counting) overlaps the work that releases the GIL (writing; RE2 and
    Hyperscan), and at most `_PIECES_AHEAD` pieces wait for the store.
    """

    def __init__(self) -> None:
        self._loop_thread = threading.get_ident()  # built on the event loop, whose thread must never wait for pieces
        self._pieces: deque[bytes] = deque()
        self._ready = threading.Condition()
        self._done = False
        self._complete = False
        self._abandoned = False

    def encode_and_scan(self, text: str, scan: ImportantLinesScan) -> None:
        """Hand the UTF-8 pieces of `text` (lone surrogates kept) to the store, scanning each (a worker thread).

        The scan runs in a thread of its own (`_Scanner`), so encoding, writing and scanning all overlap; a scan
        that fails does not stop the payload from being written whole, and its error is raised at the end.
        """
        base = 0
        scanner = _Scanner(scan)
        try:
            try:
                for piece in _encoded_pieces(text):
                    if not self._put(piece):
                        return  # the write stopped (failed, or its deadline passed): nothing more to do
                    scanner.add(piece, base)
                    base += len(piece)
                self._complete = True
            finally:
                with self._ready:
                    self._done = True
                    self._ready.notify_all()
        finally:
            failure = scanner.finish(drain=self._complete)
        if failure is not None:
            raise failure

    def _put(self, piece: bytes) -> bool:
        with self._ready:
            while len(self._pieces) >= _PIECES_AHEAD and not self._abandoned:
                self._ready.wait()
            if self._abandoned:
                return False
            self._pieces.append(piece)
            self._ready.notify_all()
            return True

    def pieces(self) -> Iterator[bytes]:
        """The pieces, in order, as the store takes them (in its own thread)."""
        if threading.get_ident() == self._loop_thread:
            # The encoder cannot start while the event loop waits here: refuse instead of hanging the run.
            raise _PiecesStopped(
                'write_stream iterated the pieces on the event loop; iterate them in a worker thread '
                '(anyio.to_thread.run_sync), as the next piece may not be encoded yet'
            )
        while True:
            with self._ready:
                while not self._pieces and not self._done and not self._abandoned:
                    self._ready.wait()
                if self._abandoned or (not self._pieces and not self._complete):
                    # Never let a store publish part of the payload as if it were all of it.
                    raise _PiecesStopped('the payload stopped before its end; nothing may be published')
                if not self._pieces:
                    return
                piece = self._pieces.popleft()
                self._ready.notify_all()
            yield piece

    def abandon(self) -> None:
        """The store is done with the pieces (it finished or failed): release the encoder; never blocks."""
        with self._ready:
            self._abandoned = True
            self._pieces.clear()
            self._ready.notify_all()


class _Scanner:
    """The preview scan of a streamed spill, in a thread of its own, at most `_PIECES_AHEAD` pieces behind."""

    def __init__(self, scan: ImportantLinesScan) -> None:
        self._scan = scan
        self._queue: deque[tuple[bytes, int]] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name='pyai-harness-preview-scan', daemon=True)
        self._thread.start()

    def add(self, piece: bytes, base: int) -> None:
        """Queue `piece` (starting at byte `base`) for the scan; waits while `_PIECES_AHEAD` are queued."""
        with self._ready:
            while len(self._queue) >= _PIECES_AHEAD and self._failure is None:
                self._ready.wait()
            if self._failure is None:
                self._queue.append((piece, base))
                self._ready.notify_all()

    def finish(self, *, drain: bool) -> BaseException | None:
        """Scan what is queued (`drain`) or drop it, wait for the thread; the scan's error, if it failed."""
        with self._ready:
            self._closed = True
            if not drain:
                self._queue.clear()
            self._ready.notify_all()
        self._thread.join()
        return self._failure

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                piece, base = self._queue.popleft()
                self._ready.notify_all()
            try:
                self._scan.feed(piece, base)  # hands the GIL over as it goes (`_preview`)
            except BaseException as exc:  # noqa: BLE001 - raised in the encoding thread once the payload is written
                with self._ready:
                    self._failure = exc
                    self._queue.clear()
                    self._ready.notify_all()
                return


class _PiecesStopped(RuntimeError):
    """Raised into a store's iteration of the pieces when they stopped before the end of the payload."""


def _encoded_pieces(text: str) -> Iterator[bytes]:
    position = 0
    size = len(text)
    while position < size:
        cut = position + _PIECE_CHARS
        if cut >= size:
            end = size
        else:
            newline = text.find('\n', cut - 1)
            end = size if newline == -1 else newline + 1
        yield text[position:end].encode('utf-8', 'surrogatepass')
        position = end


def _shape_of(rendered: Rendered, layout: JsonLayout) -> str | None:
    """The shape sketch of a stored JSON value, from a sample of its elements (nothing is parsed again)."""
    if layout.root is not None:
        return shape_sketch(layout.root, plain=layout.plain)
    return shape_sketch(rendered.jsonable) if rendered.kind == 'structured' else None


def _scan_pieces(scan: ImportantLinesScan, pieces: Sequence[bytes]) -> None:
    """The important-lines scan of a payload already cut at line ends (a worker thread, beside the write)."""
    base = 0
    for piece in pieces:
        hand_over()
        scan.feed(piece, base)
        base += len(piece)


def estimate_tokens_of(rendered: Rendered) -> int:
    """The ~4-characters-per-token heuristic, without materializing a structured value's compact text."""
    return -(-rendered.size_chars // 4)


_LARGE_CONTAINER = 1024
"""A value holding a list, tuple or dict of more members than this (itself, or one of its first few members) is
rendered in a worker thread."""


def _large_container(value: Any) -> bool:
    """Whether a return is a large container, or holds one at its first level (`{'items': [...]}`, a model)."""
    if _is_large(value):
        return True
    members: Iterable[Any] = ()
    if isinstance(value, dict):
        members = cast('dict[Any, Any]', value).values()
    elif isinstance(value, pydantic.BaseModel):
        members = (member for _, member in value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        members = (getattr(value, field.name, None) for field in dataclasses.fields(value))
    return any(_is_large(member) for member in itertools.islice(members, 64))


def _is_large(value: Any) -> bool:
    return isinstance(value, (list, tuple, dict)) and len(cast('Sequence[Any]', value)) > _LARGE_CONTAINER


async def _in_worker(work: Callable[[], object]) -> None:
    await anyio.to_thread.run_sync(work)


def _large_text(value: Any) -> bool:
    return isinstance(value, str) and len(value) > _OFF_LOOP_STRIP_CHARS


async def _off_loop(ctx: RunContext[Any], work: Callable[[], _T], *, large: bool) -> _T:
    """Run a CPU-bound step in a worker thread when its input is large, in place otherwise.

    Workflow code under a durable engine must not start threads, so there it always runs in place.
    """
    if large and not ctx.in_durable_context:
        return await anyio.to_thread.run_sync(work)
    return work()


def _query_toolset(store: OverflowStore, spill: WorkspaceSpill) -> AbstractToolset[Any]:
    """The query tools reading workspace handles from the run's workspace, others from `store`.

    With `query_tools='fallback_only'` they are offered only once a spill of the conversation is outside the workspace.
    """
    toolset = build_query_toolset(store, route=route_for_run(store, spill))
    if spill.query_tools == 'always':
        return toolset

    def needed(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        return any(not spill.owns(handle) for handle in overflow_report(ctx.messages).handles)

    return toolset.filtered(needed)


def _summarize_actions(band_lists: Iterable[Sequence[Band]]) -> tuple[Summarize, ...]:
    """Every `Summarize` action reachable from the bands (through `then` chains), in a deterministic order."""
    found: list[Summarize] = []
    for bands in band_lists:
        for band in bands:
            action: Action | None = band.action
            while action is not None:
                if isinstance(action, Summarize) and not any(known is action for known in found):
                    found.append(action)
                action = None if isinstance(action, Passthrough) else action.then
    return tuple(found)


def _not_smaller(reduced: _Reduced, rendered: Rendered) -> bool:
    """Whether a text replacement is at least as long as the text it replaces (binary is compared in other units)."""
    return rendered.kind != 'binary' and isinstance(reduced.value, str) and len(reduced.value) >= rendered.size_chars


def _visible_chars(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 0


async def _report(
    ctx: RunContext[Any],
    call: ToolCallPart,
    unit: UnitName,
    reduced: _Reduced,
    tried: list[str],
    measured: int,
) -> None:
    """Tell the application: a typed event on the run's stream, a log record, attributes on the tool's span."""
    event = OverflowReduced(
        unit=unit,
        action=reduced.action,
        fallback_path=list(tried),
        measured=measured,
        chars_before=reduced.size_before,
        chars_after=_visible_chars(reduced.value),
        handle=reduced.handle,
        key=reduced.key if reduced.handle is not None else None,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
    )
    log_reduction(call.tool_name, event)
    record_on_span(event)
    try:
        await ctx.emit(event)
    except UserError:
        pass  # a hook called outside an agent run (tests, direct use) has no event stream


def _warn(message: str) -> None:
    # Logged every time, for operators; the warning (shown once per message by Python's default filter) is for
    # developers and test suites that turn warnings into errors.
    logger.warning(message)
    warnings.warn(message, OverflowingToolOutputWarning, stacklevel=3)


def _notes(prefix: str, reduced: _Reduced) -> dict[str, Any]:
    """The metadata keys for one reduced part: `<prefix>_action`, `_size_before`, `_size_after`, `_handle`, `_bytes`.

    With a handle, also `_key`: the key it was written under (`<run id>/<tool call id>/<retry>`), for which the
    built-in stores return a short handle.
    """
    notes: dict[str, Any] = {
        f'{prefix}_action': reduced.action,
        f'{prefix}_size_before': reduced.size_before,
        f'{prefix}_size_after': _visible_chars(reduced.value),
    }
    if reduced.handle is not None:
        notes[f'{prefix}_handle'] = reduced.handle
        notes[f'{prefix}_bytes'] = reduced.nbytes
        if reduced.key is not None:
            notes[f'{prefix}_key'] = reduced.key
    return notes


def _reassemble(
    envelope: ToolReturn[Any] | None,
    value: Any,
    content: Any,
    new_value: _Reduced | None,
    new_content: _Reduced | None,
) -> ToolReturn[Any]:
    """Keep the `ToolReturn` envelope (content, metadata, tools) and record what was done in the metadata."""
    notes: dict[str, Any] = {}
    if new_value is not None:
        notes |= _notes(VALUE_PREFIX, new_value)
    if new_content is not None:
        notes |= _notes(CONTENT_PREFIX, new_content)
    metadata: Any = envelope.metadata if envelope is not None else None
    if metadata is None:
        metadata = notes
    elif isinstance(metadata, Mapping):
        metadata = {**metadata, **notes}  # pyright: ignore[reportUnknownVariableType]
    # Any other metadata object belongs to the application and is kept exactly as it was.
    return ToolReturn(
        return_value=new_value.value if new_value is not None else value,
        content=new_content.value if new_content is not None else content,
        metadata=metadata,
        tools=envelope.tools if envelope is not None else None,
    )
