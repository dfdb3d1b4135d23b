"""A soak: one long-lived process spilling 20,000 returns into a store of thousands, with every store walk running.

A service runs this library for weeks in one process; a resource it leaks once per spill, per walk or per run
ends that process (issue: one descriptor leaked per directory walked exhausted a 1,024 limit within seconds of a
service's first spill, and every later spill fell back to a lossy truncation). The soak runs in a child process
under a low descriptor limit (256), so such a leak fails within a few hundred operations instead of after a week.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]

PREFILLED = 5_000
RUNS = 200
"""Each run spills 100 returns (4 steps of 25 parallel calls): 20,000 spills."""
WARMUP = 20
"""Runs before the first sample: the worker-thread pool and the caches have reached their size by then."""
DESCRIPTOR_LIMIT = 256


def test_twenty_thousand_spills_in_one_process_leave_descriptors_threads_tasks_and_memory_flat(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            '-m',
            'tests.reliability._soak_child',
            str(tmp_path / 'store'),
            *map(str, (PREFILLED, RUNS, WARMUP, DESCRIPTOR_LIMIT)),
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3_000:]
    result, warned = (json.loads(line) for line in completed.stdout.splitlines()[-2:])
    print(f'\nsoak: {result}')
    assert warned == {'warnings': 0}, completed.stderr[-3_000:]
    # Every return spilled (none fell back to a lossy truncation), and every run found its needle by reading and by
    # grep without a handle.
    assert result['spills'] == RUNS * 100
    assert result['found'] == RUNS
    # The TTL prune walked the root again and again, and `list` walked it every 20 runs, over thousands of payloads.
    assert result['prunes'] >= 3
    assert result['listed'] >= 3_000
    start, end = result['start'], result['end']
    assert end['fds'] <= start['fds'] + 3
    assert end['threads'] <= start['threads'] + 1
    assert end['tasks'] <= start['tasks']
    assert end['rss'] - start['rss'] < 64 << 20


def test_store_walks_and_the_cli_hold_no_descriptor_per_directory(tmp_path: Path) -> None:
    """`list`, `prune` and the CLI's `ls`, `stats` and `prune` on a root of 1,500 payloads, under a limit of 64
    descriptors: each walk opens one directory at a time and closes it (a duplicate per directory walked leaked).
    """
    completed = subprocess.run(
        [sys.executable, '-c', _WALKS, str(tmp_path / 'store')],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3_000:]
    before, after, listed, pruned, cli_codes = json.loads(completed.stdout)
    assert (listed, pruned) == (1_500, 500)
    assert after == before
    assert cli_codes == [0, 0, 0]


_WALKS = """
import asyncio, contextlib, io, json, os, resource, sys, time
from datetime import timedelta
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore
from pydantic_ai_harness.overflowing_tool_output._cli import main as cli

root = sys.argv[1]
store = LocalFileStore(base_dir=root)

async def fill():
    for start in range(0, 1_500, 250):
        await asyncio.gather(*(store.write(f'run-{i % 30}/call-{i}', b'x\\n' * 50) for i in range(start, start + 250)))
    old = time.time() - 7_200
    for payload in (await store.list())[:500]:
        os.utime(store.root.joinpath(*payload.handle.split('/')).with_suffix('.out'), (old, old))

async def walks():
    for _ in range(100):
        listed = len(await store.list())
    return listed

asyncio.run(fill())
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
before = len(os.listdir('/proc/self/fd'))
listed = asyncio.run(walks())
codes = []
for command in (['ls'], ['stats'], ['prune', '--older-than', '1h', '--yes']):
    with contextlib.redirect_stdout(io.StringIO()):
        codes.append(cli(['--root', root, *command]))
pruned = listed - len(asyncio.run(store.list()))
for _ in range(20):
    asyncio.run(store.prune(timedelta(hours=1)))
print(json.dumps([before, len(os.listdir('/proc/self/fd')), listed, pruned, codes]))
"""
