r"""The literals a regular expression's every match must contain, so a grep can skip lines that hold none of them.

`required_literals('ERROR worker-[0-9]+ failed|WARN needle-\\w+')` is `(b'ERROR worker-', b'WARN needle-')`: a
line without either cannot match, and `bytes.find` rules it out far faster than RE2 would. The pattern is read
with Python's own regex parser, whose syntax is RE2's wherever both accept a pattern, except for a few constructs
they read differently; a pattern using any of those, or anything this module does not understand, gets no
literals (the grep then runs RE2 on every line, as it would without this module).
"""

from __future__ import annotations

import importlib
import itertools
import re
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = ('max_match_bytes', 'required_literals')


def _parser_modules() -> tuple[Any, Any]:
    # Python's regex parser and its constants: `re._parser` since 3.11, `sre_parse` (deprecated since) before.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        try:
            parser = importlib.import_module('re._parser')
            constants = importlib.import_module('re._constants')
        except ImportError:  # pragma: no cover - Python 3.10
            parser = importlib.import_module('sre_parse')
            constants = importlib.import_module('sre_constants')
    return parser, constants


_PARSER, _CONSTANTS = _parser_modules()

_MAX_SET = 16
"""The most alternatives a set of literals may hold (`[Ee]rror|FAIL` is 3)."""

_MAX_LITERAL = 64
"""The longest literal kept in an exact set; longer runs are cut into separate requirements."""

_MIN_USEFUL = 3
"""Literals shorter than this find too many candidate lines to be worth it."""

_MAX_USEFUL_SET = 8
"""More alternatives than this cost more finds per block than RE2 costs to run."""

_AMBIGUOUS = ('[:', '\\Q', '\\E', '{,', '\\C', '\\p', '\\P', '(?U', '\\z', '\\x{', '(?<')
"""Constructs RE2 and Python's parser read differently (POSIX classes, quoting, `{,n}` which RE2 takes literally,
and so on): a pattern with any of them gets no literals."""


@dataclass(frozen=True)
class _Info:
    """What every match of a piece of a pattern looks like, as far as literals go."""

    exact: frozenset[str] | None
    """All the strings the piece can match, when that is a small set (`{''}` for zero-width assertions)."""

    required: frozenset[str] | None
    """Strings one of which every match contains (none of them empty), or `None` when nothing is known."""

    def best(self) -> frozenset[str] | None:
        """The requirement to use for this piece on its own: its exact set when it has one."""
        if self.exact is not None and '' not in self.exact:
            return self.exact
        return self.required


_UNKNOWN = _Info(None, None)
_EMPTY = _Info(frozenset({''}), None)


def required_literals(pattern: str) -> tuple[bytes, ...]:
    """UTF-8 literals one of which every match of `pattern` (an RE2 regex, case-sensitive) contains; `()` if unsure."""
    if any(construct in pattern for construct in _AMBIGUOUS):
        return ()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error')  # a FutureWarning means Python reads the pattern in a way RE2 may not
            parsed: Any = _PARSER.parse(pattern, 0)
        if parsed.state.flags & re.IGNORECASE:
            return ()
        found = _sequence(list(parsed)).best()
    except Exception:  # noqa: BLE001 - anything the parser refuses or this module does not expect: no literals
        return ()
    if not found or len(found) > _MAX_USEFUL_SET or min(len(text) for text in found) < _MIN_USEFUL:
        return ()
    return tuple(sorted(text.encode('utf-8', 'surrogatepass') for text in found))


_UNBOUNDED = 1 << 32
"""A width Python's parser gives a repetition without an upper bound (`*`, `+`, `{n,}`) or beyond."""


def max_match_bytes(pattern: str) -> int | None:
    """The most UTF-8 bytes a match of `pattern` (an RE2 regex) can span; `None` when unbounded or unsure."""
    if any(construct in pattern for construct in _AMBIGUOUS):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            _low, high = _PARSER.parse(pattern, 0).getwidth()
    except Exception:  # noqa: BLE001 - anything the parser refuses: unsure
        return None
    return None if high >= _UNBOUNDED else 4 * int(high)  # a character is at most 4 bytes


def _sequence(items: list[tuple[Any, Any]]) -> _Info:
    """A concatenation: runs of exact pieces join into exact strings; the best requirement of all wins."""
    infos = [_item(op, argument) for op, argument in items]
    candidates: list[frozenset[str]] = []
    run: frozenset[str] = frozenset({''})
    whole: frozenset[str] | None = frozenset({''})
    for info in infos:
        if info.exact is not None:
            joined = _product(run, info.exact)
            if joined is not None:
                run = joined
                whole = _product(whole, info.exact) if whole is not None else None
                continue
        # The run ends here: it is required as it stands (it matches a contiguous part of every match).
        candidates.append(run)
        whole = None
        if info.required is not None:
            candidates.append(info.required)
        run = info.exact if info.exact is not None else frozenset({''})
    candidates.append(run)
    required = _strongest([c for c in candidates if '' not in c])
    return _Info(whole, required)


def _union(sets: list[frozenset[str] | None]) -> frozenset[str] | None:
    """All the strings of `sets` (the alternatives of a branch), unless one is unknown or there are too many."""
    joined: set[str] = set()
    for found in sets:
        if found is None:
            return None
        joined |= found
    return frozenset(joined) if len(joined) <= _MAX_SET else None


def _product(left: frozenset[str], right: frozenset[str]) -> frozenset[str] | None:
    if len(left) * len(right) > _MAX_SET:
        return None
    joined = frozenset(a + b for a, b in itertools.product(left, right))
    return joined if max(len(text) for text in joined) <= _MAX_LITERAL else None


def _strongest(sets: list[frozenset[str]]) -> frozenset[str] | None:
    """The set whose shortest literal is longest (the rarest to find by chance), fewer alternatives first."""
    if not sets:
        return None
    return max(sets, key=lambda found: (min(len(text) for text in found), -len(found)))


def _item(op: Any, argument: Any) -> _Info:
    c = _CONSTANTS
    if op is c.LITERAL:
        return _Info(frozenset({chr(argument)}), None)
    if op is c.AT:
        return _EMPTY  # zero-width (`^`, `$`, `\b`): what is on each side is still adjacent in the match
    if op is c.SUBPATTERN:
        _group, add_flags, _del_flags, body = argument
        if add_flags & re.IGNORECASE:
            return _UNKNOWN
        return _sequence(list(body))
    if op is c.BRANCH:
        branches = [_sequence(list(body)) for body in argument[1]]
        return _Info(_union([b.exact for b in branches]), _union([b.best() for b in branches]))
    if op is c.IN:
        chars: set[str] = set()
        for member_op, member in argument:
            if member_op is not c.LITERAL:
                return _UNKNOWN
            chars.add(chr(member))
        return _Info(frozenset(chars), None) if len(chars) <= _MAX_SET else _UNKNOWN
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, 'POSSESSIVE_REPEAT', c.MAX_REPEAT)):
        low, high, body = argument
        if low < 1:
            return _UNKNOWN
        inner = _sequence(list(body))
        if low == high == 1:
            return inner
        return _Info(None, inner.best())  # at least one repetition is in every match
    if op is getattr(c, 'ATOMIC_GROUP', None):
        return _sequence(list(argument))
    return _UNKNOWN
