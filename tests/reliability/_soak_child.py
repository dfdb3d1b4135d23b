"""The soak of `test_soak.py`, run as a child process with a low descriptor limit so a leak fails fast.

One process, one `LocalFileStore` that already holds thousands of payloads (some past their TTL), and many
agent runs that spill, read, grep without a handle, list the store and age old returns while the background TTL
prune keeps walking the root. Descriptors, threads, asyncio tasks and RSS are sampled after a warm-up and at the
end; the result is printed as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import threading
import time
import warnings
from datetime import timedelta
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import Aging, Band, LocalFileStore, OverflowingToolOutput, Spill
from pydantic_ai_harness.overflowing_tool_output.stores._local_prune import last_pruner

CALLS_PER_STEP = 25
STEPS_PER_RUN = 4
"""Each run spills CALLS_PER_STEP * STEPS_PER_RUN returns, then reads one back and greps without a handle."""


def _open_descriptors() -> int:
    return len(os.listdir('/proc/self/fd'))


def _rss_bytes() -> int:
    with open('/proc/self/statm', encoding='ascii') as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _sample() -> dict[str, int]:
    return {
        'fds': _open_descriptors(),
        'threads': threading.active_count(),
        'tasks': len(asyncio.all_tasks()),
        'rss': _rss_bytes(),
    }


def _payload(run: int, step: int, call: int) -> str:
    rows = [f'run {run} step {step} call {call} row {row}: ok' for row in range(60)]
    rows[37] = f'run {run} step {step} call {call} row 37: NEEDLE-{run}-{step}-{call}'
    return '\n'.join(rows)


def _model(run: int, spilled: list[int]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < STEPS_PER_RUN:
            return ModelResponse(
                parts=[
                    ToolCallPart('produce', {'run': run, 'step': step, 'call': call}) for call in range(CALLS_PER_STEP)
                ]
            )
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if step == STEPS_PER_RUN:
            handles = [part.metadata.get('overflow_handle') for part in returns if part.metadata]
            spilled.append(sum(handle is not None for handle in handles))
            handle = next((handle for handle in handles if handle is not None), 'none-spilled')
            return ModelResponse(
                parts=[
                    ToolCallPart('read_tool_result', {'handle': handle, 'offset': 30, 'limit': 10}),
                    ToolCallPart('grep_tool_result', {'pattern': f'NEEDLE-{run}-0-3$'}),
                ]
            )
        answers = [str(part.content) for part in returns[-2:]]
        return ModelResponse(parts=[TextPart(json.dumps(answers))])

    return FunctionModel(respond)


async def _prefill(store: LocalFileStore, count: int) -> None:
    """`count` payloads written before the soak; every fourth one is dated past the TTL, so the prune deletes it."""
    old = time.time() - 3_600
    for start in range(0, count, 250):
        handles = await asyncio.gather(
            *(
                store.write(f'prefill/{index}', f'prefilled payload {index}\n'.encode() * 20)
                for index in range(start, min(count, start + 250))
            )
        )
        for offset, handle in enumerate(handles):
            if (start + offset) % 4 == 0:
                full = await store.resolve(handle)
                path = store.root.joinpath(*full.split('/')).with_suffix('.out')
                os.utime(path, (old, old))


async def main(root: str, prefilled: int, runs: int, warmup: int) -> None:
    store = LocalFileStore(base_dir=root, cleanup_after=timedelta(seconds=20))
    await _prefill(store, prefilled)
    capability = OverflowingToolOutput(
        store=store,
        bands=[Band(over=1_000, action=Spill())],
        aging=Aging(after_turns=1, min_tokens=50, batch_tokens=400),
    )
    agent = Agent(capabilities=[capability])

    @agent.tool_plain
    def produce(run: int, step: int, call: int) -> str:
        return _payload(run, step, call)

    start: dict[str, int] = {}
    spilled: list[int] = []
    found = 0
    prunes: set[int] = set()
    listed = 0
    for run in range(runs):
        result = await agent.run('go', model=_model(run, spilled))
        read, grep = json.loads(result.output)
        found += f'NEEDLE-{run}-0-3' in grep and 'row 37' in read
        if run % 20 == 0:
            # The largest listing: on a slow machine the 20-second TTL empties the root of prefilled payloads early.
            listed = max(listed, len(await store.list()))
        pruner = last_pruner(store.root_path)
        if pruner is not None:
            prunes.add(id(pruner))
        if run == warmup - 1:
            start = _sample()
    pruner = last_pruner(store.root_path)
    if pruner is not None:
        pruner.join()
    end = _sample()
    print(
        json.dumps(
            {
                'start': start,
                'end': end,
                'found': found,
                'runs': runs,
                'spills': sum(spilled),
                'prunes': len(prunes),
                'listed': listed,
                'stored': len(await store.list()),
            }
        )
    )


if __name__ == '__main__':
    root, prefilled, runs, warmup, limit = sys.argv[1], *map(int, sys.argv[2:6])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    Path(root).mkdir(mode=0o700, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        asyncio.run(main(root, prefilled, runs, warmup))
    for warning in caught[:5]:
        print(f'warning: {warning.message}', file=sys.stderr)
    print(json.dumps({'warnings': len(caught)}))
