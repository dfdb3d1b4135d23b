"""Issue 16: configuration mistakes are reported at construction or at a run's start, naming the setting."""

from __future__ import annotations

import json
import logging
import math
import os
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturn
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    GREP_TOOL_NAME,
    READ_TOOL_NAME,
    Aging,
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Passthrough,
    Spill,
    Summarize,
    Truncate,
    _checks,
    build_query_toolset,
)
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import QUERY_TOOL_NAMES

from .conftest import FailingStore, MemoryStore, run_tool

pytestmark = pytest.mark.anyio

LOGGER = 'pydantic_ai_harness.overflowing_tool_output'
BIG = ''.join(f'line {i}: ok\n' for i in range(3_000))


def _overflow_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, OverflowingToolOutputWarning)]


def _model_visible(messages: list[ModelMessage]) -> str:
    return json.dumps([m.parts for m in messages], default=repr)


# --- 1. cleanup_after: one rule for every store and the spec loader ---------------------------------------------


@pytest.mark.parametrize(
    ('given', 'stored'),
    [
        (timedelta(hours=6), timedelta(hours=6)),
        (3600, timedelta(hours=1)),
        (0.5, timedelta(milliseconds=500)),
        (None, None),
    ],
)
def test_local_cleanup_after_takes_a_timedelta_or_seconds(given: Any, stored: timedelta | None) -> None:
    assert LocalFileStore(cleanup_after=given).cleanup_after == stored


