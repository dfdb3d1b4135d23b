"""Shared pieces of the reliability suite: scripted models, mounts that work for root, message helpers."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = (
    'Steps',
    'chattr_immutable',
    'mounted_tmpfs',
    'one_call_model',
    'parse_read_lines',
    'remount_read_only',
    'run_one_tool',
    'tool_returns',
)


def tool_returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def parse_read_lines(answer: str) -> list[str]:
    """The payload lines of a `read_tool_result` answer (`  12| text` rows), without their numbers."""
    lines: list[str] = []
    for row in answer.splitlines()[1:-1]:
        number, sep, text = row.partition('| ')
        assert sep and number.strip().isdigit(), row
        lines.append(text)
    return lines


class Steps:
    """A FunctionModel that sends one scripted list of tool calls per step and records what came back.

    `script(previous_answers) -> calls | None`: the next step's calls (name, args, where args may be a raw
    JSON string), or `None` to finish with 'done'. Every step's wall-clock start is recorded, so the time a
    tool call took (between the model sending it and seeing its answer) can be measured.
    """

    def __init__(self, script: Callable[[list[Any]], Sequence[tuple[str, dict[str, Any] | str]] | None]) -> None:
        self.script = script
        self.answers: list[list[Any]] = []
        self.step_started: list[float] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.step_started.append(time.perf_counter())
        last = messages[-1]
        answers: list[Any] = []
        if len(messages) > 1 and isinstance(last, ModelRequest):
            answers = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
            self.answers.append(answers)
        calls = self.script(answers)
        if not calls:
            return ModelResponse(parts=[TextPart('done')])
        step = len(self.step_started)
        return ModelResponse(
            parts=[ToolCallPart(name, args, tool_call_id=f's{step}_{i}') for i, (name, args) in enumerate(calls)]
        )

    def durations(self) -> list[float]:
        """Seconds from each step's calls to the next model request (the tool calls plus framework overhead)."""
        return [b - a for a, b in zip(self.step_started, self.step_started[1:])]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


@contextlib.contextmanager
def mounted_tmpfs(path: Path, *, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path` (mode 0700, as the store root demands); skips where mount is refused."""
    if shutil.which('mount') is None:
        pytest.skip('no mount command: cannot build a small or read-only filesystem for this test')
    path.mkdir(parents=True, exist_ok=True)
    result = _run('mount', '-t', 'tmpfs', '-o', f'size={size},mode=0700', 'tmpfs', str(path))
    if result.returncode != 0:
        pytest.skip(f'mounting a tmpfs is not permitted here ({result.stderr.strip()})')
    try:
        yield path
    finally:
        if _run('umount', str(path)).returncode != 0:
            _run('umount', '-l', str(path))


def remount_read_only(path: Path) -> None:
    result = _run('mount', '-o', 'remount,ro', str(path))
    assert result.returncode == 0, result.stderr


@contextlib.contextmanager
def chattr_immutable(path: Path) -> Iterator[Path]:
    """`chattr +i path` for the duration (refuses writes even to root); skips where chattr is unavailable."""
    if shutil.which('chattr') is None:
        pytest.skip('no chattr command: cannot make a directory unwritable for root')
    result = _run('chattr', '+i', str(path))
    if result.returncode != 0:
        pytest.skip(f'chattr +i is not supported here ({result.stderr.strip()})')
    try:
        yield path
    finally:
        _run('chattr', '-i', str(path))
        assert os.access(path, os.W_OK)


def one_call_model(tool_name: str = 'big', args: dict[str, Any] | str | None = None) -> FunctionModel:
    """Call `tool_name` once, then answer 'done'."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool_name, args or {}, tool_call_id='call_0')])
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


async def run_one_tool(capability: Any, value: Any, *, run_id: str | None = None) -> list[ModelMessage]:
    """A real agent run whose model calls the tool `big` (returning `value`) once, then answers 'done'."""
    from pydantic_ai import Agent

    agent = Agent(one_call_model(), capabilities=[capability])

    @agent.tool_plain
    def big() -> Any:
        return value

    result = await agent.run('go', run_id=run_id)
    assert result.output == 'done'
    return result.all_messages()
