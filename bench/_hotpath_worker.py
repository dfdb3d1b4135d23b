"""One side of the hot-path benchmark: times the spill step through `Agent.run` in this interpreter.

Run as a script, never imported by the package: `python bench/_hotpath_worker.py ours|upstream SCRATCH`. It builds
the payloads itself (deterministically, so both sides get the same bytes), then answers JSON commands read from
stdin, one per line: `{"payload": "log_100mb", "variant": "write" | "none" | "capability"}` -> `{"seconds": ...,
"peak_extra": ...}`; `{"grep_setup": true}` stores the 100 MB log for the grep commands, `{"grep": PATTERN,
"is_regex": ...}` times `grep_tool_result` on it; `{"modules": true}` says which optional modules are installed and
which the runs so far imported. `upstream` imports `pydantic-ai-harness` 0.62 (`ToolOutputLimits`); `ours` the
project as installed in this interpreter's environment (the script's directory is on `sys.path`, the checkout is not).

`python bench/_hotpath_worker.py read STORE_DIR HANDLE OFFSET` is a fresh agent process's 200-line read: after one
agent run without the capability it imports the package, times the first `read_tool_result` and then warm ones,
prints one JSON line and exits.
Only the standard library, pydantic-ai and pydantic-core are used besides the implementation under test.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

NEEDLE = 'needle-0xC0FFEE'
OPTIONAL_MODULES = ('hyperscan', 'numpy', 'tiktoken', 're2')
"""Modules that change the hot path's speed when present (`re2` is a dependency: listed to show it loaded)."""
READ_LIMIT = 200


def log_text(size: int) -> str:
    """A log of `size` characters: INFO lines, an ERROR line every 100,000 lines and three needles."""
    parts: list[str] = []
    total = 0
    number = 0
    while total < size:
        line = f'2024-05-01T12:00:{number % 60:02d} INFO worker-{number % 7} handled request {number} in {number % 997} ms\n'
        if number % 100_000 == 99_999:
            line = f'2024-05-01T12:00:00 ERROR worker-3 failed: ConnectionResetError at request {number}\n'
        if number in (300_000, 700_000, 1_200_000):
            line = f'2024-05-01T12:00:00 WARN {NEEDLE} at request {number}\n'
        parts.append(line)
        total += len(line)
        number += 1
    return ''.join(parts)[:size]


def json_records(compact_size: int) -> list[dict[str, Any]]:
    """A list of dicts whose compact JSON is about `compact_size` bytes."""
    records: list[dict[str, Any]] = []
    total = 2
    number = 0
    while total < compact_size:
        record = {
            'id': number,
            'name': f'user-{number}',
            'email': f'user{number}@example.com',
            'score': number * 0.25,
            'active': number % 3 == 0,
            'tags': ['alpha', 'beta'] if number % 2 else ['gamma'],
            'status': 'failed' if number % 5_000 == 0 else 'ok',
        }
        total += len(json.dumps(record, separators=(',', ':'))) + 1
        records.append(record)
        number += 1
    return records


PAYLOADS: dict[str, Any] = {}


def payload(name: str) -> Any:
    if name not in PAYLOADS:
        if name.startswith('log_'):
            PAYLOADS[name] = log_text(int(name.removeprefix('log_').removesuffix('mb')) * 1_000_000)
        else:
            PAYLOADS[name] = json_records(int(name.removeprefix('json_').removesuffix('mb')) * 1_000_000)
    return PAYLOADS[name]


