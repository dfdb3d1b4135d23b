"""Where the clash with upstream `pydantic-ai-harness` is reported in a process: the capability's construction and
the query tools warn too (once per process, at the first place that runs), filed under the caller's code.

Upstream is "installed" here as pip records an installed distribution: a `pydantic_ai_harness-0.62.0.dist-info`
directory on `sys.path` (tests/test_upstream_clash.py installs the real wheels into throwaway venvs).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness import _clash
from pydantic_ai_harness._clash import PackageClashWarning
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from ._sync_runs import in_thread


@pytest.fixture
def upstream_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / 'site'
    (site / 'pydantic_ai_harness-0.62.0.dist-info').mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(_clash, '_reported', [])
    _clash.check_clash.cache_clear()
    yield
    _clash.check_clash.cache_clear()


def test_the_capability_s_construction_warns_at_the_line_that_constructs_it(upstream_installed: None) -> None:
    line = sys._getframe().f_lineno + 2
    with pytest.warns(PackageClashWarning) as caught:
        OverflowingToolOutput()
    [warning] = caught.list
    assert (warning.filename, warning.lineno) == (__file__, line)
    message = str(warning.message)
    assert 'pydantic-ai-harness 0.62.0 (the official harness) and pydantic-ai-harness-context' in message
    assert 'pydantic-ai-harness-context was installed last' in message

    with warnings.catch_warnings():
        warnings.simplefilter('error')
        OverflowingToolOutput()  # once per process


def _reader(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart('read_log', {})])
    if len(returns) == 1:
        handle = returns[0].metadata['overflow_handle']
        return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle, 'limit': 1})])
    return ModelResponse(parts=[TextPart('done')])


def test_the_query_tools_warn_at_the_line_that_runs_the_agent(upstream_installed: None, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'spills'))
    _clash._reported.clear()  # the construction reported it, unseen: the query tool is the next place to run
    agent = Agent(FunctionModel(_reader), capabilities=[capability])

    @agent.tool_plain
    def read_log() -> str:
        return 'ok\n' * 10_000

    def run() -> None:
        agent.run_sync('Read the log.')

    line = run.__code__.co_firstlineno + 1
    with pytest.warns(PackageClashWarning) as caught:
        in_thread(run)
    [warning] = caught.list
    assert (warning.filename, warning.lineno) == (__file__, line)
