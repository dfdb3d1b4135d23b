"""Short handles: what the alias costs per spill, and what the model reads with pydantic-ai's default ids.

Run it alone with `PYTHONPATH=$PWD .venv/bin/python -m bench.bench_handles` (or add `'handles':
'bench.bench_handles'` to `bench.__main__.SECTIONS`).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._report import Entry
from examples._payloads import test_log
from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._rendering._markers import summary_marker
from pydantic_ai_harness.overflowing_tool_output.stores._local_aliases import link_alias
from pydantic_ai_harness.overflowing_tool_output.stores._local_fs import open_root
from pydantic_ai_harness.overflowing_tool_output.stores._paths import handle_for_key

TITLE = 'Short handles'
METHOD = """
Alias cost: 300 spills of 100 KB (distinct keys with a uuid7 run id and a provider call id) into a
`LocalFileStore` on `/dev/shm`: the whole store write (payload, sidecar and alias) against the alias record alone
(a 64-byte file linked into `.aliases/`), median per spill. Tokens: cl100k counts of the
spill header (its first two lines), a summary marker and a grep header for the demo's 50,000-line test log,
spilled by a real agent run with a default (uuid7) run id and the call id `call_Xq3vR8bN2mKp7LwT9yZc`.
"""

SECTION = 'handles'
CALL_ID = 'call_Xq3vR8bN2mKp7LwT9yZc'
SPILLS = 300


def _alias_cost() -> tuple[float, float]:
    """Median seconds per spill: the whole store write (payload and alias), and the alias record alone."""
    from pydantic_ai._uuid import uuid7

    base = Path('/dev/shm') if Path('/dev/shm').is_dir() else Path(tempfile.gettempdir())
    store = LocalFileStore(Path(tempfile.mkdtemp(prefix='bench-handles-', dir=base)) / 'spill')
    data = b''.join(b'2026-11-29 12:00:%02d INFO worker step %d ok\n' % (n % 60, n) for n in range(2_400))[:100_000]
    whole: list[float] = []
    alias: list[float] = []
    for n in range(SPILLS):
        handle = handle_for_key(f'{uuid7()}/{CALL_ID[:-3]}{n:03d}/0')
        started = time.perf_counter()
        store._write_sync(handle, data)
        whole.append(time.perf_counter() - started)
        root = open_root(store.root_path, create=False)
        try:
            started = time.perf_counter()
            link_alias(root, f'{handle}~~2', durable=True)
            alias.append(time.perf_counter() - started)
        finally:
            root.close()
    return statistics.median(whole), statistics.median(alias)


async def _model_texts() -> dict[str, str]:
    seen: dict[str, Any] = {}

    def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
        return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        got = returns(messages)
        if not got:
            return ModelResponse(parts=[ToolCallPart('run_tests', {}, tool_call_id=CALL_ID)])
        if len(got) == 1:
            seen['preview'], seen['handle'] = got[0].content, got[0].metadata['overflow_handle']
            grep = ToolCallPart('grep_tool_result', {'handle': seen['handle'], 'pattern': 'Traceback'})
            return ModelResponse(parts=[grep])
        seen['grep'] = got[-1].content
        return ModelResponse(parts=[TextPart('done')])

    log = test_log()
    store = LocalFileStore(tempfile.mkdtemp(prefix='bench-handles-'))
    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='run_tests')(lambda: log)
    await agent.run('go')
    handle = str(seen['handle'])
    marker = summary_marker(
        tool_name='run_tests', chars=len(log), lines=50_000, handle=handle, chunks=1, uncovered_chars=0
    )
    return {
        'handle': handle,
        'spill header': '\n'.join(str(seen['preview']).splitlines()[:2]),
        'summary marker': marker,
        'grep header': str(seen['grep']).splitlines()[0],
    }


def run() -> list[Entry]:
    whole, alias = _alias_cost()
    count = cl100k_counter()
    texts = anyio.run(_model_texts)
    ratio = alias / whole
    entries = [
        Entry(
            SECTION,
            'alias record / whole store write, per 100 KB spill (LocalFileStore)',
            ratio,
            'x',
            '<= 0.5x',
            ratio <= 0.5,
            f'alias {alias * 1e6:.0f} us of {whole * 1e6:.0f} us (medians of {SPILLS})',
        )
    ]
    for name, text in texts.items():
        tokens = count(text)
        entries.append(Entry(SECTION, f'{name}, cl100k tokens', tokens, 'tokens', '', True, repr(text[:60])))
    return entries


if __name__ == '__main__':
    for entry in run():
        print(f'{entry.name}: {entry.value:.3g} {entry.unit} ({entry.detail})')
