"""`Spill`: store the full payload, show the model a preview and a handle to read the rest back by.

Four paths, by what the payload is: binary data (stored as it is); a text short enough to show whole (nothing
stored); a structured value or JSON text (stored in its pretty layout, streamed piece by piece when large); a
large text (encoded, written and scanned in one pass when the store can take a stream). The important-lines scan
of the preview runs beside the write, in worker threads, so a 100 MB log costs about what writing it does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import anyio

from ..._gil import hand_over
from ..._typing import is_instance, is_int
from .._offload import OFF_LOOP_BYTES, in_worker, off_loop
from .._rendering._important_lines import ImportantLine, ImportantLinesScan
from .._rendering._json_layout import JsonLayout
from .._rendering._markers import SpillSummary
from .._rendering._preview import binary_preview, count_lines, text_preview
from .._rendering._render import Rendered, stored_form, stored_layout
from .._rendering._shape_sketch import shape_sketch
from ..stores import OverflowStore
from ..stores._protocol import StreamedPayload, StreamWritableStore
from ._action import DEFAULT_PREVIEW_CHARS, MIN_TRUNCATE_CHARS, Action, check_seconds, check_then
from ._spill_stream import Relay
from ._truncate import Truncate
from ._unit import ActionContext, Reduced

__all__ = ('Spill', 'spill', 'store_write')

_T = TypeVar('_T')


@dataclass(frozen=True)
class Spill(Action):
    """Store the full payload and show the model a preview and a handle to page back with. Lossless.

    The model reads the stored payload with the `read_tool_result` and `grep_tool_result` tools the
    capability registers. When the store cannot take the write (an error or a timeout), `then` runs:
    by default a [`Truncate`][pydantic_ai_harness.overflowing_tool_output.Truncate], so a failing store
    never lets an oversized payload through.
    """

    preview_chars: int = DEFAULT_PREVIEW_CHARS
    """The character budget of the preview the model sees instead of the payload.

    The header (sizes, handle) and the paging guidance always come first, about 450 characters; the budget left after
    them goes to the lines that look important, then the first and last lines. Below about 600 there is little room
    for lines.
    """

    timeout: float = 30.0
    """Seconds a store write may take before it counts as failed and `then` runs."""

    then: Action | None = field(default_factory=Truncate)
    """What to do when the store cannot take the write. `None` lets the original through (with a warning)."""

    def __post_init__(self) -> None:
        if not is_int(self.preview_chars):
            raise TypeError(f'Spill.preview_chars must be an int, got {type(self.preview_chars).__name__}')
        if self.preview_chars < MIN_TRUNCATE_CHARS:
            raise ValueError(f'Spill.preview_chars must be at least {MIN_TRUNCATE_CHARS}, got {self.preview_chars}')
        check_seconds(self.timeout, 'Spill.timeout')
        check_then(self.then, 'Spill')

    @property
    def writes_store(self) -> bool:
        """A spill stores the payload."""
        return True

    @property
    def spill_timeout(self) -> float | None:
        """This spill's `timeout`."""
        return self.timeout

    async def reduce(self, unit: ActionContext) -> tuple[Reduced | None, str]:
        """Store the unit and show its preview."""
        return await spill(self, unit)


