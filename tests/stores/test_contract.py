"""The store contract, written once and run against every store on a real backend.

`kit` (see conftest) is parametrized over LocalFileStore, RedisStore (on real Redis 6.2 and Valkey 9.1
servers), and ObjectStore on obstore's MemoryStore, LocalStore and moto's S3 server.
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic_ai import Agent
from pydantic_ai._uuid import uuid7
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset
from pydantic_ai_harness.overflowing_tool_output.stores import (
    DeletableStore,
    HandleNotFoundError,
    LineIndexedStore,
    ListableStore,
    LocalFileStore,
    OverflowStore,
    RangeReadableStore,
    ResolvableStore,
    build_line_index,
)
from pydantic_ai_harness.overflowing_tool_output.stores._paths import (
    MAX_WRITTEN_HANDLE_LENGTH,
    is_short_handle,
    short_handles,
)

from .conftest import StoreKit

pytestmark = pytest.mark.anyio

TEN_MB = 10 * 1024 * 1024


async def full(store: OverflowStore, handle: str) -> str:
    """The full handle (as listed) of a handle `write` returned: the built-in stores return short aliases."""
    return await store.resolve(handle) if isinstance(store, ResolvableStore) else handle


def log_payload(lines: int, needle_at: int | None = None) -> bytes:
    rows = [
        f'2026-11-29T10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 7} handled request {i}' for i in range(lines)
    ]
    if needle_at is not None:
        rows[needle_at] = 'ERROR payment service timed out (needle-42)'
    return ('\n'.join(rows) + '\n').encode()


def ten_mb_payload() -> bytes:
    rng = random.Random(9)
    chunk = bytes(rng.getrandbits(8) for _ in range(64 * 1024)) + b'\n'.join(b'line %d' % i for i in range(5000))
    return (chunk * (TEN_MB // len(chunk) + 1))[:TEN_MB]


LEAKS = (
    '/',
    '\\',
    '127.0.0.1',
    'localhost',
    'redis://',
    'http',
    's3',
    'bucket',
    'pyai-harness-tests',
    '~p',
    '~i',
    '~a',
    'alias',
)


def assert_not_found_without_leaks(exc: BaseException, handle: str) -> None:
    message = str(exc)
    for leak in LEAKS:
        assert leak not in message, f'{leak!r} leaked in {message!r} for handle {handle!r}'


# -- round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    'data',
    [
        pytest.param('héllo wörld\nsecond line\n'.encode(), id='text'),
        pytest.param(bytes(range(256)) * 3, id='binary'),
        pytest.param(b'', id='empty'),
        pytest.param(b'no trailing newline', id='no-newline'),
        pytest.param(b'\r\n\r\n\n', id='newlines-only'),
    ],
)
async def test_round_trip_is_byte_identical(store: OverflowStore, data: bytes) -> None:
    handle = await store.write('run-1/call_1/0', data)
    assert isinstance(handle, str) and handle
    assert await store.read(handle) == data


async def test_ten_megabyte_round_trip(store: OverflowStore) -> None:
    data = ten_mb_payload()
    handle = await store.write('run-big/call_big/0', data)
    read = await store.read(handle)
    assert len(read) == len(data) and hashlib.sha256(read).digest() == hashlib.sha256(data).digest()
    if isinstance(store, RangeReadableStore):
        assert await store.size(handle) == TEN_MB
        assert await store.read_range(handle, TEN_MB - 100, TEN_MB + 100) == data[-100:]


async def test_bytearray_and_memoryview_are_accepted(store: OverflowStore) -> None:
    handle = await store.write('run/a/0', bytearray(b'abc'))  # type: ignore[arg-type]
    assert await store.read(handle) == b'abc'
    handle = await store.write('run/b/0', memoryview(b'def'))  # type: ignore[arg-type]
    assert await store.read(handle) == b'def'


async def test_a_key_holding_other_bytes_gets_a_distinct_handle(store: OverflowStore) -> None:
    first = await store.write('run/call_0/0', b'one\ntwo\nthree\n')
    second = await store.write('run/call_0/0', b'four\n')
    third = await store.write('run/call_0/0', b'five\nsix\n')
    assert len({first, second, third}) == 3
    assert await store.read(first) == b'one\ntwo\nthree\n'
    assert await store.read(second) == b'four\n'
    assert await store.read(third) == b'five\nsix\n'
    if isinstance(store, LineIndexedStore):
        assert [(await store.line_index(h)).line_count for h in (first, second, third)] == [3, 1, 2]
    if isinstance(store, ListableStore):
        listed = sorted(payload.handle for payload in await store.list('run/call_0/'))
        assert listed == sorted([await full(store, h) for h in (first, second, third)])


async def test_the_same_bytes_under_the_same_key_keep_their_handle(store: OverflowStore) -> None:
    data = log_payload(500)
    first = await store.write('run/call_0/0', data)
    other = await store.write('run/call_0/0', data[:-1])  # Same key, same size minus one: different bytes.
    flipped = await store.write('run/call_0/0', data[:-2] + b'X\n')  # Same size, last bytes differ.
    assert len({first, other, flipped}) == 3
    # Replays and retries write the same bytes again: each gets back its own handle, byte-identical.
    assert await store.write('run/call_0/0', data) == first
    assert await store.write('run/call_0/0', data[:-1]) == other
    assert await store.write('run/call_0/0', data[:-2] + b'X\n') == flipped
    assert await store.read(first) == data
    assert await store.read(flipped) == data[:-2] + b'X\n'
    if isinstance(store, ListableStore):
        assert len(await store.list('run/call_0/')) == 3


async def test_concurrent_writers_of_one_key_never_lose_a_payload(store: OverflowStore) -> None:
    payloads = [f'writer {n}\n'.encode() * (1 + n % 5) for n in range(24)]
    payloads += payloads[:6]  # Six writers race with the same bytes as another one.
    handles: list[str] = [''] * len(payloads)

    async def write(position: int) -> None:
        handles[position] = await store.write('run/call_0/0', payloads[position])

    async with anyio.create_task_group() as group:
        for position in range(len(payloads)):
            group.start_soon(write, position)
    assert len(set(handles)) == 24
    for handle, data in zip(handles, payloads):
        assert await store.read(handle) == data
    assert handles[24:] == handles[:6]


DISTINCT_KEYS = [
    'run/call/0',
    'run/call/1',
    'run/call/0/content',
    'Run/call/0',
    'run/CALL/0',
    'run/call~2f0',
    'run/call%2F0',
    'run:call/0',
    'run~3acall/0',
    'run/call/0/',
    '/run/call/0',
    'run//call/0',
    'run/./call/0',
    'run/../call/0',
    '../../etc/passwd',
    '.',
    '..',
    '',
    'sp ace/0',
    'ünïcödé/0',
    '\x00nul/0',
    'a/b/c/d/e/f/g/h/i/j',
    'a/b/c/d/e/f/g/h~2fi~2fj',
    'x' * 96,
    'x' * 97,
    'x' * 300,
    'x' * 299 + 'y',
    '*',
    '?',
    '[a]',
    '\\',
]


async def test_distinct_keys_never_collide(store: OverflowStore) -> None:
    handles: dict[str, str] = {}
    for position, key in enumerate(DISTINCT_KEYS):
        handles[key] = await store.write(key, f'payload {position} for {key!r}'.encode())
    assert len(set(handles.values())) == len(DISTINCT_KEYS)
    for position, key in enumerate(DISTINCT_KEYS):
        assert await store.read(handles[key]) == f'payload {position} for {key!r}'.encode(), key


# -- bad handles ------------------------------------------------------------------------------------

BAD_HANDLES = [
    '',
    ' ',
    'missing/handle/0',
    '../run/call/0',
    'run/../../call/0',
    '/etc/passwd',
    '/run/call/0',
    'run/call/0/',
    'run//call/0',
    './run/call/0',
    'C:\\Windows\\win.ini',
    '..\\..\\boot.ini',
    '%2e%2e/%2e%2e/etc/passwd',
    'run/call/0\x00',
    'run\ncall',
    '*',
    'run/*',
    'run/call/?',
    '[r]un/call/0',
    'x' * 5000,
    '/'.join(['a'] * 40),
    '~p/run/call/0',
    '~i/run/call/0',
    'app:~p:run/call/0',
    'app/~p/run/call/0',
    'file:///etc/passwd',
    'http://169.254.169.254/latest/meta-data',
    'redis://127.0.0.1/',
]


async def test_unknown_malformed_and_injection_handles_are_not_found(store: OverflowStore) -> None:
    await store.write('run/call/0', b'secret')
    for handle in BAD_HANDLES:
        with pytest.raises(HandleNotFoundError) as caught:
            await store.read(handle)
        assert_not_found_without_leaks(caught.value, handle)
        if isinstance(store, RangeReadableStore):
            with pytest.raises(HandleNotFoundError):
                await store.size(handle)
            with pytest.raises(HandleNotFoundError):
                await store.read_range(handle, 0, 10)
        if isinstance(store, LineIndexedStore):
            with pytest.raises(HandleNotFoundError):
                await store.line_index(handle)
        if isinstance(store, DeletableStore):
            assert await store.delete(handle) is False
    assert await store.read('run/call/0') == b'secret'


async def test_a_handle_cannot_leave_its_namespace(kit: StoreKit) -> None:
    # `app` is a prefix of the other application's namespace: the classic way to reach a neighbour.
    mine = kit.make('app')
    neighbour = kit.make('app/eu' if kit.kind.startswith('object') else ('app-eu' if kit.kind == 'local' else 'app:eu'))
    mine_handle = await mine.write('run/call/0', b'mine')
    their_handle = await neighbour.write('run/call/0', b'theirs')
    assert mine_handle == their_handle
    assert await mine.read(mine_handle) == b'mine'
    assert await neighbour.read(their_handle) == b'theirs'
    crafted = [
        'eu/~p/run/call/0',
        'eu:~p:run/call/0',
        '../eu/~p/run/call/0',
        '..:eu:~p:run/call/0',
        '~p/run/call/0',
        '../app-eu/run/call/0',
        '../../app-eu/run/call/0',
    ]
    for handle in crafted:
        with pytest.raises(HandleNotFoundError):
            await mine.read(handle)
    if isinstance(mine, ListableStore):
        assert [payload.handle for payload in await mine.list()] == ['run/call/0']
    if isinstance(neighbour, DeletableStore):
        assert await neighbour.delete(their_handle)
        assert await mine.read(mine_handle) == b'mine'


# -- range reads, sizes, line index -----------------------------------------------------------------


async def test_range_reads_match_slices(store: OverflowStore) -> None:
    if not isinstance(store, RangeReadableStore):
        pytest.skip('not a RangeReadableStore')
    data = log_payload(3000)
    handle = await store.write('run/range/0', data)
    assert await store.size(handle) == len(data)
    rng = random.Random(3)
    cases = [(0, 0), (0, 1), (0, len(data)), (-50, 10), (len(data) - 1, len(data) + 10), (len(data), len(data) + 5)]
    cases += [(len(data) + 100, len(data) + 200), (10, 5)]
    cases += [(start, start + rng.randrange(0, 70_000)) for start in (rng.randrange(len(data)) for _ in range(30))]
    for start, end in cases:
        assert await store.read_range(handle, start, end) == data[max(0, start) : max(0, end)], (start, end)


async def test_range_reads_on_an_empty_payload(store: OverflowStore) -> None:
    if not isinstance(store, RangeReadableStore):
        pytest.skip('not a RangeReadableStore')
    handle = await store.write('run/empty/0', b'')
    assert await store.size(handle) == 0
    assert await store.read_range(handle, 0, 100) == b''


@pytest.mark.parametrize(
    'data',
    [
        pytest.param(b'', id='empty'),
        pytest.param(b'one line', id='one-line'),
        pytest.param(b'a\nb\n', id='trailing-newline'),
        pytest.param(b'\n' * 70_000, id='only-newlines-two-chunks'),
        pytest.param(log_payload(20_000), id='log-many-chunks'),
        pytest.param(b'ok\n\x00\x01\xff binary', id='binary'),
        pytest.param('€'.encode() * 30_000, id='utf8-across-chunks'),
    ],
)
async def test_line_index_matches_the_payload(store: OverflowStore, data: bytes) -> None:
    if not isinstance(store, LineIndexedStore):
        pytest.skip('not a LineIndexedStore')
    handle = await store.write('run/index/0', data)
    expected = build_line_index(data)
    index = await store.line_index(handle)
    assert (index.size, index.newline_count, index.line_count, index.is_binary, index.ends_with_newline) == (
        expected.size,
        expected.newline_count,
        expected.line_count,
        expected.is_binary,
        expected.ends_with_newline,
    )
    assert list(index.newlines_before) == list(expected.newlines_before)


# -- listing and deletion ---------------------------------------------------------------------------


async def test_listing_and_deletion(store: OverflowStore) -> None:
    if not isinstance(store, ListableStore) or not isinstance(store, DeletableStore):
        pytest.skip('not listable and deletable')
    sizes = {'run-a/call_1/0': 10, 'run-a/call_2/0': 2000, 'run-a/call_2/0/content': 0, 'run-b/call_1/0': 5}
    shorts = {key: await store.write(key, b'x' * size) for key, size in sizes.items()}
    handles = {key: await full(store, handle) for key, handle in shorts.items()}
    listed = await store.list()
    assert [payload.handle for payload in listed] == sorted(handles.values())
    assert {payload.handle: payload.size for payload in listed} == {handles[k]: v for k, v in sizes.items()}
    assert all(payload.modified > 0 for payload in listed)
    assert [payload.handle for payload in await store.list('run-a/')] == sorted(
        handles[k] for k in sizes if k.startswith('run-a/')
    )
    assert [payload.handle for payload in await store.list('run-a/call_2')] == [
        handles['run-a/call_2/0'],
        handles['run-a/call_2/0/content'],
    ]
    assert await store.list('nothing-here') == []
    assert await store.list('*') == []

    assert await store.delete(shorts['run-a/call_2/0']) is True  # By its short handle: the alias goes too.
    assert await store.delete(shorts['run-a/call_2/0']) is False
    assert await store.delete(handles['run-a/call_2/0']) is False
    for gone in (shorts['run-a/call_2/0'], handles['run-a/call_2/0']):
        with pytest.raises(HandleNotFoundError):
            await store.read(gone)
    assert await full(store, shorts['run-a/call_2/0']) == shorts['run-a/call_2/0']  # No alias left behind.
    assert await store.read(shorts['run-a/call_2/0/content']) == b''
    assert await store.delete(handles['run-a/call_1/0']) is True  # By its full handle: the alias goes too.
    assert await full(store, shorts['run-a/call_1/0']) == shorts['run-a/call_1/0']
    assert handles['run-a/call_2/0'] not in [payload.handle for payload in await store.list()]


# -- the query tools over each store ----------------------------------------------------------------


def tool_return(messages: list[ModelMessage]) -> str:
    part = messages[-1].parts[-1]
    assert isinstance(part, ToolReturnPart)
    return str(part.content)


async def test_query_tools_page_through_the_store(store: OverflowStore) -> None:
    data = log_payload(120_000, needle_at=98_765)
    handle = await store.write('run-q/call_big/0', data)
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = len(answers)
        if step > 0 or len(messages) > 1:
            answers.append(tool_return(messages))
        calls: list[dict[str, Any]] = [
            {'tool_name': 'grep_tool_result', 'args': {'handle': handle, 'pattern': 'needle-42'}},
            {'tool_name': 'read_tool_result', 'args': {'handle': handle, 'offset': 98_761, 'limit': 10}},
            {'tool_name': 'read_tool_result', 'args': {'handle': handle, 'from_end': True, 'limit': 200}},
            {'tool_name': 'read_tool_result', 'args': {'handle': 'run-q/../../etc/passwd'}},
        ]
        if len(answers) < len(calls):
            return ModelResponse(parts=[ToolCallPart(**calls[len(answers)])])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), toolsets=[build_query_toolset(store)])
    result = await agent.run('find the error')
    assert result.output == 'done'
    grep, window, tail, bad = answers
    assert '98766' in grep and 'needle-42' in grep
    assert '98766| ERROR payment service timed out (needle-42)' in window
    assert 'lines 98761-98770 of 120000' in window
    assert 'last lines 119801-120000 of 120000' in tail
    assert 'No stored result found' in bad
    for leak in ('127.0.0.1', 'redis://', 'http', 'pyai-harness-tests', os.sep + 'tmp'):
        assert leak not in bad


async def test_query_tools_on_binary_payload(store: OverflowStore) -> None:
    handle = await store.write('run-q/call_bin/0', bytes(range(256)) * 10)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle, 'limit': 2})])
        return ModelResponse(parts=[TextPart(tool_return(messages))])

    result = await Agent(FunctionModel(model), toolsets=[build_query_toolset(store)]).run('dump it')
    assert 'hex' in result.output.lower() or '00 01 02 03' in result.output


# -- keys of any length and alphabet -----------------------------------------------------------------

HOSTILE_KEYS = [
    'TENANT-ACME-CONVERSATION-' + 'Q' * 62 + '/call_0/0',
    'A' * 10_000 + '/call_0/0',
    'a' * 10_000,
    'a' * 9_999 + 'b',
    'Q' * 80,
    'Q' * 81,
    'q' * 96,
    'q' * 97,
    'ü' * 10_000 + '/call/0',
    '日本語のキー' * 2_000,
    '🦀' * 2_500 + '/🦀/0',
    '\x00\x01\x1b[31m\u202e' * 1_000,
    '\udc80\ud800' * 500,
    '.' * 300,
    '~' * 500,
    '~~2' * 1_000,
    '=' * 500,
    'abc=' + '0' * 64,
    'run/call_0/0~~2',
    'run/call_0/0~7e~7e2',
    '/' * 100,
    '/'.join(['Z' * 300] * 20),
    'a/b/c/d/e/f/g/' + 'Z' * 10_000,
    'CON/AUX/NUL.txt',
]


async def test_hostile_long_keys_are_stored_and_read_back(store: OverflowStore) -> None:
    handles = [await store.write(key, key.encode('utf-8', 'surrogatepass')[:5000] + b'!') for key in HOSTILE_KEYS]
    assert len(set(handles)) == len(HOSTILE_KEYS)
    for key, handle in zip(HOSTILE_KEYS, handles):
        assert handle.isascii() and len(handle) <= MAX_WRITTEN_HANDLE_LENGTH, key[:40]
        assert await store.read(handle) == key.encode('utf-8', 'surrogatepass')[:5000] + b'!', key[:40]
    assert (await full(store, handles[0])).startswith('TENANT-ACME-CONVERSATION-')  # A long segment stays readable.
    if isinstance(store, ListableStore):
        listed = [payload.handle for payload in await store.list()]
        assert sorted(listed) == sorted([await full(store, handle) for handle in handles])
        for handle in listed:
            await store.read(handle)


async def test_a_candidate_handle_never_names_another_key(store: OverflowStore) -> None:
    first = await store.write('run/call_0/0', b'first')
    second = await store.write('run/call_0/0', b'second')
    literal = await store.write('run/call_0/0~~2', b'literal key')  # The text of the candidate, as a key.
    assert len({first, second, literal}) == 3
    assert [await store.read(h) for h in (first, second, literal)] == [b'first', b'second', b'literal key']


_KEY_PARTS = st.sampled_from(['run', 'call_0', '0', 'Q' * 90, '~~2', '~', '=', '/', '.', 'ü', 'x' * 120, ''])
_KEYS = st.one_of(
    st.text(max_size=40),
    st.lists(_KEY_PARTS, max_size=6).map(''.join),
    st.text(alphabet='Qq~=/.-ü', min_size=80, max_size=400),
)
_DATA = st.one_of(st.sampled_from([b'', b'a', b'b', b'a\nb\n']), st.binary(max_size=24))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.tuples(st.one_of(_KEYS, st.sampled_from(['run/call_0/0', 'K'])), _DATA), max_size=8))
async def test_property_distinct_keys_or_data_never_share_a_handle(
    kit: StoreKit, writes: list[tuple[str, bytes]]
) -> None:
    store = kit.make(f'prop{len(kit.cleanups)}')
    handles = [await store.write(key, data) for key, data in writes]
    for i, (pair_i, handle_i) in enumerate(zip(writes, handles)):
        assert await store.read(handle_i) == pair_i[1]
        for pair_j, handle_j in zip(writes[:i], handles[:i]):
            assert (handle_i == handle_j) == (pair_i == pair_j), (pair_i, pair_j)


async def test_the_longest_handles_fit_every_backend(kit: StoreKit) -> None:
    namespace = 'long'
    if kit.kind.startswith('object'):
        from pydantic_ai_harness.overflowing_tool_output.stores._object import MAX_PREFIX_LENGTH

        namespace = 'n' * (MAX_PREFIX_LENGTH - len('t0123456789ab/'))  # The longest prefix the store accepts.
    store = kit.make(namespace)
    key = '/'.join(['Ü' * 10_000] * 12)  # Every segment hashed, more segments than a handle keeps.
    handles = [await store.write(key, b'payload %d' % n) for n in range(3)]
    assert len(set(handles)) == 3
    for n, handle in enumerate(handles):
        assert len(handle) <= MAX_WRITTEN_HANDLE_LENGTH and len(await full(store, handle)) <= MAX_WRITTEN_HANDLE_LENGTH
        assert await store.read(handle) == b'payload %d' % n
    if kit.kind.startswith('object'):  # Every object path is within the 1,024-byte limit of S3.
        import obstore

        from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore

        assert isinstance(store, ObjectStore)
        paths = [meta['path'] for page in obstore.list(store.store, store.prefix) for meta in page]
        assert len(paths) == 9 and max(len(path.encode()) for path in paths) <= 1024  # Payload, index, alias.


# -- short handles ----------------------------------------------------------------------------------

REAL_KEY = f'{uuid7()}/call_Xq3vR8bN2mKp7LwT9yZc/0'
"""A key as the capability makes it with pydantic-ai's defaults: a uuid7 run id and a provider's tool call id."""


async def plant_alias(kit: StoreKit, store: OverflowStore, short: str, target: str) -> None:
    """Record `short` as the alias of `target` directly in the backend, as another writer would have."""
    if isinstance(store, LocalFileStore):
        path = store.root / '.aliases' / short
        path.write_text(target)
        path.chmod(0o600)
    elif kit.kind in ('redis', 'valkey'):
        from redis.asyncio import Redis

        from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore

        assert isinstance(store, RedisStore) and store.url is not None
        client = Redis.from_url(store.url)
        try:
            await client.set(f'{store.namespace}:~a:{short}', target)
        finally:
            await client.aclose()
    else:
        import obstore

        from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore

        assert isinstance(store, ObjectStore)
        await obstore.put_async(store.store, f'{store.prefix}/~a/{short}@', target.encode())


async def test_handles_are_short_deterministic_and_resolve_in_another_store(kit: StoreKit) -> None:
    store = kit.make('app')
    data = log_payload(300)
    handle = await store.write(REAL_KEY, data)
    assert len(handle) == 10 and is_short_handle(handle)  # Against 64 characters for the full handle.
    assert handle == next(short_handles(REAL_KEY))  # From the full handle alone: the same in every process.
    later = kit.make('app')  # Another worker, another process or a later run, on the same backend.
    assert await later.read(handle) == data
    assert await later.read(REAL_KEY) == data  # The full handle reads the same payload.
    assert isinstance(later, ResolvableStore) and await later.resolve(handle) == REAL_KEY
    assert await later.resolve('0000000000') == '0000000000'  # No such alias: the handle itself.
    if isinstance(later, RangeReadableStore):
        assert await later.size(handle) == len(data)
        assert await later.read_range(handle, 5, 40) == data[5:40]
    if isinstance(later, LineIndexedStore):
        assert (await later.line_index(handle)).line_count == 300
    assert await later.write(REAL_KEY, data) == handle  # A replay of the same write: the same short handle.
    assert await later.write(REAL_KEY.replace('/0', '/1'), data) != handle  # The next retry: another one.
    other = await later.write(REAL_KEY, b'other bytes')  # The key reused for other bytes: never overwritten.
    assert other != handle and is_short_handle(other) and await later.read(handle) == data
    assert await later.resolve(other) == f'{REAL_KEY}~~2'


async def test_a_short_id_taken_by_another_handle_gets_one_character_more(kit: StoreKit) -> None:
    store = kit.make('app')
    await store.write('seed/call/0', b'seed')  # The store exists.
    first, second, *rest = short_handles('run/call_1/0')
    await plant_alias(kit, store, first, 'someone/else/0')
    handle = await store.write('run/call_1/0', b'mine')
    assert handle == second and len(handle) == 11
    assert await store.read(handle) == b'mine'
    assert await store.write('run/call_1/0', b'mine') == second  # Still deterministic.
    assert isinstance(store, ResolvableStore) and await store.resolve(first) == 'someone/else/0'  # Not overwritten.
    # Every candidate taken (an adversary with a hash farm): the full handle, which is unique anyway.
    for short in rest:
        await plant_alias(kit, store, short, 'someone/else/0')
    assert await store.write('run/call_2/0', b'theirs') != 'run/call_2/0'
    taken = list(short_handles('run/call_3/0'))
    for short in taken:
        await plant_alias(kit, store, short, 'someone/else/0')
    assert await store.write('run/call_3/0', b'x') == 'run/call_3/0'
    assert await store.read('run/call_3/0') == b'x'
