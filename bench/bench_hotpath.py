"""The spill hot path through `Agent.run` on the plain install, on its pure fallback, and upstream; grep; reads."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._report import Entry
from bench._venvs import ACCELERATORS, REPO, UPSTREAM_VERSION, Venv, clean_env, project_venv, upstream_venv

TITLE = 'Spill hot path: the plain install, its pure fallback, upstream'
METHOD = f"""
The step a user waits for, from a tool's return to the next model request: `Agent.run` with a `FunctionModel`
that calls one tool returning the payload, then answers. Each column runs in its own interpreter and virtual
environment, built by the benchmark under `bench/.out/`: **plain install** is `pip install .` of this checkout
(no extras, no dev group: what `pip install pydantic-ai-harness-context` brings, Hyperscan and numpy included
where their wheels exist), **pure fallback** is the same with `{' and '.join(ACCELERATORS)}` uninstalled (what a
platform without their wheels runs), and **upstream** is `pydantic-ai-harness=={UPSTREAM_VERSION}`
(`ToolOutputLimits` with `store=LocalFileStore(...)`, its default bands) on the same `pydantic-ai-slim` version
as ours (upstream pins an older one; it is installed with `--no-deps` beside its other requirements). A column
whose venv cannot be built is skipped and the report says so. Stores on `/dev/shm`. Rounds alternate the
variants (plain write, plain install, pure fallback, upstream; the run without the capability, context only, runs once);
every ratio is the median of the per-round ratios (both sides of a ratio measured in the same round), every time
shown the median of its rounds. Baselines: `open(path, 'wb').write(
text.encode())` of the same text (`to_json(value)` then write for the JSON value). Peak extra memory: the rise of
the process's peak RSS (`VmHWM`, reset through `/proc/self/clear_refs`) over its RSS before the step. Payloads:
logs of 1, 10 and 100 MB (an ERROR line every 100,000 lines), and a list of 20 MB of dicts in compact JSON.
Grep: `grep_tool_result` over the 100 MB log in each column's `LocalFileStore` against GNU `grep -F -n` /
`grep -E -n` on the stored file, alternated, median of 5 (peak memory: `tracemalloc` over one more call). Read:
a fresh process per round runs one agent run without the capability (as the process a model reads from has; it
loads anyio's event-loop backend), imports `pydantic_ai_harness.overflowing_tool_output` (timed apart), then times its
first `read_tool_result(offset=650_000, limit=200)` on the indexed 100 MB log and the median of 10 more; median of
5 processes.

What the columns differ in: the plain install finds the candidate lines of the spill preview's important-lines
scan with Hyperscan's SIMD literal matcher and counts the line index's newlines with numpy, in SIMD and without
holding the GIL; the pure fallback finds the candidates with one RE2 pass over the payload (RE2 releases the GIL,
but a DFA over that many literals reads a few hundred MB per second) and counts newlines with `bytes.count`
(which holds the GIL). Neither changes what the spill produces. `tiktoken` changes token counts, not speed, and
is in neither column.
"""

SECTION = 'hotpath'
WORKER = Path(__file__).resolve().parent / '_hotpath_worker.py'
COLUMNS = {
    'plain': 'plain install',
    'pure': f'pure fallback (no {", ".join(ACCELERATORS)})',
    'upstream': f'upstream {UPSTREAM_VERSION}',
}
"""Column -> its heading."""

# payload -> rounds, goal against upstream (the plain install's, from the project's issue on speed as installed)
LOGS: tuple[tuple[str, int, float], ...] = (('log_1mb', 15, 1.3), ('log_10mb', 9, 1.2), ('log_100mb', 7, 0.9))
JSON_PAYLOAD = ('json_20mb', 7, 1.2)
GREP_ROUNDS = 5
READ_ROUNDS = 5
READ_OFFSET = 650_000
GREPS: tuple[tuple[str, str, bool, str, float], ...] = (
    # label, pattern, is_regex, GNU grep flag, goal
    ('literal', 'needle-0xC0FFEE', False, '-F', 1.1),
    ('regex with a literal prefix', 'WARN needle-0x[0-9A-F]+', True, '-E', 1.5),
    ('regex with a literal inside', '[0-9]{8} failed', True, '-E', 1.5),
    ('regex without a common literal', 'ERROR worker-[0-9]+ failed|WARN needle-[0-9a-z]+x', True, '-E', 2.0),
)


def _scratch() -> Path:
    base = Path('/dev/shm') if Path('/dev/shm').is_dir() else Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix='bench-hotpath-', dir=base))


class Worker:
    """One column's long-lived worker process (`_hotpath_worker.py`), asked JSON commands one line at a time."""

    def __init__(self, python: Path, impl: str, scratch: Path) -> None:
        self.python = str(python)
        self.process = subprocess.Popen(
            [str(python), str(WORKER), impl, str(scratch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
            env=clean_env(),
        )
        self.package = self.answer()['package']

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


@dataclass
class Row:
    """One step, measured in each column."""

    step: str
    """What was measured, against which baseline."""

    unit: str
    """`'x'` for a ratio, `'ms'` or `'MB'`."""

    goal: str
    """The goal, as text."""

    limit: float | None
    """The bound the plain install is held to (the pure fallback is reported against it); `None` for a reported figure."""

    values: dict[str, float] = field(default_factory=dict[str, float])
    """Column -> the figure."""

    details: dict[str, str] = field(default_factory=dict[str, str])
    """Column -> the raw measurements behind it."""


def _ms(seconds: float) -> str:
    return f'{seconds * 1000:,.1f} ms'


def _rotations(plan: list[Any], rounds: int) -> list[list[Any]]:
    """`plan` in `rounds` rotations, so no variant always runs first."""
    return [plan[r % len(plan) :] + plan[: r % len(plan)] for r in range(rounds)]


def _measure(workers: dict[str, Worker], name: str, rounds: int) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(column, variant) -> (seconds, peak extra bytes) of each round, the variants alternated round by round."""
    plan = [('plain', 'write')] + [(column, 'capability') for column in workers]
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in plan}
    # The run without the capability is context only (and takes ~40x a plain write at 100 MB): one round.
    answer = workers['plain'].ask(payload=name, variant='none')
    figures['plain', 'none'] = [(answer['seconds'], answer['peak_extra'])]
    for order in _rotations(plan, rounds):
        for column, variant in order:
            answer = workers[column].ask(payload=name, variant=variant)
            figures[column, variant].append((answer['seconds'], answer['peak_extra']))
    return figures


def _ratio(ours: list[float], baseline: list[float]) -> float:
    """The median of the per-round ratios (both measured in the same round, so they share its load)."""
    return statistics.median(a / b for a, b in zip(ours, baseline, strict=True))


def _spill_rows(workers: dict[str, Worker]) -> list[Row]:
    rows: list[Row] = []
    for name, rounds, goal in (*LOGS, JSON_PAYLOAD):
        figures = _measure(workers, name, rounds)
        seconds = {key: [time for time, _ in runs] for key, runs in figures.items()}
        write = seconds['plain', 'write']
        is_log = name.startswith('log')
        size_mb = int(name.split('_')[1].removesuffix('mb'))
        label = f'spill {size_mb} MB log' if is_log else f'spill {size_mb} MB JSON list of dicts'
        baseline = 'write(text.encode())' if is_log else 'to_json + write'
        versus_upstream = Row(f'{label} vs upstream {UPSTREAM_VERSION}', 'x', f'<= {goal}x', goal)
        versus_write = Row(f'{label} vs {baseline}', 'x', '<= 1.1x' if is_log else 'reported', 1.1 if is_log else None)
        memory_limit = 0.5 if is_log else 2.0
        memory = Row(f'{label}: extra peak memory vs payload', 'x', f'<= {memory_limit}x', memory_limit)
        medians = {key: statistics.median(times) for key, times in seconds.items()}
        context = f'write {_ms(medians["plain", "write"])}; run without the capability {_ms(medians["plain", "none"])}'
        if 'upstream' in workers:
            context += f'; upstream {_ms(medians["upstream", "capability"])}'
        for column in workers:
            ours = seconds[column, 'capability']
            detail = f'{_ms(medians[column, "capability"])}; {context}'
            if 'upstream' in workers and column != 'upstream':
                versus_upstream.values[column] = _ratio(ours, seconds['upstream', 'capability'])
                versus_upstream.details[column] = detail
            versus_write.values[column] = _ratio(ours, write)
            versus_write.details[column] = detail
            peak = statistics.median(peak for _, peak in figures[column, 'capability'])
            memory.values[column] = peak / (size_mb * 1e6)
            memory.details[column] = f'{peak / 1e6:,.0f} MB'
        rows += [versus_write, versus_upstream, memory] if size_mb == 100 or not is_log else [versus_upstream]
    return rows


def _gnu_grep(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(['grep', *arguments], check=False, capture_output=True)
    return time.perf_counter() - started


def _grep_rows(workers: dict[str, Worker]) -> list[Row]:
    ours = {column: worker for column, worker in workers.items() if column != 'upstream'}
    setups = {column: worker.ask(grep_setup=True) for column, worker in ours.items()}
    path = setups['plain']['path']
    rows: list[Row] = []
    memory = Row('grep: peak memory of the call (largest of the patterns)', 'MB', '< 10 MB', 10.0)
    for label, pattern, is_regex, flag, goal in GREPS:
        row = Row(f'grep 100 MB, {label} `{pattern}`, vs grep {flag} -n', 'x', f'<= {goal}x', goal)
        times: dict[str, list[float]] = {column: [] for column in ['gnu', *ours]}
        for order in _rotations(list(times), GREP_ROUNDS):
            for column in order:
                if column == 'gnu':
                    times[column].append(_gnu_grep([flag, '-n', pattern, path]))
                else:
                    times[column].append(ours[column].ask(grep=pattern, is_regex=is_regex)['seconds'])
        gnu = statistics.median(times['gnu'])
        for column, worker in ours.items():
            seconds = statistics.median(times[column])
            traced = worker.ask(grep=pattern, is_regex=is_regex, trace=True)
            row.values[column] = _ratio(times[column], times['gnu'])
            row.details[column] = f'{_ms(seconds)} vs {_ms(gnu)}; answer starts {traced["answer"][:32]!r}'
            peak = traced['peak'] / 1e6
            if peak >= memory.values.get(column, 0.0):
                memory.values[column] = peak
                memory.details[column] = f'`{pattern}`'
        rows.append(row)
    rows.append(memory)
    rows += _read_rows({column: worker.python for column, worker in ours.items()}, setups)
    return rows


def _read_rows(pythons: dict[str, str], setups: dict[str, dict[str, Any]]) -> list[Row]:
    first = Row('read 200 lines of 100 MB, fresh process: first read', 'ms', '<= 20 ms', 20.0)
    warm = Row('read 200 lines of 100 MB, fresh process: warm reads', 'ms', '<= 5 ms', 5.0)
    imported = Row('read: importing the package in that fresh process', 'ms', 'reported', None)
    answers: dict[str, list[dict[str, Any]]] = {column: [] for column in pythons}
    for order in _rotations(list(pythons), READ_ROUNDS):
        for column in order:
            setup = setups[column]
            command = [pythons[column], str(WORKER), 'read', setup['store'], setup['handle'], str(READ_OFFSET)]
            completed = subprocess.run(
                command, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(), env=clean_env()
            )
            answers[column].append(json.loads(completed.stdout))
    for column, runs in answers.items():
        for row, key in ((first, 'first'), (warm, 'warm'), (imported, 'import')):
            row.values[column] = statistics.median(run[key] for run in runs) * 1000
            row.details[column] = 'all rounds: ' + ', '.join(f'{run[key] * 1000:.1f}' for run in runs)
    return [first, warm, imported]


def _value(row: Row, column: str) -> str:
    if column not in row.values:
        return ''
    value = row.values[column]
    return f'{value:.2f}x' if row.unit == 'x' else f'{value:,.1f} {row.unit}'


def _entries(rows: list[Row]) -> list[Entry]:
    entries: list[Entry] = []
    for row in rows:
        for column in ('plain', 'pure'):
            if column in row.values:
                value = row.values[column]
                ok = column != 'plain' or row.limit is None or value <= row.limit  # the fallback is reported
                name = f'{COLUMNS[column]}: {row.step}'
                entries.append(Entry(SECTION, name, value, row.unit, row.goal, ok, row.details[column]))
    return entries


def _summary(rows: list[Row], columns: list[str]) -> str:
    lines = [
        '| step | ' + ' | '.join(COLUMNS[column] for column in columns) + ' | goal (plain install) |',
        '|---|' + '---|' * len(columns) + '---|',
    ]
    lines += [f'| {row.step} | ' + ' | '.join(_value(row, c) for c in columns) + f' | {row.goal} |' for row in rows]
    return '\n'.join(lines)


def _modules_table(modules: dict[str, dict[str, str]]) -> str:
    names = sorted({name for found in modules.values() for name in found})
    lines = ['| optional module | ' + ' | '.join(COLUMNS[c] for c in modules) + ' |', '|---|' + '---|' * len(modules)]
    lines += [f'| `{name}` | ' + ' | '.join(found.get(name, '') for found in modules.values()) + ' |' for name in names]
    return '\n'.join(lines)


def _shown_path(path: str) -> str:
    """`path` relative to the checkout when it is inside it (a venv under `bench/.out/`)."""
    try:
        return str(Path(path).relative_to(REPO))
    except ValueError:
        return path


def _installs(rows: list[Row]) -> str:
    """What a plain install gets on the 100 MB spill, and its pure fallback, in one sentence from this run."""
    by_step = {row.step: row for row in rows}
    write = by_step.get('spill 100 MB log vs write(text.encode())')
    if write is None or 'plain' not in write.values:
        return ''
    text = f'A plain install spills a 100 MB log in {write.values["plain"]:.2f}x a plain write of its text'
    if 'pure' in write.values:
        text += f', and in {write.values["pure"]:.2f}x on its pure fallback (no {", ".join(ACCELERATORS)})'
    if 'upstream' in write.values:
        text += f' (upstream {UPSTREAM_VERSION}: {write.values["upstream"]:.2f}x)'
    return text + '.'


def _venvs() -> list[Venv]:
    venvs = [project_venv('plain'), project_venv('pure', without=ACCELERATORS), upstream_venv()]
    if venvs[0].python is None:
        raise RuntimeError(f'the plain install {venvs[0].note}')
    return venvs


def run() -> tuple[list[Entry], str]:
    load_before = os.getloadavg()[0] if hasattr(os, 'getloadavg') else -1.0
    venvs = _venvs()
    for venv in venvs:
        print(f'{COLUMNS[venv.name]}: {venv.note}', flush=True)
    scratch = _scratch()
    workers: dict[str, Worker] = {}
    try:
        for venv in venvs:
            if venv.python is not None:
                impl = 'upstream' if venv.name == 'upstream' else 'ours'
                workers[venv.name] = Worker(venv.python, impl, scratch / venv.name)
        for worker in workers.values():
            worker.ask(prepare=[name for name, _, _ in (*LOGS, JSON_PAYLOAD)])
        rows = _spill_rows(workers)
        rows += _grep_rows(workers)
        modules = {column: worker.ask(modules=True)['modules'] for column, worker in workers.items()}
        packages = {column: _shown_path(worker.package) for column, worker in workers.items()}
        for worker in workers.values():
            worker.close()
        workers.clear()
    finally:
        for worker in workers.values():
            worker.process.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()[0] if hasattr(os, 'getloadavg') else -1.0
    notes = '; '.join(f'{COLUMNS[venv.name]}: {venv.note}' for venv in venvs)
    imported_from = '; '.join(f'{COLUMNS[column]} `{package}`' for column, package in packages.items())
    extra = (
        f"{_installs(rows)}\n\nSide by side (the entries above hold each column to the plain install's goal):\n\n"
        f'{_summary(rows, list(packages))}\n\n'
        'Optional modules in each column after the runs (`loaded`: imported by the package during them; '
        f'`installed`: importable but not used; `absent`: not installed):\n\n{_modules_table(modules)}\n\n'
        f'Venvs: {notes}. Package imported from: {imported_from}. Measured with `make bench` (or '
        f'`PYTHONPATH=$PWD .venv/bin/python -m bench {SECTION}`) on a 2-core machine, load average {load_before:.1f} '
        f'before and {load_after:.1f} after (other work was running): figures vary by about 30% between runs.'
    )
    print(_modules_table(modules), flush=True)
    return _entries(rows), extra
