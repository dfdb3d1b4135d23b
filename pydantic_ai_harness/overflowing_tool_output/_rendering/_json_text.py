r"""The stored form of a `str` that is JSON: its own tokens, one element per line, never parsed and re-serialized.

What MCP servers and HTTP tools return is often a JSON document as one string. It is stored in the layout of
structured values (`_json_layout`: one compact element per line, a container longer than `LINE_BYTES` spread out
one member per line, `depth` spaces in, arrays of numbers packed several to a line), but the lines hold the
text's own tokens: every member (a duplicate name included), every number as spelled (`1e400`, `1.10`,
`0.30000000000000000000001`), every string with its escapes (`\u0041`). Only the whitespace around and between
tokens differs: the layout's newlines and indentation replace the text's own.

Two ways lead there:

- Most JSON texts hold exactly the tokens pydantic-core writes for their value (what `JSON.stringify`, serde,
  pydantic and `json.dumps` of ASCII text write, with any spacing). Such a text is parsed natively and laid out
  by `lay_out`, as fast as a structured value, and the layout is kept only when it holds the text's tokens
  (`_same_tokens`). A text with a `\u` or `\/` escape, which pydantic-core does not write (but for control
  characters), goes the other way at once.
- Any other text is laid out from its own characters (`relayout`): Python's C JSON scanner checks each element
  and finds where it ends, and the element's text is copied without its whitespace.

A text that is not JSON by RFC 8259 (`NaN`, a trailing comma, a BOM, nesting past the scanner's recursion limit)
gets no layout: it is stored as the text it is. Either way, what is stored is what the tool returned.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic_core

from ..._gil import hand_over
from ._json_layout import LINE_BYTES, MAX_DEPTH, PACK_START, PIECE_BYTES, JsonLayout, lay_out

__all__ = ('JSON_TEXT_MAX_CHARS', 'MAX_STEPS', 'json_text_layout', 'relayout', 'squeezed')

JSON_TEXT_MAX_CHARS = 16_000_000
"""Longer texts are stored as the text they are, even when they are JSON: parsing one costs several times its size
in memory."""

_SPACE = frozenset(' \t\n\r')
"""JSON's whitespace (RFC 8259): nothing else may stand between tokens."""

_SPACE_BYTES = b' \t\n\r'

_SPACE_CHARS = ' \t\n\r'

_SKIP_SPACE = re.compile(r'[ \t\n\r]*')

_PACKED_FIRST = frozenset('-0123456789tfn')
"""How a number, `true`, `false` or `null` starts: an array opening with one may be packed."""

_PROBE = LINE_BYTES + 1
"""Characters read to learn whether an element fits on its line: a longer one does not, unless it holds spaces."""

_WIDE_PROBE = 8 * LINE_BYTES
"""Characters read again for an element the first probe did not find the end of, when spaces may make up the
difference (a pretty-printed record)."""

_PACK_CHUNK = 1 << 16
"""A packed array's text is checked and split this many characters at a time (a cut at a comma)."""

_RUN_CHARS = 1 << 16
"""A run of scalars is written this many characters at a time, at most."""

_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_SCALAR = re.compile(rf'{_STRING}|[-+.0-9A-Za-z]+')
"""A string, number or literal as a run of an array's elements holds them (checked as JSON separately)."""

_SCALAR_RUN = re.compile(rf'(?:(?:{_STRING}|[-+.0-9A-Za-z]+)[ \t\n\r]*,[ \t\n\r]*)+')

_SCALAR_FIRST = frozenset('"-0123456789tfn')

MAX_STEPS = 500_000
"""Elements laid out one at a time (not in a run of scalars or a packed array) by `relayout`, at most: a text
needing more (millions of tiny containers) is stored as the text it is. About 2 s of CPU."""

_INT_DIGITS = 4_000
"""An int longer than this is read as `0` for the shape sketch: `int()` refuses more than 4,300 digits."""


def json_text_layout(text: str) -> JsonLayout | None:
    """The stored form of `text` when it is a JSON object or array (of at most `JSON_TEXT_MAX_CHARS`), else `None`.

    Its lines hold the text's own tokens, whitespace aside; see the module's docstring.
    """
    if len(text) > JSON_TEXT_MAX_CHARS or not _opens_container(text):
        return None
    if '\\' in text and ('\\u' in text or '\\/' in text):
        return relayout(text)  # escapes pydantic-core does not write (`\u00e9`, `\/`): its layout would not do
    try:
        layout = lay_out(pydantic_core.from_json(text, allow_inf_nan=False))
    except (ValueError, TypeError, RecursionError):  # not JSON to pydantic-core, or not writable back
        return relayout(text)
    return layout if _same_tokens(text, layout) else relayout(text)


