"""The read / grep algorithms: exact against a reference, identical on every kind of store, bounded."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pydantic_ai_harness.overflowing_tool_output._search import _grep
from pydantic_ai_harness.overflowing_tool_output._search._grep import grep_lines
from pydantic_ai_harness.overflowing_tool_output._search._grep_bytes import grep_bytes
from pydantic_ai_harness.overflowing_tool_output._search._matcher import Matcher, PatternError
from pydantic_ai_harness.overflowing_tool_output._search._query import (
    hex_dump,
    line_of_offset,
    line_start,
    open_payload,
    read_byte_window,
    read_lines,
    read_lines_at,
    sniff_type,
)
from pydantic_ai_harness.overflowing_tool_output.stores import (
    LineIndex,
    LineIndexBuilder,
    LocalFileStore,
    OverflowStore,
    RangeReadableStore,
    build_line_index,
)
from pydantic_ai_harness.overflowing_tool_output.stores._line_index import _newline_counter, nth_newline

pytestmark = pytest.mark.anyio


@dataclass
class MemoryStore:
    """Only the two base methods."""

    data: dict[str, bytes] = field(default_factory=dict[str, bytes])

    async def write(self, key: str, data: bytes) -> str:
        self.data[key] = data
        return key

    async def read(self, handle: str) -> bytes:
        return self.data[handle]


@dataclass
class RangeOnlyStore(MemoryStore):
    """Base methods plus range reads, without a line index; counts the bytes it serves."""

    served: int = 0

    async def size(self, handle: str) -> int:
        return len(self.data[handle])

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        chunk = self.data[handle][start:end]
        self.served += len(chunk)
        return chunk


def reference_lines(data: bytes) -> list[bytes]:
    if not data:
        return []
    lines = data.split(b'\n')
    return lines[:-1] if data.endswith(b'\n') else lines


def far() -> float:
    return time.monotonic() + 60


@pytest.fixture(params=['memory', 'range', 'local'])
def make_store(request: pytest.FixtureRequest, tmp_path: Path):
    def make() -> OverflowStore:
        if request.param == 'memory':
            return MemoryStore()
        if request.param == 'range':
            return RangeOnlyStore()
        return LocalFileStore(base_dir=tmp_path / 'spill')

    return make


# -- line index -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('data', 'lines'),
    [(b'', 0), (b'a', 1), (b'a\n', 1), (b'a\nb', 2), (b'\n', 1), (b'\n\n', 2), (b'a\n\nb\n', 3)],
)
async def test_line_count(data: bytes, lines: int) -> None:
    assert build_line_index(data).line_count == lines == len(reference_lines(data))


async def test_index_round_trips_and_rejects_garbage() -> None:
    index = build_line_index(b'x\n' * 100_000, chunk_size=1024)
    assert LineIndex.from_bytes(index.to_bytes()) == index
    for bad in (b'', b'nope', index.to_bytes()[:-8], b'PAILIDX1' + b'\x00' * 40):
        with pytest.raises(ValueError):
            LineIndex.from_bytes(bad)


async def test_streaming_builder_matches_one_shot() -> None:
    data = ('héllo wörld\n' * 5000 + 'end').encode()
    builder = LineIndexBuilder(chunk_size=4096)
    for start in range(0, len(data), 777):  # Pieces that split characters and chunks anywhere.
        builder.feed(data[start : start + 777])
    assert builder.finish() == build_line_index(data, chunk_size=4096)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(256 * 1024, 900_000), density=st.sampled_from([2, 40, 5000]))
def test_the_index_is_the_same_however_its_newlines_are_counted(seed: int, size: int, density: int) -> None:
    # Large pieces are counted with numpy when it is installed, small ones with `bytes.count`: same index.
    rng = random.Random(seed)
    data = bytes(10 if rng.randrange(density) == 0 else rng.randrange(32, 127) for _ in range(size))
    whole = build_line_index(data, chunk_size=4096)
    builder = LineIndexBuilder(chunk_size=4096)
    for start in range(0, size, 100_000):
        builder.feed(data[start : start + 100_000])
    assert builder.finish() == whole
    assert list(whole.newlines_before) == [data.count(b'\n', 0, start) for start in range(0, size, 4096)]
    assert whole.newline_count == data.count(b'\n')
    count = _newline_counter(data)
    for _ in range(20):
        low = rng.randrange(size)
        high = rng.randrange(low, size + 1)
        assert count(low, high) == data.count(b'\n', low, high)


@pytest.mark.parametrize(
    ('data', 'binary'),
    [
        (b'plain', False),
        ('ünï'.encode(), False),
        (b'a\x00b', True),
        (b'\xff\xfe', True),
        ('é'.encode()[:1], True),
        # A file listing with a Latin-1 name (or a str with a lone surrogate) is text with a few bad bytes.
        (b'tests/test_1.py\n' * 50 + b'caf\xe9.txt\n' + b'tests/test_2.py\n' * 50, False),
        ('notes/\udce9t\u00e9.md\n'.encode('utf-8', 'surrogatepass') * 2 + b'readme.md\n' * 20, False),
        (bytes(range(128, 256)) * 10, True),
        # Control bytes count as not text, but for the line breaks, tab, bell, backspace and ESC (colours).
        (b'./src/a.py\x00./src/b.py\x00' * 40, False),
        (b'\x1b[31mFAILED\x1b[0m test_x\r\n' * 40, False),
        (b'\x00' * 100, True),
        ('UTF-16 text'.encode('utf-16-le') * 10, True),
        # Only the first 64 KiB decide: what follows is shown as text, escaped.
        (b'x' * (64 << 10) + b'\x00' * 100_000, False),
    ],
    ids=[
        'ascii',
        'utf8',
        'nul',
        'invalid',
        'cut-char',
        'latin1-name',
        'lone-surrogate',
        'high-bytes',
        'stray-nuls',
        'ansi-colours',
        'nul-run',
        'utf16',
        'nuls-after-64-kib',
    ],
)
async def test_binary_detection(data: bytes, binary: bool) -> None:
    assert build_line_index(data).is_binary is binary


@given(data=st.binary(max_size=300).map(lambda b: b.replace(b'\x00', b'\n')), rank=st.integers(-2, 80))
def test_nth_newline_matches_reference(data: bytes, rank: int) -> None:
    positions = [i for i, byte in enumerate(data) if byte == 0x0A]
    expected = positions[rank - 1] if 1 <= rank <= len(positions) else -1
    assert nth_newline(data, rank) == expected


# -- reads and greps against a reference, on every kind of store -----------------------------------------

_LINE = st.text(alphabet=st.sampled_from(list('ab \t\rxyzé€🙂')), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(_LINE, max_size=60),
    trailing=st.booleans(),
    first=st.integers(0, 70),
    count=st.integers(1, 70),
    needle=st.sampled_from(['a', 'xy', 'é', '🙂', 'zz', ' ']),
)
def test_property_reads_and_greps_match_reference(
    make_store, lines: list[str], trailing: bool, first: int, count: int, needle: str
) -> None:
    data = '\n'.join(lines).encode() + (b'\n' if trailing and lines else b'')
    expected = reference_lines(data)

    async def check() -> None:
        store = make_store()
        handle = await store.write('run/call/0', data)
        payload = await open_payload(store, handle)
        assert payload.index.line_count == len(expected)
        got = await read_lines(payload, first, count, max_line_chars=1000)
        want = expected[first : first + count]
        assert [line.text for line in got] == [raw.decode().removesuffix('\r') for raw in want]
        assert [line.number for line in got] == list(range(first + 1, first + 1 + len(want)))
        for line in got:
            assert data[line.start : line.start + line.length] == expected[line.number - 1]
        result = await grep_lines(payload, Matcher.compile(needle, is_regex=False), max_hits=1000, deadline=far())
        matching = [n + 1 for n, raw in enumerate(expected) if needle.encode() in raw]
        assert result.total == len(matching) and result.complete
        assert [hit.line for hit in result.hits] == matching
        shown = await read_lines_at(payload, [(hit.line, hit.line_start) for hit in result.hits], max_line_chars=1000)
        assert [line.text for line in shown] == [expected[n - 1].decode().removesuffix('\r') for n in matching]
        for number in range(len(expected) + 1):
            assert await line_start(payload, number) == sum(len(raw) + 1 for raw in expected[:number]) - (
                1 if number == len(expected) and not data.endswith(b'\n') and expected else 0
            )

    anyio.run(check)


@pytest.mark.parametrize('block', [20_000, 100_000, 1 << 22])
async def test_hits_are_numbered_across_blocks_and_index_chunks(
    make_store, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Blocks that do not fall on the index's 64 KiB chunks, hits anywhere in them: numbers and line starts exact."""
    monkeypatch.setattr(_grep, 'SCAN_BLOCK', block)
    rng = random.Random(block)
    lines = [
        ('hit ' if rng.random() < 0.01 else '') + 'x' * rng.choice([0, 1, 7, 80, 300, 2_000]) for _ in range(3_000)
    ]
    data = '\n'.join(lines).encode() + b'\n'
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    store = make_store()
    payload = await open_payload(store, await store.write('run/call/0', data))
    matcher = Matcher.compile('hit', is_regex=False)
    for first in (0, 1, 777, 1_500):
        for max_hits, keep_last in ((5, False), (1_000, False), (7, True)):
            result = await grep_lines(
                payload,
                matcher,
                first_line=first,
                max_hits=max_hits,
                keep_last=keep_last,
                deadline=far(),
                context_before=3,
            )
            matching = [n + 1 for n, line in enumerate(lines) if n >= first and 'hit' in line]
            assert result.total == len(matching)
            assert [hit.line for hit in result.hits] == (matching[-max_hits:] if keep_last else matching[:max_hits])
            for hit in result.hits:
                assert hit.line_start == starts[hit.line - 1]
                assert len(hit.starts_before) <= 3
                assert list(hit.starts_before) == [starts[hit.line - 2 - k] for k in range(len(hit.starts_before))]


