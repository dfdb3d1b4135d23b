"""Faults: every failure of the store, the summarizer or the tokenizer leaves the run completing with a warning
and a correct fallback; a process killed mid-spill never leaves a partial payload under a handle."""

from __future__ import annotations

import errno
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior, UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    HandleNotFoundError,
    LocalFileStore,
    MemoryStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    QueryLimits,
    Spill,
    Summarize,
    Truncate,
    build_query_toolset,
)

from ._support import (
    Steps,
    chattr_immutable,
    mounted_tmpfs,
    remount_read_only,
    run_one_tool,
    tool_returns,
)

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

LOG = ''.join(f'{i:05d} step finished in {i % 97} ms\n' for i in range(3_000))
"""About 100 kB: over the default 10,000-character spill threshold."""


def assert_truncated(messages: list[ModelMessage], *, max_chars: int = 5_000) -> str:
    """The fallback of the default band: the Truncate marker is there and the text fits its budget."""
    [part] = tool_returns(messages)
    content = str(part.content)
    assert len(content) <= max_chars
    assert '[truncated: the middle' in content and 'omitted and not kept' in content
    assert content.split('\n', 1)[1].startswith('00000 step') and content.rstrip().endswith(
        '2999 step finished in 89 ms'
    )
    return content


# --- the filesystem under LocalFileStore -----------------------------------------------------------------------


async def test_read_only_store_root_falls_back_to_truncate_and_old_payloads_stay_readable(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / 'mnt', size='1m') as root:
        store = LocalFileStore(base_dir=root)
        earlier = await store.write('earlier/call_0/0', b'kept from before\n' * 100)
        remount_read_only(root)  # a read-only mount refuses root as well
        with pytest.raises(OSError) as probe:
            (root / 'probe').write_bytes(b'x')
        assert probe.value.errno == errno.EROFS
        # Said at the start of the run (naming the directory), then at the failed spill.
        with (
            pytest.warns(OverflowingToolOutputWarning, match=r'is on a read-only file system; remount it'),
            pytest.warns(OverflowingToolOutputWarning, match=r'Read-only file system.*falling back to Truncate'),
        ):
            messages = await run_one_tool(OverflowingToolOutput(store=store), LOG)
        assert_truncated(messages)
        # Reads still work on a read-only store (the line-index sidecar simply is not saved).
        read: Any = build_query_toolset(store).tools['read_tool_result'].function
        assert '100| kept from before' in await read(handle=earlier, from_end=True, limit=1)


async def test_disk_full_falls_back_leaves_no_temp_file_and_recovers(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / 'mnt', size='64k') as root:
        store = LocalFileStore(base_dir=root)
        big = LOG * 2  # ~200 kB into a 64 kB filesystem
        with pytest.warns(OverflowingToolOutputWarning, match=r'No space left on device.*falling back to Truncate'):
            messages = await run_one_tool(OverflowingToolOutput(store=store), big)
        [part] = tool_returns(messages)
        assert len(str(part.content)) <= 5_000 and 'omitted and not kept' in str(part.content)
        assert not list(root.rglob('.tmp-*'))  # the partial temp file was removed: the space is free again
        assert await store.list() == []
        # Once the payload fits, spilling works again on the same store.
        messages = await run_one_tool(OverflowingToolOutput(store=store), LOG[:12_000])
        [part] = tool_returns(messages)
        assert await store.read(part.metadata['overflow_handle']) == LOG[:12_000].encode()


