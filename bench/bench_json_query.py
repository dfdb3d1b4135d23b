"""`read_tool_result(handle, path=...)` on a 100 MB JSON spill: time and memory against loading the whole document."""

from __future__ import annotations

import gc
import json
import random
import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._report import Entry
from pydantic_ai_harness.overflowing_tool_output import build_query_toolset
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value, stored_form
from pydantic_ai_harness.overflowing_tool_output.stores import LocalFileStore

TITLE = 'Queries by JSON path on a 100 MB structured spill'
METHOD = """
A 100 MB JSON API response (about 340,000 nested order records, three of them stuck) stored the way a
structured spill is stored: JSON with one compact record per line, in a `LocalFileStore` on `/dev/shm`. The question "which orders are
stuck" is asked with `read_tool_result(handle, path="$.data[?@.status=='stuck'].id")` in an `Agent.run` (a scripted
model makes the call, with the default limits, and answers from it: the whole step), against the baseline of reading the stored file and
`json.loads` of the whole document (which the same question in memory then needs on top). Time: best of
2 each; peak memory: `tracemalloc` during a separate call of each.
"""

PAYLOAD_BYTES = 100_000_000
QUERY = "$.data[?@.status=='stuck'].id"


def _stored_document(target: int) -> tuple[bytes, list[str]]:
    """The text `_render.stored_form` writes for the orders document (one compact record per line), built fast."""
    rng = random.Random(17)
    records: list[str] = []
    size = 0
    stuck: list[str] = []
    index = 0
    while size < target:
        order_id = f'ord_{rng.getrandbits(32):08x}'
        status = rng.choice(['paid', 'shipped', 'delivered', 'refunded'])
        if index in (40_000, 170_000, 300_000):
            status = 'stuck'
            stuck.append(order_id)
        record = {
            'id': order_id,
            'status': status,
            'customer': {'id': f'cus_{rng.getrandbits(24):06x}', 'country': rng.choice(['FR', 'DE', 'US', 'JP'])},
            'items': [
                {
                    'sku': f'SKU-{rng.randint(1000, 9999)}',
                    'qty': rng.randint(1, 4),
                    'price': rng.randint(100, 9999) / 100,
                }
                for _ in range(rng.randint(1, 3))
            ],
        }
        text = '  ' + json.dumps(record, separators=(',', ':'), ensure_ascii=False)
        records.append(text)
        size += len(text) + 2
        index += 1
    body = ',\n'.join(records)
    document = f'{{\n "object":"list",\n "has_more":false,\n "data":[\n{body}\n ]\n}}\n'
    return document.encode(), stuck


def _best(function: Callable[[], Any], runs: int = 2) -> tuple[float, Any]:
    best = float('inf')
    result: Any = None
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def _peak(function: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _ask_through_an_agent(store: LocalFileStore, handle: str) -> str:
    """The whole step the user waits for: an `Agent.run` whose model asks the path query and answers from it."""
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle, 'path': QUERY})])
        answers.extend(str(part.content) for part in messages[-1].parts if isinstance(part, ToolReturnPart))
        return ModelResponse(parts=[TextPart('done')])

    Agent(FunctionModel(model), toolsets=[build_query_toolset(store)]).run_sync('Which orders are stuck?')
    [answer] = answers
    return answer


def run() -> list[Entry]:
    base = Path('/dev/shm') if Path('/dev/shm').is_dir() else Path(tempfile.gettempdir())
    scratch = Path(tempfile.mkdtemp(prefix='bench-jsonquery-', dir=base))
    try:
        data, stuck = _stored_document(PAYLOAD_BYTES)
        # Check once, on a small copy, that the fast builder writes exactly what a structured spill stores.
        small, _ = _stored_document(20_000)
        assert stored_form(render_value(json.loads(small)))[1] == small
        store = LocalFileStore(base_dir=scratch)
        handle = anyio.run(store.write, 'bench/orders/0', data)
        size = len(data)
        del data
        gc.collect()
        path = next(p for p in scratch.rglob('*') if p.is_file() and p.stat().st_size == size)

        def load_whole() -> Any:
            return json.loads(path.read_bytes())

        def query() -> str:
            return _ask_through_an_agent(store, handle)

        load_seconds, _ = _best(load_whole)
        query_seconds, answer = _best(query)
        load_peak = _peak(load_whole)
        query_peak = _peak(query)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    found = all(order_id in answer for order_id in stuck) and answer.startswith('3 matches')
    return [
        Entry('json_query', 'finds the 3 stuck orders in 100 MB', float(found), 'of 1', '1 of 1', found),
        Entry(
            'json_query',
            'query time vs json.loads of the whole document',
            query_seconds / load_seconds,
            'x',
            '<= 5x (it streams; the baseline has not run the query yet)',
            query_seconds / load_seconds <= 5,
            detail=f'query {query_seconds:.2f} s, json.loads {load_seconds:.2f} s, {size / 1e6:.0f} MB',
        ),
        Entry(
            'json_query',
            'peak memory vs json.loads of the whole document',
            query_peak / load_peak,
            'x',
            '<= 0.05x',
            query_peak / load_peak <= 0.05,
            detail=f'query {query_peak / 1e6:.1f} MB, json.loads {load_peak / 1e6:.0f} MB',
        ),
    ]


if __name__ == '__main__':
    for entry in run():
        print(entry)
