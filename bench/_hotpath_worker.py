"""One side of the hot-path benchmark: times the spill step through `Agent.run` in this interpreter.

Run as a script, never imported by the package: `python bench/_hotpath_worker.py ours|upstream SCRATCH`. It builds
the payloads itself (deterministically, so both sides get the same bytes), then answers JSON commands read from
stdin, one per line: `{"payload": "log_100mb", "variant": "write" | "none" | "capability"}` -> `{"seconds": ...,
"peak_extra": ...}`. `upstream` imports `pydantic-ai-harness` 0.62 (`ToolOutputLimits`); `ours` this checkout.
Only the standard library, pydantic-ai and pydantic-core are used besides the implementation under test.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import importlib
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

NEEDLE = 'needle-0xC0FFEE'


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
        self.counter = 0

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

    def _settle(self) -> None:
        # Background work (a line indexer, a pruner) of the step just timed must not run into the next one.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(t.name.startswith('pyai-harness') for t in threading.enumerate()):
            time.sleep(0.01)
        shutil.rmtree(self.store_dir, ignore_errors=True)
        gc.collect()


def main() -> None:
    impl, scratch = sys.argv[1], Path(sys.argv[2])
    scratch.mkdir(parents=True, exist_ok=True)
    side = Side(impl, scratch)
    side.run('log_1mb', 'capability')  # warm up imports and caches
    print(json.dumps({'ready': True, 'pid': os.getpid()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command.get('prepare'):
            for name in command['prepare']:
                payload(name)
            print(json.dumps({'prepared': True}), flush=True)
            continue
        print(json.dumps(side.run(command['payload'], command['variant'])), flush=True)


if __name__ == '__main__':
    asyncio.set_event_loop_policy(None)
    main()
