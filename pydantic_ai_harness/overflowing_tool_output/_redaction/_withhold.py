"""Apply secret masking to a tool's result before anything else sees it (previews, truncation, summaries, store)."""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import BinaryContent, ToolCallPart, ToolReturn
from pydantic_ai.tools import RunContext

from ..._gil import hand_over
from ..._typing import is_array, is_bytes_like, is_dict, is_instance, is_list
from .._actions._unit import is_tool_return, with_notes
from .._events import OverflowingToolOutputWarning, warn
from .._offload import off_loop
from .._rendering._markers import redaction_failed_marker
from .._rendering._render import render_value, stored_form
from ..stores import LocalFileStore
from ..stores._sniff import SNIFF_BYTES, looks_binary
from ._secrets import Redactor, SecretRedaction

__all__ = (
    'ORIGINAL_HANDLE_KEY',
    'UNCHECKED',
    'WITHHELD_KEY',
    'SecretWithholding',
    'build_withholding',
    'left_after_failure',
    'withhold_closed',
    'withhold_secrets',
)

WITHHELD_KEY = 'secrets_withheld'
"""Metadata key: how many secrets of each kind were withheld from the return."""

ORIGINAL_HANDLE_KEY = 'secrets_original_handle'

UNCHECKED = 'unchecked'
"""The kind counted under `WITHHELD_KEY` for a whole text withheld because masking raised on it."""
"""Metadata key: where `SecretRedaction.keep_original_in` stored the original."""

_STORE_TIMEOUT = 10.0

_BINARY_SNIFF_BYTES = 8 * 1024
"""Bytes with a NUL this early are taken for binary data, not text with some invalid UTF-8."""

_TEXT_MEDIA_TYPES = frozenset({'application/json', 'application/xml', 'application/yaml', 'application/x-yaml'})

_IN_PLACE_CHARS = 32 * 1024
"""Texts up to this size are masked on the event loop (a thread hop would cost more); larger ones in a worker."""


