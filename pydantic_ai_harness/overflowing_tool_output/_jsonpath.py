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
budget checked between batches and between matches, and the number of matches kept. Regexes in `match()`
and `search()` run on RE2 (linear time), not on a backtracking engine. Pure logic over a `read(start, end)`
callable; what the model reads is written in `_json_query_tool.py`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from iregexp_check import check as is_iregexp
from jsonpath_rfc9535 import JSONPathEnvironment, JSONPathError, JSONPathQuery
from jsonpath_rfc9535.function_extensions import ExpressionType, FilterFunction
from jsonpath_rfc9535.lex import tokenize
from jsonpath_rfc9535.segments import JSONPathChildSegment, JSONPathRecursiveDescentSegment, JSONPathSegment
from jsonpath_rfc9535.selectors import (
    FilterSelector,
    IndexSelector,
    JSONPathSelector,
    NameSelector,
    SliceSelector,
)
from jsonpath_rfc9535.serialize import canonical_string
from jsonpath_rfc9535.tokens import TokenType

from .._gil import past

__all__ = ('JsonMatch', 'JsonQueryError', 'JsonQueryLimits', 'JsonQueryResult', 'NotQueryableError', 'query_json')

Location = tuple[str | int, ...]
Reader = Callable[[int, int], bytes]


class JsonQueryError(ValueError):
    """A query that cannot run: invalid, or refused by a bound. The message says why, for the model."""


class NotQueryableError(JsonQueryError):
    """The payload cannot be queried by path (it is not JSON, or too large to load for this query)."""


@dataclass(frozen=True)
class JsonQueryLimits:
    """Bounds on one JSONPath query."""

    max_query_chars: int = 500
    """Longest accepted query."""

    max_descendant_segments: int = 2
    """Most `..` segments (filters included): each multiplies the work by the document's depth."""

    batch_bytes: int = 1 << 20
    """Values up to this size are loaded whole; the children of larger containers a batch of this size at a time."""

    max_load_bytes: int = 16 << 20
    """The largest single value a filter may need to load; a larger one is refused."""

    max_value_chars: int = 300
    """Each match's value is shown as compact JSON cut to this many characters."""

    time_budget: float = 30.0
    """Seconds the query may run before it stops and reports how far it got (100 MB takes about 12 s on 2 cores)."""


@dataclass(frozen=True)
class JsonMatch:
    """One matched node."""

    path: str
    """Its normalized path, e.g. `$['data'][3]['id']`."""

    value: str
    """Its value as compact JSON, cut to `max_value_chars` (a cut value ends with a note of what was left out)."""

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


# --- the JSONPath environment: RE2 for match() and search() -------------------------------------


def _iregexp_to_re2(pattern: str) -> str:
    # I-Regexp's `.` matches any character but a line break; RE2's matches any but `\n`.
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == '\\':
            out.append(char)
            escaped = True
        elif char == '[':
            in_class = True
            out.append(char)
        elif char == ']':
            in_class = False
            out.append(char)
        elif char == '.' and not in_class:
            out.append('[^\\n\\r]')
        else:
            out.append(char)
    return ''.join(out)


@lru_cache(maxsize=64)
def _compiled(pattern: str, whole: bool) -> Any:
    import re2  # pyright: ignore[reportMissingTypeStubs]

    options: Any = re2.Options()
    options.log_errors = False
    body = _iregexp_to_re2(pattern)
    try:
        return re2.compile(f'^(?:{body})$' if whole else body, options)  # pyright: ignore[reportUnknownMemberType]
    except Exception:  # noqa: BLE001 - re2.error and anything odd the binding raises: the function is False
        return None


class _Re2Function(FilterFunction):
    def __init__(self, *, whole: bool) -> None:
        self.whole = whole

    @property
    def arg_types(self) -> list[ExpressionType]:
        return [ExpressionType.VALUE, ExpressionType.VALUE]

    @property
    def return_type(self) -> ExpressionType:
        return ExpressionType.LOGICAL

    def __call__(self, string: object, pattern: object) -> bool:
        if not isinstance(string, str) or not isinstance(pattern, str) or not is_iregexp(pattern):
            return False
        compiled = _compiled(pattern, self.whole)
        return compiled is not None and compiled.search(string) is not None