async def test_regex_is_anchored_per_line_and_never_crosses_newlines(make_store) -> None:
    store = make_store()
    handle = await store.write('r', b'start ok\nmiddle start\nend\n\nlast')
    payload = await open_payload(store, handle)

    async def lines_for(pattern: str) -> list[int]:
        result = await grep_lines(payload, Matcher.compile(pattern, is_regex=True), max_hits=10, deadline=far())
        return [hit.line for hit in result.hits]

    assert await lines_for('^start') == [1]
    assert await lines_for('start$') == [2]
    assert await lines_for('^$') == [4]
    assert await lines_for('ok\\smiddle') == []
    assert await lines_for('(?i)END') == [3]
    assert await lines_for('[^x]+') == [1, 2, 3, 5]


async def test_a_cut_line_with_invalid_bytes_points_exactly_past_what_it_shows(tmp_path: Path) -> None:
    """Each invalid byte is one shown character, so the offset to read on counts the raw bytes exactly."""
    store = LocalFileStore(base_dir=tmp_path)
    line = b'caf\xe9 ' * 400 + b'MARKER' + b' tail' * 50
    handle = await store.write('r', line + b'\nnext\n')
    payload = await open_payload(store, handle)
    [first] = await read_lines(payload, 0, 1, 300)
    assert first.cut and first.text == 'caf\ufffd ' * 60
    assert first.shown_bytes == 300  # five bytes per "caf\xe9 ", all shown
    rest = await store.read_range(handle, first.start + first.shown_bytes, len(line))
    assert rest.startswith(b'caf\xe9 ') and b'MARKER' in rest


