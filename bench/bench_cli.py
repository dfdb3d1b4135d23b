"""The operator CLI's start-up: `pyai-overflow --version` / `--help`, and `ls` / `stats` on a 10,000-payload root.

Run it alone with `PYTHONPATH=$PWD .venv/bin/python -m bench.bench_cli`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._report import Entry
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore

TITLE = 'Operator CLI start-up'
METHOD = """
Wall time of whole processes, median of 15 (after one warm-up run each): `python -m
pydantic_ai_harness.overflowing_tool_output` (what `pyai-overflow` runs) with `--version` and `--help`, and with
`ls` and `stats` on a `LocalFileStore` root holding 10,000 payloads (100 runs of 100 calls, 700 bytes each, with
their short-handle aliases), against `python -c pass` on the same interpreter. The CLI imports neither pydantic-ai
nor asyncio for `--version` and `--help`; `python -X importtime -m pydantic_ai_harness.overflowing_tool_output
--version` shows what it does import.
"""

SECTION = 'cli'
ROOT = Path(__file__).resolve().parent.parent
RUNS = 15
PAYLOADS = (100, 100)


def _median_seconds(args: list[str]) -> float:
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    times: list[float] = []
    for attempt in range(RUNS + 1):
        started = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env, cwd=ROOT)
        if attempt:  # the first run warms the file cache
            times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _fill(root: Path) -> None:
    store = LocalFileStore(base_dir=root)
    runs, calls = PAYLOADS
    for run in range(runs):
        writes = (store.write(f'run{run}/call_{call}/0', b'payload line\n' * 54) for call in range(calls))
        await asyncio.gather(*writes)


def run() -> list[Entry]:
    cli = ['-m', 'pydantic_ai_harness.overflowing_tool_output']
    baseline = _median_seconds(['-c', 'pass'])
    entries: list[Entry] = []
    for name, args in (('--version', ['--version']), ('--help', ['--help'])):
        took = _median_seconds([*cli, *args])
        entries.append(
            Entry(
                SECTION,
                f'`pyai-overflow {name}`',
                took * 1000,
                'ms',
                '< 150 ms',
                took < 0.150,
                f'`python -c pass`: {baseline * 1000:.1f} ms ({took / baseline:.1f}x)',
            )
        )
    with tempfile.TemporaryDirectory(prefix='bench-cli-') as temp:
        root = Path(temp) / 'spill'
        asyncio.run(_fill(root))
        count = PAYLOADS[0] * PAYLOADS[1]
        for command in ('ls', 'stats'):
            took = _median_seconds([*cli, '--root', str(root), command])
            entries.append(
                Entry(
                    SECTION,
                    f'`pyai-overflow {command}`, {count:,} payloads',
                    took * 1000,
                    'ms',
                    '< 1,000 ms',
                    took < 1.0,
                    f'`python -c pass`: {baseline * 1000:.1f} ms',
                )
            )
    return entries


if __name__ == '__main__':
    from bench._report import markdown_table

    print(markdown_table(run()))