async def test_immutable_store_root_refuses_root_and_falls_back(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    await store.write('warmup/call_0/0', b'x')
    with chattr_immutable(store.root):
        with pytest.raises(PermissionError):
            (store.root / 'probe').mkdir()
        with (
            pytest.warns(OverflowingToolOutputWarning, match=r'is not writable by this user'),
            pytest.warns(OverflowingToolOutputWarning, match=r'Operation not permitted.*falling back to Truncate'),
        ):
            messages = await run_one_tool(OverflowingToolOutput(store=store), LOG)
        assert_truncated(messages)


def _spill_as(base_dir: str) -> dict[str, Any]:
    report: dict[str, Any] = {'uid': os.getuid()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            messages = anyio.run(
                lambda: run_one_tool(
                    OverflowingToolOutput(store=LocalFileStore(base_dir=base_dir)), LOG, run_id='blocked'
                )
            )
            report['content'] = str(tool_returns(messages)[0].content)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            report['crash'] = repr(exc)
    report['warnings'] = [str(w.message) for w in caught]
    return report


def _spill_as_nobody(base_dir: str, rehearsal_dir: str, results: Any) -> None:  # pragma: no cover - in a child
    # After `setuid` this process may be unable to read the checkout or the virtualenv (a clone under
    # `mktemp -d`, a 0700 home), so every module the run needs is imported first, as root, by a rehearsal:
    # the same spill against a root whose run directory cannot be made, which takes the same fallback path.
    rehearsal = _spill_as(rehearsal_dir)
    if 'crash' in rehearsal or len(rehearsal['warnings']) != 1:
        results.put({**rehearsal, 'crash': f'the rehearsal did not fall back once: {rehearsal}'})
        return
    before = set(sys.modules)
    os.setgid(65534)
    os.setuid(65534)
    report = _spill_as(base_dir)
    report['imported_after_dropping'] = sorted(set(sys.modules) - before)
    results.put(report)


def _unreachable_for_others(path: Path) -> Path | None:
    """The first directory above `path` that another user cannot traverse, if any."""
    for directory in [path, *path.parents]:
        if not os.stat(directory).st_mode & 0o001:
            return directory
    return None


def test_permission_denied_for_an_unprivileged_user_falls_back(tmp_path: Path) -> None:
    """EACCES as it really happens: a non-root process meets a directory it may not enter inside its root."""
    if os.geteuid() != 0:
        pytest.skip('needs root to hand a store root to user nobody with a root-owned directory inside it')
    base = Path(tempfile.mkdtemp(prefix='reliability-eacces-'))
    try:
        base.chmod(0o711)
        closed = _unreachable_for_others(base)
        if closed is not None:
            pytest.skip(f'user nobody cannot reach a directory under {closed} (mode 0700?): set TMPDIR elsewhere')
        root = base / 'spill'
        root.mkdir(mode=0o700)
        os.chown(root, 65534, 65534)
        blocked = root / 'blocked'  # the directory of the run id 'blocked', owned by root, mode 0700
        blocked.mkdir(mode=0o700)
        rehearsal_root = base / 'rehearsal'  # for root: a regular file where the run directory would go
        rehearsal_root.mkdir(mode=0o700)
        (rehearsal_root / 'blocked').write_bytes(b'')
        context = multiprocessing.get_context('spawn')
        results = context.Queue()
        child = context.Process(target=_spill_as_nobody, args=(str(root), str(rehearsal_root), results))
        child.start()
        try:
            report = results.get(timeout=60)
        finally:
            child.join(10)
        assert report['uid'] == 65534, report
        assert 'crash' not in report, report
        # Nothing was read from disk after dropping privileges, so the checkout's location does not matter.
        assert report['imported_after_dropping'] == []
        [warning] = report['warnings']
        assert 'Permission denied' in warning and 'falling back to Truncate' in warning
        content = report['content']
        assert len(content) <= 5_000 and 'omitted and not kept' in content
        assert list(blocked.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- stores that raise, lie or hang ------------------------------------------------------------------------------


class Boom(Exception):
    """An exception type no store author would think of."""


WRITE_ERRORS: list[Exception] = [
    OSError(errno.EIO, 'Input/output error at /mnt/secret'),
    PermissionError(errno.EACCES, 'Permission denied'),
    ConnectionResetError('peer reset'),
    TimeoutError('backend timed out'),
    ValueError('bad value'),
    TypeError('bad type'),
    KeyError('k'),
    RuntimeError('boom'),
    NotImplementedError('write'),
    MemoryError(),
    RecursionError('maximum recursion depth exceeded'),
    UnicodeDecodeError('utf-8', b'\xff', 0, 1, 'invalid start byte'),
    HandleNotFoundError('nope'),
    Boom('custom'),
]


class RaisingStore:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def write(self, key: str, data: bytes) -> str:
        raise self.error

    async def read(self, handle: str) -> bytes:
        raise self.error


@pytest.mark.parametrize('error', WRITE_ERRORS, ids=lambda e: type(e).__name__)
async def test_any_exception_from_a_store_write_falls_back_to_truncate(error: Exception) -> None:
    with pytest.warns(OverflowingToolOutputWarning, match=r'Spill could not reduce .*; falling back to Truncate'):
        messages = await run_one_tool(OverflowingToolOutput(store=RaisingStore(error)), LOG)
    assert_truncated(messages)


async def test_a_store_raising_timeout_error_is_reported_as_its_own_failure() -> None:
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await run_one_tool(OverflowingToolOutput(store=RaisingStore(TimeoutError('backend timed out'))), LOG)
    assert time.perf_counter() - started < 1
    [warning] = caught
    assert "the store failed: TimeoutError('backend timed out')" in str(warning.message)


class Interrupt(BaseException):
    """A BaseException that is not an Exception, like KeyboardInterrupt or SystemExit."""


async def test_a_base_exception_from_a_store_is_not_swallowed() -> None:
    """Decision: only `Exception` means "the store failed". A `BaseException` (cancellation, interrupts, exits)
    is process control, so it propagates out of the run unchanged instead of being turned into a fallback."""
    with pytest.raises(Interrupt):
        await run_one_tool(OverflowingToolOutput(store=RaisingStore(Interrupt('stop'))), LOG)


_INTERRUPT_SCRIPT = textwrap.dedent(
    """
    import anyio
    from tests.reliability.test_faults import LOG, RaisingStore
    from tests.reliability._support import run_one_tool
    from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

    error = {error}
    anyio.run(run_one_tool, OverflowingToolOutput(store=RaisingStore(error)), LOG)
    print('the run completed')
    """
)


@pytest.mark.parametrize(('error', 'returncode'), [('KeyboardInterrupt()', -signal.SIGINT), ('SystemExit(3)', 3)])
def test_keyboard_interrupt_and_system_exit_from_a_store_end_the_process(error: str, returncode: int) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, '-c', _INTERRUPT_SCRIPT.format(error=error)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 'the run completed' not in done.stdout
    assert done.returncode == returncode, done.stderr[-2000:]


READ_ERRORS: list[Exception] = [e for e in WRITE_ERRORS if not isinstance(e, HandleNotFoundError | KeyError)]


@pytest.mark.parametrize('error', READ_ERRORS, ids=lambda e: type(e).__name__)
async def test_any_exception_from_a_store_read_gives_guidance_and_the_run_goes_on(error: Exception) -> None:
    calls: list[tuple[str, dict[str, Any] | str]] = [
        ('read_tool_result', {'handle': 'r/c/0'}),
        ('read_tool_result', {'handle': 'r/c/0', 'unit': 'bytes'}),
        ('grep_tool_result', {'handle': 'r/c/0', 'pattern': 'x', 'is_regex': True}),
    ]
    steps = Steps(lambda answers: None if steps.answers else calls)
    result = await Agent(steps.model, toolsets=[build_query_toolset(RaisingStore(error))]).run('go')
    assert result.output == 'done'
    [answers] = steps.answers
    assert len(answers) == 3
    for answer in answers:
        assert isinstance(answer, ToolReturnPart)
        text = str(answer.content)
        assert f'could not be read right now (storage error: {type(error).__name__})' in text
        assert '/mnt/secret' not in text and 'boom' not in text  # never the message: it may hold paths


@pytest.mark.parametrize('error', [KeyError('r/c/0'), HandleNotFoundError('gone'), FileNotFoundError('/x')])
async def test_a_missing_payload_reads_as_unknown_handle(error: Exception) -> None:
    read: Any = build_query_toolset(RaisingStore(error)).tools['read_tool_result'].function
    assert (await read(handle='r/c/0')).startswith("No stored result found under handle 'r/c/0'")


class LyingStore:
    """A range-readable store whose answers contradict each other or have the wrong type."""

    def __init__(self, size: Any, chunk: Any, whole: Any = b'') -> None:
        self._size, self._chunk, self._whole = size, chunk, whole

    async def write(self, key: str, data: bytes) -> str:
        return key

    async def read(self, handle: str) -> Any:
        return self._whole

    async def size(self, handle: str) -> Any:
        return self._size

    async def read_range(self, handle: str, start: int, end: int) -> Any:
        return self._chunk


LIARS = {
    'size-huge-but-empty': LyingStore(10**15, b''),
    'size-negative': LyingStore(-5, b'abc'),
    'size-not-int': LyingStore('12', b'abc'),
    'range-returns-more': LyingStore(4, b'0123456789\n' * 100),
    'range-returns-str': LyingStore(100, 'not bytes'),
    'range-returns-none': LyingStore(100, None),
}


class ReadOnlyLiar:
    def __init__(self, whole: Any) -> None:
        self.whole = whole

    async def write(self, key: str, data: bytes) -> str:
        return key

    async def read(self, handle: str) -> Any:
        return self.whole


LIARS |= {
    'read-returns-str': ReadOnlyLiar('text'),
    'read-returns-none': ReadOnlyLiar(None),
    'read-returns-int': ReadOnlyLiar(42),
    'read-returns-bytearray': ReadOnlyLiar(bytearray(b'fine\n')),
}


@pytest.mark.parametrize('name', sorted(LIARS))
async def test_a_store_returning_nonsense_never_crashes_or_hangs_a_query(name: str) -> None:
    toolset = build_query_toolset(LIARS[name])
    read: Any = toolset.tools['read_tool_result'].function
    grep: Any = toolset.tools['grep_tool_result'].function
    for call in (
        lambda: read(handle='r/c/0'),
        lambda: read(handle='r/c/0', from_end=True),
        lambda: read(handle='r/c/0', unit='bytes', offset=2),
        lambda: grep(handle='r/c/0', pattern='1'),
    ):
        started = time.perf_counter()
        with anyio.fail_after(5):
            answer = await call()
        assert time.perf_counter() - started < 1.0
        assert isinstance(answer, str) and answer


async def test_a_hanging_store_write_is_bounded_by_spill_timeout() -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=10_000, action=Spill(timeout=0.2))], store=MemoryStore(hang=True, hang_reads=True)
    )
    started = time.perf_counter()
    with pytest.warns(OverflowingToolOutputWarning, match=r'did not finish writing within 0.2 s; falling back'):
        messages = await run_one_tool(capability, LOG)
    assert time.perf_counter() - started < 1.5
    assert_truncated(messages)


