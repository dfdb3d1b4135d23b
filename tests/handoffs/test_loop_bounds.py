"""A long history is built off the event loop (issue 31, section 6, case 2), through real agent runs.

`delegate()` and `HandoffHistory` walk the whole conversation (split it, drop system prompts, mark spills, filter,
nest, check). On 46,670 messages opening with an earlier hop's 8.8 MB summary, that held the event loop, and every
other run of the process with it, for 346-477 ms before the delegate's run even started. Two kinds of check, neither
timing throughput:

- structural: while the history is built, none of the functions that walk it is called on the event loop's thread
  (a profile hook on that thread records every call);
- a loop-lag bound with a wide margin: a ticker on the loop measures how late the loop wakes it within the window
  from the delegation's start to the moment the delegate's own system prompt is asked for (measured before: 346-477
  ms; now 6-28 ms, the waits for the GIL a worker holds; the bound is 150 ms). Garbage collection is off meanwhile:
  a full collection stops every thread, whichever one builds the history.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, overload

import anyio
import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import (
    HandoffHistory,
    HandoffInputData,
    delegate,
    handoff_input_from_context,
    nest_handoff_history,
    remove_all_tools,
)
from pydantic_ai_harness.handoffs._history import check_message_history, without_system_prompts
from pydantic_ai_harness.handoffs._parts import keep_parts
from pydantic_ai_harness.handoffs._spills import mark_unreadable_spills
from pydantic_ai_harness.handoffs._transcript import SUMMARY_PREAMBLE, parse_summary_text

from ._helpers import Recorder

pytestmark = pytest.mark.anyio

MESSAGES = 46_670
"""The size of the conversation the issue measured."""

WALKERS: dict[types.CodeType, str] = {
    function.__code__: function.__name__
    for function in (
        handoff_input_from_context,
        without_system_prompts,
        keep_parts,
        mark_unreadable_spills,
        remove_all_tools,
        nest_handoff_history,
        check_message_history,
        HandoffInputData.to_message_history,
    )
}
"""The functions that walk a whole history: none may run on the event loop's thread for a long one."""

LAG_BOUND = 0.15
"""Seconds; measured before: 0.35-0.48 s, now 6-28 ms."""


def earlier_summary(records: int) -> str:
    """An earlier hop's summary (3.5 MB for 200,000 records) that names no spill handle."""
    body = '\n'.join(f'{n}. user: question {n} about an order' for n in range(1, records + 1))
    return f'{SUMMARY_PREAMBLE}\n<CONVERSATION HISTORY>\n{body}\n</CONVERSATION HISTORY>'


def long_history(size: int = MESSAGES) -> list[ModelMessage]:
    """A conversation handed on before (it opens with a summary), then thousands of tool calls."""
    messages: list[ModelMessage] = [
        ModelResponse(parts=[TextPart(earlier_summary(200_000))]),
        ModelRequest(parts=[UserPromptPart('Go on with the orders')]),
    ]
    n = 0
    while len(messages) < size - 1:
        messages.append(ModelResponse(parts=[TextPart('Looking.'), ToolCallPart('lookup', {'order': n}, f'c{n}')]))
        messages.append(ModelRequest(parts=[ToolReturnPart('lookup', f'order {n}: paid', f'c{n}')]))
        n += 1
    messages.append(ModelResponse(parts=[TextPart('All looked up.')]))
    return messages


@pytest.fixture(scope='module')
def history() -> list[ModelMessage]:
    return long_history()


