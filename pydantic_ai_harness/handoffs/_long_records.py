"""Tool outputs too long for a nested summary: saved in full to the delegate's store, then cut naming the handle.

Every write is bounded: the writes of one delegation share one deadline, the shortest `Spill.timeout` of the
delegate's `OverflowingToolOutput`, so a store that hangs costs a delegation that long once, not once per record.
A record the store did not take is cut all the same, saying the rest was not kept and why (the store's own error
goes to the log, never to the model: it may name a path).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from ..overflowing_tool_output import Band, OverflowingToolOutput, OverflowStore
from ..overflowing_tool_output._actions._spill import store_write
from ..overflowing_tool_output._checks import spill_timeout
from ._cut import cut_text, with_content
from ._data import HandoffInputData
from ._parts import Part, rewrap

__all__ = (
    'LongReturn',
    'long_tool_returns',
    'save_long_returns',
    'store_timeout',
    'with_cuts',
)

logger = logging.getLogger('pydantic_ai_harness.handoffs')

_FAILED = 'the store failed to save it'


@dataclass(frozen=True)
class LongReturn:
    """A tool return longer than a summary keeps, and where it sits in a handoff's segments."""

    segment: int
    """Which segment holds it: 0 `input_history`, 1 `pre_handoff_items`, 2 `new_items`."""

    message: int
    """The index of its message in the segment."""

    part: int
    """The index of the part in the message."""

    text: str
    """Its text, as the model read it."""

    key: str
    """The store key it is saved under (the same text gets the same key, so a replay writes nothing new)."""

    data: bytes
    """Its text as UTF-8, as it is written (encoded with the rest of the scan, off the event loop for a long
    history)."""


def store_timeout(overflow: OverflowingToolOutput[Any]) -> float:
    """The shortest `Spill.timeout` among the bands of `overflow` (every band list, `then` chains and the step
    budget's action included), else `Spill`'s default (30 s), as the capability's aging takes without `Aging.timeout`.
    """
    band_lists: list[Sequence[Band]] = [overflow.bands, *overflow.per_tool.values()]
    if overflow.step_budget is not None and overflow.step_budget.action is not None:
        band_lists.append([Band(over=0, action=overflow.step_budget.action)])
    return spill_timeout(band_lists)


def _segments(data: HandoffInputData) -> tuple[Sequence[ModelMessage], ...]:
    history = data.input_history
    return (() if isinstance(history, str) else history, data.pre_handoff_items, data.new_items)


def _safe_segment(text: str) -> str:
    """A key segment from model-written text (a tool call id): short, plain characters, and distinct per value."""
    plain = ''.join(c for c in text if c.isascii() and (c.isalnum() or c in '-_'))[:40]
    return f'{plain}-{hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]}'


def long_tool_returns(data: HandoffInputData, limit: int, key_prefix: str) -> list[LongReturn]:
    """Every tool return of `data` whose text is longer than `limit`, with the key to save it under."""
    found: list[LongReturn] = []
    for segment, messages in enumerate(_segments(data)):
        for index, message in enumerate(messages):
            if not isinstance(message, ModelRequest):
                continue
            for number, part in enumerate(message.parts):
                if not isinstance(part, ToolReturnPart):
                    continue
                text = part.model_response_str(wrap_if_error=False)
                if len(text) <= limit:
                    continue
                payload = text.encode('utf-8', 'surrogatepass')
                key = f'{key_prefix}/{_safe_segment(part.tool_call_id)}/{hashlib.sha256(payload).hexdigest()[:16]}'
                found.append(LongReturn(segment, index, number, text, key, payload))
    return found


async def save_long_returns(
    found: Sequence[LongReturn], limit: int, store: OverflowStore, timeout: float
) -> dict[tuple[int, int, int], str]:
    """Write each of `found` to `store` within one deadline of `timeout` seconds; return each one's cut text.

    A record the store took is cut naming its handle; one it refused, or that the deadline left unwritten, is cut
    saying the rest was not kept.
    """
    deadline = anyio.current_time() + timeout
    late = f'the store did not save it within {timeout:g} s'
    cuts: dict[tuple[int, int, int], str] = {}
    for record in found:
        where = (record.segment, record.message, record.part)
        left = deadline - anyio.current_time()
        if left <= 0:
            cuts[where] = cut_text(record.text, limit, None, not_kept=late)
            continue
        handle, reason = await store_write(store, record.key, record.data, left)
        if handle is not None:
            cuts[where] = cut_text(record.text, limit, handle)
            continue
        timed_out = anyio.current_time() >= deadline
        logger.warning(
            'delegate() could not save a %d-character tool output to the store, so its record is cut: %s',
            len(record.text),
            reason,
        )
        cuts[where] = cut_text(record.text, limit, None, not_kept=late if timed_out else _FAILED)
    return cuts


def with_cuts(data: HandoffInputData, cuts: dict[tuple[int, int, int], str]) -> HandoffInputData:
    """`data` with the tool returns at the places of `cuts` holding their cut texts."""
    if not cuts:
        return data
    segments = [list(messages) for messages in _segments(data)]
    by_message: dict[tuple[int, int], dict[int, str]] = {}
    for (segment, message, part), text in cuts.items():
        by_message.setdefault((segment, message), {})[part] = text
    for (segment, index), texts in by_message.items():
        message = segments[segment][index]
        parts: list[Part] = [
            with_content(part, texts[number]) if number in texts and isinstance(part, ToolReturnPart) else part
            for number, part in enumerate(message.parts)
        ]
        segments[segment][index] = rewrap(message, parts)
    history, pre_handoff, new = segments
    return data.clone(
        input_history=data.input_history if isinstance(data.input_history, str) else tuple(history),
        pre_handoff_items=tuple(pre_handoff),
        new_items=tuple(new),
    )