BAD_TTLS: list[tuple[Any, type[Exception]]] = [
    (timedelta(0), ValueError),
    (timedelta(hours=-6), ValueError),
    (0, ValueError),
    (-1, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (True, TypeError),
    ('6h', TypeError),
    ([3600], TypeError),
]


@pytest.mark.parametrize(('bad', 'error'), BAD_TTLS, ids=repr)
def test_local_cleanup_after_refuses_what_would_delete_at_once_or_crash_later(bad: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r'LocalFileStore\.cleanup_after must be a positive timedelta, a positive number'):
        LocalFileStore(cleanup_after=bad)


@pytest.mark.parametrize(('bad', 'error'), BAD_TTLS, ids=repr)
def test_redis_and_object_stores_follow_the_same_rule(bad: Any, error: type[Exception]) -> None:
    from obstore.store import MemoryStore as ObstoreMemory

    from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore, RedisStore

    assert RedisStore(url='redis://127.0.0.1:1/0', cleanup_after=90).cleanup_after == timedelta(seconds=90)
    assert ObjectStore(ObstoreMemory(), cleanup_after=90.0).cleanup_after == timedelta(seconds=90)
    with pytest.raises(error, match=r'RedisStore\.cleanup_after must be a positive timedelta'):
        RedisStore(url='redis://127.0.0.1:1/0', cleanup_after=bad)
    with pytest.raises(error, match=r'ObjectStore\.cleanup_after must be a positive timedelta'):
        ObjectStore(ObstoreMemory(), cleanup_after=bad)


async def test_cleanup_after_in_seconds_spills_instead_of_falling_back(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill', cleanup_after=3600)
    run = await run_tool(OverflowingToolOutput(store=store), BIG)  # warnings are errors: no fallback happened
    part = run.returns()[0]
    assert part.metadata['overflow_action'] == 'spill'
    assert await store.read(part.metadata['overflow_handle']) == BIG.encode()


@pytest.mark.parametrize(('given', 'stored'), [(21600, timedelta(hours=6)), ('6h', timedelta(hours=6)), (1.5, 1.5)])
def test_spec_cleanup_after_follows_the_same_rule(tmp_path: Path, given: Any, stored: Any) -> None:
    capability = OverflowingToolOutput.from_spec(store={'base_dir': str(tmp_path), 'cleanup_after': given})
    assert isinstance(capability.store, LocalFileStore)
    expected = stored if isinstance(stored, timedelta) else timedelta(seconds=stored)
    assert capability.store.cleanup_after == expected


@pytest.mark.parametrize('bad', [0, -5, '0s', '-1h', True, 'soon', [1]], ids=repr)
def test_spec_cleanup_after_refusals_name_the_field(bad: Any) -> None:
    with pytest.raises(ValueError, match=r'store\.cleanup_after: expected seconds or a duration .*greater than zero'):
        OverflowingToolOutput.from_spec(store={'cleanup_after': bad})


def test_spec_base_dir_must_be_a_path() -> None:
    with pytest.raises(ValueError, match=r'store\.base_dir: expected a directory path, got int 7'):
        OverflowingToolOutput.from_spec(store={'base_dir': 7})


# --- 2. store diagnostics up front -------------------------------------------------------------------------------


def _loose_root(tmp_path: Path) -> Path:
    """A root the store cannot create: a file is in the way of its parent."""
    (tmp_path / 'a-file').write_text('x')
    return tmp_path / 'a-file' / 'spill'


def test_root_problem_names_the_directory_and_the_fix(tmp_path: Path) -> None:
    loose = _loose_root(tmp_path)
    problem = LocalFileStore(base_dir=loose).root_problem()
    assert problem is not None
    assert f'{loose} cannot be created: {tmp_path / "a-file"} is not a directory' in problem

    made_with_mkdir = tmp_path / 'made-with-mkdir'
    made_with_mkdir.mkdir(mode=0o755)
    made_with_mkdir.chmod(0o755)
    assert LocalFileStore(base_dir=made_with_mkdir).root_problem() is None  # made private at construction

    # A file or a link where the root was, after construction (which refuses either: test_store_mode.py).
    (tmp_path / 'real').mkdir(mode=0o700)
    in_the_way, linked = LocalFileStore(base_dir=tmp_path / 'file'), LocalFileStore(base_dir=tmp_path / 'link')
    (tmp_path / 'file').write_text('x')
    (tmp_path / 'link').symlink_to(tmp_path / 'real')
    assert 'is not a directory' in (in_the_way.root_problem() or '')
    assert 'is a symlink' in (linked.root_problem() or '')

    assert LocalFileStore(base_dir=tmp_path / 'not-yet' / 'spill').root_problem() is None  # created on first write
    assert LocalFileStore(base_dir=tmp_path / 'real').root_problem() is None


@pytest.mark.skipif(os.geteuid() != 0, reason='changing a directory owner needs root')
def test_root_problem_names_a_foreign_owner(tmp_path: Path) -> None:
    root = tmp_path / 'foreign'
    root.mkdir(mode=0o700)
    store = LocalFileStore(base_dir=root)
    os.chown(root, 12345, 12345)  # after construction, which refuses another user's root
    assert f'{root} is owned by uid 12345, not by this user' in (store.root_problem() or '')


@pytest.mark.skipif(os.geteuid() == 0, reason='root may write anywhere')
def test_root_problem_names_an_unwritable_root(tmp_path: Path) -> None:  # pragma: no cover - not run as root
    root = tmp_path / 'locked'
    root.mkdir(mode=0o500)
    try:
        assert 'is not writable by this user' in (LocalFileStore(base_dir=root).root_problem() or '')
    finally:
        root.chmod(0o700)


async def test_an_unusable_root_is_named_at_the_run_start_never_to_the_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loose = _loose_root(tmp_path)
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=loose))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        run = await run_tool(capability, BIG)
    messages = _overflow_warnings(caught)
    assert messages[0].startswith('Spills will fail and fall back to their `then` action: the LocalFileStore root')
    assert f'{loose} cannot be created' in messages[0]
    assert 'Spill could not reduce' in messages[1]  # then the spill itself, with its reason
    assert str(loose) not in _model_visible(run.messages)
    assert run.returns()[0].metadata['overflow_action'] == 'truncate'
    # Said once: a second run on the same capability does not repeat the up-front diagnosis.
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter('always')
        await run_tool(capability, BIG, run_id='run-2')
    assert not any(m.startswith('Spills will fail') for m in _overflow_warnings(again))


async def test_no_root_diagnosis_when_nothing_writes_to_the_store(tmp_path: Path) -> None:
    loose = _loose_root(tmp_path)
    capability = OverflowingToolOutput(bands=[Band(over=100, action=Truncate())], store=LocalFileStore(base_dir=loose))
    run = await run_tool(capability, BIG)  # warnings are errors here: none was raised
    assert run.returns()[0].metadata['overflow_action'] == 'truncate'


async def test_every_fallback_is_logged_at_warning_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    capability = OverflowingToolOutput(store=FailingStore())
    caplog.set_level(logging.INFO, logger=LOGGER)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('default')  # Python's own default: a repeated warning is shown once
        for run_id in ('run-1', 'run-2', 'run-3'):
            await run_tool(capability, BIG, run_id=run_id)
    assert len(_overflow_warnings(caught)) == 1
    fallbacks = [r for r in caplog.records if r.levelno == logging.WARNING and 'Spill could not reduce' in r.message]
    assert len(fallbacks) == 3
    assert all('No space left on device' in r.message and 'falling back to Truncate' in r.message for r in fallbacks)


async def test_a_warning_turned_into_an_error_is_not_wrapped_in_another() -> None:
    capability = OverflowingToolOutput(store=FailingStore())
    with pytest.raises(OverflowingToolOutputWarning) as raised:
        await run_tool(capability, BIG)
    message = str(raised.value)
    assert message.startswith('Spill could not reduce the return_value of `big`')
    assert 'OverflowingToolOutput failed' not in message and message.count('Spill could not reduce') == 1


