r"""Where secrets sit in bytes: token runs found in one sweep, escaped views decoded, spans merged. Pure logic.

A rule's match is widened to the whole token it sits in. Widening each match on its own rescans a long run of
token bytes once per match (quadratic on `ghp_...ghp_...`); here the run ends of all matches are found in one
sweep, each byte read at most once, and a span's checks (placeholder, entropy) read a bounded head of it.

Text often carries a secret escaped: JSON inside a JSON string (`{\"password\": \"...\"}`), escaped slashes
(`postgres:\/\/app:pw@db`). `unescaped_views` gives the text with those escapes decoded, up to three levels deep,
with a map back to the source's offsets, so the same rules match there too.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ('CHECKED_HEAD', 'TokenRuns', 'UnescapedView', 'entropy', 'merge_spans', 'unescaped_views')

_TOKEN_CLASS = rb'A-Za-z0-9_+/=.~-'
_FORWARD = re.compile(rb'[' + _TOKEN_CLASS + rb']*')
"""Bytes a secret extends over, forwards."""
_BACKWARD = re.compile(rb'[A-Za-z0-9_+/.~-]*')
"""Bytes a secret extends over, backwards: not over `=`, which ends the key of `KEY=value`."""
_DOTS = re.compile(rb'\.*')

CHECKED_HEAD = 256
"""Bytes of a span its placeholder and entropy checks read: longer spans are judged by their head, so the checks
of many spans sharing one long run cost a bounded amount each."""

_MAX_DEPTH = 3
"""Levels of escaping decoded: JSON in a string in a string in a string."""

_ESCAPE = re.compile(rb'\\([\\"/nrt])')
_UNESCAPED = {b'\\': b'\\', b'"': b'"', b'/': b'/', b'n': b'\n', b'r': b'\r', b't': b'\t'}


_COUNT_LOG_COUNT = [0.0, *(count * math.log2(count) for count in range(1, CHECKED_HEAD + 1))]


def entropy(text: bytes) -> float:
    """Shannon entropy of `text` (at most `CHECKED_HEAD` bytes), in bits per byte."""
    total = len(text)
    # H = log2(n) - sum(c * log2(c)) / n, the terms read from a table.
    return math.log2(total) - math.fsum(map(_COUNT_LOG_COUNT.__getitem__, Counter(text).values())) / total


class TokenRuns:
    """The ends of the token runs around positions of one text, each byte read at most once per direction."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._reversed = data[::-1]
        self._dots: dict[int, int] = {}

    def run_ends(self, positions: Iterable[int]) -> dict[int, int]:
        """For each position, where the run of token bytes starting there ends."""
        return _sweep(self._data, positions, _FORWARD, len(self._data))

    def run_starts(self, positions: Iterable[int]) -> dict[int, int]:
        """For each position, where the run of token bytes (`=` aside) ending there starts."""
        size = len(self._data)
        ends = _sweep(self._reversed, (size - position for position in positions), _BACKWARD, size)
        return {size - position: size - end for position, end in ends.items()}

    def without_full_stops(self, start: int, end: int) -> int:
        """`end` moved back over the full stops before it (they end a sentence, not a secret), not before `start`."""
        dots = self._dots.get(end)
        if dots is None:
            back = len(self._data) - end
            found = _DOTS.match(self._reversed, back)
            dots = self._dots[end] = found.end() - back if found is not None else 0
        return max(start, end - dots)


def _sweep(data: bytes, positions: Iterable[int], run: re.Pattern[bytes], size: int) -> dict[int, int]:
    """Where `run` ends from each position, visiting positions from the last: a byte already known to be in the run
    of a later position is never read again.
    """
    ends: dict[int, int] = {}
    low = high = size  # data[low:high] is one run, ending at high
    for position in sorted(set(positions), reverse=True):
        if position >= low:
            ends[position] = high
            continue
        reached = run.match(data, position, low)
        stop = reached.end() if reached is not None else position
        if stop == low:
            ends[position] = high
        else:
            ends[position] = high = stop
        low = position
    return ends


def merge_spans(spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans as one, named by the longest of them; sorted, disjoint."""
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans, key=lambda span: (span[0], -span[1])):
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            if end - start > last_end - last_start:
                last_kind = kind
            merged[-1] = (last_start, max(last_end, end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged


@dataclass(frozen=True)
class UnescapedView:
    """A text with one more level of backslash escapes decoded, and how to map its offsets back to the source."""

    data: bytes
    """The decoded bytes."""

    shifted: list[int]
    """Offsets in `data` of the bytes that lost the backslash before them, ascending."""

    parent: UnescapedView | None
    """The view this one was decoded from; `None` when that is the source itself."""

    def source_offset(self, offset: int) -> int:
        """The source's offset of `offset` here; a decoded byte's span starts at its backslash."""
        offset += bisect_left(self.shifted, offset)
        return self.parent.source_offset(offset) if self.parent is not None else offset


def unescaped_views(data: bytes) -> list[UnescapedView]:
    """`data` with JSON string escapes decoded, one view per level, while a level still has escapes."""
    views: list[UnescapedView] = []
    current = data
    parent: UnescapedView | None = None
    for _ in range(_MAX_DEPTH):
        if b'\\' not in current:
            break
        pieces = _ESCAPE.split(current)
        if len(pieces) == 1:
            break
        texts = pieces[0::2]
        shifted: list[int] = []
        offset = 0
        for text in texts[:-1]:
            offset += len(text)
            shifted.append(offset)
            offset += 1
        pieces[1::2] = [_UNESCAPED[escaped] for escaped in pieces[1::2]]
        current = b''.join(pieces)
        parent = UnescapedView(current, shifted, parent)
        views.append(parent)
    return views