async def test_invalid_regexes_raise_pattern_error() -> None:
    for pattern in ('(', '(?<=a)b', 'a{1001}', '(a)\\1', '((a{100}){100}){100}'):
        with pytest.raises(PatternError):
            Matcher.compile(pattern, is_regex=True)


async def test_catastrophic_regex_over_a_megabyte_line_is_fast(make_store) -> None:
    store = make_store()
    handle = await store.write('r', b'a' * 1_000_000 + b'!\n' + b'aaaa\n')
    payload = await open_payload(store, handle)
    started = time.perf_counter()
    result = await grep_lines(payload, Matcher.compile('(a+)+$', is_regex=True), max_hits=5, deadline=far())
    assert time.perf_counter() - started < 0.5
    assert [hit.line for hit in result.hits] == [2]


async def test_grep_stops_at_its_deadline_and_says_where() -> None:
    """A deadline already past: the first search is made all the same (so a continued search always gets further),
    then the scan stops and says where."""
    store = MemoryStore()
    handle = await store.write('r', b'match\n' * 200_000)
    payload = await open_payload(store, handle)
    result = await grep_lines(payload, Matcher.compile('match', is_regex=False), max_hits=3, deadline=0.0)
    assert not result.complete and result.out_of_time and not result.mid_line
    assert 0 < result.total < 200_000 and result.stopped_at_line == result.total
    assert result.stopped_at_byte == 6 * result.total


async def test_grep_stop_when_full_reports_the_next_line() -> None:
    store = MemoryStore()
    handle = await store.write('r', b'a\nb\na\nb\na\n')
    payload = await open_payload(store, handle)
    result = await grep_lines(
        payload, Matcher.compile('a', is_regex=False), max_hits=2, stop_when_full=True, deadline=far()
    )
    assert [hit.line for hit in result.hits] == [1, 3]
    assert result.stopped_at_line == 3 and not result.complete