async def spill(action: Spill, unit: ActionContext) -> tuple[Reduced | None, str]:
    """Store `unit` and return its preview, or `None` and why it could not be stored."""
    rendered = unit.rendered
    if rendered.data is not None:
        handle, reason = await unit.write(unit.key, rendered.data, action.timeout)
        if handle is None:
            return None, reason
        # Bytes that are text get a text's preview (its lines, scanned): off the loop when large.
        build = partial(
            binary_preview,
            unit.call.tool_name,
            handle,
            rendered.data,
            rendered.media_type,
            budget=action.preview_chars,
            **unit.workspace_file(handle),
        )
        preview = await off_loop(unit.run, build, large=len(rendered.data) > OFF_LOOP_BYTES)
        return Reduced(preview, 'spill', handle, len(rendered.data)), ''
    if rendered.size_chars <= action.preview_chars:
        # The preview would hold all of it plus its header, so it cannot be smaller: store nothing, and hand
        # back the text itself, which the caller recognises as "not smaller" and leaves as is.
        return Reduced(rendered.text, 'spill'), ''
    large = rendered.size_chars > OFF_LOOP_BYTES
    # A structured value's layout is built already; a text that is JSON is parsed and laid out here.
    layout = (
        rendered.layout
        if rendered.kind == 'structured'
        else await off_loop(unit.run, partial(stored_layout, rendered), large=large)
    )
    if layout is not None:
        return await _spill_layout(action, unit, layout)
    if large and not unit.run.in_durable_context:
        # Into the run's workspace when one is attached (a plain write), else the configured store, streamed
        # when it can be. (Durable workflow code may not touch the workspace: there the durable write decides.)
        store = unit.run_store()
        if isinstance(store, StreamWritableStore):
            return await _spill_streamed(store, action, unit)
    pageable, data, lines = await off_loop(unit.run, partial(_stored_with_lines, rendered), large=large)
    scan = ImportantLinesScan()
    handle, reason = await _write_scanned(
        unit, data, action.timeout, scan, beside=large and not unit.run.in_durable_context
    )
    if handle is None:
        return None, reason
    summary = _summary(unit, handle, lines=lines, nbytes=len(data))
    return await _preview(unit, action, summary, pageable, scan.result()), ''


async def store_write(store: OverflowStore, key: str, data: bytes, timeout: float) -> tuple[str | None, str]:
    """`store.write`, bounded by `timeout`. Returns `(handle, '')` or `(None, reason)`."""
    handle, reason = await _bounded(lambda: store.write(key, data), timeout)
    if reason:
        return None, reason
    if not isinstance(handle, str) or not handle:
        return None, f'the store returned {handle!r} instead of a handle string'
    return handle, ''


async def _store_write_stream(
    store: StreamWritableStore, key: str, pieces: Iterable[bytes], timeout: float
) -> tuple[StreamedPayload | None, str]:
    """`store.write_stream`, bounded by `timeout`. Returns `(written, '')` or `(None, reason)`."""
    written, reason = await _bounded(lambda: store.write_stream(key, pieces), timeout)
    if reason:
        return None, reason
    if not isinstance(written, StreamedPayload) or not is_instance(written.handle, str) or not written.handle:
        return None, f'the store returned {written!r} instead of a StreamedPayload with a handle'
    return written, ''


async def _bounded(write: Callable[[], Awaitable[_T]], timeout: float) -> tuple[_T | None, str]:
    """One store write, bounded by `timeout`: `(result, '')`, or `(None, reason)` for any failure (never raised)."""
    deadline: anyio.CancelScope | None = None
    try:
        with anyio.fail_after(timeout) as deadline:
            return await write(), ''
    except TimeoutError as exc:
        if deadline is None or not deadline.cancel_called:  # the store's own TimeoutError, not our deadline
            return None, f'the store failed: {exc!r}'
        return None, f'the store did not finish writing within {timeout:g} s'
    except Exception as exc:  # noqa: BLE001 - any store failure means: fall back
        return None, f'the store failed: {exc!r}'


def _summary(unit: ActionContext, handle: str, *, lines: int, nbytes: int, json: bool = False) -> SpillSummary:
    return SpillSummary(
        tool_name=unit.call.tool_name,
        handle=handle,
        chars=unit.rendered.size_chars,
        tokens=unit.tokens,
        lines=lines,
        nbytes=nbytes,
        json=json,
        **unit.workspace_file(handle),
    )


async def _write_scanned(
    unit: ActionContext, data: bytes, timeout: float, scan: ImportantLinesScan, *, beside: bool
) -> tuple[str | None, str]:
    """Write `data` and feed it to `scan`: in a worker thread beside the write when `beside`, else after it.

    The scan releases the GIL (RE2, Hyperscan), so beside the write it costs the step almost nothing.
    """
    if beside:
        async with anyio.create_task_group() as group:
            group.start_soon(in_worker, partial(scan.feed, data))
            return await unit.write(unit.key, data, timeout)
    written = await unit.write(unit.key, data, timeout)
    await off_loop(unit.run, partial(scan.feed, data), large=len(data) > OFF_LOOP_BYTES)
    return written