def relayout(text: str) -> JsonLayout | None:
    """`text` laid out from its own characters, or `None` when it is not one JSON object or array."""
    if not _opens_container(text):
        return None
    try:
        return _Relayout(text).build()
    except (_NotJson, _TooManySteps):
        return None


def _opens_container(text: str) -> bool:
    start = _skip_space(text, 0)
    return text[start : start + 1] in ('[', '{')


def _same_tokens(text: str, layout: JsonLayout) -> bool:
    r"""Whether `layout` holds the tokens of `text`: the same characters once all whitespace is removed from both.

    Whitespace only separates tokens, and no two tokens of JSON run together without it (a number or a literal
    always meets a bracket, a comma or a colon), so the two are the same exactly when each token is the same once
    its spaces are gone. A string of the layout is pydantic-core's spelling of the text's string; the two agree
    without their spaces only when every character is written the same way in both (a space written `\u0020`
    stays in one, not in the other).
    """
    data = text.encode('utf-8', 'surrogatepass')
    squeezed = data.translate(None, _SPACE_BYTES) if _has_space(text) else data
    position = 0
    for piece in layout.pieces:
        hand_over()
        part = piece.translate(None, _SPACE_BYTES)
        if squeezed[position : position + len(part)] != part:
            return False
        position += len(part)
    return position == len(squeezed)


class _NotJson(Exception):
    """The text is not one JSON value (RFC 8259)."""


