"""The one-pass spill of large payloads: streamed write, scan beside it, numbers from the line index."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pydantic
import pydantic_core
import pytest

from pydantic_ai_harness.overflowing_tool_output import (
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    StreamedPayload,
)
from pydantic_ai_harness.overflowing_tool_output._actions._spill_stream import PIECE_CHARS, PiecesStopped, Relay
from pydantic_ai_harness.overflowing_tool_output._rendering._important_lines import ImportantLinesScan
from pydantic_ai_harness.overflowing_tool_output._rendering._json_layout import LINE_BYTES
from pydantic_ai_harness.overflowing_tool_output._rendering._preview import count_lines
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value, stored_form
from pydantic_ai_harness.overflowing_tool_output.stores import LineIndex, LocalFileStore, StoredPayload
from pydantic_ai_harness.overflowing_tool_output.stores._protocol import StreamWritableStore

from .conftest import run_tool

pytestmark = pytest.mark.anyio


@dataclass
class PlainWriteStore:
    """A LocalFileStore reached through the base protocol and the read extensions only: no `write_stream`."""

    inner: LocalFileStore

    async def write(self, key: str, data: bytes) -> str:
        return await self.inner.write(key, data)

    async def read(self, handle: str) -> bytes:
        return await self.inner.read(handle)

    async def size(self, handle: str) -> int:
        return await self.inner.size(handle)

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        return await self.inner.read_range(handle, start, end)

    async def line_index(self, handle: str) -> LineIndex:
        return await self.inner.line_index(handle)

    async def list(self, prefix: str = '') -> Sequence[StoredPayload]:
        return await self.inner.list(prefix)


def big_log(lines: int = 120_000) -> str:
    """A ~3.6 MB log spanning several pieces, with important lines in different pieces and odd characters."""
    rows = [f'2026-11-29 12:00:{i % 60:02d} INFO worker step {i} ok, naïve ✓' for i in range(1, lines + 1)]
    for at in (17, 40_001, 65_536, 99_999):
        rows[at] = f'2026-11-29 ERROR step {at} failed: ConnectionResetError (lone \udcff surrogate)'
    rows[lines - 2] = 'FAILED tests/test_api.py::test_login - AssertionError'
    return '\n'.join(rows) + '\nexit status 1\n'


def records(count: int = 50_000) -> list[dict[str, Any]]:
    return [{'id': n, 'name': f'user-{n}', 'status': 'failed' if n % 997 == 0 else 'ok'} for n in range(count)]


def test_the_local_store_streams_and_a_wrapper_without_it_does_not() -> None:
    assert isinstance(LocalFileStore(), StreamWritableStore)
    assert not isinstance(PlainWriteStore(LocalFileStore()), StreamWritableStore)


@pytest.mark.parametrize('value', [big_log(), records()], ids=['log', 'list of dicts'])
async def test_a_streamed_spill_stores_and_shows_exactly_what_a_plain_write_does(tmp_path: Path, value: Any) -> None:
    streamed_store = LocalFileStore(base_dir=tmp_path / 'streamed')
    plain_store = LocalFileStore(base_dir=tmp_path / 'plain')
    streamed = await run_tool(OverflowingToolOutput(store=streamed_store), value)
    plain = await run_tool(OverflowingToolOutput(store=PlainWriteStore(plain_store)), value)

    assert streamed.returned() == plain.returned()
    assert streamed.returns()[0].metadata == plain.returns()[0].metadata
    handle = streamed.returns()[0].metadata['overflow_handle']
    expected = stored_form(render_value(value))[1]
    assert len(expected) > 2 * PIECE_CHARS  # several pieces, important lines in more than one
    assert await streamed_store.read(handle) == expected == await plain_store.read(handle)
    assert (
        f'{count_lines(expected.decode("utf-8", "surrogatepass"))} lines, {len(expected)} bytes' in streamed.returned()
    )


async def test_the_sidecar_is_published_with_the_streamed_payload(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    text = big_log()
    written = await store.write_stream(
        'run/call/0', iter([text[:1000].encode('utf-8', 'surrogatepass'), text[1000:].encode('utf-8', 'surrogatepass')])
    )
    sidecars = list((tmp_path / 'spill').rglob('*.idx'))
    assert len(sidecars) == 1  # there as soon as write_stream returns: no background indexing
    index = await store.line_index(written.handle)
    assert index.line_count == written.index.line_count == count_lines(text)
    assert index.newlines_before == written.index.newlines_before


async def test_write_stream_never_replaces_a_payload(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    first = await store.write_stream('run/call/0', iter([b'one\n', b'two\n']))
    again = await store.write_stream('run/call/0', iter([b'one\ntwo\n']))
    other = await store.write_stream('run/call/0', iter([b'three\n']))
    plain = await store.write('run/call/0', b'one\ntwo\n')
    assert first.handle == again.handle == plain and await store.resolve(plain) == 'run/call/0'
    assert other.handle != first.handle
    assert await store.read(first.handle) == b'one\ntwo\n'
    assert await store.read(other.handle) == b'three\n'


def _failing_pieces() -> Iterator[bytes]:
    yield b'half of a payload\n'
    raise OSError('the tool output stream broke')


async def test_a_stream_that_fails_midway_publishes_nothing(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    with pytest.raises(OSError, match='stream broke'):
        await store.write_stream('run/call/0', _failing_pieces())
    assert await store.list() == []
    leftovers = [name for _, _, files in os.walk(tmp_path / 'spill') for name in files if name != '.prune-lock']
    assert leftovers == []


async def test_pieces_abandoned_before_their_end_are_never_published(tmp_path: Path) -> None:
    """A write whose deadline passed keeps running in its thread: it must fail, not publish part of the payload."""
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    relay = Relay()
    pieces = relay.pieces()
    relay.abandon()
    with pytest.raises(PiecesStopped):
        await store.write_stream('run/call/0', pieces)
    assert await store.list() == []


async def test_a_preview_scan_that_fails_still_lets_the_whole_payload_be_written(tmp_path: Path) -> None:
    class BrokenScan:
        def feed(self, data: bytes, base: int = 0) -> None:
            raise RuntimeError('scan broke')

    store = LocalFileStore(base_dir=tmp_path / 'spill')
    relay = Relay()
    text = big_log()
    written = None
    async with anyio.create_task_group() as group:

        async def encode() -> None:
            with pytest.raises(RuntimeError, match='scan broke'):
                await anyio.to_thread.run_sync(relay.encode_and_scan, text, BrokenScan())  # pyright: ignore[reportArgumentType]

        group.start_soon(encode)
        written = await store.write_stream('run/call/0', relay.pieces())
    assert written is not None
    assert await store.read(written.handle) == text.encode('utf-8', 'surrogatepass')


async def test_a_write_that_stops_early_releases_the_encoder_and_its_scanner() -> None:
    relay = Relay()
    scan = ImportantLinesScan(count_lines=False)
    text = big_log()

    def store_takes_one_piece() -> None:
        next(iter(relay.pieces()))
        relay.abandon()  # what the capability does when the store fails or its deadline passes

    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, relay.encode_and_scan, text, scan)
        await anyio.to_thread.run_sync(store_takes_one_piece)
    # The encoder returned (the task group waited for it) and took its scanner thread down with it.
    assert not [t for t in threading.enumerate() if t.name == 'pyai-harness-preview-scan']


async def test_a_store_iterating_the_pieces_on_the_event_loop_fails_fast_instead_of_hanging(tmp_path: Path) -> None:
    @dataclass
    class LoopIteratingStore(PlainWriteStore):
        """A custom store that (wrongly) iterates the pieces on the event loop."""

        async def write_stream(self, key: str, pieces: Iterable[bytes]) -> StreamedPayload:
            data = b''.join(pieces)  # would wait forever for an encoder the blocked loop cannot start
            raise AssertionError(f'unreachable: got {len(data)} bytes')

    store = LoopIteratingStore(LocalFileStore(base_dir=tmp_path / 'spill'))
    assert isinstance(store, StreamWritableStore)
    with pytest.warns(OverflowingToolOutputWarning, match='iterate them in a worker thread'):
        run = await run_tool(OverflowingToolOutput(store=store), big_log())
    # The spill could not run: the default band's fallback (a truncation) kept the run going.
    assert 'overflow_handle' not in (run.returns()[0].metadata or {})
    assert await store.list() == []


JSON_CORPUS: list[Any] = [
    {'int': 1, 'big': 2**70, 'huge': 10**50, 'negative': -7, 'zero': 0.0, 'minus zero': -0.0},
    {'floats': [0.1, 1.0, 100.0, 1234567.0, 1e16, 1e21, 1e22, 1.5e300, 5e-324, 123456789012345680000.0]},
    {'unicode': 'naïve ✓ 😀 中文', 'controls': '\x00\x1f\x7f\u2028"\\/', 'newline': 'a\nb\tc\r'},
    [[], {}, [[]], {'a': {}}, None, True, False],
    [{'id': n, 'tags': ['x', 'y'], 'nested': {'deep': [n, {'k': None}]}} for n in range(50)],
]


class Color(enum.Enum):
    RED = 'red'


class Account(pydantic.BaseModel):
    account_id: int = pydantic.Field(serialization_alias='accountId')
    opened: datetime.datetime
    key: bytes
    labels: set[str]
    color: Color


@dataclasses.dataclass
class Holder:
    accounts: list[Account]
    ratio: float
    ident: uuid.UUID
    amount: decimal.Decimal


def account(n: int) -> Account:
    return Account(
        account_id=n,
        opened=datetime.datetime(2026, 1, 1, 12, n % 60),
        key=b'k' * (n % 7),
        labels={'a'},
        color=Color.RED,
    )


OBJECT_CORPUS: list[Any] = [
    [account(n) for n in range(300)],
    Holder([account(n) for n in range(40)], float('nan'), uuid.UUID(int=7), decimal.Decimal('1.50')),
    {'page': {'items': [Holder([account(n)], 1.0, uuid.UUID(int=n), decimal.Decimal(n)) for n in range(200)]}},
    [{'big': 'x' * 3000, 'n': n} for n in range(100)] + [{'n': -1}],
    {'records': [{'id': n, 'blob': 'y' * (n * 50)} for n in range(80)], 'numbers': list(range(5000))},
    # Dicts with many members: keys and values serialized in batches (odd keys included).
    {f'key "{n}" ✓\t\u2028': {'n': n, 'big': 'z' * (n % 3 * 700)} for n in range(3000)},
    {n: [n] * (n % 4) for n in range(3000)},
    # Objects as members of a small container: turned plain one at a time, written as pydantic writes them.
    {
        'when': datetime.datetime(2026, 1, 2, 3, 4, 5),
        'id': uuid.UUID(int=3),
        'raw': b'bytes',
        'color': Color.RED,
        'amount': decimal.Decimal('2.5'),
        'inf': float('inf'),
        'rows': [account(n) for n in range(30)],
        'tail': tuple(range(600)),
    },
]


@pytest.mark.parametrize('value', [*JSON_CORPUS, *OBJECT_CORPUS], ids=range(len(JSON_CORPUS) + len(OBJECT_CORPUS)))
def test_the_stored_form_is_the_compact_json_the_model_sees_spread_over_lines(value: Any) -> None:
    """Valid JSON equal to the value, byte for byte the compact JSON once its newlines and indents are gone."""
    from pydantic_ai.messages import tool_return_ta

    rendered = render_value(value)
    text, data = stored_form(rendered)
    compact = tool_return_ta.dump_json(value, by_alias=True)
    assert rendered.text == compact.decode()
    assert rendered.size_chars == len(compact.decode())
    assert pydantic_core.from_json(data) == pydantic_core.from_json(compact)
    assert b''.join(line.lstrip(b' ') for line in data.split(b'\n')) == compact
    assert data.endswith(b'\n') and text == data.decode()
    assert rendered.layout is not None and rendered.layout.lines == count_lines(text)
    for line in data.split(b'\n'):
        # Lines stay bounded: a longer one holds a single element that cannot be spread out (a long string).
        if len(line) > LINE_BYTES:
            element = pydantic_core.from_json(line.strip().rstrip(b',').split(b':', 1)[-1])
            assert isinstance(element, str) or b'{' not in line.strip()[1:], line[:200]


def test_numbers_are_stored_as_the_model_saw_them() -> None:
    rendered = render_value({'tiny': 1e-7, 'pad': ['p' * 100] * 12})
    assert rendered.text.startswith('{"tiny":1e-7,')
    assert stored_form(rendered)[0].startswith('{\n "tiny":1e-7,\n "pad":[\n  "pppp')


def test_a_best_effort_rendering_with_lone_surrogates_is_stored_spread_over_lines() -> None:
    rendered = render_value({'bad': '\udcff', 'object': object(), 'pad': ['p' * 100] * 12})
    assert rendered.lossy
    text, data = stored_form(rendered)
    assert text.startswith('{\n "bad":"\udcff",\n "object":"<object object>",\n "pad":[\n')
    assert data == text.encode('utf-8', 'surrogatepass')


def test_a_list_of_records_is_serialized_once() -> None:
    """Each record is written by one native call (in batches): no byte of the value is serialized twice."""
    from pydantic_ai_harness.overflowing_tool_output._rendering._json_layout import (
        _MARKER_JSON,
        _Builder,
        _dump,
        _to_plain,
    )

    written = 0
    marker = _MARKER_JSON[:-1]

    def counting(value: Any) -> bytes:
        nonlocal written
        data = _dump()(value)
        written += len(data) - data.count(marker) * len(marker)  # the markers between batched records aside
        return data

    value = {'items': records(20_000), 'total': 20_000}
    layout = _Builder(counting, _to_plain).build(value)
    assert layout.size > 500_000
    assert written < layout.size


def test_a_value_holding_the_batch_marker_is_laid_out_correctly() -> None:
    from pydantic_ai_harness.overflowing_tool_output._rendering._json_layout import _MARKER

    value = [{'n': n, 'm': [_MARKER, _MARKER, 1]} for n in range(3000)] + [_MARKER, _MARKER, [-0.0, -0.0]] * 50
    rendered = render_value(value)
    assert pydantic_core.from_json(stored_form(rendered)[1]) == value
    assert rendered.text == pydantic_core.to_json(value).decode()


RECORDS_AND_THEIR_CUT: list[Any] = [
    [{'s': '},{', 'n': n} for n in range(3000)],
    [{'a': [{'b': n}, {'c': n}]} for n in range(3000)],
    [{'x': 'y' * (989 + n % 4)} for n in range(3000)],  # 997 to 1,000 bytes: each still fits its line
    [{}, {'n': 1}] * 1500 + [1, [2]],
]


@pytest.mark.parametrize('value', RECORDS_AND_THEIR_CUT, ids=range(len(RECORDS_AND_THEIR_CUT)))
def test_a_list_of_records_is_stored_one_record_a_line_whatever_they_hold(value: Any) -> None:
    """Each record on a line of its own, whole, whatever it holds (its batch's marker cut, `},{`, records)."""
    data = stored_form(render_value(value))[1]
    lines = data.split(b'\n')
    assert lines[0] == b'[' and lines[-2:] == [b']', b'']
    assert [pydantic_core.from_json(line.strip().rstrip(b',')) for line in lines[1:-2]] == value


LARGE_ARRAYS: list[Any] = [
    records(),
    tuple(records(30_000)),
    [n if n % 3 else str(n) for n in range(200_000)],
    [[n, [n, n], {'k': [1] * (n % 5)}] for n in range(60_000)],
    [1.5] * 150_000,
    [{'first': 'x' * 300_000}] + [{'n': n} for n in range(100)],
    [account(n) for n in range(3_000)],
]


@pytest.mark.parametrize('value', LARGE_ARRAYS, ids=range(len(LARGE_ARRAYS)))
def test_a_large_array_is_sketched_from_a_sample_without_parsing_it(value: Any) -> None:
    """The sketch of the value itself (objects turned plain one sampled element at a time) is that of its JSON."""
    from pydantic_ai_harness.overflowing_tool_output._actions._spill import _shape_of
    from pydantic_ai_harness.overflowing_tool_output._rendering._shape_sketch import shape_sketch

    rendered = render_value(value)
    assert rendered.layout is not None
    assert _shape_of(rendered, rendered.layout) == shape_sketch(pydantic_core.from_json(rendered.text))