def _status() -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        with open('/proc/self/status') as status:
            for line in status:
                key, _, rest = line.partition(':')
                if key in ('VmRSS', 'VmHWM'):
                    values[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return values


def _trim() -> None:
    # Hand freed memory back to the system, so the next step's peak is not hidden in pages kept from earlier ones.
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak() -> int:
    """Reset the peak RSS (Linux `clear_refs`); the RSS now, or -1 where this cannot be measured."""
    _trim()
    try:
        with open('/proc/self/clear_refs', 'w') as refs:
            refs.write('5')
    except OSError:
        return -1
    return _status().get('VmRSS', -1)


class Side:
    def __init__(self, impl: str, scratch: Path) -> None:
        self.impl = impl
        self.scratch = scratch
        self.store_dir = scratch / f'store-{impl}'
        self.loop = asyncio.new_event_loop()
        self.grep_tool: Any = None
        self.grep_handle = ''

    def capability(self) -> Any:
        if self.impl == 'upstream':
            # Upstream's import name is ours too: it is only importable in its own virtual environment.
            upstream: Any = importlib.import_module('pydantic_ai_harness.tool_output_limits')
            return upstream.ToolOutputLimits(store=upstream.LocalFileStore(base_dir=self.store_dir))
        from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

        return OverflowingToolOutput(store=LocalFileStore(base_dir=self.store_dir))

    def agent(self, value: Any, with_capability: bool) -> Agent[None, str]:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            del info
            if len(messages) == 1:
                return ModelResponse(parts=[ToolCallPart('produce', {})])
            return ModelResponse(parts=[TextPart('done')])

        agent = Agent(FunctionModel(model), capabilities=[self.capability()] if with_capability else [])

        @agent.tool_plain
        def produce() -> Any:
            return value

        return agent

    def plain_write(self, value: Any) -> float:
        path = self.scratch / f'plain-{self.impl}.bin'
        started = time.perf_counter()
        data = value.encode() if isinstance(value, str) else pydantic_core.to_json(value)
        with open(path, 'wb') as file:
            file.write(data)
        elapsed = time.perf_counter() - started
        del data
        path.unlink()
        return elapsed

    def run(self, name: str, variant: str) -> dict[str, float]:
        value = payload(name)
        gc.collect()
        before = _reset_peak()
        if variant == 'write':
            seconds = self.plain_write(value)
        else:
            agent = self.agent(value, variant == 'capability')
            started = time.perf_counter()
            result = agent.run_sync('go')
            seconds = time.perf_counter() - started
            assert result.output == 'done'
            del agent, result
        peak = _status().get('VmHWM', -1)
        self._settle()
        return {'seconds': seconds, 'peak_extra': peak - before if before >= 0 and peak >= 0 else -1}

    def grep_setup(self) -> dict[str, Any]:
        """Store the 100 MB log and build its line index, for the grep commands and the fresh-process reads."""
        from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, build_query_toolset

        store_dir = self.scratch / 'grep-store'
        store = LocalFileStore(base_dir=store_dir)
        data = log_text(100_000_000).encode()
        handle = self.loop.run_until_complete(store.write('run/grep/0', data))
        del data
        index = self.loop.run_until_complete(store.line_index(handle))
        self.grep_tool = build_query_toolset(store).tools['grep_tool_result'].function
        self.grep_handle = handle
        path = next(store_dir.rglob('0.out'))
        return {'handle': handle, 'store': str(store_dir), 'path': str(path), 'lines': index.line_count}

    def grep(self, pattern: str, is_regex: bool, trace: bool) -> dict[str, Any]:
        call = self.grep_tool(handle=self.grep_handle, pattern=pattern, is_regex=is_regex)
        gc.collect()
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        answer = self.loop.run_until_complete(call)
        seconds = time.perf_counter() - started
        peak = -1
        if trace:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        return {'seconds': seconds, 'peak': peak, 'answer': answer[:60]}

    def _settle(self) -> None:
        # Background work (a line indexer, a pruner) of the step just timed must not run into the next one.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(t.name.startswith('pyai-harness') for t in threading.enumerate()):
            time.sleep(0.01)
        shutil.rmtree(self.store_dir, ignore_errors=True)
        gc.collect()


def modules() -> dict[str, str]:
    """For each optional module: `'loaded'` (imported by now), `'installed'` (importable, not imported) or `'absent'`."""
    return {
        name: 'loaded' if name in sys.modules else 'installed' if importlib.util.find_spec(name) else 'absent'
        for name in OPTIONAL_MODULES
    }


def _answer(command: dict[str, Any], side: Side) -> dict[str, Any]:
    if command.get('prepare'):
        for name in command['prepare']:
            payload(name)
        return {'prepared': True}
    if command.get('modules'):
        return {'modules': modules()}
    if command.get('grep_setup'):
        return side.grep_setup()
    if 'grep' in command:
        return side.grep(command['grep'], command['is_regex'], command.get('trace', False))
    return side.run(command['payload'], command['variant'])


def fresh_read(store_dir: str, handle: str, offset: int) -> dict[str, Any]:
    """A fresh agent process's first 200-line read and its warm reads (the package is imported first, timed apart).

    The model calls `read_tool_result` inside an agent run, so one run without the capability comes first: it loads
    what any run loads (anyio's asyncio backend, ~45 ms to import, among others), which the read is not charged for.
    """
    result = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('done')]))).run_sync('go')
    assert result.output == 'done'
    started = time.perf_counter()
    package: Any = importlib.import_module('pydantic_ai_harness.overflowing_tool_output')
    imported = time.perf_counter() - started
    read = package.build_query_toolset(package.LocalFileStore(base_dir=store_dir)).tools['read_tool_result'].function
    loop = asyncio.new_event_loop()
    times: list[float] = []
    for _ in range(11):
        started = time.perf_counter()
        answer = loop.run_until_complete(read(handle=handle, offset=offset, limit=READ_LIMIT))
        times.append(time.perf_counter() - started)
        assert f'lines {offset}-' in answer, answer[:200]
    return {'import': imported, 'first': times[0], 'warm': statistics.median(times[1:]), 'modules': modules()}


def main() -> None:
    if sys.argv[1] == 'read':
        print(json.dumps(fresh_read(sys.argv[2], sys.argv[3], int(sys.argv[4]))), flush=True)
        return
    impl, scratch = sys.argv[1], Path(sys.argv[2])
    scratch.mkdir(parents=True, exist_ok=True)
    side = Side(impl, scratch)
    side.run('log_1mb', 'capability')  # warm up imports and caches
    package = importlib.import_module('pydantic_ai_harness')
    print(json.dumps({'ready': True, 'pid': os.getpid(), 'package': package.__file__}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_answer(json.loads(line), side)), flush=True)


if __name__ == '__main__':
    asyncio.set_event_loop_policy(None)
    main()