class _TooManySteps(Exception):
    """The text needs more than `MAX_STEPS` elements laid out one at a time."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(name)  # `NaN`, `Infinity`, `-Infinity`: Python reads them, JSON has no such tokens


def _capped_int(digits: str) -> int:
    return int(digits) if len(digits) <= _INT_DIGITS else 0


def _identity(value: Any) -> Any:
    return value


class _Frame:
    """A container being spread out, one member per line."""

    __slots__ = ('closing', 'depth', 'expect_member', 'first', 'is_object', 'key', 'position', 'value')

    def __init__(self, opening: str, position: int, depth: int) -> None:
        self.is_object = opening == '{'
        self.closing = '}' if self.is_object else ']'
        self.position = position
        """Where to read on."""
        self.depth = depth
        self.expect_member = True
        self.first = True
        self.key = ''
        """The name of the member being written (an object's)."""
        self.value: dict[str, Any] | list[Any] = {} if self.is_object else []
        """Its members as read, for the shape sketch."""

    def add(self, member: Any) -> None:
        if isinstance(self.value, dict):
            self.value[self.key] = member
        else:
            self.value.append(member)


class _Relayout:
    """Lays a JSON text out from its own characters, checking it is JSON as it goes (`_NotJson` when not)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.decoder = json.JSONDecoder(parse_constant=_refuse_constant)
        self.capped: json.JSONDecoder | None = None
        """The decoder for a text holding an int over Python's digit limit (made on first need)."""
        self.parts: list[str] = []
        self.part_chars = 0
        self.pieces: list[bytes] = []
        self.lines = 0
        self.padding = 0
        self.steps = MAX_STEPS

    def build(self) -> JsonLayout:
        text = self.text
        written = self._value(_skip_space(text, 0), 0)
        root, end = self._spread(written) if isinstance(written, _Frame) else written
        if _skip_space(text, end) != len(text):
            raise _NotJson('text after the value')
        self._newline(0)
        self._cut()
        size = sum(len(piece) for piece in self.pieces)
        return JsonLayout(tuple(self.pieces), size, self.lines, self.padding, root, _identity)

    # Writing ------------------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.parts.append(text)
        self.part_chars += len(text)

    def _newline(self, depth: int) -> None:
        """End the line; the next starts `depth` spaces in (a piece ends here once it is long enough)."""
        self.parts.append('\n')
        self.lines += 1
        self.padding += 1 + depth
        self.part_chars += 1
        if self.part_chars >= PIECE_BYTES:
            self._cut()
        if depth:
            self._write(' ' * depth)

    def _cut(self) -> None:
        if not self.parts:
            return  # the last line ended a piece already
        self.pieces.append(''.join(self.parts).encode('utf-8', 'surrogatepass'))
        self.parts.clear()
        self.part_chars = 0

    # Reading ------------------------------------------------------------------------------------------

    def _scan(self, source: str, at: int) -> tuple[Any, int]:
        """The JSON value starting at `at` in `source`, and where it ends."""
        try:
            return self.decoder.raw_decode(source, at)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise _NotJson(str(exc)) from None
        except ValueError:  # an int over Python's digit limit: read on with a decoder that caps it
            if self.capped is None:
                self.capped = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_capped_int)
            try:
                return self.capped.raw_decode(source, at)
            except (ValueError, RecursionError) as exc:
                raise _NotJson(str(exc)) from None

    def _fit(self, at: int) -> tuple[Any, str, int] | None:
        """The value at `at`, its compact text and its end, when that text fits on a line (`LINE_BYTES`)."""
        text = self.text
        for width in (_PROBE, _WIDE_PROBE):
            window = text[at : at + width]
            try:
                value, end = self._scan(window, 0)
            except _NotJson:  # cut short by the window, or not JSON (which reading it whole tells)
                end = -1
                value = None
            if end != -1 and (end < len(window) or at + len(window) == len(text)):
                line = squeezed(window[:end])
                return (value, line, at + end) if _utf8_len(line) <= LINE_BYTES else None
            if not _has_space(window):
                return None
        return None

    # Laying out ---------------------------------------------------------------------------------------

    def _value(self, at: int, depth: int) -> tuple[Any, int] | _Frame:
        """Write the value at `at` (at `depth`) on its line, or open it to be spread out (its frame is returned).

        Returns the value as read (for the shape sketch) and where it ends.
        """
        text = self.text
        if depth < MAX_DEPTH:
            fit = self._fit(at)
            if fit is not None:
                value, line, end = fit
                self._write(line)
                return value, end
            if text[at : at + 1] in ('[', '{'):
                return self._open(at, depth)
        value, end = self._scan(text, at)
        self._write(squeezed(text[at:end]))
        return value, end

    def _open(self, at: int, depth: int) -> tuple[Any, int] | _Frame:
        """Open the container at `at`: an array of numbers, booleans and nulls is written packed at once."""
        text = self.text
        opening = text[at]
        self._write(opening)
        first = _skip_space(text, at + 1)
        if opening == '[' and text[first : first + 1] in _PACKED_FIRST:
            close = text.find(']', first)
            if close == -1:
                raise _NotJson('an array that does not close')
            if (
                text.find('"', first, close) == -1
                and text.find('[', first, close) == -1
                and text.find('{', first, close) == -1
            ):
                return self._pack(first, close, depth), close + 1
        return _Frame(opening, at + 1, depth)

    def _spread(self, frame: _Frame) -> tuple[Any, int]:
        """Write a spread-out container's members, one per line, and those of the containers spread out in it.

        Returns its value as read and where it ends.
        """
        stack = [frame]
        while True:
            frame = stack[-1]
            child = self._members(frame)
            if child is not None:
                stack.append(child)
                continue
            stack.pop()
            if not stack:
                return frame.value, frame.position
            parent = stack[-1]
            parent.add(frame.value)
            parent.position = frame.position

    def _members(self, frame: _Frame) -> _Frame | None:
        """Write `frame`'s members on their lines, until one is to be spread out (its frame is returned).

        Returns `None` once the container closes (its `position` is then past its closing bracket).
        """
        text = self.text
        depth = frame.depth + 1
        at = frame.position
        while True:
            hand_over()  # off the event loop for large texts: keep handing the GIL back to it
            at = _skip_space(text, at)
            if frame.expect_member:
                if frame.first and text[at : at + 1] == frame.closing:
                    break
                if not frame.is_object and text[at : at + 1] in _SCALAR_FIRST:
                    after = self._scalars(frame, at)
                    if after is not None:
                        at = after
                        continue
                self.steps -= 1
                if self.steps < 0:
                    raise _TooManySteps
                self._newline(depth)
                if frame.is_object:
                    at = self._name(frame, at)
                written = self._value(at, depth)
                frame.expect_member = frame.first = False
                if isinstance(written, _Frame):
                    return written
                member, at = written
                frame.add(member)
                at = _skip_space(text, at)
            char = text[at : at + 1]
            if char == ',':
                self._write(',')
                at += 1
                frame.expect_member = True
            elif char == frame.closing:
                break
            else:
                raise _NotJson(f'{char!r} where a comma or {frame.closing!r} belongs')
        if not frame.first:
            self._newline(frame.depth)
        self._write(frame.closing)
        frame.position = at + 1
        return None

    def _scalars(self, frame: _Frame, at: int) -> int | None:
        """Write a run of an array's scalars (strings, numbers, literals, each followed by a comma) at once.

        The run is found by one regex match over at most `_RUN_CHARS`, checked as JSON in one call, and split into
        its elements by their tokens; returns where the next element starts, or `None` when no run starts at `at`.
        """
        text = self.text
        found = _SCALAR_RUN.match(text, at, at + _RUN_CHARS)
        if found is None:
            return None
        body = text[at : found.end()].rstrip(_SPACE_CHARS)[:-1]  # the last comma off
        values, end = self._scan(f'[{body}]', 0)
        elements: list[str] = _SCALAR.findall(body)
        if end != len(body) + 2 or len(elements) != len(values):
            raise _NotJson('an array of scalars that is not JSON')
        depth = frame.depth + 1
        self._newline(depth)
        self._write((',\n' + ' ' * depth).join(elements) + ',')
        self.lines += len(elements) - 1
        self.padding += (len(elements) - 1) * (1 + depth)
        if isinstance(frame.value, list):
            frame.value.extend(values)
        frame.first = False
        return found.end()

    def _name(self, frame: _Frame, at: int) -> int:
        """Write the member name at `at` as written, and a colon; where the member's value starts."""
        text = self.text
        if text[at : at + 1] != '"':
            raise _NotJson('a member without a name')
        frame.key, end = self._scan(text, at)
        colon = _skip_space(text, end)
        if text[colon : colon + 1] != ':':
            raise _NotJson('a member name without a colon')
        self._write(text[at:end] + ':')
        return _skip_space(text, colon + 1)

    def _pack(self, start: int, close: int, depth: int) -> list[Any]:
        """Write the elements of an array of numbers, booleans and nulls (`text[start:close]`) several to a line.

        The lines are cut as `_json_layout` cuts them. The text is read `_PACK_CHUNK` characters at a time, each
        chunk checked to be JSON values separated by commas before its whitespace is dropped.
        """
        text = self.text
        values: list[Any] = []
        pending: list[str] = []
        taken = 0
        position = start
        last = False
        lines = 0
        count = PACK_START
        while True:
            hand_over()
            if not last and len(pending) - taken < count:
                comma = text.find(',', position + _PACK_CHUNK, close) if close - position > _PACK_CHUNK else -1
                stop = close if comma == -1 else comma
                last = comma == -1
                raw = text[position:stop]
                read, end = self._scan(f'[{raw}]', 0)
                if end != len(raw) + 2 or not read:
                    raise _NotJson('an array of numbers that is not JSON')
                values.extend(read)
                pending = pending[taken:] + _without_space(raw).split(',')
                taken = 0
                position = stop + 1
                continue
            if taken == len(pending):
                break
            while True:
                run = pending[taken : taken + count]
                line = ','.join(run)
                if len(line) <= LINE_BYTES or count == 1:
                    break
                count = max(1, count // 2)
            if lines:
                self._write(',')
            self._newline(depth + 1)
            self._write(line)
            taken += len(run)
            lines += 1
            if len(line) * 2 < LINE_BYTES:
                count *= 2
        self._newline(depth)
        self._write(']')
        return values


def _skip_space(text: str, at: int) -> int:
    if text[at : at + 1] in _SPACE:
        found = _SKIP_SPACE.match(text, at)
        return found.end() if found is not None else at
    return at


def _has_space(text: str) -> bool:
    return ' ' in text or '\n' in text or '\t' in text or '\r' in text


def _without_space(text: str) -> str:
    if not _has_space(text):
        return text
    return text.replace(' ', '').replace('\n', '').replace('\t', '').replace('\r', '')


def squeezed(value: str) -> str:
    r"""The text of a JSON value (checked already) without the whitespace between its tokens.

    Its strings are found by their quotes: with `\\` and `\"` swapped for NUL and SOH first, which JSON never
    holds unescaped, every other quote opens or closes one.
    """
    if not _has_space(value):
        return value
    escaped = '\\' in value
    marked = value.replace('\\\\', '\x00').replace('\\"', '\x01') if escaped else value
    parts = marked.split('"')
    outside = '"'.join(parts[0::2])
    squeezed = _without_space(outside)
    if len(squeezed) == len(outside):
        return value  # every space is in a string
    parts[0::2] = squeezed.split('"')
    joined = '"'.join(parts)
    return joined.replace('\x01', '\\"').replace('\x00', '\\\\') if escaped else joined


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode('utf-8', 'surrogatepass'))