# --- 3. names that match no tool, tool filters and stores checked at construction -------------------------------


def _two_step_agent(capability: OverflowingToolOutput[Any], *tool_names: str) -> Agent[None, str]:
    """An agent with `tool_names` that calls the first one twice, in two steps, then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) < 5:
            return ModelResponse(parts=[ToolCallPart(tool_names[0], {}, tool_call_id=f'c{len(messages)}')])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(respond), capabilities=[capability])
    for name in tool_names:
        agent.tool_plain(name=name)(lambda: 'ok')
    return agent


async def test_a_per_tool_name_no_tool_has_is_warned_about_with_the_closest_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    capability = OverflowingToolOutput(per_tool={'run_test': [Band(over=100, action=Truncate())]})
    agent = _two_step_agent(capability, 'run_tests', 'read_file')
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('go')
    assert _overflow_warnings(caught) == snapshot(
        [
            "OverflowingToolOutput per_tool names 'run_test', but this agent has no tool of that name (did you mean 'run_tests'?); its bands apply to no tool"
        ]
    )  # once per run, not once per step
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


async def test_a_tool_filter_name_no_tool_has_is_warned_about() -> None:
    capability = OverflowingToolOutput(tool_filter=['serch', 'read_file', 'zzz'])
    agent = _two_step_agent(capability, 'search', 'read_file')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await agent.run('go')
    found = _overflow_warnings(caught)
    assert len(found) == 2
    assert "tool_filter names 'serch'" in found[0] and "did you mean 'search'?" in found[0]
    assert "tool_filter names 'zzz'" in found[1] and "its tools are 'read_file', 'search'" in found[1]


async def test_names_that_all_exist_give_no_warning() -> None:
    capability = OverflowingToolOutput(
        per_tool={'search': [Band(over=100, action=Truncate())]}, tool_filter=['search', 'read_file']
    )
    result = await _two_step_agent(capability, 'search', 'read_file').run('go')  # warnings are errors here
    assert result.output == 'done'


@pytest.mark.parametrize(
    ('bad', 'message'),
    [
        (42, r"tool_filter must be 'all', a list of tool names, a metadata dict, or a callable .*; got int 42"),
        (3.5, r'tool_filter must be .*; got float 3.5'),
        (['read_file', 7], r'tool_filter\[1\] must be a tool name \(str\), got int 7'),
        ({1: 'x'}, r'tool_filter as a metadata dict needs str keys, got 1'),
        (b'read_file', r'tool_filter must be .*; got bytes'),
    ],
    ids=repr,
)
def test_a_tool_filter_that_is_no_tool_selector_is_refused_at_construction(bad: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        OverflowingToolOutput(tool_filter=bad)


def test_a_per_tool_key_that_is_no_name_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match=r'per_tool keys must be tool names \(str\), got int 1'):
        OverflowingToolOutput(per_tool={1: []})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    'selector', ['all', 'read_file', ['read_file'], ('read_file',), {'tier': 1}, lambda ctx, td: True], ids=repr
)
def test_every_tool_selector_form_is_accepted(selector: Any) -> None:
    assert OverflowingToolOutput(tool_filter=selector).tool_filter is selector


class SyncStore:
    def write(self, key: str, data: bytes) -> str:
        return key

    def read(self, handle: str) -> bytes:
        return b''


class WriteOnlyStore:
    async def write(self, key: str, data: bytes) -> str:
        return key


@pytest.mark.parametrize(
    ('bad', 'message'),
    [
        (
            '/tmp/x',
            r"store must be a store object, not a path: pass store=LocalFileStore\(base_dir=\.\.\.\); got str '/tmp/x'",
        ),
        (Path('/tmp/x'), r'store must be a store object, not a path'),
        (
            SyncStore(),
            r'store must have `async def write\(key: str, data: bytes\) -> str`.*SyncStore has one that is not',
        ),
        (WriteOnlyStore(), r'store must have `async def read\(handle: str\) -> bytes`.*WriteOnlyStore has none'),
        (42, r'store must have `async def write.*int has none'),
    ],
    ids=repr,
)
def test_a_store_without_async_write_and_read_is_refused_at_construction(bad: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        OverflowingToolOutput(store=bad)


def test_a_store_with_the_two_async_methods_is_accepted() -> None:
    store = MemoryStore()
    assert OverflowingToolOutput(store=store).store is store


# --- 9 (part). Passthrough takes a `then` like every action ------------------------------------------------------


async def test_passthrough_takes_a_then_that_is_never_used() -> None:
    action = Passthrough(then=Truncate())
    capability = OverflowingToolOutput(bands=[Band(over=10, action=action)])
    run = await run_tool(capability, BIG)
    assert run.returned() == BIG  # a Passthrough always succeeds, so its `then` never runs
    with pytest.raises(TypeError, match=r'Passthrough\.then must be an action'):
        Passthrough(then='Truncate')  # type: ignore[arg-type]


def test_passthrough_then_from_a_spec() -> None:
    capability = OverflowingToolOutput.from_spec(bands=[{'over': 10, 'action': {'Passthrough': {'then': 'Truncate'}}}])
    assert capability.bands == [Band(over=10, action=Passthrough(then=Truncate()))]


# --- 10. switching from upstream ---------------------------------------------------------------------------------


def test_upstream_tool_name_constants_are_exported() -> None:
    assert (READ_TOOL_NAME, GREP_TOOL_NAME) == ('read_tool_result', 'grep_tool_result')
    assert {READ_TOOL_NAME, GREP_TOOL_NAME} <= QUERY_TOOL_NAMES == set(build_query_toolset(MemoryStore()).tools)


MIXED = ToolReturn(
    return_value='ok', content=['see the picture ' * 2_000, BinaryContent(b'\x89PNG', media_type='image/png')]
)


@pytest.mark.parametrize(
    'bands',
    [
        [Band(over=10, action=Passthrough())],
        [Band(over=1_000_000, action=Spill())],  # below every threshold
    ],
    ids=['passthrough', 'below-threshold'],
)
async def test_no_multimodal_warning_when_no_reduction_was_asked_for(bands: list[Band]) -> None:
    run = await run_tool(OverflowingToolOutput(bands=bands), lambda: MIXED)  # warnings are errors here
    assert run.returned() == 'ok'
    assert run.user_texts()[0][0] == MIXED.content[0]  # type: ignore[index]


@pytest.mark.parametrize(
    ('action', 'options', 'error', 'message'),
    [
        (Spill, {'timeout': '30'}, TypeError, r'Spill\.timeout must be a positive number of seconds, got str'),
        (Spill, {'timeout': True}, TypeError, r'Spill\.timeout must be a positive number of seconds, got bool'),
        (Spill, {'timeout': math.nan}, ValueError, r'Spill\.timeout must be a positive number of seconds'),
        (Summarize, {'store_timeout': '5'}, TypeError, r'Summarize\.store_timeout must be a positive number'),
        (Summarize, {'max_chunks': '3'}, TypeError, r'Summarize\.max_chunks must be an int, got str'),
        (Summarize, {'max_input_chars': 5_000.0}, TypeError, r'Summarize\.max_input_chars must be an int'),
        (Summarize, {'keep_original': 'no'}, TypeError, r'Summarize\.keep_original must be True or False'),
    ],
    ids=repr,
)
def test_action_numbers_of_the_wrong_type_name_the_field(
    action: type[Any], options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        action(**options)


class CountingRootStore(LocalFileStore):
    """A real `LocalFileStore` that counts its root checks."""

    checks: int = 0

    def root_problem(self) -> str | None:
        CountingRootStore.checks += 1
        return super().root_problem()


async def test_the_root_is_checked_once_a_minute_not_at_every_run_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    CountingRootStore.checks = 0
    root = tmp_path / 'store'
    root.mkdir(mode=0o700)
    capability = OverflowingToolOutput(store=CountingRootStore(base_dir=root))
    for n in range(5):
        await run_tool(capability, 'small', run_id=f'run-{n}')
    assert CountingRootStore.checks == 1  # a thread hop per run start saved
    root.rmdir()
    root.write_text('x')  # the root goes bad: within the minute the run start does not look again...
    await run_tool(capability, 'small', run_id='run-5')  # (warnings are errors here: none was raised)
    monkeypatch.setattr(_checks, 'ROOT_RECHECK_SECONDS', 0.0)  # ...and once the check is older, it names it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await run_tool(capability, 'small', run_id='run-6')
    assert CountingRootStore.checks == 2
    assert any(
        m.startswith('Spills will fail') and f'{root} is not a directory' in m for m in _overflow_warnings(caught)
    )


async def test_aging_gets_the_root_checked_even_when_no_band_spills(tmp_path: Path) -> None:
    loose = _loose_root(tmp_path)
    capability = OverflowingToolOutput(
        bands=[Band(over=100_000, action=Truncate())], store=LocalFileStore(base_dir=loose), aging=Aging()
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        await run_tool(capability, 'small')
    assert any(
        m.startswith('Spills will fail') and f'{loose} cannot be created' in m for m in _overflow_warnings(caught)
    )