@dataclass(frozen=True)
class SecretWithholding:
    """`redact_secrets` in force: the setting and the redactor built from it."""

    setting: SecretRedaction
    """What the user configured."""

    redactor: Redactor
    """The compiled rules."""

    async def __call__(self, ctx: RunContext[Any], call: ToolCallPart, result: Any) -> Any:
        """`result` with its secrets masked, or `result` itself (the same object) when it holds none."""
        return await withhold_secrets(self.redactor, self.setting, ctx, call, result)

    def mask_text(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with its secrets masked, and how many of each kind were withheld."""
        masked, found = self.redactor.mask(text)
        return (masked, dict(found)) if found else (text, {})


def build_withholding(setting: SecretRedaction | None, *, query_store: object) -> SecretWithholding | None:
    """What `redact_secrets` asks for; a bad setting raises at construction, naming it.

    `keep_original_in` may not be `query_store`, the store the query tools read: the model could read the
    originals back, secrets and all.
    """
    if setting is None:
        return None
    if not is_instance(setting, SecretRedaction):
        raise TypeError(f'redact_secrets must be a SecretRedaction or None, got {type(setting).__name__}')
    if setting.keep_original_in is not None and not callable(getattr(setting.keep_original_in, 'write', None)):
        raise TypeError('redact_secrets.keep_original_in must be an OverflowStore (with an async write(key, data))')
    if _same_store(setting.keep_original_in, query_store):
        raise ValueError(
            'redact_secrets.keep_original_in is the store the query tools read from (`store`): the model could '
            'read the originals back, secrets and all. Give keep_original_in a store of its own.'
        )
    try:
        return SecretWithholding(setting, Redactor.from_setting(setting))
    except ImportError as exc:
        raise UserError(f'redact_secrets: {exc}') from None


def _same_store(kept_in: object, store: object) -> bool:
    """Whether `kept_in` is `store`, or a `LocalFileStore` over the same directory."""
    if kept_in is store:
        return True
    return (
        isinstance(kept_in, LocalFileStore)
        and isinstance(store, LocalFileStore)
        and kept_in.root_path == store.root_path
    )


async def withhold_secrets(
    redactor: Redactor, setting: SecretRedaction, ctx: RunContext[Any], call: ToolCallPart, result: Any
) -> Any:
    """`result` with its secrets masked, or `result` itself (the same object) when it holds none.

    A large result is masked in a worker thread (rendering, matching and parsing a 10 MB document take a while), so
    the event loop keeps serving the run's other tasks.
    """
    envelope = result if is_tool_return(result) else None
    value = envelope.return_value if envelope is not None else result
    content = envelope.content if envelope is not None else None
    large = _large(value) or _large(content)
    masked = await off_loop(ctx, partial(_masked, redactor, value, content), large=large)
    if masked is None:
        return result
    new_value, new_content, counts = masked
    notes: dict[str, Any] = {WITHHELD_KEY: counts}
    if setting.keep_original_in is not None:
        handle = await _keep_original(setting, ctx, call, value)
        if handle is not None:
            notes[ORIGINAL_HANDLE_KEY] = handle
    return ToolReturn[Any](
        return_value=new_value,
        content=new_content,
        metadata=with_notes(envelope.metadata if envelope is not None else None, notes),
        tools=envelope.tools if envelope is not None else None,
    )


async def withhold_closed(
    withholding: SecretWithholding,
    ctx: RunContext[Any],
    call: ToolCallPart,
    selected: Callable[[], Awaitable[bool]],
    result: Any,
) -> Any:
    """`result` with its secrets masked when `selected()`, failing closed: a filter that raises counts as selected,
    and a result that masking raises on is replaced by a notice that it is withheld (and why, for the operator).
    """
    try:
        chosen = await selected()
    except Exception:  # noqa: BLE001 - the user's filter raising must not unmask a secret
        chosen = True
    if not chosen:
        return result
    try:
        return await withholding(ctx, call, result)
    except Exception as exc:  # noqa: BLE001 - fail closed: what could not be checked is not shown
        warn(f'Secret redaction raised on the output of `{call.tool_name}`, so it was withheld from the model: {exc!r}')
        marker = redaction_failed_marker('output', call.tool_name, type(exc).__name__)
        return ToolReturn[Any](return_value=marker, metadata={WITHHELD_KEY: {UNCHECKED: 1}})


def left_after_failure(withholding: SecretWithholding | None, tool_name: str, result: Any, exc: Exception) -> Any:
    """What goes on when the capability failed on `result` (the run must never die there): `result` as it is, its
    text already masked; with redaction on, a result holding files (bytes no mask has read: a PDF the durable read
    failed on) is withheld instead, failing closed.
    """
    if withholding is None or not _holds_files(result):
        warn(f'OverflowingToolOutput failed on the result of `{tool_name}` and left it as is: {exc!r}')
        return result
    warn(f'OverflowingToolOutput failed on the result of `{tool_name}`, which holds files, so it was withheld: {exc!r}')
    marker = redaction_failed_marker('output', tool_name, type(exc).__name__)
    return ToolReturn[Any](return_value=marker, metadata={WITHHELD_KEY: {UNCHECKED: 1}})


def _holds_files(value: object, depth: int = 0) -> bool:
    """Whether `value` (a result, a `ToolReturn`, a list) holds a file given as bytes."""
    if isinstance(value, BinaryContent | bytes | bytearray):
        return True
    if is_tool_return(value):
        return _holds_files(value.return_value, depth + 1) or _holds_files(value.content, depth + 1)
    if is_array(value) and depth < 4:
        return any(_holds_files(item, depth + 1) for item in value)
    return False


def _masked(redactor: Redactor, value: Any, content: Any) -> tuple[Any, Any, dict[str, int]] | None:
    """The value and content with their secrets masked, and the counts; `None` when they hold none."""
    counts: Counter[str] = Counter()
    new_value = _mask_value(redactor, value, counts)
    new_content = _mask_content(redactor, content, counts)
    return (new_value, new_content, dict(counts)) if counts else None


def _large(value: object) -> bool:
    """Whether masking `value` may hold up the event loop: anything but a short text (or none)."""
    if value is None or isinstance(value, (bool, int, float)):
        return False
    if isinstance(value, str) or is_bytes_like(value):
        return len(value) > _IN_PLACE_CHARS
    return True  # a structured value is rendered, matched and parsed back: off the loop, whatever its size


def _mask_value(redactor: Redactor, value: Any, counts: Counter[str]) -> Any:
    if isinstance(value, str):
        masked, found = redactor.mask(value)
        counts.update(found)
        return masked if found else value
    if is_bytes_like(value):
        return _mask_bytes(redactor, bytes(value), counts, value)
    if isinstance(value, BinaryContent) and _is_text_media(value.media_type):
        data = _mask_bytes(redactor, value.data, counts, value.data)
        return value if data is value.data else replace(value, data=data)
    rendered = render_value(value)
    if rendered.kind == 'text':
        masked, found = redactor.mask(rendered.text)
        counts.update(found)
        return masked if found else value
    if rendered.kind != 'structured' or rendered.jsonable is None:
        return value  # binary and files are passed on as they are
    masked, found = redactor.mask(rendered.text)
    if not found:
        return value
    counts.update(found)
    try:
        # The masked JSON, parsed back: the model reads the same document, with markers where secrets were.
        return _loads_in_steps(masked)
    except ValueError:
        # A match crossed the JSON syntax: mask each string on its own instead.
        return _mask_leaves(redactor, rendered.jsonable, Counter())


def _mask_bytes(redactor: Redactor, data: bytes, counts: Counter[str], unchanged: Any) -> Any:
    """Bytes that read as text (what `subprocess.check_output` returns) masked byte for byte; `unchanged` if none.

    Bytes with a NUL early on are data, not text, unless they are valid UTF-8 or are text all the same by the decision
    the preview and the query tools make (`looks_binary`: a stray NUL in text): those are passed on as they are.
    """
    if b'\x00' in data[:_BINARY_SNIFF_BYTES] and looks_binary(data[:SNIFF_BYTES], whole=len(data) <= SNIFF_BYTES):
        try:
            data.decode('utf-8')
        except UnicodeDecodeError:
            return unchanged
    masked, found = redactor.mask_bytes(data)
    if not found:
        return unchanged
    counts.update(found)
    return masked


def _is_text_media(media_type: str) -> bool:
    return media_type.startswith('text/') or media_type in _TEXT_MEDIA_TYPES


_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r'[ \t\n\r]*')


def _loads_in_steps(text: str, depth: int = 2) -> Any:
    """`json.loads`, one array element or object member at a time, handing the GIL over in between.

    One `json.loads` of a 10 MB document is a single C call that holds the GIL some 200 ms, and with it the event
    loop; parsed piece by piece it is about the same work, in short calls. Arrays are parsed one whole element at a
    time; objects (`{'items': [...]}`) are entered `depth` levels deep, so the array inside is too.
    """
    value, end = _parse_at(text, _skip(text, 0), depth)
    if _skip(text, end) != len(text):
        raise ValueError('extra data after the JSON value')
    return value


def _parse_at(text: str, index: int, depth: int) -> tuple[Any, int]:
    opening = text[index : index + 1]
    if depth <= 0 or opening not in ('[', '{'):
        return _DECODER.raw_decode(text, index)
    closing = ']' if opening == '[' else '}'
    items: list[Any] = []
    members: dict[str, Any] = {}
    index = _skip(text, index + 1)
    if text[index : index + 1] == closing:
        return (items if opening == '[' else members), index + 1
    while True:
        hand_over()
        if opening == '[':
            item, index = _DECODER.raw_decode(text, index)  # an element: one short call (rows are small)
            items.append(item)
        else:
            key, index = _DECODER.raw_decode(text, index)
            index = _skip(text, index)
            if not isinstance(key, str) or text[index : index + 1] != ':':
                raise ValueError(f'expected a member name and a colon at {index}')
            members[key], index = _parse_at(text, _skip(text, index + 1), depth - 1)
        index = _skip(text, index)
        separator = text[index : index + 1]
        if separator == closing:
            return (items if opening == '[' else members), index + 1
        if separator != ',':
            raise ValueError(f'expected , or {closing} at {index}')
        index = _skip(text, index + 1)


def _skip(text: str, index: int) -> int:
    """The index of the first character at or after `index` that is not JSON white space."""
    found = _WHITESPACE.match(text, index)
    return found.end() if found is not None else index


def _mask_leaves(redactor: Redactor, value: Any, counts: Counter[str]) -> Any:
    if isinstance(value, str):
        masked, found = redactor.mask(value)
        counts.update(found)
        return masked
    if is_dict(value):
        return {key: _mask_leaves(redactor, item, counts) for key, item in value.items()}
    if is_list(value):
        return [_mask_leaves(redactor, item, counts) for item in value]
    return value


def _mask_content(redactor: Redactor, content: Any, counts: Counter[str]) -> Any:
    if content is None:
        return None
    if isinstance(content, str):
        masked, found = redactor.mask(content)
        counts.update(found)
        return masked if found else content
    items: Sequence[Any] = content
    texts = [item for item in items if isinstance(item, str)]
    if len(texts) == len(items):
        # Masked as the one text they are read as, so a secret split across two parts is still found.
        masked_parts, found = redactor.mask_parts(texts)
        counts.update(found)
        return masked_parts if found else content
    masked_items: list[Any] = []
    for item in items:
        if isinstance(item, str):
            text, found = redactor.mask(item)
            counts.update(found)
            masked_items.append(text)
        else:
            masked_items.append(item)
    return masked_items if sum(counts.values()) else content


async def _keep_original(
    setting: SecretRedaction, ctx: RunContext[Any], call: ToolCallPart, original: Any
) -> str | None:
    data = (
        original.encode('utf-8', 'surrogatepass')
        if isinstance(original, str)
        else stored_form(render_value(original))[1]
    )
    key = f'{ctx.run_id}/{call.tool_call_id}/{ctx.retry}/original'
    try:
        with anyio.fail_after(_STORE_TIMEOUT):
            handle = await setting.keep_original_in.write(key, data)
    except Exception as exc:  # noqa: BLE001 - keeping the original is best effort; masking is not
        warnings.warn(
            f'The original of `{call.tool_name}` (secrets withheld) could not be kept: {type(exc).__name__}',
            OverflowingToolOutputWarning,
            stacklevel=2,
        )
        return None
    return handle if isinstance(handle, str) else None
