"""Hostile tool return values: every kind of Python value a tool may return, spilled through a real store.

Each run completes, the model-visible text can be produced, and whatever was spilled reads back exactly.
`tests/overflowing_tool_output/test_capability.py::test_any_value_never_crashes_the_run` covers nine of these
values under a Truncate band; here every value goes through `Spill` and `LocalFileStore` and is read back.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import fractions
import math
import re
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple, TypedDict

import anyio
import pydantic
import pytest
from pydantic_ai.messages import BinaryContent, ImageUrl, ToolReturn, ToolReturnPart

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Spill,
    build_query_toolset,
)

from ._support import run_one_tool, tool_returns

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]


class Color(enum.Enum):
    RED = 'red'


class Level(enum.IntEnum):
    HIGH = 3


@dataclass
class Point:
    x: int
    y: list[str]


class Model(pydantic.BaseModel):
    name: str
    tags: list[str]


class Movie(TypedDict):
    title: str


class Pair(NamedTuple):
    left: int
    right: str


class Opaque:
    __slots__ = ()


class ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError('repr exploded')

    def __str__(self) -> str:
        raise RuntimeError('str exploded')


class EqRaises:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError('eq exploded')

    __hash__ = object.__hash__


def _deep_list(levels: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(levels):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


def _deep_dict(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    current = root
    for _ in range(levels):
        child: dict[str, Any] = {}
        current['k'] = child
        current = child
    return root


def _cycle_list() -> list[Any]:
    value: list[Any] = ['loop']
    value.append(value)
    return value


def _cycle_dict() -> dict[str, Any]:
    value: dict[str, Any] = {'name': 'loop'}
    value['self'] = value
    return value


def _generator() -> Iterator[int]:
    yield from range(3)


BIG = 200  # every value below is over a 100-character band, or is the smallest of its kind
VALUES: dict[str, Callable[[], Any]] = {
    'none': lambda: None,
    'bool': lambda: True,
    'int': lambda: -1,
    'huge-int': lambda: 10**5_000,  # beyond Python's 4,300-digit str() limit
    'huge-negative-int': lambda: -(7**20_000),
    'float': lambda: 1.5,
    'nan-inf': lambda: [math.nan, math.inf, -math.inf] * BIG,
    'complex': lambda: complex(1, 2),
    'decimal': lambda: [decimal.Decimal('3.14159265358979323846264338327950288')] * BIG,
    'fraction': lambda: fractions.Fraction(1, 3),
    'str': lambda: 'plain text ' * BIG,
    'str-with-nul-and-controls': lambda: 'a\x00b\x07c\x1b[31mred\x1b[0m\r\n' * BIG,
    'lone-surrogates': lambda: '\ud800 high \udfff low \udcff escaped\n' * BIG,
    'astral-and-combining': lambda: '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 e\u0301 👩‍👩‍👧 \u202e\n' * BIG,
    'bytes-invalid-utf8': lambda: b'\xff\xfe\xc0\xaf\xed\xa0\x80' * BIG,
    'bytes-empty': lambda: b'',
    'bytearray': lambda: bytearray(b'\x00\x01' * BIG),
    'memoryview': lambda: memoryview(b'\x80' * BIG),
    'binary-content': lambda: BinaryContent(b'\x89PNG\r\n\x1a\n' + b'\x00' * BIG, media_type='image/png'),
    'image-url': lambda: ImageUrl(url='https://example.com/x.png'),
    'list-with-a-file': lambda: ['caption ' * BIG, BinaryContent(b'GIF89a', media_type='image/gif')],
    'list': lambda: list(range(BIG)),
    'tuple': lambda: tuple('abc' * BIG),
    'set': lambda: set(range(BIG)),
    'frozenset': lambda: frozenset(['x' * BIG]),
    'deque': lambda: collections.deque(range(BIG)),
    'range': lambda: range(BIG),
    'dict-int-keys': lambda: {i: str(i) for i in range(BIG)},
    'dict-tuple-keys': lambda: {(i, i): i for i in range(BIG)},
    'dict-object-keys': lambda: {Opaque(): 1 for _ in range(3)},
    'dict-none-and-bool-keys': lambda: {None: 'n', True: 't', 1.5: 'f', 'pad': 'x' * BIG},
    'deep-list-10k': lambda: _deep_list(10_000),
    'deep-dict-10k': lambda: _deep_dict(10_000),
    'cyclic-list': _cycle_list,
    'cyclic-dict': _cycle_dict,
    'dataclass': lambda: [Point(1, ['a'] * 10)] * 20,
    'pydantic-model': lambda: [Model(name='n', tags=['t'] * 10)] * 20,
    'typed-dict': lambda: [Movie(title='t' * 20)] * 20,
    'named-tuple': lambda: [Pair(1, 'r' * 20)] * 20,
    'enum': lambda: [Color.RED, Level.HIGH] * BIG,
    'datetimes': lambda: (
        [
            datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
            datetime.date(2024, 1, 1),
            datetime.time(12, 0),
            datetime.timedelta(days=1, microseconds=1),
        ]
        * BIG
    ),
    'uuid': lambda: [uuid.UUID(int=n) for n in range(BIG)],
    'paths': lambda: [Path('/etc/passwd'), PurePosixPath('a/b')] * BIG,
    'regex': lambda: re.compile('x' * BIG),
    'generator': _generator,
    'lambda': lambda: lambda: None,
    'class': lambda: Opaque,
    'module': lambda: math,
    'exception': lambda: ValueError('x' * BIG),
    'object': object,
    'repr-raises': ReprRaises,
    'eq-raises': lambda: [EqRaises()] * BIG,
    'tool-return-with-content': lambda: ToolReturn(return_value='v' * BIG, content='c' * BIG, metadata={'m': 1}),
    'tool-return-with-odd-metadata': lambda: ToolReturn(return_value=[Opaque()] * BIG, metadata=Opaque()),
    'hundred-thousand-ints': lambda: list(range(100_000)),
}


@pytest.mark.parametrize('name', sorted(VALUES))
async def test_any_return_value_is_reduced_or_passed_and_spills_read_back(name: str, tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    capability = OverflowingToolOutput(bands=[Band(over=100, action=Spill(preview_chars=200))], store=store)
    value = VALUES[name]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        messages = await run_one_tool(capability, value)
    # Only the capability's own warnings (for values it cannot serialize exactly or cannot reduce).
    assert all(issubclass(w.category, OverflowingToolOutputWarning) for w in caught), [str(w.message) for w in caught]
    [part] = tool_returns(messages)
    assert part.outcome == 'success'
    assert isinstance(part.model_response_str(), str)  # the text the model would be sent can be produced
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    for key in ('overflow_handle', 'overflow_content_handle'):
        handle = (part.metadata or {}).get(key) if isinstance(part.metadata, dict) else None
        if handle is None:
            continue
        stored = await store.read(handle)
        assert stored and len(stored) == (part.metadata or {})[key.replace('handle', 'bytes')]
        if isinstance(value, bytes | bytearray | memoryview):
            assert stored == bytes(value)
        elif isinstance(value, str):
            assert stored == value.encode('utf-8', 'surrogatepass')
        answer = await read(handle=handle, limit=5)
        assert answer.startswith('Stored result'), answer[:200]


HUNDRED_MB = 100_000_000


async def test_a_100_mb_single_line_string_spills_and_reads_back_at_both_ends(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    head, tail = 'BEGIN-\u00e9-', '-\u4e16-END'
    text = head + 'x' * (HUNDRED_MB - len(head) - len(tail)) + tail
    started = time.perf_counter()
    messages = await run_one_tool(OverflowingToolOutput(store=store), text)
    spilled_in = time.perf_counter() - started
    [part] = tool_returns(messages)
    assert isinstance(part, ToolReturnPart) and len(str(part.content)) < 2_000
    handle = part.metadata['overflow_handle']
    encoded_size = len(text.encode())
    assert part.metadata['overflow_bytes'] == encoded_size == await store.size(handle)
    assert await store.read_range(handle, 0, 64) == text.encode()[:64]
    assert await store.read_range(handle, encoded_size - 64, encoded_size) == text.encode()[-64:]
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    first = await read(handle=handle, unit='bytes', offset=0, limit=32)
    last = await read(handle=handle, unit='bytes', offset=0, limit=32, from_end=True)
    assert f'\n{head}xxx' in first and f'xxx{tail}\n' in last
    line = await read(handle=handle)  # the one line, cut, with the byte offset to read on from
    assert (
        '1| BEGIN-é-xxx' in line and 'line cut: 99999' in line and "unit='bytes', offset=1001]" in line
    )  # é is 2 bytes
    print(f'\na 100 MB single-line string was spilled in {spilled_in:.1f} s and read back at both ends')


async def test_spilling_10_mb_never_blocks_the_event_loop_for_long(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    gaps: list[float] = []
    done = anyio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async def spill() -> None:
        await run_one_tool(OverflowingToolOutput(store=store), 'x' * 10_000_000)
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        group.start_soon(spill)
    assert max(gaps) < 0.5, f'the event loop was blocked for {max(gaps):.2f} s'