class _Environment(JSONPathEnvironment):
    max_recursion_depth = 200

    def setup_function_extensions(self) -> None:
        super().setup_function_extensions()
        # The standard ones use a backtracking engine, where a crafted pattern takes exponential time.
        self.function_extensions['match'] = _Re2Function(whole=True)
        self.function_extensions['search'] = _Re2Function(whole=False)


_ENV = _Environment()


def compile_query(query: str, limits: JsonQueryLimits) -> tuple[JSONPathQuery, bool]:
    """Parse and check `query`; returns it and whether a filter refers to the root (`$`)."""
    if not isinstance(query, str) or not query.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise JsonQueryError("path must be a JSONPath query starting with '$', e.g. $.items[0]")
    query = query.strip()
    if len(query) > limits.max_query_chars:
        raise JsonQueryError(f'path is {len(query)} characters long; the limit is {limits.max_query_chars}.')
    try:
        tokens = tokenize(query)
        compiled = _ENV.compile(query)
    except JSONPathError as exc:
        raise JsonQueryError(f'path {query[:120]!r} is not valid JSONPath (RFC 9535): {exc}') from None
    except RecursionError:
        raise JsonQueryError('path is nested too deeply.') from None
    descendants = sum(1 for token in tokens if token.type_ == TokenType.DOUBLE_DOT)
    if descendants > limits.max_descendant_segments:
        raise JsonQueryError(
            f"path has {descendants} '..' segments; at most {limits.max_descendant_segments} are allowed, since each "
            'one multiplies the work by the depth of the document. Name the levels instead.'
        )
    roots = sum(1 for token in tokens if token.type_ == TokenType.ROOT)
    return compiled, roots > 1


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


_SCAN_BLOCK = 1 << 20

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