@pytest.fixture
def frozen_filesystem(tmp_path: Path) -> Iterator[tuple[LocalFileStore, threading.Event]]:
    """A LocalFileStore on a loop-mounted ext4 that is frozen (`fsfreeze`): every write blocks in the kernel.

    Yields the store and an event to set when the filesystem may thaw; it thaws after 3 s at the latest, and
    is thawed and unmounted on teardown whatever happened.
    """
    for tool in ('mkfs.ext4', 'fsfreeze', 'mount', 'umount'):
        if shutil.which(tool) is None:
            pytest.skip(f'{tool} is not available: cannot freeze a filesystem under the store')
    image, mountpoint = tmp_path / 'fs.img', tmp_path / 'frozen'
    with image.open('wb') as handle:
        handle.truncate(8 << 20)
    subprocess.run(['mkfs.ext4', '-q', '-F', str(image)], check=True, capture_output=True, timeout=30)
    mountpoint.mkdir()
    mounted = subprocess.run(
        ['mount', '-o', 'loop', str(image), str(mountpoint)], check=False, capture_output=True, timeout=30
    )
    if mounted.returncode != 0:
        pytest.skip(f'loop mounts are not permitted here ({mounted.stderr.decode().strip()})')
    thaw = threading.Event()
    thawer: threading.Thread | None = None
    try:
        store = LocalFileStore(base_dir=mountpoint / 'spill')
        anyio.run(store.write, 'warmup/call_0/0', b'ok')
        subprocess.run(['fsfreeze', '-f', str(mountpoint)], check=True, capture_output=True, timeout=30)

        def unfreeze_later() -> None:
            thaw.wait(3.0)
            subprocess.run(['fsfreeze', '-u', str(mountpoint)], capture_output=True, timeout=30, check=False)

        thawer = threading.Thread(target=unfreeze_later, daemon=True)
        thawer.start()
        yield store, thaw
    finally:
        thaw.set()
        if thawer is not None:
            thawer.join(30)
        subprocess.run(['fsfreeze', '-u', str(mountpoint)], capture_output=True, timeout=30, check=False)
        subprocess.run(['umount', str(mountpoint)], capture_output=True, timeout=30, check=False)