async def _spill_layout(action: Spill, unit: ActionContext, layout: JsonLayout) -> tuple[Reduced | None, str]:
    """Spill a structured value (or a text that is JSON) in its stored layout, serialized once already.

    The layout's pieces go to the store as they are (streamed when it can), the preview scan beside the write.
    """
    large = layout.size > OFF_LOOP_BYTES and not unit.run.in_durable_context
    store = unit.run_store() if large else None
    scan = ImportantLinesScan(count_lines=not isinstance(store, StreamWritableStore))
    handle: str | None = None
    reason = ''
    numbers: list[int] | None = None
    if isinstance(store, StreamWritableStore):
        written: StreamedPayload | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(in_worker, partial(_scan_pieces, scan, layout.pieces))
            written, reason = await _store_write_stream(store, unit.key, iter(layout.pieces), action.timeout)
        if written is not None:
            handle = written.handle
            numbers = _line_numbers(scan, written, layout.data)
    else:
        handle, reason = await _write_scanned(unit, layout.data(), action.timeout, scan, beside=large)
    if handle is None:
        return None, reason
    summary = _summary(unit, handle, lines=layout.lines, nbytes=layout.size, json=True)
    important = scan.result(numbers)

    def build() -> str:
        shape = _shape_of(unit.rendered, layout)
        return text_preview(summary, None, action.preview_chars, shape=shape, important=important, pieces=layout.pieces)

    preview = await off_loop(unit.run, build, large=large)  # the shape sketch and the preview, one worker call
    return Reduced(preview, 'spill', summary.handle, summary.nbytes), ''


async def _spill_streamed(store: StreamWritableStore, action: Spill, unit: ActionContext) -> tuple[Reduced | None, str]:
    """Spill a large text in one pass: encode, write and index it piece by piece, the preview scan beside it."""
    pageable = unit.rendered.text
    scan = ImportantLinesScan(count_lines=False)
    relay = Relay()
    written: StreamedPayload | None = None
    reason = ''
    async with anyio.create_task_group() as group:
        group.start_soon(in_worker, partial(relay.encode_and_scan, pageable, scan))
        try:
            written, reason = await _store_write_stream(store, unit.key, relay.pieces(), action.timeout)
        finally:
            relay.abandon()
    if written is None:
        return None, reason
    numbers = _line_numbers(scan, written, lambda: pageable.encode('utf-8', 'surrogatepass'))
    summary = _summary(unit, written.handle, lines=written.index.line_count, nbytes=written.index.size)
    return await _preview(unit, action, summary, pageable, scan.result(numbers)), ''


def _line_numbers(scan: ImportantLinesScan, written: StreamedPayload, data: Callable[[], bytes]) -> list[int]:
    """The line numbers of the lines the scan chose, from the index the store built while writing."""
    chosen = scan.chosen()
    try:
        return scan.numbers_from_index(chosen, written.index)
    except ValueError:  # a custom store's index with unusual chunks: count the lines the slow way
        payload = data()
        return [payload.count(b'\n', 0, line.line_start) + 1 for line in chosen]


async def _preview(
    unit: ActionContext,
    action: Spill,
    summary: SpillSummary,
    pageable: str,
    important: tuple[list[ImportantLine], bool],
) -> Reduced:
    build = partial(text_preview, summary, pageable, action.preview_chars, important=important)
    # The head and tail walk only as far as the budget, but a shape sketch or long lines cost more: off the loop.
    preview = await off_loop(unit.run, build, large=summary.nbytes > OFF_LOOP_BYTES)
    return Reduced(preview, 'spill', summary.handle, summary.nbytes)


def _stored_with_lines(rendered: Rendered) -> tuple[str, bytes, int]:
    pageable, data = stored_form(rendered)
    return pageable, data, count_lines(pageable)


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
