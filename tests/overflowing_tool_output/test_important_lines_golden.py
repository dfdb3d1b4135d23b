"""The prefiltered important-lines scan selects exactly what the single-pass scan before it selected.

`reference_important_lines` is the implementation as it was before the literal prefilter (copied unchanged), run
on a corpus of varied payloads and on generated ones; both engines (RE2, and Hyperscan when installed) are checked,
and so is the streamed scan (fed in pieces cut at line ends, numbered afterwards from byte offsets).
"""

from __future__ import annotations

import importlib
import json
import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings, strategies as st

from pydantic_ai_harness.overflowing_tool_output._rendering import _important_lines
from pydantic_ai_harness.overflowing_tool_output._rendering._important_lines import (
    _EXCERPT_BEFORE,
    _EXCERPT_BYTES,
    _IMPORTANT,
    _MAX_IMPORTANT,
    _MAX_MATCHES_SCANNED,
    _RANKS,
    LINE_CHARS,
    ImportantLine,
    ImportantLinesScan,
    _HyperscanFinder,
    _LiteralFinder,
    _Re2Finder,
    _spread,
    important_lines,
)
from pydantic_ai_harness.overflowing_tool_output.stores import build_line_index


def reference_important_lines(text: str | bytes) -> tuple[list[ImportantLine], bool]:
    """The single-pass scan as it was before the prefilter (verbatim but for this docstring)."""
    data = text if isinstance(text, bytes) else text.encode('utf-8', 'surrogatepass')
    by_rank: list[list[ImportantLine]] = [[] for _ in _RANKS]
    line_number = 1
    counted_to = 0
    start, end = -1, -1
    shown_until = -1
    scanned = 0
    for match in _IMPORTANT.finditer(data):
        scanned += 1
        if scanned > _MAX_MATCHES_SCANNED:
            break
        at = match.start()
        same_line = start <= at < end
        if not same_line:
            start = data.rfind(b'\n', max(end, 0), at) + 1
            found = data.find(b'\n', at)
            end = found if found != -1 else len(data)
        long_line = end - start > LINE_CHARS
        if same_line and (not long_line or at < shown_until):
            continue
        if not same_line:
            line_number += data.count(b'\n', counted_to, start)
            counted_to = start
        rank = next(rank for rank in range(len(_RANKS)) if match.group(rank + 1) is not None)
        if long_line:
            low = max(start, at - _EXCERPT_BEFORE)
            high = min(end, low + _EXCERPT_BYTES)
            shown_until = high
            excerpt = data[low:high].decode('utf-8', 'replace').strip('\ufffd')
            excerpt = ('[...]' if low > start else '') + excerpt + ('[...]' if high < end else '')
            by_rank[rank].append(ImportantLine(line_number, low - start, excerpt, rank))
        else:
            by_rank[rank].append(ImportantLine(line_number, 0, data[start:end].decode('utf-8', 'replace'), rank))
    chosen: list[ImportantLine] = []
    for found in by_rank:
        chosen += _spread(found, _MAX_IMPORTANT - len(chosen))
    return chosen, scanned > _MAX_MATCHES_SCANNED


def _finders() -> list[_LiteralFinder]:
    finders: list[_LiteralFinder] = [_Re2Finder()]
    try:
        hyperscan = importlib.import_module('hyperscan')
    except ImportError:
        return finders
    return [*finders, _HyperscanFinder(hyperscan)]


FINDERS = _finders()


@pytest.fixture(params=FINDERS, ids=lambda finder: type(finder).__name__)
def finder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> _LiteralFinder:
    chosen: _LiteralFinder = request.param
    monkeypatch.setattr(_important_lines, '_literal_finder', lambda: chosen)
    return chosen


