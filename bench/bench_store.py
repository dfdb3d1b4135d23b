"""Spill store and query tools: write cost, O(window) reads, grep speed, and regex safety."""

from __future__ import annotations

import gc
import shutil
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from bench._report import Entry
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset
from pydantic_ai_harness.overflowing_tool_output.stores import LocalFileStore

TITLE = 'Spill store and query tools'
METHOD = """
A 100 MB text payload (~1.3 M log lines) on `/dev/shm` (tmpfs, so disk write-back does not swamp the
timings). Write: `LocalFileStore.write` against `open(path, 'wb').write(data)` of the same bytes, best
of 5 each, peak memory from `tracemalloc` during the store write. Window: `read_tool_result` with
`limit=200` at 5 positions after the line index exists (best of 3 at each, worst position reported;
memory measured in a separate traced call), plus the first read right
after the write (the index of a payload this large is built in the background). Grep: a literal that
occurs 3 times, `grep_tool_result` against `grep -F -n` on the same file, best of 3, with the peak
memory of the grep call. Regex: `(a+)+$` over one 1 MB line.
"""

SECTION = 'store'
PAYLOAD_BYTES = 100_000_000
NEEDLE = 'needle-0xC0FFEE'


def _payload() -> bytes:
    parts: list[bytes] = []
    size = 0
    number = 0
    while size < PAYLOAD_BYTES:
        line = f'2024-05-01T12:00:{number % 60:02d} INFO worker-{number % 7} handled request {number} in {number % 997} ms\n'
        if number in (300_000, 700_000, 1_200_000):
            line = f'2024-05-01T12:00:00 ERROR {NEEDLE} at request {number}\n'
        encoded = line.encode()
        parts.append(encoded)
        size += len(encoded)
        number += 1
    return b''.join(parts)[:PAYLOAD_BYTES]


def _scratch() -> Path:
    base = Path('/dev/shm') if Path('/dev/shm').is_dir() else Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix='bench-store-', dir=base))


def _plain_write(path: Path, data: bytes) -> float:
    started = time.perf_counter()
    with open(path, 'wb') as file:
        file.write(data)
    elapsed = time.perf_counter() - started
    path.unlink()
    return elapsed


def _grep_cli(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run(['grep', '-F', '-n', NEEDLE, str(path)], capture_output=True, check=True)
    return time.perf_counter() - started


def _best(times: list[float]) -> float:
    return min(times)


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call()
    return time.perf_counter() - started, result


async def _traced_peak(call: Callable[[], Awaitable[Any]]) -> tuple[float, int, Any]:
    gc.collect()
    tracemalloc.start()
    try:
        started = time.perf_counter()
        result = await call()
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return elapsed, peak, result


async def _run(entries: list[Entry]) -> None:
    scratch = _scratch()
    try:
        data = _payload()
        plain_path = scratch / 'plain.bin'
        store = LocalFileStore(base_dir=scratch / 'spill')
        await store.write('warmup/c/0', b'x')

        plain_times: list[float] = []
        store_times: list[float] = []
        handle = ''
        for attempt in range(5):
            plain_times.append(_plain_write(plain_path, data))
            elapsed, handle = await _timed(lambda key=f'run/big/{attempt}': store.write(key, data))
            store_times.append(elapsed)
        plain, spill = _best(plain_times), _best(store_times)
        entries.append(
            Entry(
                SECTION,
                'spill write of 100 MB vs plain file write',
                spill / plain,
                'x',
                '<= 1.5x',
                spill / plain <= 1.5,
                f'{spill * 1000:.0f} ms vs {plain * 1000:.0f} ms',
            )
        )
        _, peak, handle = await _traced_peak(lambda: store.write('run/big/peak', data))
        entries.append(
            Entry(
                SECTION,
                'spill write peak memory (extra, vs payload)',
                peak / len(data),
                'x',
                '<= 1.0x extra (2x total)',
                peak <= len(data),
                f'{peak / 1e6:.1f} MB extra for a {len(data) / 1e6:.0f} MB payload',
            )
        )

        toolset = build_query_toolset(store)
        read: Any = toolset.tools['read_tool_result'].function
        grep: Any = toolset.tools['grep_tool_result'].function

        fresh = await store.write('run/fresh/0', data)
        first_read, _ = await _timed(lambda: read(handle=fresh, offset=650_000, limit=200))
        await store.line_index(handle)
        total_lines = (await store.line_index(handle)).line_count
        worst_time = 0.0
        worst_peak = 0
        for fraction in (0.0, 0.25, 0.5, 0.75, 0.9999):
            offset = int(total_lines * fraction)
            times: list[float] = []
            for _ in range(3):
                elapsed, answer = await _timed(lambda at=offset: read(handle=handle, offset=at, limit=200))
                times.append(elapsed)
                # `offset` is the first line shown (1-based; 0 also means the start).
                assert f'lines {max(offset, 1)}-' in answer, answer[:200]
            _, peak, _ = await _traced_peak(lambda at=offset: read(handle=handle, offset=at, limit=200))
            worst_time, worst_peak = max(worst_time, _best(times)), max(worst_peak, peak)
        entries.append(
            Entry(
                SECTION,
                '200-line read_tool_result window in 100 MB (worst of 5 positions)',
                worst_time * 1000,
                'ms',
                '<= 20 ms',
                worst_time <= 0.020,
                f'first read right after the write: {first_read * 1000:.0f} ms',
            )
        )
        entries.append(
            Entry(
                SECTION,
                '200-line window extra memory',
                worst_peak / 1e6,
                'MB',
                '<= 10 MB',
                worst_peak <= 10_000_000,
            )
        )

        payload_file = next((scratch / 'spill').rglob('0.out'))
        grep_times: list[float] = []
        for _ in range(3):
            grep_times.append(_grep_cli(payload_file))
        ours: list[float] = []
        answer = ''
        for _ in range(3):
            elapsed, answer = await _timed(lambda: grep(handle=handle, pattern=NEEDLE))
            ours.append(elapsed)
        assert answer.startswith(f"3 matching lines for '{NEEDLE}'"), answer[:200]
        _, grep_peak, _ = await _traced_peak(lambda: grep(handle=handle, pattern=NEEDLE))
        ratio = _best(ours) / _best(grep_times)
        entries.append(
            Entry(
                SECTION,
                'grep_tool_result literal over 100 MB vs grep -F -n',
                ratio,
                'x',
                '<= 3x',
                ratio <= 3,
                f'{_best(ours) * 1000:.0f} ms vs {_best(grep_times) * 1000:.0f} ms; peak {grep_peak / 1e6:.1f} MB',
            )
        )

        line_handle = await store.write('run/regex/0', b'a' * 1_000_000 + b'!\n')
        elapsed, answer = await _timed(lambda: grep(handle=line_handle, pattern='(a+)+$', is_regex=True))
        assert answer.startswith('No line matches'), answer[:200]
        entries.append(
            Entry(
                SECTION,
                'catastrophic regex (a+)+$ over a 1 MB line',
                elapsed * 1000,
                'ms',
                '< 1000 ms',
                elapsed < 1.0,
            )
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run() -> list[Entry]:
    entries: list[Entry] = []
    anyio.run(_run, entries)
    return entries
