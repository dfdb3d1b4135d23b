"""JSONPath (RFC 9535) queries over a stored JSON document, streamed so memory stays bounded.

The evaluation itself is `jsonpath-rfc9535`'s. What this module adds is the bounding: a structured value is
stored spread over lines (`_json_layout`: a large container has one member per line, `depth` spaces in; a small
one is compact on its line; a long array of numbers has several on a line), so the children of a spread-out
container can be found by scanning for lines at the next indent, without parsing the document. A container
larger than `batch_bytes` is never loaded whole: its children are loaded a batch at a time and the query's next
segment runs on each batch; smaller values are loaded and queried directly. Every match comes back with its
normalized path and the line of the stored text it is on. (Texts indented with `json.dumps(indent=1)`, as earlier
versions stored them, are navigated the same way.)

Bounds: the query's length and its number of descendant (`..`) segments, the bytes loaded at once, a time
budget checked between batches and between matches, and the number of matches kept. A bracket's selectors over a
big container share one pass over its children (two when a negative index or a slice needs their count), and a
child or a wildcard a union names again is evaluated once and its finds replayed, so a union does not multiply
the work; a bracket with more than `MAX_SCANS` different wildcards and filters is refused. A filter that refers
to the root loads the document a batch at a time, so no `json.loads` call holds the GIL (and the event loop) for
more than one batch. Pure logic over a `read(start, end)` callable; the query's parsing is `_jsonpath_query`'s,
what the model reads is written in `_json_query_tool.py`.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonpath_rfc9535 import JSONPathError
from jsonpath_rfc9535.segments import JSONPathRecursiveDescentSegment, JSONPathSegment
from jsonpath_rfc9535.selectors import FilterSelector, IndexSelector, JSONPathSelector, NameSelector, SliceSelector
from jsonpath_rfc9535.serialize import canonical_string

from ..._gil import hand_over, past
from .._query_tools._names import offered_names
from ._jsonpath_load import SCAN_BLOCK, BlockCache, load_json, release
from ._jsonpath_query import (
    WILDCARD,
    JsonQueryError,
    JsonQueryLimits,
    NotQueryableError,
    Picks,
    child_segment,
    compile_query,
    segments_query,
)
from ._jsonpath_values import Spelling

__all__ = ('JsonMatch', 'JsonQueryError', 'JsonQueryLimits', 'JsonQueryResult', 'NotQueryableError', 'query_json')

Location = tuple[str | int, ...]
Reader = Callable[[int, int], bytes]


@dataclass(frozen=True)
class JsonMatch:
    """One matched node."""

    path: str
    """Its normalized path, e.g. `$['data'][3]['id']`."""

    value: str
    """Its value as compact JSON spelled as stored, cut to `max_value_chars` (a cut value ends with a note of what
    was left out)."""

    line: int | None
    """The 1-based line of the stored text where the value starts, when the text is indented JSON."""


@dataclass(frozen=True)
class JsonQueryResult:
    """What a query found."""

    matches: list[JsonMatch]
    """The first matches, in document order as RFC 9535 defines it."""

    total: int
    """How many nodes matched (at least this many when not `complete`)."""

    complete: bool
    """False when the time budget stopped the query before it finished."""

    reached_line: int | None = None
    """When not complete: the line the query had reached."""


# --- the indented layout ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    start: int
    """The byte where the value starts (after any `"key": ` prefix)."""
    end: int
    """The byte after its last character."""
    line: int
    """The 1-based line it starts on."""
    depth: int
    location: Location
    text_start: int
    """Where its member text starts: its `"key": ` prefix in an object, else `start`."""

    @property
    def size(self) -> int:
        return self.end - self.start


_PARSE_BYTES = 1 << 17
"""The most text one `json.loads` call parses when a container is loaded: 128 KB parse in 2-10 ms."""

_PACKED_STARTS = frozenset(bytes([char]) for char in b'-0123456789tfn')
"""How a line of numbers, booleans and nulls starts: such a line may hold several array elements."""


class _Stop(Exception):
    """The time budget ran out."""


@dataclass
class _Sink:
    limit: int
    max_value_chars: int
    deadline: float
    matches: list[tuple[Location, str, _Node, Location]] = field(
        default_factory=list[tuple[Location, str, _Node, Location]]
    )
    total: int = 0
    reached_line: int = 1

    def tick(self, line: int) -> None:
        self.reached_line = max(self.reached_line, line)
        if past(self.deadline):
            raise _Stop

    def add(self, location: Location, value: Any, anchor: _Node, relative: Location) -> None:
        self.total += 1
        if len(self.matches) < self.limit:
            self.matches.append((location, _compact(value, self.max_value_chars), anchor, relative))
        if self.total % 1024 == 0 and time.monotonic() > self.deadline:
            raise _Stop

    def recording(self) -> _Sink:
        """An empty sink with the same bounds, to record what one evaluation finds and `replay` it."""
        return _Sink(self.limit, self.max_value_chars, self.deadline, reached_line=self.reached_line)

    def replay(self, recorded: _Sink) -> None:
        """Add what `recorded` found, as if it had been found here again."""
        self.total += recorded.total
        self.reached_line = max(self.reached_line, recorded.reached_line)
        room = self.limit - len(self.matches)
        if room > 0:
            self.matches.extend(recorded.matches[:room])
        self.tick(self.reached_line)


@dataclass(frozen=True)
class _Big:
    """A value too large to show: described, never loaded."""

    description: str


def _compact(value: Any, limit: int) -> str:
    if isinstance(value, _Big):
        return value.description
    text = json.dumps(value, ensure_ascii=False, separators=(',', ':'))
    if len(text) <= limit:
        return text
    return f'{text[:limit]}... ({len(text) - limit} more characters)'


class _Document:
    def __init__(self, read: Reader, size: int, width: int, limits: JsonQueryLimits, sink: _Sink) -> None:
        self.read = BlockCache(read, size)
        self.size = size
        self.width = width
        self.limits = limits
        self.sink = sink

    # Layout ----------------------------------------------------------------------------------------

    def load(self, node: _Node) -> Any:
        """The value of `node`; a spread-out container is parsed `_PARSE_BYTES` at a time (see `_parse_members`)."""
        if node.size > self.limits.max_load_bytes:
            raise JsonQueryError(
                f'the value at {_path(node.location)} is {node.size} bytes, more than the {self.limits.max_load_bytes} '
                'a query may load at once; select its parts by name or index instead of filtering it whole.'
            )
        if node.size > _PARSE_BYTES and self.spread(node):
            is_object = self.read(node.start, node.start + 1) == b'{'
            return self._parse_members(node, is_object, node.start + 1, node.end - 1)
        return _parse(self.read(node.start, node.end))

    def _parse_batch(self, batch: list[_Node]) -> Any:
        """Consecutive members of one container, parsed as one container of the same kind.

        They are one slice of the text (what separates them is a comma and whitespace), so their members keep
        their keys, or their order.
        """
        self.sink.tick(batch[-1].line)
        is_object = batch[0].text_start != batch[0].start
        first = batch[0]
        parent = _Node(first.text_start, batch[-1].end, first.line, first.depth - 1, first.location[:-1], 0)
        return self._parse_members(parent, is_object, first.text_start, batch[-1].end)

    def _parse_members(self, parent: _Node, is_object: bool, start: int, end: int) -> dict[str, Any] | list[Any]:
        """The members of `parent` in the text `[start, end)`, parsed about `_PARSE_BYTES` at a time.

        `json.loads` holds the GIL, and so the event loop, for its whole length: the text is cut where a member
        starts (a comma, a newline and the members' indent) into pieces that each parse in a few milliseconds, a
        member larger than that is loaded the same way on its own, and the GIL is handed over between pieces.
        """
        indent = self.width * (parent.depth + 1)
        marker = re.compile(b',\n' + b' ' * indent + b'(?=[^ \\]}])')
        whole: dict[str, Any] | list[Any] = {} if is_object else []
        position = start
        while position < end:
            cut = (
                self._member_cut(marker, position + _PARSE_BYTES, end, indent) if end - position > _PARSE_BYTES else end
            )
            if cut - position > 2 * _PARSE_BYTES:
                cut = self._member_cut(marker, position, end, indent)  # a big member ahead: one member at a time
                if cut - position > _PARSE_BYTES:
                    head = self.read(position, position + indent + 2)
                    member_start = position + len(head) - len(head.lstrip())
                    tail = self.read(cut - indent - 2, cut)
                    member_end = cut - (len(tail) - len(tail.rstrip()))
                    member = self._child(parent, is_object, 0, member_start, member_end, parent.line)
                    value = self.load(member)
                    if isinstance(whole, dict):
                        whole[str(member.location[-1])] = value
                    else:
                        whole.append(value)
                    position = cut + 1
                    continue
            piece = self.read(position, cut)
            part = _parse(b'{' + piece + b'}' if is_object else b'[' + piece + b']')
            if isinstance(whole, dict):
                whole.update(part)
            else:
                whole.extend(part)
            position = cut + 1  # past the comma
            hand_over()
        return whole

    def _member_cut(self, marker: re.Pattern[bytes], start: int, end: int, indent: int) -> int:
        """Where the first member separator at or after `start` is (its comma), or `end`."""
        position = start
        while position < end:
            window_end = min(end, position + SCAN_BLOCK)
            found = marker.search(self.read(position, min(end + 1, window_end + indent + 2)))
            if found is not None and position + found.start() < end:
                return position + found.start()
            position = window_end
        return end

    def spread(self, node: _Node) -> bool:
        """Whether a node is a container spread over lines (else it is on one line, or a scalar)."""
        opening = self.read(node.start, node.start + 2)
        return opening[:1] in (b'{', b'[') and opening[1:2] == b'\n'

    def children(self, node: _Node) -> Iterator[_Node]:
        """The children of a container node, in order, found by their indent."""
        is_object = self.read(node.start, node.start + 1) == b'{'
        for index, (start, end, line) in enumerate(self._spans(node)):
            yield self._child(node, is_object, index, start, end, line)

    def _spans(self, node: _Node) -> Iterator[tuple[int, int, int]]:
        """`(start, end, line)` of each child's member text (an object member starts with its key)."""
        opening = self.read(node.start, node.start + 2)
        if opening[:1] not in (b'{', b'[') or opening[1:2] in (b'}', b']'):
            return  # a scalar, or an empty container
        indent = self.width * (node.depth + 1)
        marker = re.compile(b'\n' + b' ' * indent + b'(?=[^ \\]}])')
        closing_newline = node.end - 1 - self.width * node.depth - 1
        if self.read(closing_newline, closing_newline + 1) != b'\n':
            raise _Layout
        position = node.start
        line = node.line
        previous: tuple[int, int] | None = None  # (start of the child's text, its line)
        while position < closing_newline:
            block_end = min(closing_newline, position + SCAN_BLOCK)
            # Read a little past the block so a marker across its edge is seen; only starts inside it count.
            block = self.read(position, min(node.end, block_end + indent + 1))
            counted_to = 0
            for found in marker.finditer(block):
                newline = position + found.start()
                if newline >= block_end:
                    break
                line += block.count(b'\n', counted_to, found.start())
                counted_to = found.start()
                if previous is not None:
                    yield from self._elements(previous[0], newline, previous[1])
                previous = (newline + 1 + indent, line + 1)
            line += block.count(b'\n', counted_to, block_end - position)
            position = block_end
            self.sink.tick(line)
        if previous is not None:
            yield from self._elements(previous[0], closing_newline, previous[1])

    def _elements(self, start: int, end: int, line: int) -> Iterator[tuple[int, int, int]]:
        """The elements of one line: itself, or each of the numbers, booleans and nulls packed on it."""
        if self.read(start, start + 1) not in _PACKED_STARTS:
            yield start, end, line
            return
        text = self.read(start, end)
        if text.endswith(b','):
            text = text[:-1]
        if b',' not in text:
            yield start, end, line
            return
        offset = start
        for element in text.split(b','):
            yield offset, offset + len(element), line
            offset += len(element) + 1

    def _child(self, parent: _Node, is_object: bool, index: int, start: int, end: int, line: int) -> _Node:
        if self.read(end - 1, end) == b',':
            end -= 1
        key: str | int = index
        text_start = start
        if is_object:
            head = self.read(start, min(end, start + 65_536)).decode('utf-8', 'surrogatepass')
            try:
                key, after = json.JSONDecoder().raw_decode(head)
            except ValueError:
                raise _Layout from None
            if not isinstance(key, str) or head[after : after + 1] != ':':
                raise _Layout
            after += 2 if head[after + 1 : after + 2] == ' ' else 1  # `"key":value`, or `"key": value` (indented)
            start += len(head[:after].encode('utf-8', 'surrogatepass'))
        return _Node(start, end, line, parent.depth + 1, (*parent.location, key), text_start)

    def _children_at(self, node: _Node, keys: set[str | int]) -> dict[str | int, _Node]:
        """The children of `node` under `keys` (indices in an array, names in an object), in one pass (over an
        array, it stops once all are found).
        """
        found: dict[str | int, _Node] = {}
        if self.read(node.start, node.start + 1) == b'[':
            last = max((key for key in keys if isinstance(key, int)), default=-1)
            for index, (start, end, line) in enumerate(self._spans(node)):
                if index > last:
                    break
                if index in keys:
                    found[index] = self._child(node, False, index, start, end, line)
            return found
        for child in self.children(node):  # to the end: of two members with the same name, the last one counts
            if child.location[-1] in keys:
                found[child.location[-1]] = child
        return found

    def locate_all(self, wanted: Sequence[tuple[_Node, Location]]) -> list[int | None]:
        """The line of each `(anchor, relative)` match: matches under one container are found in one pass over it,
        however many there are.
        """
        lines: list[int | None] = [None] * len(wanted)
        pending: list[tuple[int, _Node, Location]] = [
            (number, anchor, relative) for number, (anchor, relative) in enumerate(wanted)
        ]
        while pending:
            groups: dict[int, tuple[_Node, list[tuple[int, Location]]]] = {}
            for number, node, relative in pending:
                if not relative or not self.spread(node):
                    lines[number] = node.line  # a value on one line: its parts are on that line too
                else:
                    groups.setdefault(node.start, (node, []))[1].append((number, relative))
            pending = []
            for node, members in groups.values():
                try:
                    found = self._children_at(node, {relative[0] for _, relative in members})
                except _Layout:
                    continue
                for number, relative in members:
                    child = found.get(relative[0])
                    if child is None:  # pragma: no cover - a match's location always exists
                        lines[number] = node.line
                    else:
                        pending.append((number, child, relative[1:]))
        return lines

    # Evaluation ------------------------------------------------------------------------------------

    def evaluate(self, node: _Node, segments: Sequence[JSONPathSegment]) -> None:
        self.sink.tick(node.line)
        if not segments:
            value = _Big(_described(node)) if node.size > self.limits.batch_bytes else self.load(node)
            self.sink.add(node.location, value, node, ())
            return
        if node.size <= self.limits.batch_bytes:
            self.run_loaded(node, self.load(node), segments, node, ())
            return
        if self.read(node.start, node.start + 1) not in (b'{', b'['):  # pragma: no cover - big scalars are strings
            return  # a scalar has no children for any segment to select
        if not self.spread(node):
            self.run_loaded(node, self.load(node), segments, node, ())  # one long line: loaded, within the limit
            return
        segment, rest = segments[0], tuple(segments[1:])
        if isinstance(segment, JSONPathRecursiveDescentSegment):
            self.evaluate(node, (child_segment(segment.selectors), *rest))
            self._each_child(node, child_segment((WILDCARD,)), (segment, *rest))
            return
        self._select(node, segment.selectors, rest)

    def _select(self, node: _Node, selectors: Sequence[JSONPathSelector], rest: tuple[JSONPathSegment, ...]) -> None:
        """Run a bracket's selectors over a big container: its names and indices picked in one pass over the
        children (two when a negative index or a slice needs their count), each child picked evaluated once, and
        each wildcard or filter once however often the bracket repeats it; the results in the selectors' order.
        """
        kind = self.read(node.start, node.start + 1)
        repeats = Counter(str(selector) for selector in selectors)
        picks = Picks.of(list({str(selector): selector for selector in selectors}.values()), kind)
        if picks.needs_count:
            picks.count = sum(1 for _ in self._spans(node))
        picked = self._pick(node, picks) if picks.wanted() else {}
        shared: dict[str | int, _Sink] = {}
        done: dict[str, _Sink] = {}
        for selector in selectors:
            text = str(selector)
            recorded = done.get(text)
            if recorded is not None:
                self.sink.replay(recorded)
            elif repeats[text] > 1:
                with self._recording() as recorded:
                    self._run_selector(node, selector, rest, picks, picked, shared)
                done[text] = recorded
            else:
                self._run_selector(node, selector, rest, picks, picked, shared)

    def _run_selector(
        self,
        node: _Node,
        selector: JSONPathSelector,
        rest: tuple[JSONPathSegment, ...],
        picks: Picks,
        picked: dict[str | int, _Node],
        shared: dict[str | int, _Sink],
    ) -> None:
        if not isinstance(selector, (NameSelector, IndexSelector, SliceSelector)):
            self._each_child(node, child_segment((selector,)), rest)
            return
        for key in picks.targets(selector):
            child = picked.get(key)
            if child is not None:
                self._evaluate_once(child, rest, key, picks.multiplicity.get(key, 1) > 1, shared)

    def _evaluate_once(
        self,
        child: _Node,
        rest: tuple[JSONPathSegment, ...],
        key: str | int,
        again: bool,
        shared: dict[str | int, _Sink],
    ) -> None:
        recorded = shared.get(key)
        if recorded is not None:
            self.sink.replay(recorded)
        elif again:
            with self._recording() as recorded:
                self.evaluate(child, rest)
            shared[key] = recorded
        else:
            self.evaluate(child, rest)

    @contextlib.contextmanager
    def _recording(self) -> Generator[_Sink]:
        """Evaluate into a fresh sink, then replay it here (also when the time budget stops the evaluation)."""
        outer = self.sink
        recorded = self.sink = outer.recording()
        try:
            yield recorded
        finally:
            self.sink = outer
            outer.replay(recorded)

    def _pick(self, node: _Node, picks: Picks) -> dict[str | int, _Node]:
        """The children a bracket's names and indices select, in one pass."""
        picked: dict[str | int, _Node] = {}
        if picks.is_object:
            for child in self.children(node):
                if child.location[-1] in picks.names:
                    picked[child.location[-1]] = child  # the last of two members with the same name, as json.loads
            return picked
        for index, (start, end, line) in enumerate(self._spans(node)):
            if picks.selects(index):
                picked[index] = self._child(node, False, index, start, end, line)
        return picked

    def _each_child(self, node: _Node, first: JSONPathSegment, rest: tuple[JSONPathSegment, ...]) -> None:
        """Run `first` (a wildcard or a filter over `node`'s children) and `rest`, a batch of children at a time."""
        batch: list[_Node] = []
        batch_size = 0
        for child in self.children(node):
            if child.size > self.limits.batch_bytes:
                self._run_batch(batch, first, rest)
                batch, batch_size = [], 0
                self._run_big_child(child, first, rest)
                continue
            if batch and batch_size + child.size > self.limits.batch_bytes:
                self._run_batch(batch, first, rest)
                batch, batch_size = [], 0
            batch.append(child)
            batch_size += child.size
        self._run_batch(batch, first, rest)

    def _run_big_child(self, child: _Node, first: JSONPathSegment, rest: tuple[JSONPathSegment, ...]) -> None:
        selector = first.selectors[0]
        if isinstance(selector, FilterSelector):
            # The filter needs the whole child; load it (bounded) only to test it.
            kept = any(True for _ in segments_query((first,)).finditer([self.load(child)]))
            if not kept:
                return
        self.evaluate(child, rest)

    def _run_batch(self, batch: list[_Node], first: JSONPathSegment, rest: tuple[JSONPathSegment, ...]) -> None:
        if not batch:
            return
        is_object = batch[0].text_start != batch[0].start
        values = self._parse_batch(batch)
        by_step: dict[str | int, _Node] = (
            {child.location[-1]: child for child in batch} if is_object else dict(enumerate(batch))
        )
        for found in segments_query((first, *rest)).finditer(values):
            child = by_step[found.location[0]]
            relative = found.location[1:]
            self.sink.add((*child.location, *relative), found.value, child, relative)

    def run_loaded(
        self, node: _Node, value: Any, segments: Sequence[JSONPathSegment], anchor: _Node, relative: Location
    ) -> None:
        for found in segments_query(tuple(segments)).finditer(value):
            self.sink.add((*node.location, *found.location), found.value, anchor, (*relative, *found.location))


class _Layout(Exception):
    """The stored text is not in the indented layout this module navigates."""


def _parse(data: bytes) -> Any:
    try:
        return load_json(data)
    except (ValueError, RecursionError):
        raise _Layout from None


def _path(location: Location) -> str:
    return '$' + ''.join(f'[{canonical_string(part)}]' if isinstance(part, str) else f'[{part}]' for part in location)


def _described(node: _Node) -> str:
    return f'<a value of {node.size} bytes starting at line {node.line}: select its parts to see them>'


def _indent_width(head: bytes) -> int | None:
    """The indent width of an indented JSON text, from its first bytes; `None` when it is not indented JSON."""
    if head[:2] not in (b'{\n', b'[\n'):
        return None
    second = head[2:].split(b'\n', 1)[0]
    width = len(second) - len(second.lstrip(b' '))
    return width or None


def query_json(
    read: Reader, size: int, query: str, *, max_matches: int, limits: JsonQueryLimits | None = None
) -> JsonQueryResult:
    """Run a JSONPath `query` over the JSON text of `size` bytes that `read(start, end)` returns.

    Raises `JsonQueryError` for an invalid or refused query, or a payload that is not JSON.
    """
    caps = limits or JsonQueryLimits()
    compiled, uses_root = compile_query(query, caps)
    sink = _Sink(max(1, max_matches), caps.max_value_chars, time.monotonic() + caps.time_budget)
    end = size
    while end > 0 and read(end - 1, end) in (b'\n', b' ', b'\r', b'\t'):
        end -= 1
    width = _indent_width(read(0, min(size, 4096)))
    document = _Document(read, size, width or 1, caps, sink)
    root = _Node(0, end, 1, 0, (), 0)
    complete = True
    try:
        if width is None or uses_root:
            if end > caps.max_load_bytes:
                why = (
                    'A filter that refers to the root ($)'
                    if width is not None
                    else 'A query on JSON text stored on one line'
                )
                raise NotQueryableError(
                    f'{why} needs the whole document loaded, and at {end} bytes it is larger than the '
                    f'{caps.max_load_bytes} a query may load. '
                    + ('Use @ (the current node) in filters.' if width is not None else f'Use {offered_names().grep}.')
                )
            try:
                value = _parse(read(0, end)) if width is None else document.load(root)
            except _Layout:
                raise NotQueryableError(
                    f'It is not valid JSON, so it cannot be queried by path; use {offered_names().grep}.'
                ) from None
            try:
                document.run_loaded(root, value, compiled.segments, root, ())
            finally:
                release(value)
        else:
            document.evaluate(root, compiled.segments)
    except _Stop:
        complete = False
    except _Layout:
        raise NotQueryableError(
            f'It is not valid JSON, so it cannot be queried by path; use {offered_names().grep}.'
        ) from None
    except RecursionError:
        raise NotQueryableError('The document is nested too deeply for this query.') from None
    except JSONPathError as exc:
        raise JsonQueryError(f'the query failed: {exc}') from None
    sink.deadline = float('inf')  # locating the matches shown is part of the answer, not of the search
    lines: list[int | None] = [None] * len(sink.matches)
    if width is not None:
        lines = document.locate_all([(anchor, relative) for _, _, anchor, relative in sink.matches])
    spelling = Spelling(document.read, whole_bytes=caps.batch_bytes, limit=caps.max_value_chars)
    matches = [
        JsonMatch(_path(location), spelling.value(anchor.start, anchor.end, relative) or value, line)
        for (location, value, anchor, relative), line in zip(sink.matches, lines, strict=True)
    ]
    return JsonQueryResult(matches, sink.total, complete, None if complete else sink.reached_line)