async def test_a_local_store_on_a_frozen_filesystem_is_bounded_by_spill_timeout(
    frozen_filesystem: tuple[LocalFileStore, threading.Event],
) -> None:
    store, _ = frozen_filesystem
    capability = OverflowingToolOutput(bands=[Band(over=10_000, action=Spill(timeout=0.3))], store=store)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        messages = await run_one_tool(capability, LOG)
    elapsed = time.perf_counter() - started
    assert [str(w.message) for w in caught if 'within 0.3 s' in str(w.message)], (elapsed, caught)
    assert elapsed < 1.5, f'the run waited {elapsed:.1f} s for a write bounded by 0.3 s'
    assert_truncated(messages)


async def test_a_hanging_store_read_is_bounded() -> None:
    steps = Steps(lambda answers: None if steps.answers else [('read_tool_result', {'handle': 'r/c/0'})])
    agent = Agent(
        steps.model,
        toolsets=[build_query_toolset(MemoryStore(hang=True, hang_reads=True), limits=QueryLimits(store_timeout=0.5))],
    )
    messages: list[ModelMessage] = []
    with anyio.move_on_after(2.0) as scope:
        result = await agent.run('go')
        assert result.output == 'done'
        messages = result.all_messages()
    assert not scope.cancelled_caught, 'read_tool_result was still waiting for the store after 2 s'
    [answer] = [p for p in tool_returns(messages) if p.tool_name == 'read_tool_result']
    assert 'the storage did not answer within 0.5 s' in str(answer.content)


