"""The stored form of a structured value: valid JSON with one compact element per line, serialized natively.

A list of records is stored as `[`, then one compact record per line (` {"id":0,...},`), then `]`, so a line read
or a grep hit is a whole record. A container whose compact JSON is longer than `LINE_BYTES` is spread out the same
way, one member per line, indented one space per level; smaller ones stay on one line. The layout only adds
newlines and indentation to the compact JSON the model would have seen: removing every newline and the spaces
after it gives that compact text back, byte for byte.

Every line is written by pydantic-core (the serializer pydantic-ai sends tool returns with): one native call per
line, so the whole value is serialized about once. Larger elements cost one more call per level they are spread
over. Nothing here parses the value back.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from pydantic_ai.messages import tool_return_ta

from ..._gil import hand_over

__all__ = (
    'LINE_BYTES',
    'MAX_DEPTH',
    'PACK_START',
    'PIECE_BYTES',
    'JsonLayout',
    'lay_out',
    'lay_out_jsonable',
    'single_line_layout',
)

LINE_BYTES = 1_000
"""A container whose compact JSON is longer than this is spread out, one member per line (the read tool's default
`max_line_chars`, so a line it shows is whole)."""

MAX_DEPTH = 16
"""Containers nested deeper than this stay on one line however long: indentation and work stay bounded."""

PIECE_BYTES = 1 << 20
"""The stored text comes in pieces of about this many bytes, each ending at a line end (a streamed write's unit)."""

_FEW_MEMBERS = 64
"""The members of a container with at most this many are sized by a bounded walk before being serialized, so a
large one is spread out without first being serialized whole (`{"items": [...]}`)."""

_WALK_BUDGET = 100_000
"""Values the walks of one layout may visit in all; past it, members are serialized to learn their size."""

_MARKER = '\x7f'
"""What separates the elements of a batch while it is serialized: a string of one DEL, rare in data. Its cut,
`,"\\x7f",`, is five bytes: CPython looks for a needle shorter than six bytes without the setup a longer one costs on
every call (`split` makes one per element), which makes the cut ~30% cheaper than with `,-0.0,`. The cut is checked
(one part per element), so a value that holds it only costs one call per element."""

_MARKER_JSON = b',"\x7f",'

_BATCH = 512
"""Elements of a large array serialized and joined at once (none of them spread out): few enough that a batch's
text and its parts stay small and are reused from batch to batch (a 20 MB list of records is laid out ~5% faster
than in batches of 2048; lists of tiny elements as fast)."""

_PLAIN = (dict, list, tuple)

_HOLD_FROM = 4096
"""Text at least this long is held as it is until its piece is cut (copied once, into the piece), not added to the
buffer: a buffer grown by large runs is copied again at every growth."""

Dump = Callable[[Any], bytes]


@dataclass(frozen=True)
class JsonLayout:
    """A structured value as stored text (UTF-8), in pieces that each end at a line end."""

    pieces: tuple[bytes, ...]
    """The stored text, cut at line ends."""

    size: int
    """Bytes in all."""

    lines: int
    """Lines (the text ends with a newline, which starts none)."""

    padding: int
    """The newlines and indentation the layout adds to the compact JSON."""

    root: Any
    """The value it was laid out from, as plain containers at the levels that were spread out (the shape sketch)."""

    plain: Callable[[Any], Any]
    """Turns an element of `root` into its JSON-compatible form (for the shape sketch of a sample)."""

    @functools.cached_property
    def chars(self) -> int:
        """Characters of the compact JSON: the stored text's, less the padding."""
        total = 0
        for piece in self.pieces:
            total += len(piece) if piece.isascii() else len(piece.decode('utf-8', 'surrogatepass'))
        return total - self.padding

    def data(self) -> bytes:
        """The stored text as one `bytes`."""
        return self.pieces[0] if len(self.pieces) == 1 else b''.join(self.pieces)

    def compact(self) -> bytes:
        """The compact JSON (UTF-8): the stored text without its newlines and indentation."""
        data = self.data()
        if self.lines <= 1:
            return data.rstrip(b'\n')
        # No JSON string holds a raw newline, so every newline and the spaces after it are the layout's own.
        return b''.join(line.lstrip(b' ') for line in data.split(b'\n'))


@functools.cache
def _dump() -> Dump:
    """pydantic-ai's own tool-return serializer (built on first use), called once per line."""
    tool_return_ta.dump_json(None)  # the adapter defers building its serializer until first used
    to_json = tool_return_ta.serializer.to_json
    return functools.partial(to_json, by_alias=True)


def _to_plain(value: Any) -> Any:
    return tool_return_ta.dump_python(value, mode='json', by_alias=True)


def lay_out(value: Any) -> JsonLayout:
    """Lay out a value pydantic can serialize. Raises what pydantic-core raises when it cannot."""
    return _Builder(_dump(), _to_plain).build(value)


def single_line_layout(compact: bytes) -> JsonLayout:
    """The layout of compact JSON kept on one line (a value only pydantic-ai's serializer takes whole)."""
    return JsonLayout((compact + b'\n',), len(compact) + 1, 1, 1, None, _to_plain)


def _dumps_jsonable(value: Any) -> bytes:
    # `json.dumps` without `indent` runs on the C encoder; lone surrogates of a best-effort rendering are kept.
    return json.dumps(value, ensure_ascii=False, separators=(',', ':')).encode('utf-8', 'surrogatepass')


def lay_out_jsonable(value: Any) -> JsonLayout:
    """Lay out a JSON-compatible value (plain dicts, lists, str, int, float, bool, None): a best-effort rendering."""
    return _Builder(_dumps_jsonable, lambda item: item).build(value)


_PACKABLE = frozenset({int, float, bool, type(None)})
"""Arrays of only these are packed, several elements a line: their JSON never holds a comma of its own."""

PACK_START = 64
"""Elements in the first line of a packed array; later lines adapt to fill about `LINE_BYTES`."""


class _Frame:
    __slots__ = ('batched', 'children', 'closing', 'depth', 'few', 'first', 'is_dict', 'packed', 'pending')

    def __init__(self, container: Any, depth: int) -> None:
        self.is_dict = type(container) is dict
        self.closing = b'}' if self.is_dict else b']'
        self.depth = depth
        self.first = True
        self.few = len(container) <= _FEW_MEMBERS
        self.packed = (
            not self.is_dict
            and len(container) > 0
            and type(container[0]) in _PACKABLE
            and set(map(type, container)) <= _PACKABLE  # at C speed: ~30 ms for 1,000,000 elements
        )
        self.children: Iterator[Any] = (
            _Packer(container) if self.packed else iter(container.items() if self.is_dict else container)
        )
        self.batched = not self.packed and not self.few
        self.pending: deque[tuple[Any, bytes]] = deque()
        """Elements of a batch already serialized, to be written one at a time (some are spread out)."""


class _Packer:
    """Consecutive runs of a packed array's elements, each sized to make a line of about `LINE_BYTES`."""

    def __init__(self, items: Any) -> None:
        self.items = items
        self.position = 0
        self.count = PACK_START

    def __iter__(self) -> _Packer:
        return self

    def __next__(self) -> _Packer:
        if self.position >= len(self.items):
            raise StopIteration
        return self

    def line(self, dump: Dump) -> bytes:
        """The next run's line (its elements, comma-separated), moving past it."""
        while True:
            chunk = self.items[self.position : self.position + self.count]
            line = dump(chunk)[1:-1]
            if len(line) <= LINE_BYTES or self.count == 1:
                break
            self.count = max(1, self.count // 2)
        self.position += len(chunk)
        if len(line) * 2 < LINE_BYTES:
            self.count *= 2
        return line


class _Builder:
    def __init__(self, dump: Dump, plain: Callable[[Any], Any]) -> None:
        self.dump = dump
        self.plain = plain
        self.pieces: list[bytes] = []
        self.buffer = bytearray()
        """The text since the last run held in `held`."""
        self.held: list[bytes] = []
        """The text of the piece being built, before `buffer`: long runs as they are, and the buffer's text before them."""
        self.held_bytes = 0
        self.lines = 1
        self.padding = 0
        self.walk_budget = _WALK_BUDGET

    def build(self, value: Any) -> JsonLayout:
        root = value
        if type(root) not in _PLAIN and not _is_scalar(root):
            # An object (a model, a dataclass, a set): its JSON-compatible form, once, so it can be spread out.
            root = self.plain(root)
        if type(root) in _PLAIN and self._spread(root, few=True) is not False:
            self._write_container(root, b'')
        else:
            line = self.dump(root)
            if type(root) in _PLAIN and len(line) > LINE_BYTES:
                self._write_container(root, b'')
            else:
                self._write(line)
        self.buffer += b'\n'
        self._cut()
        size = sum(len(piece) for piece in self.pieces)
        return JsonLayout(tuple(self.pieces), size, self.lines, self.padding + 1, root, self.plain)

    def _newline(self, depth: int) -> None:
        self.buffer += b'\n'
        self.lines += 1
        self.padding += 1 + depth
        if len(self.buffer) + self.held_bytes >= PIECE_BYTES:
            self._cut()
        self.buffer += b' ' * depth

    def _write(self, text: bytes) -> None:
        """Add `text` to the piece being built: to the buffer when short, held as it is when long."""
        if len(text) < _HOLD_FROM:
            self.buffer += text
            return
        if self.buffer:
            self.held.append(bytes(self.buffer))
            self.held_bytes += len(self.buffer)
            self.buffer.clear()
        self.held.append(text)
        self.held_bytes += len(text)

    def _cut(self) -> None:
        """End the piece being built (the text so far ends at a line end)."""
        if self.held:
            self.held.append(bytes(self.buffer))
            self.pieces.append(b''.join(self.held))
            self.held.clear()
            self.held_bytes = 0
        else:
            self.pieces.append(bytes(self.buffer))
        self.buffer.clear()

    def _write_container(self, container: Any, prefix: bytes) -> None:
        """Write a container spread over lines (its opening line starts with `prefix`, a member's key)."""
        self.buffer += prefix
        self.buffer += b'{' if type(container) is dict else b'['
        stack = [_Frame(container, 0)]
        while stack:
            hand_over()  # off the event loop for large values: keep handing the GIL back to it
            frame = stack[-1]
            line: bytes | None = None
            if frame.pending:
                child, line = frame.pending.popleft()
            elif frame.batched:
                batch = list(itertools.islice(frame.children, _BATCH))
                if batch:
                    self._write_batch(frame, batch)
                    continue
                child = _END
            else:
                child = next(frame.children, _END)
            if child is _END:
                stack.pop()
                self._newline(frame.depth)
                self.buffer += frame.closing
                continue
            self._next_line(frame)
            depth = frame.depth + 1
            if frame.packed:
                self.buffer += cast(_Packer, child).line(self.dump)
                continue
            if frame.is_dict:
                key, member = cast('tuple[Any, Any]', child)
                spread = self._member(member, depth, frame.few, partial(_member_json, self.dump, key), line)
                if spread is not None:
                    self.buffer += self.dump({key: None})[1:-5]
            else:
                spread = self._member(child, depth, frame.few, self.dump, line)
            if spread is not None:
                self.buffer += b'{' if type(spread) is dict else b'['
                stack.append(_Frame(spread, depth))

    def _next_line(self, frame: _Frame) -> None:
        if not frame.first:
            self.buffer += b','
        frame.first = False
        self._newline(frame.depth + 1)

    def _write_batch(self, frame: _Frame, batch: list[Any]) -> None:
        """Write many elements of an array at once, serialized in one native call and cut apart at a marker.

        The marker is `-0.0` between every two elements; the cut is checked (one part per element), so a value
        holding it only costs the one-call-per-element way.
        """
        depth = frame.depth + 1
        if frame.is_dict:
            parts = self._members(batch)
        else:
            parts = self._elements(batch)
            if parts is None:
                parts = list(map(self.dump, batch))
        if max(map(len, parts)) > LINE_BYTES:
            frame.pending.extend(zip(batch, parts))  # some must be spread out: one at a time, reusing these
            return
        self._next_line(frame)
        self._write((b',\n' + b' ' * depth).join(parts))
        self.lines += len(parts) - 1
        self.padding += (len(parts) - 1) * (1 + depth)

    def _elements(self, batch: list[Any]) -> list[bytes] | None:
        """Each element's JSON, from one call; `None` when the marker turned up in the values themselves."""
        interleaved: list[Any] = [_MARKER] * (2 * len(batch) - 1)
        interleaved[::2] = batch
        parts = self.dump(interleaved).split(_MARKER_JSON)
        if len(parts) != len(batch):
            return None
        # The brackets come off the first and last parts, not off the whole text: no copy of the batch's JSON.
        parts[0] = parts[0][1:]
        parts[-1] = parts[-1][:-1]
        return parts

    def _members(self, batch: list[tuple[Any, Any]]) -> list[bytes]:
        """Each `"key":value` of a batch of dict members: keys and values each from one call when keys are str."""
        keys = [key for key, _ in batch]
        if set(map(type, keys)) == {str}:  # a str key is written as the same JSON string as a str value
            key_parts = self._elements(keys)
            value_parts = self._elements([value for _, value in batch])
            if key_parts is not None and value_parts is not None:
                return [key + b':' + value for key, value in zip(key_parts, value_parts)]
        return [_member_json(self.dump, key, value) for key, value in batch]

    def _member(self, value: Any, depth: int, few: bool, dump: Dump, line: bytes | None = None) -> Any:
        """Write one member on its line (`line`: its JSON, when known); or return it, plain, to be spread out."""
        if depth >= MAX_DEPTH:
            self._write(line if line is not None else dump(value))
            return None
        if line is None and few and type(value) not in _PLAIN and not _is_scalar(value):
            value = self.plain(value)  # one of few members: its plain form costs little and may spare a pass
        if line is None and type(value) in _PLAIN and self._spread(value, few):
            return value
        if line is None:
            line = dump(value)
        if len(line) > LINE_BYTES and line[-1:] in (b'}', b']'):
            plain = value if type(value) in _PLAIN else self.plain(value)
            if type(plain) in _PLAIN:
                return plain
        self._write(line)
        return None

    def _spread(self, container: Any, few: bool) -> bool | None:
        """Whether a plain container's compact JSON surely exceeds `LINE_BYTES` (`None`: not known without serializing).

        By its length alone when that is enough; for one of few members, by a walk bounded by `LINE_BYTES` values.
        """
        count = len(container)
        per_member = 5 if type(container) is dict else 2  # `"":0,` and `0,` are the shortest
        if count * per_member > LINE_BYTES:
            return True
        if not few or self.walk_budget <= 0:
            return None
        return self._walk(container)

    def _walk(self, container: Any) -> bool | None:
        """Whether a lower bound of the compact JSON's length passes `LINE_BYTES`, walked until it does.

        `True` when it does, `False` when the whole value is smaller, `None` when an object (a model, ...) makes it
        unknowable.
        """
        total = 0
        stack = [container]
        while stack:
            self.walk_budget -= 1
            value: Any = stack.pop()
            kind = cast('type[Any]', type(value))
            if kind is str:
                total += len(value) + 2
            elif kind is dict:
                mapping = cast('dict[Any, Any]', value)
                total += 1 + 4 * len(mapping) + sum(len(key) for key in mapping if type(key) is str)
                if total <= LINE_BYTES:
                    stack.extend(mapping.values())
            elif kind is list or kind is tuple:
                items = cast('list[Any]', value)
                total += 1 + len(items)
                if total <= LINE_BYTES:
                    stack.extend(items)
            elif _is_scalar(value):
                total += 1
            else:
                return None
            if total > LINE_BYTES:
                return True
        return False


_END = object()


def _member_json(dump: Dump, key: Any, value: Any) -> bytes:
    """`"key":value`, as the member of a dict (pydantic-core writes the key as a dict key: `1` becomes `"1"`)."""
    return dump({key: value})[1:-1]


def _is_scalar(value: Any) -> bool:
    return value is None or type(value) in (str, int, float, bool)
