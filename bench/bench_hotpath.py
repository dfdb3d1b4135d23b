"""The spill hot path through `Agent.run`, side by side with upstream `pydantic-ai-harness` 0.62, and grep speed."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from bench._report import Entry

TITLE = 'Spill hot path, side by side with upstream'
METHOD = """
The step a user waits for, from a tool's return to the next model request: `Agent.run` with a `FunctionModel`
that calls one tool returning the payload, then answers. Each implementation runs in its own interpreter: this
checkout, and upstream `pydantic-ai-harness==0.62.0` (`ToolOutputLimits` with `store=LocalFileStore(...)`, its
default bands) installed by the benchmark into its own virtual environment under the system temp directory,
with the same `pydantic-ai-slim` version as ours (upstream pins 2.62.0; it is installed with `--no-deps` beside
its other requirements so both run on the same pydantic-ai). Without network or a wheel for it, the upstream
column is skipped and the report says so. Stores on `/dev/shm`. Rounds alternate the variants (plain write,
the run without the capability, ours, upstream); each figure is the median of its rounds, every ratio is against
figures of the same run. Baselines: `open(path, 'wb').write(text.encode())` of the same text (`to_json(value)`
then write for the JSON value). Peak extra memory: the rise of the process's peak RSS (`VmHWM`, reset through
`/proc/self/clear_refs`) over its RSS before the step. Payloads: logs of 1, 10 and 100 MB (an ERROR line every
100,000 lines), and a list of 20 MB of dicts in compact JSON. Grep: `grep_tool_result` over the 100 MB log in
`LocalFileStore` against GNU `grep -F -n` / `grep -E -n` on the stored file, alternated, median of 5.
"""

SECTION = 'hotpath'
UPSTREAM_VERSION = '0.62.0'
WORKER = Path(__file__).resolve().parent / '_hotpath_worker.py'
REPO = WORKER.parent.parent

# payload -> rounds, target ratio against upstream
LOGS: tuple[tuple[str, int, float], ...] = (('log_1mb', 15, 1.5), ('log_10mb', 9, 1.5), ('log_100mb', 5, 1.15))
JSON_PAYLOAD = ('json_20mb', 5, 1.5)


def _scratch() -> Path:
    base = Path('/dev/shm') if Path('/dev/shm').is_dir() else Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix='bench-hotpath-', dir=base))


def _slim_version() -> str:
    return metadata.version('pydantic-ai-slim')


def upstream_python() -> tuple[Path | None, str]:
    """The interpreter of a venv holding upstream 0.62 on our pydantic-ai-slim, installing it if needed."""
    slim = _slim_version()
    venv = Path(tempfile.gettempdir()) / 'pyai-harness-bench' / f'upstream-{UPSTREAM_VERSION}-slim-{slim}'
    python = venv / ('Scripts' if os.name == 'nt' else 'bin') / 'python'
    probe = [str(python), '-c', 'import pydantic_ai_harness.tool_output_limits']
    # Away from this checkout (and its PYTHONPATH), or `pydantic_ai_harness` would be ours.
    isolated: dict[str, Any] = {'capture_output': True, 'cwd': tempfile.gettempdir(), 'env': _env(with_repo=False)}
    if python.exists() and subprocess.run(probe, check=False, **isolated).returncode == 0:
        return python, f'upstream {UPSTREAM_VERSION} from {venv}'
    pip = [str(python), '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']
    try:
        subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True, **isolated)
        subprocess.run(
            [*pip, f'pydantic-ai-slim=={slim}', 'genai-prices>=0.0.71', 'httpx>=0.28.1', 'json-repair>=0.58.0'],
            check=True,
            **isolated,
        )
        subprocess.run([*pip, '--no-deps', f'pydantic-ai-harness=={UPSTREAM_VERSION}'], check=True, **isolated)
        subprocess.run(probe, check=True, **isolated)
    except (OSError, subprocess.CalledProcessError) as exc:
        stderr = getattr(exc, 'stderr', b'') or b''
        reason = stderr.decode(errors='replace').strip().splitlines()[-1:] or [str(exc)]
        return None, f'upstream {UPSTREAM_VERSION} could not be installed ({reason[0][:200]}); its column is skipped'
    return python, f'upstream {UPSTREAM_VERSION} installed into {venv}'


class Worker:
    def __init__(self, python: Path | str, impl: str, scratch: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(python), str(WORKER), impl, str(scratch / impl)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=scratch,
            env=env,
        )
        self.answer()

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError('the benchmark worker exited')
        return json.loads(line)

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + '\n')
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def _env(with_repo: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    if with_repo:
        env['PYTHONPATH'] = str(REPO)
    return env


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _measure(workers: dict[str, Worker], name: str, rounds: int) -> dict[tuple[str, str], tuple[float, float]]:
    """(side, variant) -> (median seconds, median peak extra bytes), variants alternated round by round."""
    plan = [('ours', 'write'), ('ours', 'none'), ('ours', 'capability')]
    if 'upstream' in workers:
        plan += [('upstream', 'capability')]
    times: dict[tuple[str, str], list[float]] = {key: [] for key in plan}
    peaks: dict[tuple[str, str], list[float]] = {key: [] for key in plan}
    for round_number in range(rounds):
        shift = round_number % len(plan)
        for side, variant in plan[shift:] + plan[:shift]:
            answer = workers[side].ask(payload=name, variant=variant)
            times[side, variant].append(answer['seconds'])
            peaks[side, variant].append(answer['peak_extra'])
    return {key: (_median(times[key]), _median(peaks[key])) for key in plan}


def _ms(seconds: float) -> str:
    return f'{seconds * 1000:,.1f} ms'


def _spill_entries(workers: dict[str, Worker], entries: list[Entry], upstream_note: str) -> None:
    has_upstream = 'upstream' in workers
    for name, rounds, target in (*LOGS, JSON_PAYLOAD):
        figures = _measure(workers, name, rounds)
        write, _ = figures['ours', 'write']
        bare, _ = figures['ours', 'none']
        ours, ours_peak = figures['ours', 'capability']
        label = name.replace('_', ' ').replace('mb', ' MB').replace('log', 'log').replace('json', 'JSON list of dicts')
        detail = f'ours {_ms(ours)}, write {_ms(write)}, run without capability {_ms(bare)}'
        if has_upstream:
            upstream, _ = figures['upstream', 'capability']
            detail += f', upstream {_ms(upstream)}'
            entries.append(
                Entry(
                    SECTION,
                    f'{label}: spill step vs upstream 0.62',
                    ours / upstream,
                    'x',
                    f'<= {target}x',
                    ours / upstream <= target,
                    detail,
                )
            )
        else:
            entries.append(
                Entry(
                    SECTION,
                    f'{label}: spill step vs upstream 0.62 (skipped)',
                    0.0,
                    'x',
                    f'<= {target}x',
                    True,
                    upstream_note,
                )
            )
        size = 100_000_000 if name == 'log_100mb' else 20_000_000
        if name == 'log_100mb':
            entries.append(
                Entry(
                    SECTION,
                    f'{label}: spill step vs write(text.encode())',
                    ours / write,
                    'x',
                    '<= 1.2x',
                    ours / write <= 1.2,
                    detail,
                )
            )
            entries.append(
                Entry(
                    SECTION,
                    f'{label}: extra peak memory vs payload',
                    ours_peak / size,
                    'x',
                    '<= 0.5x',
                    0 <= ours_peak <= size / 2,
                    _peak_detail(ours_peak, figures, has_upstream),
                )
            )
        if name.startswith('json'):
            entries.append(
                Entry(SECTION, f'{label}: spill step vs to_json + write', ours / write, 'x', 'reported', True, detail)
            )
            entries.append(
                Entry(
                    SECTION,
                    f'{label}: extra peak memory vs compact JSON',
                    ours_peak / size,
                    'x',
                    '<= 2x',
                    0 <= ours_peak <= 2 * size,
                    _peak_detail(ours_peak, figures, has_upstream),
                )
            )


def _peak_detail(ours: float, figures: dict[tuple[str, str], tuple[float, float]], has_upstream: bool) -> str:
    detail = f'ours {ours / 1e6:,.0f} MB'
    if has_upstream:
        detail += f', upstream {figures["upstream", "capability"][1] / 1e6:,.0f} MB'
    return detail


async def _grep_entries(entries: list[Entry], scratch: Path) -> None:
    sys.path.insert(0, str(WORKER.parent))
    from _hotpath_worker import NEEDLE, log_text

    from pydantic_ai_harness.overflowing_tool_output._tools import build_query_toolset
    from pydantic_ai_harness.overflowing_tool_output.stores import LocalFileStore

    store = LocalFileStore(base_dir=scratch / 'grep-store')
    data: bytes = log_text(100_000_000).encode()
    handle = await store.write('run/grep/0', data)
    del data
    await store.line_index(handle)
    path = next((scratch / 'grep-store').rglob('0.out'))
    grep: Any = build_query_toolset(store).tools['grep_tool_result'].function
    cases = (
        ('literal', NEEDLE, False, ['-F'], 1.5),
        ('regex with a literal', 'WARN needle-0x[0-9A-F]+', True, ['-E'], 2.0),
        ('regex without a literal', 'ERROR worker-[0-9]+ failed|WARN needle-[0-9a-z]+x', True, ['-E'], 2.0),
    )
    for label, pattern, is_regex, flags, target in cases:
        ours: list[float] = []
        gnu: list[float] = []
        answer = ''
        expected = 0
        for _ in range(5):
            elapsed, expected = await anyio.to_thread.run_sync(_gnu_grep, [*flags, '-n', pattern, str(path)])
            gnu.append(elapsed)
            elapsed, answer = await _timed(partial(grep, handle=handle, pattern=pattern, is_regex=is_regex))
            ours.append(elapsed)
        _, peak = await _traced(partial(grep, handle=handle, pattern=pattern, is_regex=is_regex))
        ratio = _median(ours) / _median(gnu)
        entries.append(
            Entry(
                SECTION,
                f'grep_tool_result {label} over 100 MB vs grep {flags[0]} -n',
                ratio,
                'x',
                f'<= {target}x',
                ratio <= target,
                f'{_ms(_median(ours))} vs {_ms(_median(gnu))}; {expected} matching lines; peak {peak / 1e6:.1f} MB; '
                f'`{pattern}`; answer starts {answer[:40]!r}',
            )
        )


def _gnu_grep(arguments: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    completed = subprocess.run(['grep', *arguments], check=False, capture_output=True)
    return time.perf_counter() - started, completed.stdout.count(b'\n')


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call()
    return time.perf_counter() - started, result


async def _traced(call: Callable[[], Awaitable[Any]]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = await call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def run() -> tuple[list[Entry], str]:
    entries: list[Entry] = []
    scratch = _scratch()
    workers: dict[str, Worker] = {}
    try:
        python, note = upstream_python()
        workers['ours'] = Worker(sys.executable, 'ours', scratch, _env(with_repo=True))
        if python is not None:
            workers['upstream'] = Worker(python, 'upstream', scratch, _env(with_repo=False))
        for worker in workers.values():
            worker.ask(prepare=[name for name, _, _ in (*LOGS, JSON_PAYLOAD)])
        _spill_entries(workers, entries, note)
        for worker in workers.values():
            worker.close()
        workers.clear()
        anyio.run(_grep_entries, entries, scratch)
    finally:
        for worker in workers.values():
            worker.process.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    from pydantic_ai_harness.overflowing_tool_output._preview import _literal_finder
    from pydantic_ai_harness.overflowing_tool_output.stores._line_index import _numpy

    engine = 'Hyperscan' if type(_literal_finder()).__name__ == '_HyperscanFinder' else 'RE2 (hyperscan not installed)'
    counting = 'numpy' if _numpy() is not None else '`bytes.count` (numpy not installed)'
    return entries, (
        f'Upstream: {note}. Important-lines prefilter: {engine}; line counting: {counting} (the `hyperscan` and '
        f'`numpy` extras). Measured with `PYTHONPATH=$PWD .venv/bin/python -m bench {SECTION}` on a shared 2-core '
        'machine: figures vary by about 30% between runs.'
    )