class _BlockCache:
    """Serves small reads from the last two aligned blocks read, so scanning and loading read each byte about once."""

    def __init__(self, read: Reader, size: int) -> None:
        self._read = read
        self._size = size
        self._blocks: dict[int, bytes] = {}

    def _block(self, number: int) -> bytes:
        block = self._blocks.get(number)
        if block is None:
            block = self._read(number * _SCAN_BLOCK, min(self._size, (number + 1) * _SCAN_BLOCK))
            if len(self._blocks) >= 2:
                self._blocks.pop(max(self._blocks, key=lambda known: abs(known - number)))
            self._blocks[number] = block
        return block

    def __call__(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(self._size, end)
        if end <= start:
            return b''
        first, last = start // _SCAN_BLOCK, (end - 1) // _SCAN_BLOCK
        base = first * _SCAN_BLOCK
        if first == last:
            return self._block(first)[start - base : end - base]
        if last == first + 1:
            return self._block(first)[start - base :] + self._block(last)[: end - base - _SCAN_BLOCK]
        return self._read(start, end)


class _Document:
    def __init__(self, read: Reader, size: int, width: int, limits: JsonQueryLimits, sink: _Sink) -> None:
        self.read = _BlockCache(read, size)
        self.size = size
        self.width = width
        self.limits = limits
        self.sink = sink

    # Layout ----------------------------------------------------------------------------------------

    def load(self, node: _Node) -> Any:
        if node.size > self.limits.max_load_bytes:
            raise JsonQueryError(
                f'the value at {_path(node.location)} is {node.size} bytes, more than the {self.limits.max_load_bytes} '
                'a query may load at once; select its parts by name or index instead of filtering it whole.'
            )
        return _parse(self.read(node.start, node.end))

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
            block_end = min(closing_newline, position + _SCAN_BLOCK)
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

    def child(self, node: _Node, key: str | int) -> _Node | None:
        if isinstance(key, int):
            for index, (start, end, line) in enumerate(self._spans(node)):
                if index == key:
                    return self._child(node, False, index, start, end, line)
            return None
        for child in self.children(node):
            if child.location[-1] == key:
                return child
        return None

    def locate(self, anchor: _Node, relative: Location) -> int:
        node = anchor
        for part in relative:
            if not self.spread(node):
                break  # a value on one line: its parts are on that line too
            found = self.child(node, part)
            if found is None:  # pragma: no cover - a match's location always exists
                break
            node = found
        return node.line

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
            self.evaluate(node, (_child_segment(segment.selectors), *rest))
            self._each_child(node, _child_segment((_WILDCARD,)), (segment, *rest))
            return
        for selector in segment.selectors:
            self._select(node, selector, rest)

    def _select(self, node: _Node, selector: JSONPathSelector, rest: tuple[JSONPathSegment, ...]) -> None:
        if isinstance(selector, NameSelector):
            child = self.child(node, selector.name) if self.read(node.start, node.start + 1) == b'{' else None
            if child is not None:
                self.evaluate(child, rest)
            return
        if isinstance(selector, (IndexSelector, SliceSelector)):
            if self.read(node.start, node.start + 1) != b'[':
                return
            count = sum(1 for _ in self.children(node))
            if isinstance(selector, IndexSelector):
                wanted = [selector.index + count if selector.index < 0 else selector.index]
                wanted = [i for i in wanted if 0 <= i < count]
            else:
                wanted = list(range(*selector.slice.indices(count)))
            order = {index: rank for rank, index in enumerate(wanted)}
            picked: dict[int, _Node] = {}
            for child in self.children(node):
                index = child.location[-1]
                if isinstance(index, int) and index in order:
                    picked[index] = child
            for index in wanted:  # slices with a negative step select in reverse
                self.evaluate(picked[index], rest)
            return
        self._each_child(node, _child_segment((selector,)), rest)

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
            kept = any(True for _ in _query((first,)).finditer([self.load(child)]))
            if not kept:
                return
        self.evaluate(child, rest)

    def _run_batch(self, batch: list[_Node], first: JSONPathSegment, rest: tuple[JSONPathSegment, ...]) -> None:
        if not batch:
            return
        self.sink.tick(batch[-1].line)
        # Consecutive members are one slice of the text (what separates them is a comma and whitespace), so the
        # batch parses as one container of the same kind: its members keep their keys, or their order.
        is_object = batch[0].text_start != batch[0].start
        body = self.read(batch[0].text_start, batch[-1].end)
        values = _parse(b'{' + body + b'}' if is_object else b'[' + body + b']')
        by_step: dict[str | int, _Node] = (
            {child.location[-1]: child for child in batch} if is_object else dict(enumerate(batch))
        )
        for found in _query((first, *rest)).finditer(values):
            child = by_step[found.location[0]]
            relative = found.location[1:]
            self.sink.add((*child.location, *relative), found.value, child, relative)

    def run_loaded(
        self, node: _Node, value: Any, segments: Sequence[JSONPathSegment], anchor: _Node, relative: Location
    ) -> None:
        for found in _query(tuple(segments)).finditer(value):
            self.sink.add((*node.location, *found.location), found.value, anchor, (*relative, *found.location))


class _Layout(Exception):
    """The stored text is not in the indented layout this module navigates."""


_WILDCARD: JSONPathSelector = _ENV.compile('$[*]').segments[0].selectors[0]


def _child_segment(selectors: tuple[JSONPathSelector, ...]) -> JSONPathSegment:
    return JSONPathChildSegment(env=_ENV, token=selectors[0].token, selectors=selectors)


def _query(segments: tuple[JSONPathSegment, ...]) -> JSONPathQuery:
    return JSONPathQuery(env=_ENV, segments=segments)


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data.decode('utf-8', 'surrogatepass'))
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
                    + ('Use @ (the current node) in filters.' if width is not None else 'Use grep_tool_result.')
                )
            try:
                value = _parse(read(0, end))
            except _Layout:
                raise NotQueryableError(
                    'It is not valid JSON, so it cannot be queried by path; use grep_tool_result.'
                ) from None
            document.run_loaded(root, value, compiled.segments, root, ())
        else:
            document.evaluate(root, compiled.segments)
    except _Stop:
        complete = False
    except _Layout:
        raise NotQueryableError(
            'It is not valid JSON, so it cannot be queried by path; use grep_tool_result.'
        ) from None
    except RecursionError:
        raise NotQueryableError('The document is nested too deeply for this query.') from None
    except JSONPathError as exc:
        raise JsonQueryError(f'the query failed: {exc}') from None
    sink.deadline = float('inf')  # locating the matches shown is part of the answer, not of the search
    matches: list[JsonMatch] = []
    for location, value, anchor, relative in sink.matches:
        line: int | None = None
        if width is not None:
            try:
                line = document.locate(anchor, relative)
            except _Layout:
                line = None
        matches.append(JsonMatch(_path(location), value, line))
    return JsonQueryResult(matches, sink.total, complete, None if complete else sink.reached_line)
