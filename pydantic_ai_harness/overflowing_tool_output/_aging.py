"""Lossless aging: old tool returns leave the context as short stubs naming a handle the model reads them back by.

Pure planning (which returns are due, whether the batch is worth a broken prompt-cache prefix, the stub) is kept
apart from the one async step that stores the due returns and builds the replacement messages; the capability
wires it into `before_model_request`.

Providers cache a request's unchanged prefix, and every aged return changes the requests after it from its place
on. So returns are aged in batches: nothing happens until the returns that are due would together save at least
`Aging.batch_tokens`, and then all of them go at once. The replacement is kept in the run's history, so every
later request carries the same stubs (one broken prefix per batch, not one per request), and a replay of the same
history makes the same decisions (the writes go through the durable store-write operation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.tools import RunContext

from .._typing import is_int, is_mapping
from ._events import AGED_PREFIX, VALUE_PREFIX, OverflowAged, aged_in_run, report_aged, warn
from ._unit import with_notes

__all__ = (
    'AGED_PREFIX',
    'AgedBatch',
    'Aging',
    'AgingTools',
    'DueReturn',
    'age_history',
    'age_request',
    'aged_stub',
    'due_returns',
    'is_aged',
)

_WRITE_TIMEOUT = 30.0
"""Seconds one stub's store write may take before the return is left in the context."""

_HANDLE_FOR_ESTIMATE = 'k3x9m2p7qd'
"""A handle as long as the built-in stores' short ones, to count a stub before its handle is known."""


@dataclass(frozen=True)
class Aging:
    """Move old tool returns out of the context, losslessly: each becomes a stub naming a handle to read it back by.

    A return is due once `after_turns` model responses have followed it and it is at least `min_tokens` large.
    Due returns are aged together, and only when together they save at least `batch_tokens`: each batch changes
    the requests from its first stub on, so a provider's prompt cache is rebuilt from there once per batch, not on
    every request. A return the capability already stored (a spill) is not written again: its stub names the
    handle it has. [`OverflowReport.prefix_breaks`][pydantic_ai_harness.overflowing_tool_output.OverflowReport]
    and the run's `OverflowAged` events count the batches.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import Aging, OverflowingToolOutput

    capability = OverflowingToolOutput(aging=Aging(after_turns=4, min_tokens=200, batch_tokens=8_000))
    ```
    """

    after_turns: int = 4
    """Model responses that must follow a return before it may leave the context; the last turns are never aged."""

    min_tokens: int = 200
    """Smaller returns stay where they are: their stub would save too little to pay for the later read."""

    batch_tokens: int = 8_000
    """Age only when the due returns together save at least this many tokens; then age every one of them."""

    def __post_init__(self) -> None:
        for name, minimum in (('after_turns', 1), ('min_tokens', 1), ('batch_tokens', 0)):
            value: object = getattr(self, name)
            if not is_int(value) or value < minimum:
                raise ValueError(f'aging.{name} must be an int of at least {minimum}, got {value!r}')


@dataclass(frozen=True)
class DueReturn:
    """A tool return old and large enough to age, and where it is."""

    message: ModelRequest
    """The request that carries it."""

    index: int
    """Its place among the request's parts."""

    part: ToolReturnPart
    """The return itself."""

    text: str
    """What the model is sent for it."""

    tokens: int
    """Tokens of `text`."""

    handle: str | None
    """The handle it is already stored under (a spill, a summary's kept original); `None` if it must be written."""


@dataclass(frozen=True)
class AgingTools:
    """What aging needs from the capability and the run."""

    count: Callable[[str], int]
    """Tokens of a text (the capability's tokenizer, or about four characters per token)."""

    selected: Callable[[str], Awaitable[bool]]
    """Whether the named tool's returns may be aged (the `tool_filter`, and not a tool with `per_tool={name: []}`)."""

    write: Callable[[str, bytes, float], Awaitable[tuple[str | None, str]]]
    """Store `(key, data, timeout)`, through the durable store-write operation: `(handle, '')` or `(None, reason)`."""

    run_id: str | None
    """The run doing the aging (keys of returns whose message has no run id, and the `_run` note)."""

    step: int
    """The request being prepared (the `_step` note)."""


@dataclass(frozen=True)
class AgedBatch:
    """One batch of aged returns: the replacement messages, and what the batch did."""

    replacements: Mapping[int, ModelRequest]
    """`id(old message)` -> the message with its due returns replaced by stubs."""

    aged: int
    """How many returns became stubs."""

    tokens_before: int
    """Their tokens before."""

    tokens_after: int
    """The tokens of their stubs."""

    handles: tuple[str, ...]
    """The handles the stubs name."""

    failures: tuple[str, ...]
    """Why a due return stayed (its write failed), one reason each."""


def is_aged(part: ToolReturnPart) -> bool:
    """Whether `part` already is a stub."""
    return is_mapping(part.metadata) and f'{AGED_PREFIX}_handle' in part.metadata


def _stored_handle(part: ToolReturnPart) -> str | None:
    """The handle the return's value is already stored under, when the capability stored it."""
    if not is_mapping(part.metadata):
        return None
    handle = part.metadata.get(f'{VALUE_PREFIX}_handle')
    return handle if isinstance(handle, str) and handle else None


