"""`OverflowingToolOutput`: the hooks, the band and fallback loop, and the durable operations.

The actions live in modules of their own names (`_truncate`, `_spill`, `_summarize`), the step budget in
`_step_budget`, the query tools in `_tools`; this module wires them to pydantic-ai's hooks.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any, Literal

import anyio
from pydantic_ai.capabilities import CompactionRequest, CompactionResult, durable_operation
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext, ToolDefinition, ToolSelector, matches_tool_selector
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage

from .._clash import warn_on_clash
from .._typing import is_instance
from ._actions._band_loop import BandLoop
from ._actions._bands import (
    Band,
    Summarize,
    default_bands,
    plainly_below,
    sorted_bands,
    summarize_actions,
)
from ._actions._spill import store_write
from ._actions._summarize import (
    DEFAULT_SUMMARY_PROMPT,
    OverflowConfigurationError,
    SummaryOutcome,
    SummaryRequest,
    SummaryRun,
    summarize_in_place,
    validate_summary_prompt,
)
from ._actions._unit import (
    handle_place,
)
from ._checks import check_store, check_tool_filter, spill_timeout, store_root_problem, unknown_tool_names, uses_store
from ._events import (
    OverflowingToolOutputWarning,
    overflow_report,
    report_run,
    warn,
)
from ._media import is_view_tool
from ._media._hooks import ImageHooks
from ._query_tools._names import is_query_tool, naming, run_names
from ._query_tools._tools import build_query_toolset
from ._redaction._secrets import SecretRedaction
from ._redaction._withhold import SecretWithholding, build_withholding, left_after_failure, withhold_closed
from ._rendering._important_lines import load_literal_finder
from ._rendering._render import Rendered, measure
from ._request._aging import Aging, Place, TokenCounts
from ._request._aging_rule import AgingKit
from ._request._compaction import LosslessCompaction
from ._request._request_side import RequestSide
from ._request._step_budget import StepBudget
from ._spec import (
    BandSpec,
    StoreSpec,
    parse_aging,
    parse_bands,
    parse_compaction,
    parse_redaction,
    parse_step_budget,
    parse_store,
    parse_workspace,
)
from .stores import HandleNotFoundError, LocalFileStore, OverflowStore
from .stores._local import DEFAULT_RETENTION
from .stores._protocol import payload_size
from .stores._workspace import WorkspaceSpill, route_for_run, store_for_run

__all__ = ('OverflowingToolOutput',)


@dataclass
class OverflowingToolOutput(ImageHooks[AgentDepsT]):
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
    """Where `Spill` puts payloads; default: a [`LocalFileStore`][pydantic_ai_harness.overflowing_tool_output.LocalFileStore]
    in the system temp directory that deletes payloads after 7 days (`cleanup_after`), which the preview says."""

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

    aging: Aging | None = None
    """Opt-in: old tool returns leave the context in batches, as stubs naming a handle the model reads them back by.
    See [`Aging`][pydantic_ai_harness.overflowing_tool_output.Aging]."""

    compaction: LosslessCompaction | None = field(default_factory=LosslessCompaction)
    """When pydantic-ai asks for a compaction (a context overflow, a smaller fallback model, `request_compaction`):
    old tool returns leave the context as stubs naming handles until the request fits, losslessly; when that is not
    enough, the next capability compacts. `None`: leave every compaction to the others. See
    [`LosslessCompaction`][pydantic_ai_harness.overflowing_tool_output.LosslessCompaction]."""

    _bands_desc: tuple[Band, ...] = field(init=False, repr=False, compare=False)
    _per_tool_desc: dict[str, tuple[Band, ...]] = field(init=False, repr=False, compare=False)
    _resolved_store: OverflowStore = field(init=False, repr=False, compare=False)
    _summarize_actions: tuple[Summarize, ...] = field(init=False, repr=False, compare=False)
    _reported_root_problem: str | None = field(default=None, init=False, repr=False, compare=False)
    _withholding: SecretWithholding | None = field(init=False, repr=False, compare=False)
    _loop: BandLoop = field(init=False, repr=False, compare=False)
    _requests: RequestSide = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        warn_on_clash()  # once per process; this class is upstream's `ToolOutputLimits` when upstream won the files
        self._bands_desc = sorted_bands(self.bands, 'bands')
        if not is_instance(self.per_tool, Mapping):
            raise TypeError(f'per_tool must be a mapping of tool name to bands, got {type(self.per_tool).__name__}')
        for name in self.per_tool:
            if not is_instance(name, str):
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
        self._resolved_store = self.store if self.store is not None else LocalFileStore(cleanup_after=DEFAULT_RETENTION)
        self._withholding = build_withholding(self.redact_secrets, query_store=self._resolved_store)
        if self.step_budget is not None and not is_instance(self.step_budget, StepBudget):
            raise TypeError(f'step_budget must be a StepBudget or None, got {type(self.step_budget).__name__}')
        if self.aging is not None and not is_instance(self.aging, Aging):
            raise TypeError(f'aging must be an Aging or None, got {type(self.aging).__name__}')
        if self.compaction is not None and not is_instance(self.compaction, LosslessCompaction):
            raise TypeError(f'compaction must be a LosslessCompaction or None, got {type(self.compaction).__name__}')
        self._set_up_images(self._resolved_store, self.workspace, self._write, self._withholding)
        self._summarize_actions = summarize_actions(self._band_lists())
        self._loop = BandLoop(
            self.bands_for,
            self.tool_filter,
            self.over_tokens,
            self.tokenizer,
            self.strip_ansi,
            self._resolved_store,
            self.workspace,
            self._write,
            SummaryRun(self._summarize_actions, self.summary_prompt, self._summarize_durably),
            withholding=self._withholding,
            images=self.images,
            durable_media=self._durable_media(),
        )
        self._requests = RequestSide(
            self._loop,
            self._withholding,
            self.step_budget,
            self.aging,
            self.compaction,
            self._aging_kit(),
            self._per_tool_desc,
            offers_query_tools=self._text_toolset() is not None,
        )
        load_literal_finder()  # where the agent is defined, not in a durable workflow's first spill

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
        aging: bool | Mapping[str, Any] | None = None,
        compaction: bool | Mapping[str, Any] | None = True,
    ) -> OverflowingToolOutput[Any]:
        """Build the capability from plain data, as `Agent.from_spec` / `Agent.from_file` pass it.

        Bands are `{'over': 10000, 'action': 'Spill'}`; an action is its name or `{Name: {field: value}}`,
        e.g. `{'Truncate': {'strategy': 'tail', 'max_chars': 4000}}` or `{'Spill': {'then': 'Truncate'}}`.
        `store` configures the `LocalFileStore` (`base_dir`, `cleanup_after` as seconds or `'6h'`), or names
        a fleet store: `{'RedisStore': {'url': ...}}`, `{'ObjectStore': {'url': 's3://bucket', 'config': ...}}`.
        `workspace` is `true` (the default), `false`, or `WorkspaceSpill`'s fields; `redact_secrets` is `true`
        or `SecretRedaction`'s fields (`keep_original_in` a store spec); `step_budget` a size or
        `{'max_size': ..., 'action': ...}`; `aging` `true` or `Aging`'s fields; `compaction` `true` (the default),
        `false`, or `LosslessCompaction`'s fields. A bad value raises `ValueError`
        naming the field, e.g. `bands[1].action.Truncate: Truncate.max_chars must be at least 200 ...`.
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
            aging=parse_aging(aging, 'aging'),
            compaction=parse_compaction(compaction, 'compaction'),
        )

    # --- hooks ---------------------------------------------------------------------------------------

    def _text_toolset(self) -> AbstractToolset[AgentDepsT] | None:
        """The query tools, offered from the first request on; none when no setting can ever store (`get_toolset`)."""
        # A step budget without an action uses each tool's smallest band, which may be any of them: keep the tools.
        budget_picks_any_band = self.step_budget is not None and self.step_budget.action is None
        if not budget_picks_any_band and self.aging is None and not uses_store(self._band_lists()):
            return None
        if self.workspace is None:
            store = self._resolved_store  # routed, so the tools see the run's messages (its handles, for near misses)
            return build_query_toolset(store, route=lambda _ctx, _handle: store, before_call=self._settle_ledger)
        return _query_toolset(self._resolved_store, self.workspace, self._settle_ledger)

    async def prepare_tools(self, ctx: RunContext[AgentDepsT], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        """At a run's first step, warn about settings the run shows to be wrong; the tools are left as they are.

        The first step is the first time the agent's tools are known (toolsets such as MCP servers list them
        per run): each `per_tool` / `tool_filter` name no tool has gets a warning with the closest tool name.
        A `LocalFileStore` root that writes would fail on is reported here too, before the first spill.
        """
        if ctx.run_step <= 1:
            for message in unknown_tool_names(
                self.per_tool, self.tool_filter, (tool.name for tool in tool_defs if not is_query_tool(tool))
            ):
                warn(message)
            lists = (self._bands_desc, *self._per_tool_desc.values())
            aging, durable = self.aging is not None, ctx.in_durable_context
            timeout = min(spill_timeout(lists), (self.aging.timeout if self.aging else None) or float('inf'))
            problem = await store_root_problem(
                self._resolved_store, lists, durable=durable, aging=aging, timeout=timeout
            )
            if problem is not None and problem != self._reported_root_problem:
                warn(f'Spills will fail and fall back to their `then` action: {problem}')
            self._reported_root_problem = problem
        return tool_defs

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
        if is_query_tool(tool_def) or is_view_tool(tool_def):
            return result  # our own query tools (under any name): their output is already bounded
        if self._withholding is not None:
            selected = partial(matches_tool_selector, self.tool_filter, ctx, tool_def)
            result = await withhold_closed(self._withholding, ctx, call, selected, result)
        if type(result) is str and plainly_below(
            result, self.bands_for(tool_def.name), self.over_tokens, self.tokenizer, self.strip_ansi
        ):
            return result  # the common case, decided without rendering or allocating anything
        try:
            result = await self._fit_images(ctx, call, tool_def, result, self.tool_filter)
            with naming(run_names(ctx)):  # previews name the query tools as this run offers them
                return await self._loop.reduce_result(ctx, call, tool_def, result)
        except OverflowConfigurationError:
            raise  # a configuration that cannot work is the user's to fix, not a run-time fallback
        except OverflowingToolOutputWarning:
            raise  # one of our warnings, raised by a filter set to "error": pass it on as it is, not wrapped again
        except Exception as exc:  # noqa: BLE001 - the run must never die here
            return left_after_failure(self._withholding, call.tool_name, result, exc)

    async def after_model_request(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """When the model answers without calling a function tool, emit the run's `OverflowRunSummary`."""
        function_tools = {tool.name for tool in request_context.model_request_parameters.function_tools}
        if any(isinstance(part, ToolCallPart) and part.tool_name in function_tools for part in response.parts):
            return response
        await report_run(ctx)
        return response

    async def prepare_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Hold each attempt at a request to the rules of a return, for the model serving it: the failure texts
        (`ModelRetry`, `ToolFailed`) masked and reduced, the tool returns of the step held to `step_budget`, largest
        first, and old returns aged (`aging`). Each rule runs apart (`_request_rules`): one failing leaves the others'
        work. What a rule replaces is put in the run's history, and a further attempt (another model, under
        `ModelFallback`) starts from it, so the history stays as the first attempt left it or goes further.
        """
        return await self._requests.prepare(ctx, request_context)

    async def compact_history(self, ctx: RunContext[AgentDepsT], request: CompactionRequest) -> CompactionResult | None:
        """Compact losslessly (`compaction`): old tool returns leave as stubs naming handles until the request fits
        the serving model's window; `None` when that is not enough, so the next capability compacts.

        Only where the query tools are offered (bands that can store, `aging` or a step budget): a stub names a
        handle the model must be able to read.
        """
        return await self._requests.compact(ctx, request)

    async def after_run(self, ctx: RunContext[AgentDepsT], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        """A compaction in the run's last step keeps the handles it took out, as one in an earlier step does."""
        self._requests.settle(ctx, result.all_messages())
        return result

    def bands_for(self, tool_name: str) -> tuple[Band, ...]:
        """The bands that apply to `tool_name`, largest threshold first."""
        return self._per_tool_desc.get(tool_name, self._bands_desc)

    def _settle_ledger(self, ctx: RunContext[Any]) -> None:
        """Before a query tool reads the conversation's handles: a compaction since the last request keeps its own."""
        self._requests.settle(ctx)

    # --- configuration and stores --------------------------------------------------------------------

    def _aging_kit(self) -> AgingKit:
        """What aging and lossless compaction need to move a return out of the context."""
        store, spill, tokenizer = self._resolved_store, self.workspace, self.tokenizer
        return AgingKit(
            TokenCounts(),
            lambda text: measure(Rendered('text', text), over_tokens=True, tokenizer=tokenizer)[0],
            lambda tool_name: not self._per_tool_desc.get(tool_name, True),  # `per_tool={name: []}`
            self._write,
            self._checked_payload_size,
            lambda handle: Place(**handle_place(store, spill, handle)),
            spill_timeout(self._band_lists()),
            self.images,
        )

    async def _checked_payload_size(
        self, ctx: RunContext[AgentDepsT], handle: str, timeout: float
    ) -> tuple[int | None, bool]:
        """`_payload_size`, through its durable operation under a durable engine."""
        if not ctx.in_durable_context:
            return await self._payload_size(ctx, handle, timeout)
        try:
            size, answered = await self._payload_size_durably(ctx, handle, timeout)
        except Exception:  # noqa: BLE001 - a durable unit that failed checked nothing: the text is written anew
            return None, False
        return size, answered

    def _band_lists(self) -> list[Sequence[Band]]:
        """Every band list of the configuration; the step budget's own action as a band of its own."""
        lists: list[Sequence[Band]] = [self._bands_desc, *self._per_tool_desc.values()]
        if self.step_budget is not None and self.step_budget.action is not None:
            lists.append((Band(over=0, action=self.step_budget.action),))
        return lists

    async def _write(
        self, ctx: RunContext[AgentDepsT], key: str, data: bytes, timeout: float
    ) -> tuple[str | None, str]:
        """Write `data` through the durable `overflow_spill_write` operation; any failure becomes a reason."""
        if not ctx.in_durable_context:
            # Outside a durable run the operation would run in place anyway: skip its text/base64 round trip,
            # which costs several copies of a payload that may be 100 MB.
            return await store_write(store_for_run(self._resolved_store, ctx, self.workspace), key, data, timeout)
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

    # --- durable operations (their names are persisted by the engines: never change them) -------------

    @durable_operation(name='overflow_spill_write')
    async def _spill_write(
        self, ctx: RunContext[AgentDepsT], key: str, text: str | None, data_b64: str | None, timeout: float
    ) -> tuple[str | None, str]:
        """Write one payload (`text` as UTF-8, else `data_b64`) to the store, bounded by `timeout`.

        Returns `(handle, '')` or `(None, reason)`. A durable operation (a DBOS step, a Temporal activity, a
        Prefect task) under a durability capability, so a replay or a recovery reuses the recorded handle
        instead of writing again. Failures are returned, not raised, so they are recorded too.
        """
        data = text.encode('utf-8') if text is not None else base64.b64decode(data_b64 or '')
        return await store_write(store_for_run(self._resolved_store, ctx, self.workspace), key, data, timeout)

    @durable_operation(name='overflow_payload_size')
    async def _payload_size_durably(
        self, ctx: RunContext[AgentDepsT], handle: str, timeout: float
    ) -> tuple[int | None, bool]:
        """`_payload_size` as a durable operation, so a replay sees the answer the first run got."""
        return await self._payload_size(ctx, handle, timeout)

    async def _payload_size(self, ctx: RunContext[AgentDepsT], handle: str, timeout: float) -> tuple[int | None, bool]:
        """The bytes stored under `handle` where the query tools read it (`None` when nothing is there), and whether
        the store answered at all within `timeout` (a store that fails or hangs did not).
        """
        store = self._resolved_store
        holder = route_for_run(store, self.workspace)(ctx, handle) if self.workspace is not None else store
        try:
            with anyio.fail_after(timeout):
                return await payload_size(holder, handle), True
        except (HandleNotFoundError, KeyError, FileNotFoundError):
            return None, True
        except Exception:  # noqa: BLE001 - failing or slow: the store did not answer
            return None, False

    @durable_operation(name='overflow_summarize')
    async def _summarize_durably(
        self, ctx: RunContext[AgentDepsT], action_index: int, request: SummaryRequest
    ) -> tuple[SummaryOutcome, RunUsage]:
        """Summarize with the `action_index`-th `Summarize` action; returns the outcome and the usage it cost.

        The usage is returned rather than added to the run's here, so it reaches the run exactly once whether
        this runs in place or in a durable unit: the caller adds it.
        """
        return await summarize_in_place(self._summarize_actions[action_index], ctx, request)


def _query_toolset(
    store: OverflowStore, spill: WorkspaceSpill, before_call: Callable[[RunContext[Any]], None]
) -> AbstractToolset[Any]:
    """The query tools reading workspace handles from the run's workspace, others from `store`.

    With `query_tools='fallback_only'` they are offered only once a spill of the conversation is outside the workspace.
    """
    toolset = build_query_toolset(store, route=route_for_run(store, spill), before_call=before_call)
    if spill.query_tools == 'always':
        return toolset

    def needed(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        return any(not spill.owns(handle) for handle in overflow_report(ctx.messages).handles)

    return toolset.filtered(needed)