async def test_a_hanging_store_under_summarize_keep_original_is_bounded() -> None:
    action = Summarize(summarize=lambda tool, text: 'a short summary', store_timeout=0.5)
    capability = OverflowingToolOutput(
        bands=[Band(over=10_000, action=action)], store=MemoryStore(hang=True, hang_reads=True)
    )
    messages: list[Any] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with anyio.move_on_after(2.0) as scope:
            messages = await run_one_tool(capability, LOG)
    assert not scope.cancelled_caught, 'the run was still waiting for the store after 2 s'
    assert any('could not be kept' in str(w.message) for w in caught)
    assert str(tool_returns(messages)[0].content).endswith('a short summary')


# --- the summarizer and the tokenizer ----------------------------------------------------------------------------


def _summarizer(error: BaseException | None, reply: str = '') -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if error is not None:
            raise error
        return ModelResponse(parts=[TextPart(reply)])

    return FunctionModel(respond)


SUMMARIZER_ERRORS: list[Exception] = [
    RuntimeError('model crashed'),
    ModelHTTPError(status_code=500, model_name='summarizer', body='internal error'),
    ModelHTTPError(status_code=429, model_name='summarizer', body='rate limited'),
    UnexpectedModelBehavior('garbage'),
    TimeoutError('read timeout'),
    ConnectionError('refused'),
    ValueError('bad'),
    UserError('no API key'),  # raised by a model at request time, it is a failure of that request: fall back
]


@pytest.mark.parametrize('error', SUMMARIZER_ERRORS, ids=lambda e: f'{type(e).__name__}')
async def test_a_raising_summarizer_model_falls_back_to_truncate(error: Exception) -> None:
    action = Summarize(model=_summarizer(error), then=Truncate(), keep_original=False)
    with pytest.warns(OverflowingToolOutputWarning, match=r'Summarize could not reduce .*falling back to Truncate'):
        messages = await run_one_tool(OverflowingToolOutput(bands=[Band(over=10_000, action=action)]), LOG)
    assert_truncated(messages)


