"""Turn any tool return value into measurable text or bytes, once, without ever raising."""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal

import pydantic
import pydantic_core
from pydantic_ai.messages import BinaryContent, FileUrl, tool_return_ta

from ..._gil import hand_over
from ..._typing import is_array, is_bytes_like, is_dict, is_int, is_set
from ._json_layout import JsonLayout, lay_out, lay_out_jsonable, single_line_layout
from ._json_text import json_text_layout

__all__ = (
    'Rendered',
    'estimate_tokens',
    'has_ansi_codes',
    'render_content',
    'render_value',
    'stored_form',
    'stored_layout',
    'stored_text',
    'strip_ansi_codes',
)

Kind = Literal['text', 'structured', 'binary', 'multimodal']

CHARS_PER_TOKEN = 4
"""The heuristic used when no tokenizer is given: about four characters per token."""


@dataclass(frozen=True, eq=False)
class Rendered:
    """A tool return value (or `ToolReturn.content`) rendered once for measuring and reducing."""

    kind: Kind
    """`text` (a str), `structured` (sent as JSON), `binary` (bytes) or `multimodal` (files the model sees natively)."""

    given_text: str | None = None
    """The text of a text or multimodal value (a structured value's is derived from `layout` when needed)."""

    data: bytes | None = None
    """The raw bytes of a binary value."""

    media_type: str | None = None
    """The declared media type of a binary value, if any."""

    lossy: bool = False
    """The value could not be serialized as the model would see it; `text` is a best-effort rendering."""

    layout: JsonLayout | None = None
    """For structured values: the stored form, serialized once; the compact JSON the model sees is derived from it."""

    given_jsonable: Any = field(default=None, repr=False)
    """For best-effort renderings: the JSON-compatible form they were written from (else `jsonable` parses)."""

    @functools.cached_property
    def text(self) -> str:
        """What the model would see as text: the string, the compact JSON, or the text parts of multimodal content."""
        if self.given_text is not None:
            return self.given_text
        if self.layout is not None:
            return self.layout.compact().decode('utf-8', 'surrogatepass')
        return ''

    @functools.cached_property
    def jsonable(self) -> Any:
        """For structured values: the JSON-compatible form (truncation, secrets), parsed on first use.

        `None` when the text is not JSON that can be parsed (nested too deep, say).
        """
        if self.kind != 'structured':
            return None
        if self.given_jsonable is not None:
            return self.given_jsonable
        try:
            return pydantic_core.from_json(self.layout.data() if self.layout is not None else self.text)
        except ValueError:
            return None

    @functools.cached_property
    def json_text_layout(self) -> JsonLayout | None:
        """For a text that is JSON (an object or an array, as MCP servers and HTTP tools return): its stored form.

        The text's own tokens, one element per line (`_json_text`). Only texts whose first non-space character is
        `{` or `[` and of at most `JSON_TEXT_MAX_CHARS` are read, once; anything else is `None`.
        """
        if self.kind != 'text' or self.given_text is None:
            return None
        return json_text_layout(self.given_text)

    @property
    def size_chars(self) -> int:
        """Characters of text, or bytes of a binary value."""
        if self.data is not None:
            return len(self.data)
        if self.given_text is None and self.layout is not None:
            return self.layout.chars
        return len(self.text)


def stored_layout(rendered: Rendered) -> JsonLayout | None:
    """The JSON layout a structured value, or a text that is JSON, is stored in; `None` for other text."""
    if rendered.kind == 'structured':
        return rendered.layout
    return rendered.json_text_layout


# ECMA-48: CSI (with parameter and intermediate bytes), the string controls (OSC, DCS, SOS, PM, APC)
# ended by BEL or ST, nF escapes such as charset designators (`ESC ( B`), and single-char escapes.
# A regex alternation over these is quadratic on attacker text (every unterminated string control scans to the
# end), so `strip_ansi_codes` walks the introducers itself and looks each terminator up at most once.
_ANSI_START = re.compile(r'[\x1b\x90\x98\x9b\x9d\x9e\x9f]')
_C1_STRING_STARTS = frozenset('\x90\x98\x9d\x9e\x9f')
"""DCS, SOS, OSC, PM, APC as single C1 characters."""
_ESC_STRING_FINALS = frozenset(']PX^_')
"""The same string controls written `ESC <final>`."""
_STRING_STOP = re.compile(r'[\x07\x1b\x9c]')
"""What ends a string control's body: BEL, ESC (of `ESC \\`) or ST."""
_CSI_TAIL = re.compile(r'[0-?]*[ -/]*[@-~]')
_NF_TAIL = re.compile(r'[ -/]+[0-~]')
_NEXT_CSI = re.compile(r'\x9b')
_STRING_START = re.compile(r'[\x90\x98\x9d\x9e\x9f]|\x1b[\]PX^_]')
_WITHOUT_STRINGS = re.compile(r'(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b[ -/]+[0-~]|\x1b[0-~]')
"""Every other sequence: disjoint character classes, so one regex pass stays linear."""


