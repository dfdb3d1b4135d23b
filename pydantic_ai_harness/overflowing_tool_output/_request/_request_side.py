"""The request side of the capability: each attempt at a model request held to the request rules for the model that
serves it, lossless compaction when pydantic-ai asks for one, and the handle ledger that outlives any compaction.

The rules themselves are `_request_rules` (the protocol, redaction, failure texts), `_step_rule` and `_aging_rule`;
this module builds them from the configuration and runs them from the hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pydantic_ai.capabilities import CompactionRequest, CompactionResult
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext, ToolDefinition, ToolSelector, matches_tool_selector

from .._actions._band_loop import BandLoop
from .._actions._bands import Action, Band
from .._actions._summarize import OverflowConfigurationError
from .._actions._unit import Reduced, reduction_notes
from .._events import VALUE_PREFIX, OverflowingToolOutputWarning, warn
from .._offload import large_text, off_loop
from .._query_tools._names import names_in, naming, query_tool_names
from .._redaction._withhold import SecretWithholding
from .._rendering._render import Rendered
from ._aging import Aging
from ._aging_rule import AgingKit, AgingRule
from ._compaction import LosslessCompaction, compact_losslessly, tool_tokens
from ._image_totals_rule import ImageTotalsRule
from ._ledger import HandleLedger
from ._request_rules import (
    FailureBands,
    FailureRedaction,
    HeldRequest,
    Replacements,
    RequestRule,
    Selected,
    hold_request,
)
from ._step_budget import StepBudget, step_action
from ._step_rule import StepBudgetRule

__all__ = ('RequestSide', 'conversation_of', 'selector')


@dataclass
class RequestSide:
    """The rules, compaction and ledger of one capability, run from its request hooks."""

    loop: BandLoop
    """The capability's band loop (failure texts and the step budget reduce through it)."""

    withholding: SecretWithholding | None
    """`redact_secrets` in force, if set."""

    step_budget: StepBudget | None
    """The step budget, if set."""

    aging: Aging | None
    """Aging, if set."""

    compaction: LosslessCompaction | None
    """Lossless compaction, if set."""

    kit: AgingKit
    """What moving returns out of the context needs (aging and compaction)."""

    per_tool: dict[str, tuple[Band, ...]]
    """The per-tool bands, largest threshold first (a step budget without an action takes a tool's smallest band)."""

    offers_query_tools: bool
    """Whether the query tools are offered: compaction names handles only then."""

    rules: tuple[RequestRule, ...] = field(init=False)
    """The rules each attempt is held to, in order: redaction first, so no later rule sees a secret."""

    replacements: Replacements = field(default_factory=Replacements)
    """What the rules replaced, so a further attempt starts from the history as it is now."""

    ledger: HandleLedger = field(default_factory=HandleLedger)
    """The handles each conversation showed at its last request, for the compaction that may follow."""

    def __post_init__(self) -> None:
        rules: list[RequestRule] = []
        if self.withholding is not None:
            rules.append(FailureRedaction(self.withholding, self._mask_text))
        rules.append(FailureBands(self._reduce_failure))
        if self.step_budget is not None:
            action_for = partial(step_action, self.step_budget, self.per_tool, self.loop.bands_for)
            unit = 'tokens' if self.loop.over_tokens else 'characters'
            rules.append(
                StepBudgetRule(
                    self.step_budget, self._reduce_with, self.loop.measure, action_for, unit, images=self.kit.images
                )
            )
        if self.aging is not None:
            rules.append(AgingRule(self.aging, self.kit))
        if self.kit.images is not None:
            rules.append(ImageTotalsRule(self.kit))  # last: what the rules before it left must fit the provider
        self.rules = tuple(rules)

    async def prepare(self, ctx: RunContext[Any], request_context: ModelRequestContext) -> ModelRequestContext:
        """One attempt at a request, held to the rules for the model serving it; what a rule replaces is put in the
        run's history, and a further attempt starts from it.
        """
        # The query tools by the names this request offers them under (`PrefixTools` renames them).
        offered = request_context.model_request_parameters.function_tools
        conversation = conversation_of(ctx)
        self.ledger.settle(conversation, ctx.messages)  # a compaction since the last request: keep its handles
        earlier = self.replacements.latest(request_context.messages)
        exempt, selected = query_tool_names(offered), selector(self.loop.tool_filter, ctx, offered)
        request = HeldRequest(ctx, earlier, exempt, selected, request_context.model)
        with naming(names_in(offered)):  # stubs and previews name the query tools as this request offers them
            await hold_request(self.rules, request)
        pairs = [
            (old, new) for old, new in zip(request_context.messages, request.messages, strict=True) if old is not new
        ]
        self.ledger.remember(conversation, request.messages, [new for _, new in pairs])
        if not pairs:
            return request_context
        # Persist the new messages in the run's history, so later requests carry them too, and send them now.
        self.replacements.add(pairs)
        ctx.messages[:] = self.replacements.latest(ctx.messages)
        return replace(request_context, messages=request.messages)

    async def compact(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
        """The losslessly compacted history, or `None` for the next capability to compact."""
        setting = self.compaction
        if setting is None or not self.offers_query_tools:
            return None
        parameters = request.conversation_request.parameters
        offered = parameters.function_tools
        exempt, selected = query_tool_names(offered), selector(self.loop.tool_filter, ctx, offered)
        tools = self.kit.tools(ctx, exempt, selected, None, setting.timeout)
        try:
            with naming(names_in(offered)):
                return await compact_losslessly(ctx, request, setting, tools, tool_tokens(parameters))
        except (OverflowConfigurationError, OverflowingToolOutputWarning):
            raise
        except Exception as exc:  # noqa: BLE001 - the run must never die here: the next capability compacts
            warn(f'Lossless compaction failed and left the compaction to the next capability: {exc!r}')
            return None

    def settle(self, ctx: RunContext[Any], messages: Sequence[ModelMessage] | None = None) -> None:
        """Give a compaction made since the last request the handles it took out (before a query tool reads them)."""
        if messages is None:
            try:
                messages = ctx.messages
            except UserError:  # a durable unit's context carries the handles, not the messages
                return
        self.ledger.settle(conversation_of(ctx), messages)

    async def _reduce_failure(
        self, request: HeldRequest, call: ToolCallPart, text: str
    ) -> tuple[str, dict[str, Any]] | None:
        """A failure text a tool sent (`ModelRetry`, `ToolFailed`), already masked, reduced as a return would be."""
        bands, rendered = self.loop.bands_for(call.tool_name), Rendered('text', text)
        reduced = await self.loop.reduce_unit(
            request.ctx, call, bands, rendered, text, 'return_value', context=request.context, failure=True
        )
        if reduced is not None and isinstance(reduced.value, str):
            return reduced.value, reduction_notes(VALUE_PREFIX, replace(reduced, size_before=len(text)))
        return None

    async def _mask_text(self, ctx: RunContext[Any], text: str) -> tuple[str, dict[str, int]]:
        withholding = self.withholding
        assert withholding is not None  # only `FailureRedaction`, built with it, calls this
        return await off_loop(ctx, partial(withholding.mask_text, text), large=large_text(text))

    async def _reduce_with(
        self, request: HeldRequest, call: ToolCallPart, action: Action, rendered: Rendered, original: Any
    ) -> Reduced | None:
        """One return reduced by one action (the step budget's), through the band loop: a list holding documents
        document by document, as at tool execution (what is left of it stays: a band over nothing would store it
        again whole).
        """
        bands = (Band(over=0, action=action),)
        return await self.loop.reduce_part(
            request.ctx, call, bands, rendered, original, 'return_value', context=request.context, rest=False
        )


def conversation_of(ctx: RunContext[Any]) -> str:
    """What the handle ledger remembers a history by: its conversation, or its run when it has no conversation id."""
    return ctx.conversation_id or ctx.run_id or ''


def selector(tool_filter: ToolSelector[Any], ctx: RunContext[Any], offered: Sequence[ToolDefinition]) -> Selected:
    """`tool_filter` for the request-time rules, which know a tool by name: matched against the tool's definition
    in this request (a filter may read its metadata or description), as `after_tool_execute` matches a return.
    """
    definitions = {tool_def.name: tool_def for tool_def in offered}

    async def selected(tool_name: str) -> bool:
        tool_def = definitions.get(tool_name) or ToolDefinition(name=tool_name)  # a tool this request no longer offers
        return await matches_tool_selector(tool_filter, ctx, tool_def)

    return selected