@pytest.mark.parametrize('reply', ['', '   ', '\n\n\t'], ids=['empty', 'spaces', 'whitespace'])
async def test_an_empty_summary_falls_back_to_truncate(reply: str) -> None:
    action = Summarize(model=_summarizer(None, reply), then=Truncate(), keep_original=False)
    with pytest.warns(OverflowingToolOutputWarning, match=r'no usable text.*falling back to Truncate'):
        messages = await run_one_tool(OverflowingToolOutput(bands=[Band(over=10_000, action=action)]), LOG)
    assert_truncated(messages)


def _raise(error: Exception) -> Any:
    raise error


TOKENIZERS: dict[str, Any] = {
    'raises-ValueError': lambda text: _raise(ValueError('bad text')),
    'raises-RecursionError': lambda text: _raise(RecursionError()),
    'raises-MemoryError': lambda text: _raise(MemoryError()),
    'raises-KeyError': lambda text: _raise(KeyError('vocab')),
    'returns-negative': lambda text: -1,
    'returns-None': lambda text: None,
    'returns-str': lambda text: '25000',
    'returns-float': lambda text: 2.5e4,
    'returns-bool': lambda text: True,
}


@pytest.mark.parametrize('name', sorted(TOKENIZERS))
async def test_a_broken_tokenizer_falls_back_to_the_heuristic(name: str) -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=2_500, action=Truncate())], over_tokens=True, tokenizer=TOKENIZERS[name]
    )
    with pytest.warns(OverflowingToolOutputWarning, match=r'The tokenizer raised .*~4 characters/token'):
        messages = await run_one_tool(capability, LOG)
    assert_truncated(messages)  # ~25,000 heuristic tokens reach the 2,500-token band


# --- a process killed in the middle of a spill -------------------------------------------------------------------

KILL_PAYLOAD_BYTES = 48 << 20


def kill_payload(run: int) -> bytes:
    """A large binary tool output (a tarball, say), different for every run."""
    return bytes([run % 251]) * KILL_PAYLOAD_BYTES


def _spill_forever(base_dir: str, ready: Any) -> None:  # pragma: no cover - runs in a child process
    import anyio as child_anyio

    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=base_dir))

    async def main() -> None:
        run = 0
        while True:
            await run_one_tool(capability, kill_payload(run), run_id=f'run{run}')
            ready.set()
            run += 1

    child_anyio.run(main)


def test_a_process_killed_mid_spill_leaves_each_handle_absent_or_complete(tmp_path: Path) -> None:
    base_dir = tmp_path / 'spill'
    context = multiprocessing.get_context('spawn')
    ready = context.Event()
    child = context.Process(target=_spill_forever, args=(str(base_dir), ready))
    child.start()
    torn_temp: list[int] = []
    try:
        assert ready.wait(60), 'the child never completed a first spill'
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not torn_temp:
            for temp in base_dir.rglob('.tmp-*'):
                try:
                    size = temp.stat().st_size
                except FileNotFoundError:
                    continue
                if 0 < size < KILL_PAYLOAD_BYTES:
                    torn_temp.append(size)
                    break
            time.sleep(0.0005)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(10)
    assert child.exitcode == -signal.SIGKILL
    assert torn_temp, 'never caught the child in the middle of writing a payload'

    async def check() -> list[str]:
        store = LocalFileStore(base_dir=base_dir, cleanup_after=timedelta(hours=1))
        read: Any = build_query_toolset(store).tools['read_tool_result'].function
        handles = [payload.handle for payload in await store.list()]
        for handle in handles:
            run = int(handle.split('/')[0].removeprefix('run'))
            assert await store.size(handle) == KILL_PAYLOAD_BYTES, handle
            assert await store.read(handle) == kill_payload(run), handle
            assert 'binary (50,331,648 bytes' in (await read(handle=handle, from_end=True)).replace(
                '50331648', '50,331,648'
            )
        in_flight = f'run{len(handles)}/call_0/0'
        with pytest.raises(HandleNotFoundError):
            await store.read(in_flight)
        return handles

    handles = anyio.run(check)
    assert handles == [f'run{n}/call_0/0' for n in range(len(handles))]
