r"""The value a path query shows for a match, as the stored text spells it. Pure logic for `_jsonpath`.

A query runs on values `json.loads` read from the stored text, and writing one of those back would change what
the tool wrote: `1e400` would read `Infinity`, `1.10` `1.1`, `"\u0041"` `"A"`, and an object with a duplicate
name would lose the first member. So the value shown is the stored text's own, cut out of it: the stored value
the match is in (its anchor: a member on its line, a batch's child, or a document loaded whole) is read, and the
match is found in it by its path relative to the anchor, each member on the way skipped by Python's C JSON
scanner. Of two members with the same name the last one is the match, as it is for `json.loads`. Bounded: at
most `WALK_STEPS` members are skipped to find one match, and anchors larger than a value shown whole are not read;
`None` (show the value as read) otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .._rendering._json_text import squeezed

__all__ = ('WALK_STEPS', 'Spelling')

Reader = Callable[[int, int], bytes]

WALK_STEPS = 2_000
"""Members skipped, at most, to find one match in its anchor."""

_SPACE = re.compile(r'[ \t\n\r]*')

_DECODER = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)
"""Reads a value only to find where it ends: numbers stay text (no digit limit, no float conversion)."""


class _TooFar(Exception):
    """The match is more than `WALK_STEPS` members into its anchor."""


class Spelling:
    """The values of one query's matches, as the stored text spells them (the last anchor read is kept)."""

    def __init__(self, read: Reader, *, whole_bytes: int, limit: int) -> None:
        self._read = read
        self._whole_bytes = whole_bytes
        """The largest value shown whole (a larger one is described, not shown)."""
        self._limit = limit
        """Characters shown of a value; the rest is counted."""
        self._anchor: tuple[int, int, str] = (0, 0, '')

    def value(self, start: int, end: int, relative: tuple[str | int, ...]) -> str | None:
        """The compact text of the value at `relative` in the stored value `[start, end)`, cut to the limit.

        `None` when it cannot be cut out cheaply.
        """
        if end - start > self._whole_bytes:
            return None
        if self._anchor[:2] != (start, end):
            self._anchor = (start, end, self._read(start, end).decode('utf-8', 'surrogatepass'))
        text = self._anchor[2]
        try:
            at, stop = _find(text, relative)
        except (ValueError, IndexError, _TooFar):
            return None
        value = squeezed(text[at:stop])
        if len(value) <= self._limit:
            return value
        return f'{value[: self._limit]}... ({len(value) - self._limit} more characters)'


def _find(text: str, relative: tuple[str | int, ...]) -> tuple[int, int]:
    """Where the value at `relative` starts and ends in `text` (one JSON value); `ValueError` when it is not there."""
    at = _skip(text, 0)
    steps = [WALK_STEPS]
    for step in relative:
        opening = text[at : at + 1]
        if opening == '{' and isinstance(step, str):
            at = _member(text, at, step, steps)
        elif opening == '[' and isinstance(step, int):
            at = _element(text, at, step, steps)
        else:
            raise ValueError(step)
    return at, _DECODER.raw_decode(text, at)[1]


def _member(text: str, at: int, name: str, steps: list[int]) -> int:
    """Where the value of the last member called `name` of the object at `at` starts."""
    found = -1
    at = _skip(text, at + 1)
    while text[at] != '}':
        _spend(steps)
        key, after = _DECODER.raw_decode(text, at)
        value_at = _skip(text, _skip(text, after) + 1)  # past the colon
        if key == name:
            found = value_at
        at = _next(text, _DECODER.raw_decode(text, value_at)[1])
    if found == -1:
        raise ValueError(name)
    return found


def _element(text: str, at: int, index: int, steps: list[int]) -> int:
    """Where element `index` of the array at `at` starts."""
    at = _skip(text, at + 1)
    for _ in range(index):
        _spend(steps)
        at = _next(text, _DECODER.raw_decode(text, at)[1])
    if text[at] == ']':
        raise ValueError(index)
    return at


def _spend(steps: list[int]) -> None:
    steps[0] -= 1
    if steps[0] < 0:
        raise _TooFar


def _next(text: str, end: int) -> int:
    """Past the comma after a member ending at `end`, or at the container's closing bracket."""
    at = _skip(text, end)
    return _skip(text, at + 1) if text[at] == ',' else at


def _skip(text: str, at: int) -> int:
    found = _SPACE.match(text, at)
    return found.end() if found is not None else at