def aged_stub(tool_name: str, tokens: int, handle: str) -> str:
    """The text a model reads in place of an aged return: what left, how large, and how to get it back."""
    return (
        f'[Moved out of context: the output of `{tool_name}` (~{tokens:,} tokens). '
        f"Saved in full under handle '{handle}'; read_tool_result or grep_tool_result gets it back.]"
    )


def due_returns(messages: Sequence[ModelMessage], aging: Aging, count: Callable[[str], int]) -> list[DueReturn]:
    """The tool returns of `messages` that `aging` would move out, oldest first (the tool filter not applied).

    A return's age is the number of model responses after its request. Failed or denied returns, returns that
    carry files (images, documents), returns already aged and returns whose metadata is an application object
    (there is no room in it for the handle) stay.
    """
    due: list[DueReturn] = []
    responses_after = 0
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            responses_after += 1
            continue
        if responses_after < aging.after_turns:
            continue
        for index in range(len(message.parts) - 1, -1, -1):
            part = message.parts[index]
            if not isinstance(part, ToolReturnPart) or part.outcome != 'success' or is_aged(part) or part.files:
                continue
            if part.metadata is not None and not is_mapping(part.metadata):
                continue  # the application's own metadata object: no room to record the handle the model may read
            text = part.model_response_str()
            if len(text) < aging.min_tokens:
                continue  # no tokenizer counts more tokens than characters here: too small without counting
            tokens = count(text)
            if tokens >= aging.min_tokens:
                due.append(DueReturn(message, index, part, text, tokens, _stored_handle(part)))
    due.reverse()
    return due


def _saving(item: DueReturn, count: Callable[[str], int]) -> int:
    return item.tokens - count(aged_stub(item.part.tool_name, item.tokens, item.handle or _HANDLE_FOR_ESTIMATE))


async def age_history(messages: Sequence[ModelMessage], aging: Aging, tools: AgingTools) -> AgedBatch | None:
    """Age every due return of `messages` when together they save `aging.batch_tokens`; `None` when nothing aged.

    Returns are stored one after another, in history order, so a durable engine records the writes in the order
    a replay makes them. A return whose write fails stays as it is (nothing is ever dropped); the others age.
    """
    candidates = [
        item for item in due_returns(messages, aging, tools.count) if await tools.selected(item.part.tool_name)
    ]
    due = [item for item in candidates if _saving(item, tools.count) > 0]
    if not due or sum(_saving(item, tools.count) for item in due) < aging.batch_tokens:
        return None
    new_parts: dict[int, list[Any]] = {}
    handles: list[str] = []
    failures: list[str] = []
    tokens_before = tokens_after = 0
    for item in due:
        handle, key = item.handle, None
        if handle is None:
            run_id = item.message.run_id or tools.run_id or 'run'
            key = f'{run_id}/{item.part.tool_call_id}/aged'
            handle, reason = await tools.write(key, item.text.encode('utf-8', 'surrogatepass'), _WRITE_TIMEOUT)
            if handle is None:
                failures.append(f'`{item.part.tool_name}` ({item.part.tool_call_id}): {reason}')
                continue
        stub = aged_stub(item.part.tool_name, item.tokens, handle)
        notes: dict[str, Any] = {
            f'{AGED_PREFIX}_handle': handle,
            f'{AGED_PREFIX}_size_before': len(item.text),
            f'{AGED_PREFIX}_size_after': len(stub),
            f'{AGED_PREFIX}_run': tools.run_id,
            f'{AGED_PREFIX}_step': tools.step,
        }
        if key is not None:
            notes[f'{AGED_PREFIX}_key'] = key
        parts = new_parts.setdefault(id(item.message), list(item.message.parts))
        parts[item.index] = dataclasses.replace(item.part, content=stub, metadata=with_notes(item.part.metadata, notes))
        handles.append(handle)
        tokens_before += item.tokens
        tokens_after += tools.count(stub)
    if not handles:
        return None if not failures else AgedBatch({}, 0, 0, 0, (), tuple(failures))
    replacements = {
        id(item.message): dataclasses.replace(item.message, parts=new_parts[id(item.message)])
        for item in due
        if id(item.message) in new_parts
    }
    return AgedBatch(replacements, len(handles), tokens_before, tokens_after, tuple(handles), tuple(failures))


async def age_request(
    ctx: RunContext[Any], messages: Sequence[ModelMessage], aging: Aging, tools: AgingTools
) -> Mapping[int, ModelRequest]:
    """Age the request about to be sent: the replacement messages by `id` of the old ones (empty: nothing aged).

    A batch is reported as an `OverflowAged` event; a return whose write failed is a warning and stays.
    """
    batch = await age_history(messages, aging, tools)
    if batch is None:
        return {}
    if batch.failures:
        warn(f'Aging left {len(batch.failures)} old tool returns in the context: ' + '; '.join(batch.failures[:3]))
    if not batch.aged:
        return {}
    aged_messages = [batch.replacements.get(id(message), message) for message in messages]
    event = OverflowAged(
        aged=batch.aged,
        tokens_before=batch.tokens_before,
        tokens_after=batch.tokens_after,
        handles=list(batch.handles),
        prefix_breaks=aged_in_run(aged_messages, tools.run_id)[1],
    )
    await report_aged(ctx, event)
    return batch.replacements
