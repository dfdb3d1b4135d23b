"""Lossless compaction: when pydantic-ai asks for a compaction (a context overflow, a switch to a smaller window,
a request), old tool returns leave the context as stubs naming handles, oldest first, until the request fits.

This is aging done at once, on demand: the same due returns, the same stubs and writes (`_aging`), chosen oldest
first until the request is under the serving model's window with `LosslessCompaction.headroom` to spare. When even
every old return would not make it fit, the hook answers `None` and the next capability (a summarizer,
`NativeCompaction`) compacts instead; nothing is summarized here, so nothing is lost.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import CompactionRequest, CompactionResult
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import RunContext

from ..._typing import is_int
from .._events import OverflowAged, aged_in_run, report_aged, warn
from .._query_tools._names import offered_names
from ._aging import AgedBatch, Aging, AgingTools, DueReturn, age_items, due_returns, savings_of
from ._context_window import usable_window
from ._ledger import record_ledger

__all__ = ('COMPACTION_HANDLER', 'LosslessCompaction', 'compact_losslessly', 'request_tokens', 'tool_tokens')

COMPACTION_HANDLER = 'overflowing_tool_output'
"""What `CompactionRecord.handler` says for a compaction this capability made."""


def compaction_note() -> str:
    """The summary text core requires a compaction part to carry; the model reads it as a note beside the stubs."""
    names = offered_names()
    return (
        'Older tool outputs in this conversation were moved out of the context to make room; nothing was '
        f'summarized or lost. Each stub names a handle: {names.read} or {names.grep} gets the output back.'
    )


@dataclass(frozen=True)
class LosslessCompaction:
    """How `OverflowingToolOutput` compacts when pydantic-ai asks it to (`compact_history`): old tool returns leave
    the context as stubs naming handles (as `Aging` makes them), oldest first, until the request fits the serving
    model's window with `headroom` to spare. When that is not enough, it leaves the compaction to the next capability.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import LosslessCompaction, OverflowingToolOutput

    capability = OverflowingToolOutput(compaction=LosslessCompaction(headroom=0.3))
    ```
    """

    headroom: float = 0.4
    """The share of the serving model's window left free after compacting, for the answer and the next returns. The
    more is left, the fewer compactions (each rebuilds a prompt cache), and the more returns are read back by handle."""

    after_turns: int = 1
    """Model responses that must follow a return before it may move; the newest turns always stay."""

    min_tokens: int = 50
    """Smaller returns stay: their stub would save too little."""

    timeout: float | None = None
    """Seconds each store call may take. `None`: the capability's `Spill` timeout (the shortest), else 30."""

    def __post_init__(self) -> None:
        headroom = self.headroom
        if not (type(headroom) in (int, float) and 0 <= headroom < 1):
            raise ValueError(f'compaction.headroom must be a number in [0, 1), got {headroom!r}')
        for name, minimum in (('after_turns', 1), ('min_tokens', 1)):
            value: object = getattr(self, name)
            if not is_int(value) or value < minimum:
                raise ValueError(f'compaction.{name} must be an int of at least {minimum}, got {value!r}')
        timeout = self.timeout
        if timeout is not None and not (type(timeout) in (int, float) and 0 < timeout < float('inf')):
            raise ValueError(f'compaction.timeout must be a positive number of seconds or None, got {timeout!r}')

    def as_aging(self) -> Aging:
        """The `Aging` whose due returns this compaction may move."""
        return Aging(after_turns=self.after_turns, min_tokens=self.min_tokens, batch_tokens=0, timeout=self.timeout)


def request_tokens(messages: Sequence[ModelMessage], tools: AgingTools) -> int:
    """About how many tokens `messages` are: the counted returns as counted, everything else at ~4 characters each."""
    total = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                known = tools.counts.known(part)
                total += known if known is not None else len(part.model_response_str()) // 4
            else:
                total += len(str(getattr(part, 'content', None) or getattr(part, 'args', None) or '')) // 4
    return total


def tool_tokens(parameters: ModelRequestParameters) -> int:
    """About how many tokens the request's tool definitions take (~4 characters each of name, text and schema)."""
    tools = [*parameters.function_tools, *parameters.output_tools]
    return sum(len(t.name) + len(t.description or '') + len(json.dumps(t.parameters_json_schema)) for t in tools) // 4


def _target(window: int | None, headroom: float, tokens: int, overflow: bool) -> int:
    """The tokens the compacted request may take: the window less its headroom (0 when the window is unknown, so
    every old return goes). A model that said it overflowed counted more than this estimate: aim below it too.
    """
    target = int(window * (1 - headroom)) if window is not None else 0
    return min(target, int(tokens * (1 - headroom))) if overflow else target


def _oldest_first_until(due: Sequence[DueReturn], savings: Sequence[int], excess: int) -> list[DueReturn] | None:
    """The oldest due returns that together save `excess` tokens; `None` when all of them would not."""
    chosen: list[DueReturn] = []
    saved = 0
    for item, saving in zip(due, savings, strict=True):
        if saving <= 0:
            continue
        chosen.append(item)
        saved += saving
        if saved >= excess:
            return chosen
    return None


async def compact_losslessly(
    ctx: RunContext[Any],
    request: CompactionRequest,
    setting: LosslessCompaction,
    tools: AgingTools,
    tool_tokens: int,
) -> CompactionResult | None:
    """The compacted history for `request`, or `None` when moving every old return would not make it fit.

    `tools` is aging's toolkit for this run; `tool_tokens` what the request's tool definitions take.
    """
    model = request.conversation_request.model
    window = usable_window(model.context_window, model.model_name)
    messages = request.messages
    aging = setting.as_aging()
    due = await due_returns(messages, aging, tools)
    tokens = request_tokens(messages, tools) + tool_tokens
    target = _target(window, setting.headroom, tokens, request.reason == 'context_overflow')
    if tokens <= target:
        return None  # it fits already: leave the compaction to a capability that was asked for one anyway
    chosen = _oldest_first_until(due, savings_of(due, tools), tokens - target)
    if chosen is None:
        warn(
            f'Lossless compaction could not make the request fit ({tokens:,} tokens, {target:,} wanted, '
            f'{len(due)} old tool returns to move); leaving the compaction to the next capability'
        )
        return None
    batch = await age_items(chosen, tools)
    if not batch.aged:
        return None  # the first write failed: nothing moved, the next capability compacts
    compacted = [batch.replacements.get(id(message), message) for message in messages]
    part = CompactionPart(content=compaction_note())
    record_ledger(part, [])  # the stubs name every handle it moved: nothing left to carry
    holder = _holder(compacted, batch)
    compacted[holder] = dataclasses.replace(compacted[holder], parts=[*compacted[holder].parts, part])
    await _report(ctx, compacted, batch)
    metadata = {'aged': batch.aged, 'tokens_before': tokens, 'tokens_moved': batch.tokens_before - batch.tokens_after}
    return CompactionResult(
        messages=compacted, part=part, handler=COMPACTION_HANDLER, kept_from=holder + 1, metadata=metadata
    )


def _holder(messages: list[ModelMessage], batch: AgedBatch) -> int:
    """The request the compaction part goes in: the last one the batch changed, or the first request after the newest
    compaction part already in the history (core requires the new part to be the newest).
    """
    changed = [index for index, message in enumerate(messages) if id(message) in _ids(batch)]
    start = max(changed)
    newest = max(
        (i for i, message in enumerate(messages) if any(isinstance(p, CompactionPart) for p in message.parts)),
        default=-1,
    )
    start = max(start, newest)
    return next(i for i in range(start, len(messages)) if isinstance(messages[i], ModelRequest))


def _ids(batch: AgedBatch) -> set[int]:
    return {id(message) for message in batch.replacements.values()}


async def _report(ctx: RunContext[Any], messages: Sequence[ModelMessage], batch: AgedBatch) -> None:
    event = OverflowAged(
        aged=batch.aged,
        tokens_before=batch.tokens_before,
        tokens_after=batch.tokens_after,
        handles=list(batch.handles),
        prefix_breaks=aged_in_run(messages, ctx.run_id).batches,
    )
    await report_aged(ctx, event)
