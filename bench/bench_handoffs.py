"""Benchmark: `nest_handoff_history` and `remove_all_tools` over long histories."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import anyio
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from bench._report import Entry
from pydantic_ai_harness.handoffs import HandoffInputData, nest_handoff_history, remove_all_tools
from pydantic_ai_harness.handoffs._delegation import nest_off_loop
from pydantic_ai_harness.handoffs._transcript import DEFAULT_END_WRAPPER, DEFAULT_START_WRAPPER, SUMMARY_PREAMBLE

TITLE = 'Handoff history: nest_handoff_history and remove_all_tools'
METHOD = """
Each function runs over a synthetic handoff of 1k, 10k and 100k messages (a repeating four-message
turn: user prompt; thinking, text and a tool call; the tool return; an answer), split as a handoff is:
the first half is the input history, the rest the pre-handoff messages, the last two the handoff turn.
The figure is the best of 7 runs of one call, timed with `time.perf_counter` after a
`gc.collect()` (the garbage collector stays enabled while timing). Both functions
must grow linearly (100k / 10k time ratio <= 12) and handle 10k messages in under 100 ms.

Parsing a summary-shaped text (issue 13, finding 6): `nest_handoff_history` over one assistant turn in the
nested-summary format whose single record spans 1.6 MB and 16 MB of continuation lines (the shape that was
quadratic: 17.9 s for 1.6 MB), and one of 1.6 MB made of 100k short records; best of 3. It must grow linearly
(16 MB / 1.6 MB ratio <= 12). The event-loop lag is the longest a 5 ms ticker woke late while `delegate`'s nesting
step (a worker thread above 200,000 characters) ran on those inputs.
"""

SIZES = (1_000, 10_000, 100_000)


def build_history(size: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    turn = 0
    while len(messages) < size:
        call_id = f'call_{turn}'
        messages.append(ModelRequest(parts=[UserPromptPart(f'Question {turn}: what is the status of order {turn}?')]))
        messages.append(
            ModelResponse(
                parts=[
                    ThinkingPart(f'The user asks about order {turn}; look it up.'),
                    TextPart('Let me check that order.'),
                    ToolCallPart('lookup_order', {'order_id': turn, 'fields': ['status', 'total']}, call_id),
                ]
            )
        )
        messages.append(
            ModelRequest(parts=[ToolReturnPart('lookup_order', {'status': 'paid', 'total': turn}, call_id)])
        )
        messages.append(ModelResponse(parts=[TextPart(f'Order {turn} is paid.')]))
        turn += 1
    return messages[:size]


def build_data(size: int) -> HandoffInputData:
    messages = build_history(size)
    half = size // 2
    return HandoffInputData(
        input_history=tuple(messages[:half]),
        pre_handoff_items=tuple(messages[half : size - 2]),
        new_items=tuple(messages[size - 2 :]),
    )


def best_time(function: Callable[[HandoffInputData], HandoffInputData], data: HandoffInputData, repeat: int) -> float:
    best = float('inf')
    for _ in range(repeat):
        gc.collect()  # start every run from the same heap state; the collector stays on while timing
        started = time.perf_counter()
        function(data)
        best = min(best, time.perf_counter() - started)
    return best


def summary_shaped(size: int, *, many_records: bool) -> HandoffInputData:
    """One assistant turn in the nested-summary format, about `size` characters long."""
    if many_records:
        body = '\n'.join(f'{n}. user: question {n}' for n in range(1, size // 16))
    else:
        body = '1. user: start\n' + 'line of a long record\n' * (size // 22)
    text = f'{SUMMARY_PREAMBLE}\n{DEFAULT_START_WRAPPER}\n{body}\n{DEFAULT_END_WRAPPER}'
    return HandoffInputData(input_history=(ModelResponse(parts=[TextPart(text)]),), pre_handoff_items=(), new_items=())


def parse_entries() -> list[Entry]:
    small, large = 1_600_000, 16_000_000
    long_record = {
        size: best_time(nest_handoff_history, summary_shaped(size, many_records=False), 3) for size in (small, large)
    }
    many = best_time(nest_handoff_history, summary_shaped(small, many_records=True), 3)
    detail = f'one record: 1.6 MB {long_record[small] * 1000:.0f} ms, 16 MB {long_record[large] * 1000:.0f} ms; '
    detail += f'100k records in 1.6 MB: {many * 1000:.0f} ms'
    ratio = long_record[large] / long_record[small]
    return [
        Entry('handoffs', 'summary parse: 16 MB / 1.6 MB record time', ratio, 'x', '<= 12x', ratio <= 12, detail),
        Entry(
            'handoffs',
            'summary parse: 1.6 MB record',
            long_record[small] * 1000,
            'ms',
            '< 1000 ms',
            long_record[small] < 1,
            detail,
        ),
    ]


async def _worst_loop_lag(data: HandoffInputData) -> float:
    """The longest the event loop woke late (5 ms ticks) while `delegate`'s nesting step ran on `data`."""
    worst = 0.0
    done = anyio.Event()

    async def monitor() -> None:
        nonlocal worst
        while not done.is_set():
            started = time.perf_counter()
            await anyio.sleep(0.005)
            worst = max(worst, time.perf_counter() - started - 0.005)

    async with anyio.create_task_group() as group:
        group.start_soon(monitor)
        await anyio.sleep(0.02)
        await nest_off_loop(data)
        done.set()
    return worst


def loop_lag_entries() -> list[Entry]:
    lags = {
        '1.6 MB of 100k records': anyio.run(_worst_loop_lag, summary_shaped(1_600_000, many_records=True)),
        '16 MB record': anyio.run(_worst_loop_lag, summary_shaped(16_000_000, many_records=False)),
    }
    detail = ', '.join(f'{name}: {lag * 1000:.0f} ms' for name, lag in lags.items())
    worst = max(lags.values()) * 1000
    return [Entry('handoffs', 'delegate nesting: worst event-loop lag', worst, 'ms', '< 250 ms', worst < 250, detail)]


def run() -> list[Entry]:
    entries: list[Entry] = [*parse_entries(), *loop_lag_entries()]
    functions: dict[str, Callable[[HandoffInputData], HandoffInputData]] = {
        'nest_handoff_history': nest_handoff_history,
        'remove_all_tools': remove_all_tools,
    }
    data = {size: build_data(size) for size in SIZES}
    for name, function in functions.items():
        times = {size: best_time(function, data[size], 7) for size in SIZES}
        detail = ', '.join(f'{size:,}: {times[size] * 1000:.1f} ms' for size in SIZES)
        ratio = times[100_000] / times[10_000]
        entries.append(
            Entry('handoffs', f'{name}: 100k / 10k messages time', ratio, 'x', '<= 12x', ratio <= 12, detail)
        )
        ten_k = times[10_000] * 1000
        entries.append(Entry('handoffs', f'{name}: 10k messages', ten_k, 'ms', '< 100 ms', ten_k < 100, detail))
    return entries