def has_ansi_codes(text: str) -> bool:
    """Whether `text` may hold an ECMA-48 escape sequence (it has a character that can start one)."""
    return _ANSI_START.search(text) is not None


def strip_ansi_codes(text: str) -> str:
    """Remove every ECMA-48 escape sequence (colours, cursor moves, hyperlinks, titles) from `text`.

    Linear in `len(text)` whatever it holds: each character is examined a bounded number of times.
    """
    start = _ANSI_START.search(text)
    if start is None:
        return text
    if _STRING_START.search(text, start.start()) is None:
        return _WITHOUT_STRINGS.sub('', text)  # colours and cursor moves only: the common case, at C speed
    kept: list[str] = []
    kept_from = 0
    stops = _StringStops(text)
    position = start.start()
    while True:
        hand_over()  # off the event loop above 32 KiB: keep handing the GIL back to it
        end, skip_to = _sequence_at(text, position, stops)
        if end != -1:
            kept.append(text[kept_from:position])
            kept_from = skip_to = end
        found = _ANSI_START.search(text, skip_to)
        if found is None:
            break
        position = found.start()
    kept.append(text[kept_from:])
    return ''.join(kept)


class _StringStops:
    """Where the body of a string control stops, looked up once per stretch of text (so the walk stays linear)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.stop_at = -1

    def after(self, body: int) -> int:
        """The first BEL, ESC or ST at or after `body` (`len(text)` when there is none)."""
        if self.stop_at < body:
            found = _STRING_STOP.search(self.text, body)
            self.stop_at = found.start() if found is not None else len(self.text)
        return self.stop_at


def _sequence_at(text: str, position: int, stops: _StringStops) -> tuple[int, int]:
    """`(end, next)`: one past the sequence starting at `position` (-1 if none does), and where to look on."""
    char = text[position]
    nxt = text[position + 1 : position + 2]
    if char == '\x9b' or (char == '\x1b' and nxt == '['):
        tail = _CSI_TAIL.match(text, position + (1 if char == '\x9b' else 2))
        if tail is not None:
            return tail.end(), tail.end()
        # `ESC [` alone is a two-character escape; a lone CSI character is kept.
        return (position + 2 if char == '\x1b' else -1), position + 1
    if char in _C1_STRING_STARTS or (char == '\x1b' and nxt and nxt in _ESC_STRING_FINALS):
        stop_at = stops.after(position + (1 if char != '\x1b' else 2))
        terminator = text[stop_at : stop_at + 2]
        if terminator[:1] in ('\x07', '\x9c') and terminator:
            return stop_at + 1, stop_at + 1
        if terminator == '\x1b\\':
            return stop_at + 2, stop_at + 2
        if char == '\x1b':
            return position + 2, position + 2  # an unterminated `ESC ]` is stripped as a two-character escape
        # Unterminated: so is every C1 string control before `stop_at`; only a CSI can start before it.
        csi = _NEXT_CSI.search(text, position + 1, stop_at)
        return -1, csi.start() if csi is not None else stop_at
    if char == '\x1b':
        tail = _NF_TAIL.match(text, position + 1)
        if tail is not None:
            return tail.end(), tail.end()
        if nxt and '0' <= nxt <= '~':
            return position + 2, position + 2
    return -1, position + 1


def estimate_tokens(text: str) -> int:
    """The ~4-characters-per-token heuristic."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def render_value(value: Any, *, strip_ansi: bool = False) -> Rendered:
    """Render a `return_value` the way the model would see it. Never raises."""
    if isinstance(value, str):
        return Rendered('text', strip_ansi_codes(value) if strip_ansi else value)
    if is_bytes_like(value):
        return Rendered('binary', '', data=bytes(value))
    if isinstance(value, BinaryContent):
        if value.is_image:
            return Rendered('multimodal', '')  # sent as an image, not measured in bytes (the image band fits it)
        return Rendered('binary', '', data=value.data, media_type=value.media_type)
    if isinstance(value, FileUrl):
        return Rendered('multimodal', value.url)
    if is_array(value) and any(issubclass(kind, (BinaryContent, FileUrl)) for kind in _element_types(value)):
        return _render_multimodal(value)
    return _render_structured(value)


def _element_types(items: Sequence[Any]) -> set[type[Any]]:
    """The distinct types of `items`, at C speed (a 200,000-element list in ~2 ms; one of a single type in less)."""
    if not items:
        return set()
    first: type[Any] = items[0].__class__
    if operator.countOf(map(type, items), first) == len(items):
        return {first}  # the common case: counting compares by identity, cheaper than hashing into a set
    return set(map(type, items))


def render_content(content: str | Sequence[Any]) -> Rendered:
    """Render `ToolReturn.content`: a str, or a sequence of user content (text and files)."""
    if isinstance(content, str):
        return Rendered('text', content)
    if all(isinstance(item, str) for item in content):
        # Several text blocks: reduced as one text, which is what the model reads anyway.
        return Rendered('text', '\n\n'.join(content))
    return _render_multimodal(content)


def _render_multimodal(items: Sequence[Any]) -> Rendered:
    texts = [item for item in items if isinstance(item, str)]
    return Rendered('multimodal', '\n\n'.join(texts))


