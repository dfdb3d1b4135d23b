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


def _installed(site: Path, direct_url: str | None) -> _clash.Distribution:
    dist_info = site / 'pydantic_ai_harness_context-0.1.0.dist-info'
    dist_info.mkdir(parents=True)
    if direct_url is not None:
        (dist_info / 'direct_url.json').write_text(direct_url)
    return _clash.Distribution('pydantic-ai-harness-context', '0.1.0', str(dist_info))


def test_the_fix_installs_this_project_again_the_way_pip_recorded_it(tmp_path: Path) -> None:
    """PEP 610's direct_url.json: a wheel, a checkout (editable or not), a VCS URL; none: a package index."""
    wheel = tmp_path / 'pydantic_ai_harness_context-0.1.0-py3-none-any.whl'
    wheel.write_bytes(b'')
    python = sys.executable
    cases = {
        f'{{"url": "file://{wheel}", "archive_info": {{}}}}': str(wheel),
        f'{{"url": "file://{tmp_path}", "dir_info": {{"editable": true}}}}': f'-e {tmp_path}',
        f'{{"url": "file://{tmp_path}", "dir_info": {{}}}}': str(tmp_path),
        '{"url": "https://example.org/x.git", "vcs_info": {"vcs": "git", "commit_id": "abc"}}': (
            "'pydantic-ai-harness-context @ git+https://example.org/x.git@abc'"
        ),
        '{"url": "file:///gone/x.whl", "archive_info": {}}': (
            "'<the wheel or checkout pydantic-ai-harness-context was installed from; /gone/x.whl is gone>'"
        ),
        None: 'pydantic-ai-harness-context==0.1.0',
    }
    for n, (direct_url, argument) in enumerate(cases.items()):
        ours = _installed(tmp_path / f'site-{n}', direct_url)
        assert _clash.fix_command(ours) == (
            f'{python} -m pip uninstall -y pydantic-ai-harness pydantic-ai-harness-context && '
            f'{python} -m pip install {argument}'
        )


def test_from_a_checkout_on_the_path_the_fix_uninstalls_upstream_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, 'path', [str(tmp_path)])  # no dist-info of this project anywhere on the path
    assert _clash.fix_command() == f'{sys.executable} -m pip uninstall -y pydantic-ai-harness'