async def test_keep_last_and_end_line() -> None:
    store = MemoryStore()
    handle = await store.write('r', b''.join(b'hit %d\n' % i for i in range(1, 101)))
    payload = await open_payload(store, handle)
    result = await grep_lines(
        payload, Matcher.compile('hit', is_regex=False), end_line=90, max_hits=3, keep_last=True, deadline=far()
    )
    assert [hit.line for hit in result.hits] == [88, 89, 90]
    assert result.total == 90


async def test_long_lines_are_cut_and_skipped_with_the_index(make_store) -> None:
    store = make_store()
    long_line = b'x' * 9_000_000 + b'NEEDLE-AT-THE-END'
    handle = await store.write('r', b'first\n' + long_line + b'\nthird NEEDLE\n')
    payload = await open_payload(store, handle)
    lines = await read_lines(payload, 0, 10, max_line_chars=100)
    assert [line.number for line in lines] == [1, 2, 3]
    assert lines[1].cut and lines[1].length == len(long_line) and lines[1].shown_bytes == 100
    assert lines[2].text == 'third NEEDLE'
    scattered = await read_lines_at(payload, [(1, 0), (2, 6), (3, 6 + len(long_line) + 1)], max_line_chars=100)
    assert [line.text for line in scattered] == ['first', 'x' * 100, 'third NEEDLE']
    result = await grep_lines(payload, Matcher.compile('NEEDLE', is_regex=False), max_hits=5, deadline=far())
    # The long line is searched whole, piece by piece (its match 9 MB in), and the next line after it.
    assert [(hit.line, hit.match_start) for hit in result.hits] == [(2, 6 + 9_000_000), (3, 6 + len(long_line) + 7)]
    assert result.complete and not result.windowed_lines


async def test_window_reads_are_o_window_on_range_stores() -> None:
    store = RangeOnlyStore()
    data = b''.join(b'line %07d\n' % i for i in range(400_000))
    handle = await store.write('r', data)
    payload = await open_payload(store, handle)  # Streams once to build the index (no line_index method).
    store.served = 0
    lines = await read_lines(payload, 300_000, 200, max_line_chars=1000)
    assert lines[0].text == 'line 0300000' and len(lines) == 200
    assert store.served < 300_000  # One index chunk plus the window, not the 5 MB payload.


async def test_local_store_reads_are_o_window(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('r', b''.join(b'line %07d\n' % i for i in range(400_000)))
    payload = await open_payload(store, handle)
    assert isinstance(store, RangeReadableStore)
    lines = await read_lines(payload, 123_456, 3, max_line_chars=1000)
    assert [line.text for line in lines] == ['line 0123456', 'line 0123457', 'line 0123458']
    assert await line_of_offset(payload, lines[0].start) == 123_456


async def test_byte_windows_have_utf8_safe_edges() -> None:
    store = MemoryStore()
    text = 'aé€🙂b' * 3
    data = text.encode()
    handle = await store.write('r', data)
    payload = await open_payload(store, handle)
    for start in range(len(data)):
        for length in range(1, 12):
            window = await read_byte_window(payload, start, length, utf8_edges=True)
            assert window.data == data[window.start : window.end]
            window.data.decode('utf-8')  # Never a torn character.
            assert window.start >= start and window.start - start <= 3
            assert window.end > window.start


async def test_binary_grep_finds_matches_across_block_edges() -> None:
    from pydantic_ai_harness.overflowing_tool_output._search import _query

    store = MemoryStore()
    block = _query.SCAN_BLOCK
    data = bytearray(b'\x00' * (2 * block + 100))
    for offset in (5, block - 2, block + 7, 2 * block + 90):
        data[offset : offset + 4] = b'MARK'
    handle = await store.write('r', bytes(data))
    payload = await open_payload(store, handle)
    result = await grep_bytes(payload, Matcher.compile('MARK', is_regex=False), max_hits=10, deadline=far())
    assert [hit.match_start for hit in result.hits] == [5, block - 2, block + 7, 2 * block + 90]
    regex = await grep_bytes(payload, Matcher.compile('M.RK', is_regex=True), max_hits=10, deadline=far())
    assert regex.total == 4


async def test_hex_dump_and_sniffing() -> None:
    assert hex_dump(b'\x89PNG\r\n\x1a\nABCDEFGH!', 32) == [
        '00000020  89 50 4e 47 0d 0a 1a 0a  41 42 43 44 45 46 47 48  |.PNG....ABCDEFGH|',
        '00000030  21                                                |!|',
    ]
    assert sniff_type(b'\x89PNG\r\n\x1a\n....') == 'PNG image'
    assert sniff_type(b'%PDF-1.7') == 'PDF document'
    assert sniff_type(b'RIFF\x00\x00\x00\x00WEBPVP8 ') == 'WebP image'
    assert sniff_type(b'hello') is None
