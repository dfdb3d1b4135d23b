"""Load: a thousand concurrent spills into one LocalFileStore, and four processes sharing a root under TTL pruning."""

from __future__ import annotations

import hashlib
import multiprocessing
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ToolReturnPart

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from ._support import Steps, parse_read_lines

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

RUNS = 20
CALLS_PER_RUN = 50


def payload_for(run: int, call: int) -> str:
    """About 12 kB of text (over the default 10,000-character threshold), unique per run and call."""
    return ''.join(f'run {run:02d} call {call:02d} line {line:03d} ' + 'x' * (line % 90) + '\n' for line in range(160))


async def test_a_thousand_concurrent_spills_read_back_byte_identical(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    agent = Agent(capabilities=[OverflowingToolOutput(store=store)])

    @agent.tool_plain
    def produce(run: int, call: int) -> str:
        return payload_for(run, call)

    handles: set[str] = set()

    def script_for(run: int) -> Steps:
        step = 0

        def script(answers: list[Any]) -> list[tuple[str, dict[str, Any] | str]] | None:
            nonlocal step
            step += 1
            if step == 1:
                return [('produce', {'run': run, 'call': call}) for call in range(CALLS_PER_RUN)]
            if step == 2:
                mine: list[tuple[str, dict[str, Any] | str]] = []
                for part in answers:
                    assert isinstance(part, ToolReturnPart)
                    handle = part.metadata['overflow_handle']
                    assert handle not in handles, f'handle collision: {handle}'
                    handles.add(handle)
                    mine.append(('read_tool_result', {'handle': handle, 'limit': 1000}))
                return mine
            return None

        return Steps(script)

    scripts = [script_for(run) for run in range(RUNS)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for steps in scripts:
                group.start_soon(lambda s=steps: agent.run('go', model=s.model))
        elapsed = time.perf_counter() - started
    assert [str(w.message) for w in caught] == []
    assert len(handles) == RUNS * CALLS_PER_RUN
    print(f'\n{RUNS * CALLS_PER_RUN} concurrent spills, each read back with read_tool_result, in {elapsed:.2f} s')

    # Through the store: byte-identical, and nothing else is in it.
    stored = {payload.handle for payload in await store.list()}
    assert stored == {await store.resolve(handle) for handle in handles}  # Listed by their full handles.
    # Through the store (byte-identical) and through read_tool_result (every line, in order, exactly).
    for run, steps in enumerate(scripts):
        spills, reads = steps.answers
        assert len(spills) == len(reads) == CALLS_PER_RUN
        for spill, read in zip(spills, reads, strict=True):
            assert isinstance(spill, ToolReturnPart) and isinstance(read, ToolReturnPart)
            expected = payload_for(run, int(spill.tool_call_id.removeprefix('s1_')))
            assert await store.read(spill.metadata['overflow_handle']) == expected.encode()
            assert parse_read_lines(str(read.content)) == expected.splitlines()
    assert not list(store.root.rglob('.tmp-*'))
    assert elapsed < 60


# --- four processes, one root, TTL pruning on -----------------------------------------------------------------

TTL_SECONDS = 2.0
WORK_SECONDS = 3.5
SAFETY = 0.75
"""A payload listed as younger than TTL - SAFETY must be readable and intact."""


def content_for(handle: str) -> bytes:
    """Deterministic content derived from the handle alone, so any process can verify any payload."""
    seed = hashlib.sha256(handle.encode()).digest()
    size = 1 + int.from_bytes(seed[:3], 'big') % 200_000
    block = hashlib.sha512(seed).digest()
    body = (block * (size // len(block) + 1))[:size]
    return body.replace(b'\x00', b'\n')


def _worker(base_dir: str, index: int, results: Any) -> None:  # pragma: no cover - runs in a child process
    import anyio as child_anyio

    store = LocalFileStore(base_dir=base_dir, cleanup_after=timedelta(seconds=TTL_SECONDS))
    report: dict[str, Any] = {'written': 0, 'verified_own': 0, 'verified_foreign': 0, 'errors': [], 'warnings': []}

    async def main() -> None:
        deadline = time.monotonic() + WORK_SECONDS
        n = 0
        mine: list[tuple[float, str, str]] = []
        while time.monotonic() < deadline:
            key = f'proc{index}/call_{n}/0'  # Also the payload's full handle (what a listing shows).
            handle = await store.write(key, content_for(key))
            n += 1
            report['written'] += 1
            if await store.read(handle) != content_for(key):
                report['errors'].append(f'own payload {handle} differs right after writing it')
            report['verified_own'] += 1
            mine.append((time.time(), handle, key))
            if n % 10 == 0:
                now = time.time()
                # Nothing of ours younger than the TTL may have been lost (a listing would not show a loss).
                for written_at, own, own_key in mine:
                    if written_at < now - TTL_SECONDS + SAFETY:
                        continue
                    try:
                        intact = await store.read(own) == content_for(own_key)
                    except Exception as exc:  # noqa: BLE001 - reported to the parent
                        report['errors'].append(f'own young payload {own} lost: {exc!r}')
                        continue
                    if not intact:
                        report['errors'].append(f'own young payload {own} corrupted')
                    report['verified_own'] += 1
                for listed in await store.list():
                    if listed.modified < now - TTL_SECONDS + SAFETY:
                        continue  # old enough that the pruner may take it at any moment
                    try:
                        data = await store.read(listed.handle)
                    except Exception as exc:  # noqa: BLE001 - reported to the parent
                        report['errors'].append(f'young payload {listed.handle} unreadable: {exc!r}')
                        continue
                    if data != content_for(listed.handle):
                        report['errors'].append(f'young payload {listed.handle} corrupted')
                    report['verified_foreign'] += 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            child_anyio.run(main)
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            report['errors'].append(f'worker crashed: {exc!r}')
    report['warnings'] = [f'{w.category.__name__}: {w.message}' for w in caught]
    results.put((index, report))


def test_four_processes_share_a_root_with_ttl_pruning(tmp_path: Path) -> None:
    base_dir = str(tmp_path / 'spill')
    context = multiprocessing.get_context('spawn')
    results = context.Queue()
    workers = [context.Process(target=_worker, args=(base_dir, i, results)) for i in range(4)]
    for worker in workers:
        worker.start()
    reports: dict[int, dict[str, Any]] = {}
    try:
        for _ in workers:
            index, report = results.get(timeout=60)
            reports[index] = report
    finally:
        for worker in workers:
            worker.join(10)
            if worker.is_alive():  # pragma: no cover - only if a worker hung
                worker.kill()
                worker.join(5)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    for index, report in sorted(reports.items()):
        assert report['errors'] == [], (index, report['errors'][:5])
        assert report['warnings'] == [], (index, report['warnings'][:5])
        assert report['written'] > 20, report
        assert report['verified_own'] > report['written'] and report['verified_foreign'] > 0, report
    written = sum(r['written'] for r in reports.values())
    remaining = anyio.run(LocalFileStore(base_dir=base_dir).list)
    print(
        f'\n4 processes wrote {written} payloads in {WORK_SECONDS:.1f} s with a {TTL_SECONDS:.0f} s TTL; '
        f'{len(remaining)} left, {sum(r["verified_foreign"] for r in reports.values())} young payloads '
        'verified across processes'
    )
    assert len(remaining) < written  # pruning really ran while the writers worked
