"""The unit an action reduces (a tool return's value or its content), the context it works in, and what it leaves.

Actions (`Action.reduce`: `_truncate`, `_spill`, `_summarize`) take an [`ActionContext`][] instead of reaching into the
capability, and return a [`Reduced`][] (or why they could not); the capability records it in the return's metadata.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Protocol

from pydantic_ai.messages import BinaryImage, ToolCallPart, ToolReturn, UserContent
from pydantic_ai.tools import RunContext
from typing_extensions import TypeIs

from .._events import CONTENT_PREFIX, FILE_HANDLES, VALUE_PREFIX, OverflowReduced, warn
from .._rendering._markers import unrenderable_note
from .._rendering._render import Rendered
from ..stores import OverflowStore
from ..stores._workspace import WorkspaceSpill, store_for_run
from ._summary_run import SummaryRun

__all__ = (
    'ActionContext',
    'Reduced',
    'UnitName',
    'Writer',
    'estimate_tokens_of',
    'handle_place',
    'is_tool_return',
    'left_as_is',
    'not_smaller',
    'reassemble',
    'reduced_event',
    'reduction_notes',
    'unit_key',
)

UnitName = Literal['return_value', 'content']
"""Which part of a tool return is reduced: `ToolReturn.return_value` (or the plain return), or `ToolReturn.content`."""


@dataclass(frozen=True)
class Reduced:
    """A unit's replacement and what the metadata should say about it."""

    value: Any
    """What the model sees instead of the unit."""

    action: str
    """What produced it: `'spill'`, `'truncate'`, `'summarize'`, or a clean-up (`'render'`, `'strip_ansi'`, `'unwrap'`:
    a text the tool wrapped in a one-member mapping, shown whole without it)."""

    handle: str | None = None
    """The handle the full payload was stored under, when it was."""

    nbytes: int | None = None
    """Bytes stored, when anything was."""

    size_before: int = 0
    """Characters (bytes for binary) of the unit as the tool returned it."""

    key: str | None = None
    """The key the payload was written under (`<run id>/<tool call id>/<retry>`), when it was stored."""

    images: tuple[dict[str, Any], ...] = ()
    """Images (and documents) stored apart from the unit (base64 blobs, a PDF), recorded as the image band records
    its originals, so the model can view them (`overflow_images` in the metadata)."""

    shown: tuple[BinaryImage, ...] = ()
    """Images shown to the model after `value` (image blobs found in it, fitted), in the order of its markers."""

    files: tuple[tuple[str, str | None], ...] = ()
    """For a list whose documents were reduced one by one (`_media._file_items`): the handle and key of each one
    stored, in list order (`<prefix>_file_handles` in the metadata), so every one is known, not only `handle`."""


class Writer(Protocol):
    """Writes one payload under `key` within `timeout` seconds: `(handle, '')`, or `(None, why not)`."""

    def __call__(self, key: str, data: bytes, timeout: float) -> Awaitable[tuple[str | None, str]]: ...


@dataclass(frozen=True)
class ActionContext:
    """Everything an action needs to reduce one unit of one tool return."""

    run: RunContext[Any]
    """The run the tool was called in."""

    call: ToolCallPart
    """The tool call whose return is reduced."""

    unit: UnitName
    """Which part of the return this is."""

    rendered: Rendered
    """The unit, rendered once: text, structured (with its JSON layout), binary or multimodal."""

    tokens: int
    """Its size in tokens, for headers: the measured count, or the ~4 characters per token heuristic."""

    write: Writer
    """The capability's (durable) store write."""

    store: OverflowStore
    """The configured store (the workspace, when one is attached, is tried first: `run_store`)."""

    workspace: WorkspaceSpill | None
    """The workspace spill setting, to tell the model when a handle is a file of its workspace."""

    takes_arguments: bool = True
    """Whether the tool takes arguments, so advice to call it again more narrowly makes sense."""

    summaries: SummaryRun | None = None
    """The capability's summarizing machinery (prompt, durable operation, locks), for a `Summarize`."""

    failure: bool = False
    """Whether the unit is the message of the tool's failure (`ModelRetry`, `ToolFailed`), not what it returned."""

    part: str | None = None
    """For a file of a list reduced on its own, its part of the key (`file2`): each is stored apart."""

    @property
    def key(self) -> str:
        """The key this unit is stored under."""
        return unit_key(self.run, self.call, self.unit, self.part)

    def run_store(self) -> OverflowStore:
        """The store this run writes to directly (streamed writes): the workspace first, when one is attached."""
        return store_for_run(self.store, self.run, self.workspace)

    def workspace_file(self, handle: str) -> dict[str, Any]:
        """What the preview says of where `handle` lives: how long its store keeps it (`expires_after`, when it
        deletes old payloads) and, for a spill in the workspace, its path (the handle itself) and whether the query
        tools are on.
        """
        return handle_place(self.store, self.workspace, handle)