@dataclass
class Window:
    """What happened on the event loop's thread between a delegation's start and the delegate's system prompt."""

    opened_at: float | None = None
    """When the window opened (`time.perf_counter()`)."""

    closed_at: float | None = None
    """When it closed."""

    called: list[str] = field(default_factory=list[str])
    """The history walkers called on the loop's thread in the window."""

    wakes: list[tuple[float, float]] = field(default_factory=list[tuple[float, float]])
    """`(due, woke)` of every ticker sleep: when it asked to wake, and when the loop woke it."""

    def profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event == 'call' and (name := WALKERS.get(frame.f_code)) is not None:
            self.called.append(name)

    profiled: bool = False
    """Whether to record the walkers called (a profile hook, which slows the loop's thread several times over)."""

    def start(self) -> None:
        self.opened_at = time.perf_counter()
        if self.profiled:
            sys.setprofile(self.profile)  # this thread only: the event loop's

    def close(self) -> None:
        if self.opened_at is not None and self.closed_at is None:
            self.closed_at = time.perf_counter()
            sys.setprofile(None)

    async def tick(self) -> None:
        while True:
            due = time.perf_counter() + 0.005
            await anyio.sleep(0.005)
            self.wakes.append((due, time.perf_counter()))

    @property
    def worst(self) -> float:
        """The longest the loop was late to wake the ticker within the window (a late wake that began before it
        opened, or ended after it closed, counts for the part inside), in seconds."""
        assert self.opened_at is not None and self.closed_at is not None
        opened, closed = self.opened_at, self.closed_at
        return max((min(woke, closed) - max(due, opened) for due, woke in self.wakes), default=0.0)


