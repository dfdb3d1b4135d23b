"""The JSONPath query itself: its bounds, its parsing and checks, and what a bracket's selectors pick.

Regexes in `match()` and `search()` run on RE2 (linear time), not on a backtracking engine. Pure logic; the
streaming evaluation over a stored document is `_jsonpath`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any

from iregexp_check import check as is_iregexp
from jsonpath_rfc9535 import JSONPathEnvironment, JSONPathError, JSONPathQuery
from jsonpath_rfc9535.function_extensions import ExpressionType, FilterFunction
from jsonpath_rfc9535.lex import tokenize
from jsonpath_rfc9535.segments import JSONPathChildSegment, JSONPathSegment
from jsonpath_rfc9535.selectors import IndexSelector, JSONPathSelector, NameSelector, SliceSelector
from jsonpath_rfc9535.tokens import TokenType

__all__ = (
    'MAX_SCANS',
    'WILDCARD',
    'JsonQueryError',
    'JsonQueryLimits',
    'NotQueryableError',
    'Picks',
    'child_segment',
    'compile_query',
    'segments_query',
)


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
    re2: Any = import_module('re2')  # google-re2 ships no type stubs
    options: Any = re2.Options()
    options.log_errors = False
    body = _iregexp_to_re2(pattern)
    try:
        return re2.compile(f'^(?:{body})$' if whole else body, options)
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


ENV = _Environment()


def compile_query(query: object, limits: JsonQueryLimits) -> tuple[JSONPathQuery, bool]:
    """Parse and check `query`; returns it and whether a filter refers to the root (`$`)."""
    if not isinstance(query, str) or not query.strip():
        raise JsonQueryError("path must be a JSONPath query starting with '$', e.g. $.items[0]")
    query = query.strip()
    if len(query) > limits.max_query_chars:
        raise JsonQueryError(f'path is {len(query)} characters long; the limit is {limits.max_query_chars}.')
    try:
        tokens = tokenize(query)
        compiled = ENV.compile(query)
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


MAX_SCANS = 4
"""Most different wildcard and filter selectors in one bracket over a container too big to load: each reads all
of its children once."""


@dataclass
class Picks:
    """What a bracket's name, index and slice selectors select among a container's children."""

    is_object: bool
    names: set[str]
    indices: list[int]
    slices: list[SliceSelector]
    count: int = 0
    multiplicity: Counter[str | int] = field(default_factory=Counter[str | int])
    _index_hits: Counter[int] | None = None
    _ranges: list[range] = field(default_factory=list[range])

    @classmethod
    def of(cls, selectors: Sequence[JSONPathSelector], kind: bytes) -> Picks:
        names = {s.name for s in selectors if isinstance(s, NameSelector)} if kind == b'{' else set[str]()
        is_array = kind == b'['
        indices = [s.index for s in selectors if isinstance(s, IndexSelector)] if is_array else []
        slices = [s for s in selectors if isinstance(s, SliceSelector)] if is_array else []
        scans = Counter(str(s) for s in selectors if not isinstance(s, (NameSelector, IndexSelector, SliceSelector)))
        if len(scans) > MAX_SCANS:
            raise JsonQueryError(
                f'a bracket holds {len(scans)} different wildcard or filter selectors; at most {MAX_SCANS} are allowed '
                'on a large container, since each one reads all of its children. Split the query.'
            )
        picks = cls(kind == b'{', names, indices, slices)
        for name in names:
            picks.multiplicity[name] = sum(1 for s in selectors if isinstance(s, NameSelector) and s.name == name)
        return picks

    @property
    def needs_count(self) -> bool:
        return bool(self.slices) or any(index < 0 for index in self.indices)

    def wanted(self) -> bool:
        return bool(self.names or self.indices or self.slices)

    def _index(self, index: int) -> int:
        return index + self.count if index < 0 else index

    def targets(self, selector: JSONPathSelector) -> Iterable[str | int]:
        """The keys `selector` picks, in its order (a slice with a negative step selects in reverse)."""
        if isinstance(selector, NameSelector):
            return (selector.name,) if self.is_object else ()
        if isinstance(selector, IndexSelector):
            return (self._index(selector.index),) if self.indices else ()
        if isinstance(selector, SliceSelector) and self.slices:
            return range(*selector.slice.indices(self.count))
        return ()

    def selects(self, index: int) -> bool:
        """Whether some index or slice selects the child at `index`; counts how many do."""
        if self._index_hits is None:
            self._index_hits = Counter(self._index(wanted) for wanted in self.indices)
            self._ranges = [range(*selector.slice.indices(self.count)) for selector in self.slices]
        hits = self._index_hits.get(index, 0)
        for selected in self._ranges:
            if index in selected:
                hits += 1
        if hits > 1:
            self.multiplicity[index] = hits
        return hits > 0


WILDCARD: JSONPathSelector = ENV.compile('$[*]').segments[0].selectors[0]


def child_segment(selectors: tuple[JSONPathSelector, ...]) -> JSONPathSegment:
    return JSONPathChildSegment(env=ENV, token=selectors[0].token, selectors=selectors)


def segments_query(segments: tuple[JSONPathSegment, ...]) -> JSONPathQuery:
    return JSONPathQuery(env=ENV, segments=segments)
