"""A line too long for one regex search is searched in overlapping windows, and a scan stopped anywhere (inside a
line too) goes on there: both answer exactly what one search of each whole line answers.

How much one regex search covers depends on the pattern's compiled program alone; here the program is taken as
the largest accepted (20,000 instructions), so the windows are their smallest (1 KiB, overlapping by 256 bytes)
and lines of a few KiB are searched in many. The reference is Python's `re` on each line, over the bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from pydantic_ai_harness.overflowing_tool_output._search._grep import GrepResult, Hit, grep_lines
from pydantic_ai_harness.overflowing_tool_output._search._grep_scan import Pacer
from pydantic_ai_harness.overflowing_tool_output._search._matcher import MAX_PROGRAM_SIZE, Matcher
from pydantic_ai_harness.overflowing_tool_output._search._query import Payload
from pydantic_ai_harness.overflowing_tool_output.stores import build_line_index

PATTERNS = [
    'ab+x',
    r'\bab\b',
    '^ab',
    'xa$',
    'b[ax]{3,9}b',
    '(?:ax|xb){2}',
    'a b',
    'bab',
]
"""Patterns whose matches are at most a few bytes long (within the overlap), with anchors and word boundaries that
a window's edge must not fake."""

_CHUNKS = st.sampled_from(['a', 'b', 'x', ' ', 'ab', 'bab', 'xa', 'axbx', 'abbbx'])
_LINE = st.one_of(
    st.lists(_CHUNKS, max_size=8).map(''.join),
    st.lists(_CHUNKS, min_size=600, max_size=2_500).map(''.join),  # 1-8 KB: searched in windows
)
_TEXT = st.lists(_LINE, min_size=1, max_size=6).map('\n'.join)


def _payload(data: bytes) -> Payload:
    async def read_range(start: int, end: int) -> bytes:
        return data[max(0, start) : max(0, end)]

    return Payload('h', build_line_index(data), read_range)


def _small_windows(pattern: str) -> Matcher:
    return replace(Matcher.compile(pattern, is_regex=True), program_size=MAX_PROGRAM_SIZE)


def _reference(pattern: str, data: bytes, *, each_match: bool) -> list[tuple[int, int]]:
    """`(line, match start)` of each matching line (its first match), or of every match."""
    compiled = re.compile(pattern.encode())
    found: list[tuple[int, int]] = []
    start = 0
    for number, line in enumerate(data.split(b'\n'), 1):
        spans = [match.start() for match in compiled.finditer(line)]
        found += [(number, start + at) for at in (spans if each_match else spans[:1])]
        start += len(line) + 1
    return found


def _spans(hits: list[Hit]) -> list[tuple[int, int]]:
    return [(hit.line, hit.match_start) for hit in hits]


def test_the_windows_here_are_the_smallest() -> None:
    pacer = Pacer(_small_windows('ab+x'))
    assert (pacer.line_limit(), pacer.overlap()) == (1024, 256)


@settings(max_examples=200, deadline=None)
@given(pattern=st.sampled_from(PATTERNS), text=_TEXT, each_match=st.booleans())
def test_lines_searched_in_windows_answer_what_whole_lines_do(pattern: str, text: str, each_match: bool) -> None:
    data = text.encode()
    matcher = _small_windows(pattern)

    async def check() -> None:
        payload = _payload(data)
        for used in (matcher, replace(matcher, required=(), finders=())):  # with and without the prefilter
            result = await grep_lines(
                payload, used, max_hits=10_000, deadline=math.inf, each_match_over=0 if each_match else None
            )
            assert _spans(result.hits) == _reference(pattern, data, each_match=each_match)
            # A match is never longer than the overlap here, so nothing can hide where windows meet.
            assert result.complete and not result.windowed_lines

    anyio.run(check)


@settings(max_examples=100, deadline=None)
@given(pattern=st.sampled_from(PATTERNS), text=_TEXT, each_match=st.booleans(), literal=st.booleans())
def test_a_scan_continued_where_its_deadline_stopped_it_finds_what_one_scan_finds(
    pattern: str, text: str, each_match: bool, literal: bool
) -> None:
    """No time at all: each call makes one step (a window, or a block) and says where it stopped, inside a line
    or at its start; calls that go on from there find, together, exactly what one call with time finds."""
    data = text.encode()
    matcher = Matcher.compile(pattern, is_regex=False) if literal else _small_windows(pattern)
    each_match_over = 0 if each_match else None

    async def check() -> None:
        payload = _payload(data)
        whole = await grep_lines(payload, matcher, max_hits=10_000, deadline=math.inf, each_match_over=each_match_over)
        hits: list[Hit] = []
        results: list[GrepResult] = []
        position: int | None = None
        while len(results) < 5_000:
            result = await grep_lines(
                payload, matcher, first_byte=position, max_hits=10_000, deadline=0.0, each_match_over=each_match_over
            )
            results.append(result)
            hits += result.hits
            if result.complete:
                break
            assert result.out_of_time and (position is None or result.stopped_at_byte > position)  # it got further
            position = result.stopped_at_byte
        assert results[-1].complete
        assert _spans(hits) == _spans(whole.hits)
        assert sum(result.total for result in results) == whole.total

    anyio.run(check)


@pytest.mark.anyio
async def test_a_match_across_the_edge_of_two_pieces_of_a_long_line_is_found() -> None:
    """A line longer than a scan block is read 4 MiB at a time: a match crossing where two pieces meet is found,
    once, by a literal and by a regex, and counted once when each match counts."""
    edge = 4 << 20
    line = bytearray(b'xy' * (9 << 19))  # 9 MiB of one line
    for at in (edge - 5, 2 * edge - 1, 100):
        line[at : at + 10] = b'TOKEN-1234'
    data = b'head\n' + bytes(line) + b'\ntail TOKEN-9\n'
    payload = _payload(data)
    starts = [5 + 100, 5 + edge - 5, 5 + 2 * edge - 1, len(data) - 8]
    for matcher in (Matcher.compile('TOKEN-', is_regex=False), Matcher.compile(r'TOKEN-\d+', is_regex=True)):
        result = await grep_lines(payload, matcher, max_hits=100, deadline=math.inf, each_match_over=16_000)
        assert [hit.match_start for hit in result.hits] == starts
        assert (result.total, result.match_hits, result.complete) == (4, 3, True)
        first_only = await grep_lines(payload, matcher, max_hits=100, deadline=math.inf)
        assert _spans(first_only.hits) == [(2, starts[0]), (3, starts[3])]