def _log(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    for number in range(lines):
        roll = rng.random()
        if roll < 0.002:
            out.append(f'2024-05-01 ERROR worker-{number % 7} failed: ConnectionResetError at request {number}')
        elif roll < 0.003:
            out.append('Traceback (most recent call last):')
        elif roll < 0.004:
            out.append(f'process exited: exit status {rng.choice([0, 1, 2, 137])}')
        elif roll < 0.0045:
            out.append(f'{rng.randint(1, 9)} failed, {rng.randint(0, 99)} passed in 3.2s')
        elif roll < 0.005:
            out.append('terrors of the deep: mailed and railed, no match here but literals')
        else:
            out.append(f'2024-05-01T12:00:{number % 60:02d} INFO worker-{number % 7} handled request {number} ok')
    return '\n'.join(out) + '\n'


def _test_run() -> str:
    lines = ['============================= test session starts ==============================']
    for number in range(3000):
        lines.append(f'tests/test_mod_{number // 50}.py::test_case_{number} PASSED')
        if number % 411 == 0:
            lines.append(f'tests/test_mod_{number // 50}.py::test_case_{number} FAILED')
            lines.append('E       AssertionError: assert 1 == 2')
            lines.append('E       error[E0382]: borrow of moved value')
    lines.append('FAIL: test_something (tests.TestX)')
    lines.append('panic: runtime error: index out of range')
    lines.append('Segmentation fault (core dumped)')
    lines.append('FATAL: out of memory')
    lines.append('==== 8 failed, 2992 passed, 3 errors in 12.34s ====')
    lines.append('return code: 1')
    return '\n'.join(lines)


def _traceback_in_json() -> str:
    records = [
        {
            'id': number,
            'status': 'failed' if number % 97 == 0 else 'ok',
            'log': (
                'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\nKeyError: \'x\'\n'
                if number % 97 == 0
                else 'fine'
            ),
        }
        for number in range(2000)
    ]
    return json.dumps(records, indent=1)


def _one_long_line() -> str:
    pieces = [f'step {n} ok; ' for n in range(20_000)]
    for at in (10, 5_000, 12_345, 19_999):
        pieces[at] = f'step {at} ValueError: bad value; Error here; exit code 3; '
    return ''.join(pieces)


def _noisy_every_line() -> str:
    return ''.join(f'ERROR {n} failed: TimeoutError in worker\n' for n in range(30_000))


def _noisy_literals_only() -> str:
    return ''.join(f'terrors {n} mailed railed tailored\n' for n in range(20_000))


def _unicode_and_bytes() -> bytes:
    text = 'héllo wörld ✓\nERROR: ünïcode fails here — RuntimeError\n' * 300 + 'lone \udcff surrogate Error\n'
    return text.encode('utf-8', 'surrogatepass') + b'\xff\xfe invalid bytes ERROR\n' + b'no newline at end FAILED'


def _corpus() -> Iterator[tuple[str, str | bytes]]:
    yield 'empty', ''
    yield 'no match', 'all good\n' * 10_000
    yield 'log', _log(40_000, 1)
    yield 'log without trailing newline', _log(5_000, 2).rstrip('\n')
    yield 'test run', _test_run()
    yield 'traceback in json', _traceback_in_json()
    yield 'traceback in compact json', json.dumps(json.loads(_traceback_in_json()))
    yield 'one long line', _one_long_line()
    yield 'noisy, every line matches', _noisy_every_line()
    yield 'noisy literals without a match', _noisy_literals_only()
    yield 'unicode and invalid bytes', _unicode_and_bytes()
    yield 'CRLF', _log(3_000, 3).replace('\n', '\r\n')
    yield 'matches at block edges', ('x' * 65_530 + ' Error\n') * 4 + 'ERROR' + 'y' * 70_000 + ' FAILED\n'


CORPUS = list(_corpus())


@pytest.mark.parametrize(('name', 'payload'), CORPUS, ids=[name for name, _ in CORPUS])
def test_the_prefiltered_scan_selects_exactly_what_the_single_pass_did(
    finder: _LiteralFinder, name: str, payload: str | bytes
) -> None:
    del finder, name
    assert important_lines(payload) == reference_important_lines(payload)


@pytest.mark.parametrize(('name', 'payload'), CORPUS, ids=[name for name, _ in CORPUS])
@pytest.mark.parametrize('piece', [4096, 70_000, 1 << 20])
def test_a_scan_fed_in_pieces_cut_at_line_ends_selects_the_same(name: str, payload: str | bytes, piece: int) -> None:
    del name
    data = payload if isinstance(payload, bytes) else payload.encode('utf-8', 'surrogatepass')
    scan = ImportantLinesScan(count_lines=False)
    position = 0
    while position < len(data):
        cut = data.find(b'\n', position + piece - 1)
        end = len(data) if cut == -1 else cut + 1
        scan.feed(data[position:end], position)
        position = end
    chosen = scan.chosen()
    numbers = scan.numbers_from_index(chosen, build_line_index(data))
    assert numbers == [data.count(b'\n', 0, line.line_start) + 1 for line in chosen]
    assert scan.result(numbers) == reference_important_lines(data)


_FRAGMENTS = [
    'ok ',
    'x',
    '\n',
    ' ',
    'FAILED',
    'FAIL:',
    'FAIL',
    'panic:',
    'FATAL',
    'Segmentation fault',
    '3 failed',
    '0 errors',
    '12 error',
    'exit status 1',
    'exit code: 0',
    'return code=2',
    'return status',
    'error:',
    'error[E12]:',
    'ValueError',
    'MyException',
    'ERROR',
    'Traceback (most recent call last)',
    'Error',
    'error',
    'failed',
    'Failure',
    'failure',
    'terror',
    'mailed',
    'é',
    '\udcff',
    'a' * 170,
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_FRAGMENTS), max_size=400),
    st.sampled_from([1, 7, 64, 65_536]),
    st.sampled_from([1, 5, 100, 1 << 20]),
)
def test_generated_payloads_select_the_same(parts: list[str], block: int, window: int) -> None:
    payload = ''.join(parts)
    saved = _important_lines._PREFILTER_BLOCK, _important_lines._FIND_WINDOW
    # Small regions and finder windows put their edges everywhere in these small payloads.
    _important_lines._PREFILTER_BLOCK, _important_lines._FIND_WINDOW = block, window
    try:
        for chosen in FINDERS:
            scan = ImportantLinesScan()
            scan._finder = chosen
            scan.feed(payload.encode('utf-8', 'surrogatepass'))
            assert scan.result() == reference_important_lines(payload)
    finally:
        _important_lines._PREFILTER_BLOCK, _important_lines._FIND_WINDOW = saved