def handle_place(store: OverflowStore, workspace: WorkspaceSpill | None, handle: str) -> dict[str, Any]:
    """What a marker says of where `handle` lives: `expires_after` (when its store deletes old payloads) and, for a
    file of the run's workspace, `path` (the handle itself) and whether the query tools are offered for it.
    """
    if workspace is None or not workspace.owns(handle):
        ttl = getattr(store, 'cleanup_after', None)
        return {'expires_after': ttl} if isinstance(ttl, timedelta) else {}
    return {'path': handle, 'query_tools': workspace.query_tools == 'always', 'expires_after': workspace.cleanup_after}


def unit_key(ctx: RunContext[Any], call: ToolCallPart, unit: UnitName, part: str | None = None) -> str:
    """`<run id>/<tool call id>/<retry>`, with `/content` for a `ToolReturn`'s content, and `/<part>` for a file
    of a list reduced on its own (`file2`).
    """
    key = f'{ctx.run_id}/{call.tool_call_id}/{ctx.retry}'
    key = f'{key}/content' if unit == 'content' else key
    return f'{key}/{part}' if part is not None else key


def estimate_tokens_of(rendered: Rendered) -> int:
    """The ~4-characters-per-token heuristic, without materializing a structured value's compact text."""
    return -(-rendered.size_chars // 4)


def is_tool_return(value: object) -> TypeIs[ToolReturn[Any]]:
    """Whether a tool's result is a `ToolReturn` envelope (its value and content are reduced apart)."""
    return isinstance(value, ToolReturn)


def not_smaller(reduced: Reduced, rendered: Rendered) -> bool:
    """Whether a text replacement is at least as long as the text it replaces (binary is compared in other units)."""
    return rendered.kind != 'binary' and isinstance(reduced.value, str) and len(reduced.value) >= rendered.size_chars


def left_as_is(rendered: Rendered, original: object, tool_name: str) -> Reduced | None:
    """An unreduced value passes through untouched, except what would break the run or what the user asked to clean.

    For values below every band, and for those a band (or a fallback) passes through.
    """
    if isinstance(original, memoryview):
        return Reduced(original.tobytes(), 'render')  # pydantic cannot serialize a memoryview; bytes it can
    if rendered.lossy:
        # pydantic-ai cannot serialize this value and the run would crash; send the best-effort rendering.
        warn(f'`{tool_name}` returned a value that cannot be serialized; sent a best-effort rendering')
        return Reduced(rendered.text + unrenderable_note(type(original).__name__), 'render')
    if rendered.kind == 'text' and isinstance(original, str) and rendered.text != original:
        return Reduced(rendered.text, 'strip_ansi', size_before=len(original))
    return None


def _visible_chars(value: object) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 0


def reduced_event(
    call: ToolCallPart, unit: UnitName, reduced: Reduced, tried: list[str], measured: int
) -> OverflowReduced:
    """The event that reports one reduction."""
    return OverflowReduced(
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


def reduction_notes(prefix: str, reduced: Reduced) -> dict[str, Any]:
    """The metadata keys for one reduced part: `<prefix>_action`, `_size_before`, `_size_after`, `_handle`, `_bytes`.

    With a handle, also `_key`: the key it was written under (`<run id>/<tool call id>/<retry>`), for which the
    built-in stores return a short handle. For a list whose documents were stored one by one, `_file_handles`:
    `[handle, key]` of each.
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
    if reduced.files:
        notes[f'{prefix}_{FILE_HANDLES}'] = [[handle, key] for handle, key in reduced.files]
    return notes


def with_notes(metadata: object, notes: dict[str, Any]) -> object:
    """The notes merged into a part's metadata: a mapping gets them added, `None` becomes them.

    Any other metadata object belongs to the application and is kept exactly as it was.
    """
    if metadata is None:
        return notes
    if _is_mapping(metadata):
        return {**metadata, **notes}
    return metadata


def _is_mapping(metadata: object) -> TypeIs[Mapping[str, Any]]:
    return isinstance(metadata, Mapping)


def reassemble(
    envelope: ToolReturn[Any] | None,
    value: object,
    content: str | Sequence[UserContent] | None,
    new_value: Reduced | None,
    new_content: Reduced | None,
) -> ToolReturn[Any]:
    """Keep the `ToolReturn` envelope (content, metadata, tools) and record what was done in the metadata."""
    notes: dict[str, Any] = {}
    if new_value is not None:
        notes |= reduction_notes(VALUE_PREFIX, new_value)
    if new_content is not None:
        notes |= reduction_notes(CONTENT_PREFIX, new_content)
    return ToolReturn(
        return_value=new_value.value if new_value is not None else value,
        content=new_content.value if new_content is not None else content,
        metadata=with_notes(envelope.metadata if envelope is not None else None, notes),
        tools=envelope.tools if envelope is not None else None,
    )