@contextmanager
def watching(window: Window) -> Iterator[None]:
    """Collection off meanwhile: a full collection of a history this size stops every thread for 0.1-0.3 s, whatever
    runs, so it would be measured as lag whichever thread builds the history."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        window.close()


def specialist_closing(window: Window, recorder: Recorder) -> Agent[None, str]:
    """The delegate: its dynamic system prompt, asked for once its history is built, closes the window."""
    specialist = Agent(recorder.model, name='specialist')

    @specialist.system_prompt(dynamic=True)
    async def rules() -> str:
        window.close()
        return 'You are the specialist.'

    return specialist


def delegating_parent(specialist: Agent[None, str], window: Window, **settings: Any) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) and p.tool_name == 'ask' for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('ask', {}, 'h')])

    parent = Agent(FunctionModel(respond), name='parent', deps_type=type(None))

    @parent.tool
    async def ask(ctx: RunContext[None]) -> str:
        """Ask the specialist."""
        window.start()
        return (await delegate(specialist, ctx, 'take over', **settings)).output

    return parent


SETTINGS: dict[str, dict[str, Any]] = {
    'as it is': {},
    'nested': {'nest_handoff_history': True},
    'filtered': {'input_filter': remove_all_tools},
}


async def delegate_in_window(window: Window, history: list[ModelMessage], settings: dict[str, Any]) -> None:
    recorder = Recorder()
    parent = delegating_parent(specialist_closing(window, recorder), window, **settings)
    with watching(window):
        async with anyio.create_task_group() as group:
            group.start_soon(window.tick)
            assert (await parent.run('next', message_history=history)).output == 'done'
            group.cancel_scope.cancel()
    assert len(recorder.seen) == 1  # the delegate ran, on the history built


@pytest.mark.parametrize('mode', list(SETTINGS))
async def test_delegate_walks_a_long_history_in_a_worker_thread(mode: str) -> None:
    window = Window(profiled=True)
    await delegate_in_window(window, long_history(5_000), SETTINGS[mode])  # over the bounds; the hook is slow
    assert window.called == []  # measured before: every walker, on the loop's thread


@pytest.mark.parametrize('mode', list(SETTINGS))
async def test_delegate_does_not_hold_the_event_loop_on_a_long_history(history: list[ModelMessage], mode: str) -> None:
    window = Window()
    await delegate_in_window(window, history, SETTINGS[mode])
    assert window.worst < LAG_BOUND, f'the loop was held {window.worst * 1000:.0f} ms'


async def test_a_synchronous_filter_runs_in_the_worker_and_an_async_one_on_the_loop() -> None:
    threads: list[str] = []

    def sync_filter(data: HandoffInputData) -> HandoffInputData:
        threads.append('loop' if threading.current_thread() is loop_thread else 'worker')
        return data

    async def async_filter(data: HandoffInputData) -> HandoffInputData:
        threads.append('loop' if threading.current_thread() is loop_thread else 'worker')
        return data

    loop_thread = threading.current_thread()
    for input_filter in (sync_filter, async_filter):
        await delegate_in_window(Window(), long_history(1_000), {'input_filter': input_filter})
    assert threads == ['worker', 'loop']


@pytest.mark.parametrize('settings', [{'input_filter': remove_all_tools}, {'nest_handoff_history': True}])
async def test_handoff_history_rewrites_a_long_history_off_the_event_loop(settings: dict[str, Any]) -> None:
    window, recorder = Window(profiled=True), Recorder()
    history = long_history(5_000)  # well over the bounds; the profile hook slows pydantic-ai's own work here
    agent = Agent(recorder.model, capabilities=[HandoffHistory(**settings)])
    with watching(window):
        window.start()
        await agent.run('next', message_history=history)
        window.close()
    assert len(recorder.seen[0]) < len(history)  # the tool calls are gone: it was rewritten
    assert window.called == []


def calls_on_this_thread(work: Callable[[], object], code: types.CodeType) -> int:
    calls = 0

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == 'call' and frame.f_code is code

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_marking_a_history_that_names_no_handle_parses_nothing(history: list[ModelMessage]) -> None:
    """Nothing to mark: the 8.8 MB summary is not parsed, and every message is kept as it is."""
    marked: list[tuple[ModelMessage, ...]] = []
    parses = calls_on_this_thread(lambda: marked.append(mark_unreadable_spills(history)), parse_summary_text.__code__)
    assert parses == 0
    assert all(a is b for a, b in zip(marked[0], history, strict=True))


def test_a_summary_that_names_a_handle_is_still_marked() -> None:
    summary = earlier_summary(3).replace(
        '3. user: question 3 about an order',
        '3. {"type": "function_call_output", "call_id": "c", "output": "Saved in full under handle \'h1\': 9 lines"}',
    )
    [marked] = mark_unreadable_spills([ModelResponse(parts=[TextPart(summary)])])
    [part] = marked.parts
    assert isinstance(part, TextPart)
    assert "the full output saved under 'h1' cannot be read by this agent" in part.content


class Watched(Sequence[ModelMessage]):
    """A history that remembers how far it was read."""

    def __init__(self, messages: list[ModelMessage]) -> None:
        self.messages = messages
        self.read = 0

    def __len__(self) -> int:
        return len(self.messages)

    @overload
    def __getitem__(self, index: int) -> ModelMessage: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[ModelMessage]: ...
    def __getitem__(self, index: int | slice) -> ModelMessage | Sequence[ModelMessage]:
        if isinstance(index, slice):
            raise NotImplementedError
        self.read = max(self.read, index + 1)
        return self.messages[index]


def test_the_size_check_reads_a_bounded_prefix() -> None:
    """Deciding whether a history is large stops once it is over a bound: it never walks all of it."""
    from pydantic_ai_harness.handoffs._worker import is_large

    many_parts = Watched([ModelRequest(parts=[UserPromptPart('hi')] * 100) for _ in range(150)])  # 15,000 parts
    assert is_large(many_parts)
    assert many_parts.read == 11  # 1,001 parts read: over 1,000, the rest not looked at
    small = long_history(50)[2:]  # no summary: a few hundred characters
    assert not is_large(small)
    assert is_large(small, 'x' * 200_001)
    assert is_large([ModelRequest(parts=[ToolReturnPart('t', {'rows': list(range(2_000))}, 'c')])])
    assert is_large([ModelRequest(parts=[ToolReturnPart('t', threading.Lock(), 'c')])])  # cost unknown: large
    assert not is_large([ModelResponse(parts=[ToolCallPart('t', {'a': [1, 'b', None]}, 'c')])])
