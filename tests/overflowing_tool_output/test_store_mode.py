"""A `base_dir` made with `mkdir` (mode 0755) is made private at construction and spills losslessly; one that cannot be
made private is refused at construction naming the path and the mode; a fallback is reported once, at the user's line.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, StoreRootError

from .._sync_runs import in_thread

LOGGER = 'pydantic_ai_harness.overflowing_tool_output'
LOG = ''.join(f'2026-12-06 12:00:{n % 60:02d} INFO step {n} ok\n' for n in range(4_000)).replace(
    'INFO step 2718 ok', 'ERROR step 2718 FAILED: disk full'
)
"""A log whose one FAILED line a truncation to 5,000 characters would lose."""


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart('read_log', {})])
    if len(returns) == 1:
        handle = returns[0].metadata['overflow_handle']
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'FAILED'})])
    return ModelResponse(parts=[TextPart(str(returns[-1].content))])


def _run(capability: OverflowingToolOutput) -> str:
    agent = Agent(FunctionModel(_model), capabilities=[capability])

    @agent.tool_plain
    def read_log() -> str:
        return LOG

    return in_thread(lambda: agent.run_sync('What failed?').output)


def test_a_base_dir_made_with_mkdir_is_made_private_once_and_spills_losslessly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / 'spills'
    root.mkdir()
    root.chmod(0o755)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert [r.getMessage() for r in caplog.records] == [
        (
            f'LocalFileStore made its root {root} private: its mode was 0755, open to group/other, and is 0700 now '
            '(spilled tool output is readable by its owner only)'
        )
    ]
    LocalFileStore(base_dir=root)  # already private: nothing more to say

    answer = _run(capability)  # warnings are errors here: no fallback warned
    assert '2719| 2026-12-06 12:00:18 ERROR step 2718 FAILED: disk full' in answer
    assert len(caplog.records) == 1


def test_a_root_loosened_after_construction_is_made_private_at_the_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / 'spills'
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root))
    root.mkdir(mode=0o700)
    root.chmod(0o775)  # another process made it, with its umask
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert 'FAILED: disk full' in _run(capability)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert [r.getMessage() for r in caplog.records if 'made its root' in r.getMessage()] == [
        (
            f'LocalFileStore made its root {root} private: its mode was 0775, open to group/other, and is 0700 now '
            '(spilled tool output is readable by its owner only)'
        )
    ]


def test_a_root_that_cannot_be_made_private_is_refused_at_construction(tmp_path: Path) -> None:
    (tmp_path / 'real').mkdir(mode=0o755)
    (tmp_path / 'link').symlink_to(tmp_path / 'real')
    with pytest.raises(StoreRootError) as info:
        LocalFileStore(base_dir=tmp_path / 'link')
    assert str(info.value).startswith(f'LocalFileStore.base_dir: {tmp_path / "link"} (mode 0777) is a symlink')

    (tmp_path / 'file').write_text('x')
    with pytest.raises(StoreRootError, match=r'LocalFileStore\.base_dir: .*/file \(mode 0644\) is not a directory'):
        LocalFileStore(base_dir=tmp_path / 'file')
    assert stat.S_IMODE((tmp_path / 'real').stat().st_mode) == 0o755  # never through the link


@pytest.mark.skipif(os.geteuid() != 0, reason='changing a directory owner needs root')
def test_another_user_s_root_is_refused_at_construction(tmp_path: Path) -> None:
    root = tmp_path / 'foreign'
    root.mkdir()
    root.chmod(0o755)
    os.chown(root, 12345, 12345)
    with pytest.raises(StoreRootError) as info:
        OverflowingToolOutput(store=LocalFileStore(base_dir=root))
    assert str(info.value) == (
        f'LocalFileStore.base_dir: {root} (mode 0755) is owned by uid 12345, not by this user (uid 0), so it cannot '
        'be made private; pass LocalFileStore(base_dir=...) a directory only this user can use (the store creates '
        'it with mode 0700)'
    )
    assert stat.S_IMODE(root.stat().st_mode) == 0o755


FALLBACK = """
import os, tempfile
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

root = os.path.join(tempfile.mkdtemp(dir={temp!r}), 'spills')
store = LocalFileStore(base_dir=root)
open(root, 'w').close()  # the root went bad after construction: a file is in the way
steps = iter([ModelResponse(parts=[ToolCallPart('read_log', {{}})]), ModelResponse(parts=[TextPart('done')])])
agent = Agent(FunctionModel(lambda messages, info: next(steps)), capabilities=[OverflowingToolOutput(store=store)])
agent.tool_plain(lambda: 'ok\\n' * 10_000, name='read_log')
agent.run_sync('go')
"""


def test_a_fallback_is_reported_once_at_the_line_that_runs_the_agent(tmp_path: Path) -> None:
    script = tmp_path / 'app.py'
    script.write_text(textwrap.dedent(FALLBACK.format(temp=str(tmp_path))))
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONWARNINGS'}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, env=env)
    lines = done.stderr.splitlines()
    reports = [line for line in lines if 'OverflowingToolOutputWarning' in line or 'could not reduce' in line]
    [start, spill] = reports  # the run start's diagnosis, then the spill's fallback: each once, nothing logged twice
    assert start.startswith(f'{script}:14: OverflowingToolOutputWarning: Spills will fail and fall back to their ')
    assert spill.startswith(f'{script}:14: OverflowingToolOutputWarning: Spill could not reduce the return_value of ')
