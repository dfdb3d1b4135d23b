"""Grep's fast paths: a regex is prefiltered by the literals its matches must contain, literals are found through
their rarest byte, and a scan reads a stored payload through one open handle. Each answers exactly what the plain
path answers."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset
from pydantic_ai_harness.overflowing_tool_output._search._grep import grep_lines, grep_lines_backward
from pydantic_ai_harness.overflowing_tool_output._search._grep_bytes import grep_bytes
from pydantic_ai_harness.overflowing_tool_output._search._literals import required_literals
from pydantic_ai_harness.overflowing_tool_output._search._matcher import LiteralSearch, Matcher
from pydantic_ai_harness.overflowing_tool_output._search._query import SCAN_BLOCK, Payload, open_payload
from pydantic_ai_harness.overflowing_tool_output.stores import HandleNotFoundError, LocalFileStore, build_line_index

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ('pattern', 'literals'),
    [
        ('ERROR worker-[0-9]+ failed|WARN needle-[0-9a-z]+x', (b'ERROR worker-', b'WARN needle-')),
        ('[a-z]+ needle-0x[0-9A-F]+', (b' needle-0x',)),
        ('[Ee]rror: (foo|bar)', (b'Error: bar', b'Error: foo', b'error: bar', b'error: foo')),
        (r'\bFAILED\b', (b'FAILED',)),
        ('(abc)*def', (b'def',)),
        ('(?:abc)+xyz', (b'abc',)),
        ('é+llo', (b'llo',)),
        ('ab\\bcd', (b'abcd',)),
        ('naïve [0-9]', ('naïve '.encode(),)),
        # Nothing every match must contain, or too little to be worth a prefilter.
        ('foo|[0-9]+', ()),
        (r'\d{3}-\d{4}', ()),
        ('ab|cd', ()),
        ('a+', ()),
        # Case-insensitive: the literal's case is not known.
        ('(?i)needle', ()),
        ('ab(?i:cdef)', ()),
        # Constructs RE2 reads differently from Python's parser: never trusted.
        ('x{,3}yyyy', ()),
        ('[[:alpha:]]zzzz', ()),
        (r'\Qa.b\E', ()),
    ],
)
def test_required_literals(pattern: str, literals: tuple[bytes, ...]) -> None:
    assert required_literals(pattern) == literals


_ATOMS = st.sampled_from(
    ['ab', 'abc', 'cab', 'b', 'c', 'x', '.', '[ab]', '[^a]', r'\b', '^', '$', r'\w', ' ', 'é', 'err', 'or']
)


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            inner = '|'.join(draw(st.lists(_patterns(depth + 1), min_size=1, max_size=3)))
            parts.append(f'(?:{inner})')
        else:
            parts.append(draw(_ATOMS))
        parts[-1] += draw(st.sampled_from(['', '', '', '*', '+', '?', '{2}', '{1,3}']))
    return ''.join(parts)


_TEXT = st.lists(st.text(alphabet='abcx éeorr\n', max_size=40), max_size=12).map('\n'.join)


def _all_matches(matcher: Matcher, data: bytes) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    position = 0
    while position <= len(data):
        start, end = matcher.search(data, position, len(data))
        if start == -1:
            break
        spans.append((start, end))
        position = max(end, start + 1)
    return spans


@settings(max_examples=300, deadline=None)
@given(pattern=_patterns(), text=_TEXT)
def test_every_match_contains_a_required_literal(pattern: str, text: str) -> None:
    literals = required_literals(pattern)
    if not literals:
        return
    data = text.encode()
    matcher = Matcher.compile(pattern, is_regex=True)
    for start, end in _all_matches(matcher, data):
        assert any(literal in data[start:end] for literal in literals), (pattern, data[start:end])


def _payload(data: bytes) -> Payload:
    async def read_range(start: int, end: int) -> bytes:
        return data[max(0, start) : max(0, end)]

    return Payload('h', build_line_index(data), read_range)


def _unfiltered(matcher: Matcher) -> Matcher:
    return replace(matcher, required=(), finders=())


@settings(max_examples=150, deadline=None)
@given(
    pattern=_patterns().map(lambda p: 'err' + p),  # ensure some literal, anywhere but at the very start
    text=_TEXT,
    max_hits=st.integers(1, 5),
)
def test_a_prefiltered_grep_answers_exactly_what_rE2_alone_does(pattern: str, text: str, max_hits: int) -> None:
    data = text.encode()
    pattern = f'[a-z ]*{pattern}'
    matcher = Matcher.compile(pattern, is_regex=True)
    plain = _unfiltered(matcher)

    async def check() -> None:
        payload = _payload(data)
        for keep_last in (False, True):
            fast = await grep_lines(payload, matcher, max_hits=max_hits, keep_last=keep_last, deadline=math.inf)
            slow = await grep_lines(payload, plain, max_hits=max_hits, keep_last=keep_last, deadline=math.inf)
            assert fast == slow
        lines = payload.index.line_count
        fast = await grep_lines_backward(payload, matcher, end_line=lines, max_hits=max_hits, deadline=math.inf)
        slow = await grep_lines_backward(payload, plain, end_line=lines, max_hits=max_hits, deadline=math.inf)
        assert fast == slow

    if matcher.required:
        anyio.run(check)


def test_the_benchmark_patterns_are_prefiltered_where_it_pays() -> None:
    assert Matcher.compile('ERROR worker-[0-9]+ failed|WARN needle-[0-9a-z]+x', is_regex=True).required
    # A literal prefix too: RE2 skips to its first byte only, the prefilter to its rarest (and gives way to RE2 alone
    # where candidates are on nearly every line).
    assert Matcher.compile('WARN needle-0x[0-9A-F]+', is_regex=True).required


@settings(max_examples=300, deadline=None)
@given(
    literal=st.binary(min_size=1, max_size=6),
    haystack=st.lists(st.sampled_from([b'a', b'b', b'A', b'\xff', b'\n', b'ab', b'Ab\xff', b'%', b' ']), max_size=60),
    start=st.integers(0, 70),
    end=st.integers(0, 70),
)
def test_a_literal_search_finds_what_bytes_find_finds(
    literal: bytes, haystack: list[bytes], start: int, end: int
) -> None:
    data = b''.join(haystack)
    data = data[: len(data) // 2] + literal + data[len(data) // 2 :]
    search = LiteralSearch(literal)
    assert search.find(data, start, end) == data.find(literal, start, end)
    assert search.find(bytearray(data), start, end) == data.find(literal, start, end)


def test_a_literal_search_with_many_false_candidates_stays_exact() -> None:
    # Every `X` is a candidate for the rarest byte of `aaaX!`; only the last one is preceded by `aaa`.
    data = b'X!' * 10_000 + b'aaaX!'
    assert LiteralSearch(b'aaaX!').find(data, 0, len(data)) == len(data) - 5


_FILLERS = [b'INFO worker-1 handled request in 3 ms\n', b'abcabcabc ', b'\xff\xfe ', b'X' * 7, b'failed failed\n']


@settings(max_examples=60, deadline=None)
@given(
    literal=st.sampled_from([b' failed', b'abc', b'X!', b'\xfe failed', b'request in', b'zz top']),
    filler=st.sampled_from(_FILLERS),
    places=st.lists(st.integers(0, 200_000), max_size=4),
    starts=st.lists(st.integers(0, 200_000), min_size=1, max_size=4),
)
def test_a_literal_search_that_samples_its_text_finds_what_bytes_find_finds(
    literal: bytes, filler: bytes, places: list[int], starts: list[int]
) -> None:
    """The first search over 64 KiB or more counts the literal's bytes there and starts at the rarest: every later
    search of the same `LiteralSearch` (anywhere, in any text) still answers exactly as `bytes.find` does."""
    data = bytearray(filler * (150_000 // len(filler)))
    for place in sorted(places, reverse=True):
        data[place:place] = literal
    search = LiteralSearch(literal)
    for start in [0, *starts]:  # the first search samples the text
        assert search.find(data, start, len(data)) == data.find(literal, start)
        assert search.find(bytes(data), start, start + 1_000) == data.find(literal, start, start + 1_000)
    assert search.find(b'no match here' + literal, 0, 100) == 13


@settings(max_examples=40, deadline=None)
@given(
    pattern=st.sampled_from(['[0-9]{8} failed', '[a-z]+ failed|req [0-9]', '[0-9] request in', 'b?c fail(ed)?$']),
    filler=st.sampled_from(_FILLERS),
    lines=st.lists(st.sampled_from(['12345678 failed', 'a failed', 'req 3 request in 9', 'bc fail', 'X!']), max_size=6),
    places=st.lists(st.integers(0, 300_000), max_size=6),
)
def test_a_prefiltered_grep_of_a_large_payload_answers_exactly_what_rE2_alone_does(
    pattern: str, filler: bytes, lines: list[str], places: list[int]
) -> None:
    """Over blocks large enough that the prefilter samples its text, it finds the lines RE2 alone finds."""
    data = bytearray(filler * (300_000 // len(filler)))
    for place, line in sorted(zip(places, lines), reverse=True):
        data[place:place] = f'\n{line}\n'.encode()
    matcher = Matcher.compile(pattern, is_regex=True)
    assert matcher.required

    async def check() -> None:
        payload = _payload(bytes(data))
        for max_hits in (1, 100):
            fast = await grep_lines(payload, matcher, max_hits=max_hits, deadline=math.inf)
            slow = await grep_lines(payload, _unfiltered(matcher), max_hits=max_hits, deadline=math.inf)
            assert fast == slow

    anyio.run(check)


async def test_grep_reads_a_local_payload_through_one_open_handle(tmp_path: Path) -> None:
    class CountingStore(LocalFileStore):
        """The local store, counting how the query code reaches the payload."""

        opened: int = 0
        range_reads: int = 0

        async def open_reader(self, handle: str):
            type(self).opened += 1
            return await super().open_reader(handle)

        async def read_range(self, handle: str, start: int, end: int) -> bytes:
            type(self).range_reads += 1
            return await super().read_range(handle, start, end)

    store = CountingStore(base_dir=tmp_path / 'spill')
    lines = b''.join(b'line %d: all is well\n' % n for n in range(600_000))  # ~13 MB: several blocks
    assert len(lines) > 3 * SCAN_BLOCK
    handle = await store.write('run/call/0', lines + b'the needle\n')
    payload = await open_payload(store, handle)
    result = await grep_lines(payload, Matcher.compile('needle', is_regex=False), max_hits=5, deadline=math.inf)
    assert [hit.line for hit in result.hits] == [600_001]
    assert CountingStore.opened == 1
    assert CountingStore.range_reads <= 2  # a line lookup or two, never one read per block
    binary = await store.write('run/call/1', b'\x00' * (2 * SCAN_BLOCK) + b'needle')
    found = await grep_bytes(
        await open_payload(store, binary), Matcher.compile('needle', is_regex=False), max_hits=3, deadline=math.inf
    )
    assert [hit.match_start for hit in found.hits] == [2 * SCAN_BLOCK]
    assert CountingStore.opened == 2


async def test_an_open_payload_file_reads_ranges_and_closes_once(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    data = bytes(range(256)) * 100
    reader = await store.open_reader(await store.write('run/call/0', data))
    buffer = bytearray(b'left over from an earlier block')
    reader.read_into(buffer, 100, 300)
    assert buffer == data[100:300]
    reader.read_into(buffer, len(data) - 5, len(data) + 50)  # clamped to the payload
    assert buffer == data[-5:]
    reader.read_into(buffer, len(data) + 1, len(data) + 9)
    assert buffer == b''
    reader.close()
    reader.close()  # idempotent
    with pytest.raises(ValueError, match='closed'):
        reader.read_into(buffer, 0, 1)


async def test_open_reader_refuses_what_reads_refuse(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('run/call/0', b'secret')
    with pytest.raises(HandleNotFoundError):
        await store.open_reader('run/unknown/0')
    with pytest.raises(HandleNotFoundError):
        await store.open_reader('../../etc/passwd')
    # A payload swapped for a symlink is refused like every other read.
    payload_file = next((tmp_path / 'spill').rglob('0.out'))
    outside = tmp_path / 'outside.txt'
    outside.write_bytes(b'not yours')
    os.replace(payload_file, tmp_path / 'moved')
    payload_file.symlink_to(outside)
    with pytest.raises(HandleNotFoundError):
        await store.open_reader(handle)


async def test_the_grep_tool_answers_the_same_through_the_fast_paths(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    text = ''.join(
        f'2024-05-01 INFO worker-{n % 7} handled request {n}\n'
        if n % 997
        else f'2024-05-01 ERROR worker-{n % 7} failed: ConnectionResetError at {n}\n'
        for n in range(200_000)
    )
    handle = await store.write('run/call/0', text.encode())
    grep: Any = build_query_toolset(store).tools['grep_tool_result'].function
    answer = await grep(handle=handle, pattern='ERROR worker-[0-9]+ failed|WARN x', is_regex=True, max_matches=3)
    expected = sum(1 for n in range(200_000) if n % 997 == 0)
    assert answer.startswith(f'{expected} matching lines for ')
    assert '| 2024-05-01 ERROR worker-0 failed: ConnectionResetError at 0' in answer
