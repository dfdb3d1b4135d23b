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
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.tools import RunContext
from typing_extensions import TypeIs

from ..._typing import is_int, is_list, is_mapping
from .._actions._unit import with_notes
from .._events import AGED_PREFIX, VALUE_PREFIX, OverflowAged, aged_in_run, file_handles, report_aged, warn
from .._query_tools._names import QUERY_TOOL_KINDS, offered_names
from .._rendering._markers import kept_for
from .._rendering._text_wrapper import wrapped_text

if TYPE_CHECKING:
    from .._media._aging import ImageAging, OffLoop

__all__ = (
    'AGED_PREFIX',
    'AgedBatch',
    'Aging',
    'AgingTools',
    'DueReturn',
    'Place',
    'TokenCounts',
    'age_history',
    'age_items',
    'age_request',
    'aged_stub',
    'due_returns',
    'is_aged',
    'query_stub',
    'report_batch',
    'savings_of',
)

_HANDLE_FOR_ESTIMATE = 'k3x9m2p7qd'
"""A handle as long as the built-in stores' short ones, to count a stub before its handle is known."""


@dataclass(frozen=True)
class Aging:
    """Move old tool returns out of the context, losslessly: each becomes a stub naming a handle to read it back by.

    A return is due once `after_turns` model responses have followed it and it is at least `min_tokens` large.
    Due returns are aged together, and only when together they save at least `batch_tokens` (or `batch_share` of a
    known context window): each batch changes the requests from its first stub on, so a provider's prompt cache is
    rebuilt from there once per batch, not on every request. A spilled return is not written again: its stub names
    the spill's handle. [`OverflowReport.prefix_breaks`][pydantic_ai_harness.overflowing_tool_output.OverflowReport]
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

    batch_share: float | None = 0.1
    """With a known context window, a batch also goes once it saves this share of the window, so a small window
    never waits for `batch_tokens` (an 8k-token model ages every 800 tokens). `None`: `batch_tokens` alone."""

    timeout: float | None = None
    """Seconds each store call of aging (a write, or the check that a spill's payload is still there) may take before
    the return stays where it is. `None`: the capability's `Spill` timeout (the shortest, when bands differ), else 30."""

    def __post_init__(self) -> None:
        for name, minimum in (('after_turns', 1), ('min_tokens', 1), ('batch_tokens', 0)):
            value: object = getattr(self, name)
            if not is_int(value) or value < minimum:
                raise ValueError(f'aging.{name} must be an int of at least {minimum}, got {value!r}')
        share = self.batch_share
        if share is not None and not (type(share) in (int, float) and 0 < share <= 1):  # bool and NaN refused too
            raise ValueError(f'aging.batch_share must be a number in (0, 1] or None, got {share!r}')
        timeout = self.timeout
        if timeout is not None and not (type(timeout) in (int, float) and 0 < timeout < float('inf')):
            raise ValueError(f'aging.timeout must be a positive number of seconds or None, got {timeout!r}')

    def batch_threshold(self, window: int | None) -> int:
        """The tokens a batch must save, under a context window of `window` tokens (`None`: unknown)."""
        if self.batch_share is None or not window:
            return self.batch_tokens
        return min(self.batch_tokens, int(window * self.batch_share))


@dataclass(frozen=True)
class Place:
    """What a stub says of where its handle lives."""

    expires_after: timedelta | None = None
    """How long the store keeps the payload, when it deletes old ones."""

    path: str | None = None
    """The file in the run's workspace that holds it (the handle itself), when it went there."""

    query_tools: bool = True
    """Whether the query tools are offered for it (a workspace spill may leave them to the agent's own tools)."""


class TokenCounts:
    """Token counts of old returns by identity, so a return that stays in the context is counted once, not on every
    request (a tokenizer over a large return is the costliest step of aging). An entry lives exactly as long as its
    return: it holds no return alive and goes when the return is collected, so a conversation of any length is
    counted once and the table never outgrows the returns in memory.
    """

    def __init__(self) -> None:
        self._counts: dict[int, tuple[weakref.ref[ToolReturnPart], int]] = {}

    def known(self, part: ToolReturnPart) -> int | None:
        """`part`'s count, if it was counted."""
        entry = self._counts.get(id(part))
        return entry[1] if entry is not None and entry[0]() is part else None

    def add(self, part: ToolReturnPart, tokens: int) -> None:
        """Remember `part`'s count until `part` is collected."""
        key, counts = id(part), self._counts

        def forget(ref: weakref.ref[ToolReturnPart]) -> None:
            entry = counts.get(key)
            if entry is not None and entry[0] is ref:
                del counts[key]

        counts[key] = (weakref.ref(part, forget), tokens)

    def __len__(self) -> int:
        return len(self._counts)


@dataclass(frozen=True)
class DueReturn:
    """A tool return old and large enough to age, and where it is."""

    message: ModelRequest
    """The request that carries it."""

    index: int
    """Its place among the request's parts."""

    part: ToolReturnPart
    """The return itself."""

    tokens: int
    """Tokens of what the model is sent for it."""

    handle: str | None
    """The handle its metadata says it is stored under (a spill); `None` if it must be written. Checked against the
    store before a stub names it (`AgingTools.stored_size`)."""


@dataclass(frozen=True)
class AgingTools:
    """What aging needs from the capability and the run."""

    count: Callable[[str], int]
    """Tokens of a text (the capability's tokenizer, or about four characters per token)."""

    count_many: Callable[[list[str]], Awaitable[list[int]]]
    """Tokens of several texts, counted in a worker thread when together they are large."""

    counts: TokenCounts
    """The capability's token counts of old returns, so one is not counted again on every request."""

    selected: Callable[[str], Awaitable[bool]]
    """Whether the named tool's returns may be aged (the `tool_filter`, and not a tool with `per_tool={name: []}`)."""

    write: Callable[[str, bytes, float], Awaitable[tuple[str | None, str]]]
    """Store `(key, data, timeout)`, through the durable store-write operation: `(handle, '')` or `(None, reason)`."""

    place: Callable[[str], Place]
    """Where a handle lives: how long its store keeps it, and whether it is a file of the run's workspace."""

    stored_size: Callable[[str], Awaitable[tuple[int | None, bool]]]
    """The bytes the store the query tools read holds under a handle (`None`: nothing there), and whether the store
    answered within `timeout` at all (a durable operation under a durable engine)."""

    timeout: float
    """Seconds each store call may take (`Aging.timeout`, else the capability's `Spill` timeout)."""

    is_query: Callable[[str], bool]
    """Whether the named tool is one of the query tools: their answers age without a write (the call gets them back)."""

    window: int | None
    """The model's context window in tokens, when known (`Aging.batch_share`)."""

    run_id: str | None
    """The run doing the aging (keys of returns whose message has no run id, and the `_run` note)."""

    step: int
    """The request being prepared (the `_step` note)."""

    images: ImageAging | None = None
    """How returns holding images age (`ImageBand`); `None`: they stay where they are."""

    off_loop: OffLoop | None = None
    """Runs a CPU-bound step of the run off the event loop when large (the digests of images aging moves)."""


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

    failure: str
    """Why the batch stopped early (a write failed), or `''`: that return and the rest of the batch stay."""


def is_aged(part: ToolReturnPart) -> bool:
    """Whether `part` already is a stub."""
    return is_mapping(part.metadata) and f'{AGED_PREFIX}_step' in part.metadata


def _stored_handle(part: ToolReturnPart) -> str | None:
    """The handle a spilled return's metadata names: its preview is a view of that payload, so nothing is lost, once
    `_verified_size` has checked it. A summary that kept its original is written anew: the model read the summary. So
    is a list whose documents were stored one by one: its handle holds the first document alone, not the list.
    """
    if not is_mapping(part.metadata) or part.metadata.get(f'{VALUE_PREFIX}_action') != 'spill':
        return None
    if not isinstance(part.content, str):
        return None
    handle = part.metadata.get(f'{VALUE_PREFIX}_handle')
    return handle if isinstance(handle, str) and handle else None


def _own_spill(item: DueReturn, run_id: str | None) -> bool:
    """Whether the spill metadata of `item` describes this very return: its key names this call (and the run of its
    message, when that has one). Metadata is the application's and a tool's to set: an `overflow_handle` copied from
    another history, or set by a tool, names a payload this return is not.
    """
    metadata = item.part.metadata
    key = metadata.get(f'{VALUE_PREFIX}_key') if is_mapping(metadata) else None
    if not isinstance(key, str):
        return False
    run, _, rest = key.partition('/')
    call = rest.partition('/')[0]
    owner = item.message.run_id or run_id
    return call == item.part.tool_call_id and (owner is None or run == owner)


async def _verified_size(item: DueReturn, tools: AgingTools) -> tuple[int | None, bool]:
    """The bytes stored under `item.handle` when it is this return's spill and still held where the query tools read
    (not expired, not another worker's store), else `None` (the text the model saw is then written anew); and
    whether the store answered the check.
    """
    if item.handle is None or not _own_spill(item, tools.run_id):
        return None, True
    size, answered = await tools.stored_size(item.handle)
    recorded = item.part.metadata.get(f'{VALUE_PREFIX}_bytes') if is_mapping(item.part.metadata) else None
    verified = size if is_int(size) and (not is_int(recorded) or recorded == size) else None
    return verified, answered


def aged_stub(tool_name: str, tokens: int, handle: str, place: Place | None = None) -> str:
    """The text a model reads in place of an aged return: what left, how large, and how to get it back."""
    place = place or Place()
    saved = (
        f'[Moved out of context: the output of `{tool_name}` (~{tokens:,} tokens). '
        f"Saved in full{kept_for(place.expires_after)} under handle '{handle}'"
    )
    names = offered_names()
    if place.path is None:
        return f'{saved}; {names.read} or {names.grep} gets it back.]'
    if place.query_tools:
        return f"{saved}; {names.read} or {names.grep} gets it back, or your own file tools (it is the file's path).]"
    return f"{saved}: that is the file's path in your workspace; your own file tools read it.]"


def _ages(part: object, images: ImageAging | None, message: ModelRequest, index: int) -> TypeIs[ToolReturnPart]:
    """Whether a part may age at all: a plain successful tool return, without files (but images, with `images`), not
    already a stub, and with metadata that can hold the handle (a typed return, such as a tool search's, is read back
    by pydantic-ai itself).
    """
    if type(part) is not ToolReturnPart or part.outcome != 'success':
        return False
    if part.tool_kind is not None and part.tool_kind not in QUERY_TOOL_KINDS:  # a typed return core reads back
        return False
    if part.metadata is not None and not is_mapping(part.metadata):
        return False  # the application's own metadata object: no room to record the handle the model may read
    if is_aged(part) or _failed(part):
        return False
    return not part.files or (images is not None and images.holds(part, message, index))


def _failed(part: ToolReturnPart) -> bool:
    return is_mapping(part.metadata) and f'{AGED_PREFIX}_failed' in part.metadata


def query_stub(tool_name: str, tokens: int) -> str:
    """The text in place of an aged answer of a query tool: what it read stays stored, so the call gets it back."""
    return (
        f'[Moved out of context: this `{tool_name}` answer (~{tokens:,} tokens). '
        'Calling it again with the same arguments gets it back.]'
    )


def _stored_form(part: ToolReturnPart, sent: str) -> bytes:
    """What an aged return is stored as: the text the model was sent, or the text it only wraps (`_text_wrapper`:
    `{'content': '<text>'}`), or the texts of a list whose documents were stored one by one, so that its handle is
    read and grepped as the text's own lines.
    """
    content = part.content
    if _document_texts(part) and is_list(content) and all(isinstance(item, str) for item in content):
        return '\n\n'.join(content).encode('utf-8', 'surrogatepass')  # its texts, each read as lines
    wrapped = wrapped_text(content)
    return (sent if wrapped is None else wrapped[1]).encode('utf-8', 'surrogatepass')


def _document_texts(part: ToolReturnPart) -> bool:
    """Whether `part` is a list whose documents were stored one by one (each is now its header and text)."""
    return is_mapping(part.metadata) and bool(file_handles(part.metadata, VALUE_PREFIX))


def _stub(item: DueReturn, tools: AgingTools, handle: str | None = None, stored_bytes: int = 0) -> str:
    """The stub for `item`; without `handle`, the one counted before its write (a query answer needs none).

    A reused spill's stub states what its handle holds (about a token per four of its `stored_bytes`), not the preview.
    """
    if tools.is_query(item.part.tool_name):
        return query_stub(item.part.tool_name, item.tokens)
    if handle is None:  # only to count a stub before its write: a handle as long as the built-in stores' ones
        return aged_stub(item.part.tool_name, item.tokens, item.handle or _HANDLE_FOR_ESTIMATE)
    held = max(item.tokens, stored_bytes // 4)
    return aged_stub(item.part.tool_name, held, handle, tools.place(handle))


async def due_returns(messages: Sequence[ModelMessage], aging: Aging, tools: AgingTools) -> list[DueReturn]:
    """The tool returns of `messages` that `aging` would move out, oldest first.

    A return's age is the number of model responses after its request. Only returns of selected tools count;
    failed or denied returns, typed returns, returns that carry files (images, documents), returns already aged
    or whose write failed, and returns whose metadata is an application object (no room for the handle) stay.
    """
    candidates: list[tuple[ModelRequest, int, ToolReturnPart]] = []
    selected: dict[str, bool] = {}
    responses_after = 0
    images = tools.images
    keep_newest = images.keep_newest if images is not None else None
    newer_images = 0  # returns holding images seen so far, newest first (`ImageBand.keep_newest`)
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            responses_after += 1
            continue
        old = responses_after >= aging.after_turns
        if not old and (keep_newest is None or responses_after < 1):
            continue  # (a return the model has not seen yet never ages)
        for index in range(len(message.parts) - 1, -1, -1):
            part = message.parts[index]
            holds = images is not None and type(part) is ToolReturnPart and images.holds(part, message, index)
            newer_images += holds
            if not old and not (holds and keep_newest is not None and newer_images > keep_newest):
                continue
            if not _ages(part, images, message, index):
                continue
            if part.tool_name not in selected:
                selected[part.tool_name] = await tools.selected(part.tool_name)
            if selected[part.tool_name]:
                candidates.append((message, index, part))
    await _count_new(candidates, aging, tools)
    due = [
        DueReturn(message, index, part, count, _stored_handle(part))
        for message, index, part in reversed(candidates)
        if (count := tools.counts.known(part) or 0) >= aging.min_tokens
    ]
    return due


async def _count_new(
    candidates: Sequence[tuple[ModelRequest, int, ToolReturnPart]], aging: Aging, tools: AgingTools
) -> None:
    """Count the returns not counted yet, all at once (in a worker thread when together they are large)."""
    new: list[ToolReturnPart] = []
    texts: list[str] = []
    for message, index, part in candidates:
        if tools.counts.known(part) is not None:
            continue
        if tools.images is not None and tools.images.holds(part, message, index):
            # A few short texts and image headers (its `ToolReturn.content`'s too, found in its request).
            tools.counts.add(part, tools.images.tokens(part, tools.count, message, index))
            continue
        text = part.model_response_str()
        if 4 * len(text) < aging.min_tokens:  # a token covers at least one byte, a character at most four
            tools.counts.add(part, 0)
            continue
        new.append(part)
        texts.append(text)
    if new:
        for part, tokens in zip(new, await tools.count_many(texts), strict=True):
            tools.counts.add(part, tokens)


def savings_of(due: Sequence[DueReturn], tools: AgingTools) -> list[int]:
    """What aging each return saves: its tokens less its stub's. Stubs of one tool differ only in digits, so each
    shape is counted once, not once per return (12,000 due returns are a handful of tokenizer calls).
    """
    stub_tokens: dict[tuple[str, int, bool], int] = {}
    savings: list[int] = []
    for item in due:
        shape = (item.part.tool_name, len(f'{item.tokens:,}'), item.handle is None)
        if shape not in stub_tokens:
            stub_tokens[shape] = tools.count(_stub(item, tools))
        savings.append(item.tokens - stub_tokens[shape])
    return savings


async def age_history(messages: Sequence[ModelMessage], aging: Aging, tools: AgingTools) -> AgedBatch | None:
    """Age every due return of `messages` when together they save `aging.batch_tokens`; `None` when nothing changed."""
    candidates = await due_returns(messages, aging, tools)
    savings = list(zip(candidates, savings_of(candidates, tools), strict=True))
    due = [item for item, saving in savings if saving > 0]
    if not due or sum(saving for _, saving in savings if saving > 0) < aging.batch_threshold(tools.window):
        return None
    return await age_items(due, tools)


async def age_items(due: Sequence[DueReturn], tools: AgingTools) -> AgedBatch:
    """Replace each of `due` by its stub, writing what is not stored yet.

    Returns are stored one after another, in history order, so a durable engine records the writes in the order
    a replay makes them. The first write that fails ends the batch: that return and the rest of the batch stay in
    the context for good (marked `overflow_aged_failed`, which the model is not sent), so a store that is down
    costs one write timeout per batch, not one per return and request. Nothing is ever dropped.
    """
    new_parts: dict[int, list[Any]] = {}
    checking = True
    handles: list[str] = []
    failure = ''
    aged = tokens_before = tokens_after = 0
    for item in due:
        parts = new_parts.setdefault(id(item.message), list(item.message.parts))
        if failure:
            parts[item.index] = _marked_failed(item.part, failure)
            continue
        if tools.images is not None and tools.images.holds(item.part, item.message, item.index):
            replaced = await _age_images(item, tools, tools.images)
            if isinstance(replaced, str):
                failure = f'`{item.part.tool_name}` ({item.part.tool_call_id}): {replaced}'
                parts[item.index] = _marked_failed(item.part, failure)
                continue
            parts[item.index], item_handles, prompt = replaced
            if prompt is not None:  # its `ToolReturn.content`, sent as a prompt part of the same request
                parts[prompt[0]] = prompt[1]
            handles.extend(item_handles)
            aged += 1
            tokens_before += item.tokens
            tokens_after += tools.count(parts[item.index].model_response_str())
            continue
        text = item.part.model_response_str()
        stored: int | None = None
        if checking:
            # A store that did not answer one check is not asked again in this batch: one timeout, not one per spill.
            stored, checking = await _verified_size(item, tools)
        handle, key = (item.handle, None) if stored is not None else (None, None)
        if handle is None and not tools.is_query(item.part.tool_name):
            run_id = item.message.run_id or tools.run_id or 'run'
            key = f'{run_id}/{item.part.tool_call_id}/aged'
            handle, reason = await tools.write(key, _stored_form(item.part, text), tools.timeout)
            if handle is None:
                failure = f'`{item.part.tool_name}` ({item.part.tool_call_id}): {reason}'
                parts[item.index] = _marked_failed(item.part, failure)
                continue
        stub = _stub(item, tools, handle, stored or 0)
        notes: dict[str, Any] = {
            f'{AGED_PREFIX}_size_before': len(text),
            f'{AGED_PREFIX}_size_after': len(stub),
            f'{AGED_PREFIX}_run': tools.run_id,
            f'{AGED_PREFIX}_step': tools.step,
        }
        if handle is not None:
            notes[f'{AGED_PREFIX}_handle'] = handle
            handles.append(handle)
        if key is not None:
            notes[f'{AGED_PREFIX}_key'] = key
        parts[item.index] = dataclasses.replace(item.part, content=stub, metadata=with_notes(item.part.metadata, notes))
        aged += 1
        tokens_before += item.tokens
        tokens_after += tools.count(stub)
    replacements = {
        id(item.message): dataclasses.replace(item.message, parts=new_parts[id(item.message)]) for item in due
    }
    return AgedBatch(replacements, aged, tokens_before, tokens_after, tuple(handles), failure)


async def _age_images(
    item: DueReturn, tools: AgingTools, images: ImageAging
) -> tuple[ToolReturnPart, list[str], tuple[int, UserPromptPart] | None] | str:
    """`item`, a return holding images, as its stub (`_media._aging`), the handles it names, and the prompt part of
    its `ToolReturn.content` with its images replaced (with its place in the request); or why not.
    """
    from .._media._aging import aged_image_notes

    run_id = item.message.run_id or tools.run_id or 'run'
    key = f'{run_id}/{item.part.tool_call_id}/aged'
    aged = await images.age(item.part, key, tools.write, tools.timeout, item.message, item.index, tools.off_loop)
    if isinstance(aged, str):
        return aged
    notes: dict[str, Any] = {
        f'{AGED_PREFIX}_size_before': aged.text_chars,
        f'{AGED_PREFIX}_size_after': len(aged.stub) if aged.stub is not None else aged.text_chars,
        f'{AGED_PREFIX}_run': tools.run_id,
        f'{AGED_PREFIX}_step': tools.step,
        **aged_image_notes(aged),
    }
    if aged.text_handle is not None:
        notes[f'{AGED_PREFIX}_handle'] = aged.text_handle
        notes[f'{AGED_PREFIX}_key'] = key
    metadata = with_notes(item.part.metadata, notes)
    handles = [*aged.image_handles, *([aged.text_handle] if aged.text_handle is not None else [])]
    content = aged.stub if aged.stub is not None else item.part.content  # (a caption of its content's images stays)
    return dataclasses.replace(item.part, content=content, metadata=metadata), handles, aged.prompt


def _marked_failed(part: ToolReturnPart, reason: str) -> ToolReturnPart:
    """`part` as it is, its metadata saying why it stays: it is never tried again (metadata is not sent)."""
    return dataclasses.replace(part, metadata=with_notes(part.metadata, {f'{AGED_PREFIX}_failed': reason}))


async def age_request(
    ctx: RunContext[Any], messages: Sequence[ModelMessage], aging: Aging, tools: AgingTools
) -> Mapping[int, ModelRequest]:
    """Age the request about to be sent: the replacement messages by `id` of the old ones (empty: nothing aged).

    A batch is reported as an `OverflowAged` event; a return whose write failed is a warning and stays.
    """
    batch = await age_history(messages, aging, tools)
    if batch is None:
        return {}
    await report_batch(ctx, messages, batch, tools)
    return batch.replacements


async def report_batch(
    ctx: RunContext[Any], messages: Sequence[ModelMessage], batch: AgedBatch, tools: AgingTools
) -> None:
    """Report an aged batch of `messages`: an `OverflowAged` event, and a warning when a write failed."""
    if batch.failure:
        warn(
            'Aging could not store an old tool return; it and the rest of its batch stay in the context: '
            f'{batch.failure}'
        )
    if batch.aged:
        aged_messages = [batch.replacements.get(id(message), message) for message in messages]
        event = OverflowAged(
            aged=batch.aged,
            tokens_before=batch.tokens_before,
            tokens_after=batch.tokens_after,
            handles=list(batch.handles),
            prefix_breaks=aged_in_run(aged_messages, tools.run_id).batches,
        )
        await report_aged(ctx, event)