def _render_structured(value: Any) -> Rendered:
    try:
        layout = lay_out(value)
    except _SERIALIZATION_ERRORS:
        # pydantic-ai's own serializer may still take it whole (a type the per-line layout cannot spread out).
        try:
            dumped = tool_return_ta.dump_json(value, by_alias=True)
        except _SERIALIZATION_ERRORS:
            return _render_unserializable(value)
        layout = single_line_layout(dumped)
    if layout.pieces[0].startswith(b'"'):
        # A value whose JSON form is a string (datetime, UUID, ...) is sent as that plain string.
        try:
            return Rendered('text', pydantic_core.from_json(layout.data()))
        except ValueError:
            return Rendered('structured', layout=layout)
    return Rendered('structured', layout=layout)


_SERIALIZATION_ERRORS = (pydantic_core.PydanticSerializationError, ValueError, TypeError, RecursionError, OverflowError)


def _render_unserializable(value: Any) -> Rendered:
    """A best-effort rendering of a value pydantic cannot serialize (objects, cycles, extreme nesting)."""
    jsonable = _to_jsonable(value, 0, set())
    try:
        layout = lay_out_jsonable(jsonable)
    except (ValueError, TypeError, RecursionError):  # pragma: no cover - _to_jsonable only yields JSON types
        return Rendered('text', _safe_repr(value), lossy=True)
    return Rendered('structured', lossy=True, layout=layout, given_jsonable=jsonable)


_MAX_DEPTH = 100
"""Deeper nesting is cut: the rendering stays bounded and far from the interpreter's recursion limit."""

_INT_DIGITS_LIMIT = 4_000
"""Python refuses to print ints with more than 4,300 digits by default; bigger ones are described instead."""

_OBJECT_ADDRESS = re.compile(r' at 0x[0-9a-fA-F]+')


def _to_jsonable(value: Any, depth: int, active: set[int]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if value.bit_length() > _INT_DIGITS_LIMIT * 3:
            return f'<int of about {int(value.bit_length() * 0.30103)} digits>'
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if is_bytes_like(value):
        return bytes(value).decode('utf-8', 'backslashreplace')
    if depth >= _MAX_DEPTH:
        return '<nested too deep>'
    identity = id(value)
    if identity in active:
        return '<circular reference>'
    active.add(identity)
    try:
        if is_dict(value):
            return {str(k): _to_jsonable(v, depth + 1, active) for k, v in value.items()}
        if is_array(value):
            return [_to_jsonable(v, depth + 1, active) for v in value]
        if is_set(value):
            items = [_to_jsonable(v, depth + 1, active) for v in value]
            return sorted(items, key=repr)  # sets have no order; sorting keeps the text deterministic
        if is_dataclass(value) and not isinstance(value, type):
            return {f.name: _to_jsonable(getattr(value, f.name, None), depth + 1, active) for f in fields(value)}
        if isinstance(value, pydantic.BaseModel):
            return {k: _to_jsonable(v, depth + 1, active) for k, v in value}
        try:
            return pydantic_core.to_jsonable_python(value, bytes_mode='base64')
        except Exception:  # noqa: BLE001
            return _safe_repr(value)
    finally:
        active.discard(identity)


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break the run  # noqa: BLE001
        return f'<unrepresentable {type(value).__name__}>'
    # Memory addresses would make the model-visible text differ between runs and replays.
    return _OBJECT_ADDRESS.sub('', text)


def stored_text(rendered: Rendered) -> str:
    """The text a text or structured value is stored as.

    Structured values (and texts that are JSON) are stored as JSON with one compact element per line, so a line
    read or a grep hit is a whole record (`_json_layout`).
    """
    return stored_form(rendered)[0]


def stored_form(rendered: Rendered) -> tuple[str, bytes]:
    """The text a text or structured value is stored as (`stored_text`), and its UTF-8 bytes (lone surrogates kept)."""
    layout = stored_layout(rendered)
    if layout is not None:
        data = layout.data()
        return data.decode('utf-8', 'surrogatepass'), data
    return rendered.text, rendered.text.encode('utf-8', 'surrogatepass')


def measure(
    rendered: Rendered, *, over_tokens: bool, tokenizer: Callable[[str], int] | None
) -> tuple[int, Exception | None]:
    """The size bands compare against: characters (bytes for binary) or tokens.

    Returns the size and, when the tokenizer raised, the error (the heuristic was used instead).
    """
    if not over_tokens:
        return rendered.size_chars, None
    if rendered.data is not None:
        return math.ceil(len(rendered.data) / CHARS_PER_TOKEN), None
    if tokenizer is None:
        return math.ceil(rendered.size_chars / CHARS_PER_TOKEN), None
    try:
        count = tokenizer(rendered.text)
        if not is_int(count) or count < 0:
            raise TypeError(f'the tokenizer must return a non-negative int, got {count!r}')
        return count, None
    except Exception as exc:  # noqa: BLE001
        return estimate_tokens(rendered.text), exc
