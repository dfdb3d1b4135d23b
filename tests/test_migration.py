"""The migration guide's claims about upstream `pydantic-ai-harness` 0.62, checked against upstream itself.

docs/migration.md runs this project's side of every claim as doc examples; here upstream's side runs on
upstream's real 0.62.0 wheel, installed alone in an isolated venv (see tests/test_upstream_clash.py), on this
environment's pydantic-ai (upstream pins 2.62.0; what is checked here does not depend on it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from ._sync_runs import in_thread
from .test_upstream_clash import Venv, fetch_wheels, make_venv

UPSTREAM_FACTS = """
import re
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from pydantic_ai_harness import ToolOutputLimits
from pydantic_ai_harness.tool_output_limits import (
    READ_TOOL_RESULT_KIND, Band, LocalFileStore, Spill, Truncate, _capability, indented_json, json_lines,
)

# Defaults that changed.
assert Truncate().max_chars == 4_000
assert Spill().then is None
assert ToolOutputLimits().id == 'tool_output_limits'
assert ToolOutputLimits().bands == [Band(over=10_000, action=Spill(then=Truncate()))]
assert _capability.logger.name.startswith('pydantic_ai_harness.tool_output_limits')
Truncate(keep_tail_lines=2)  # the same field here
# What has no equivalent here.
ToolOutputLimits(serializer=indented_json)
ToolOutputLimits(serializer=json_lines)
assert READ_TOOL_RESULT_KIND.id == 'tool_output_limits.read_tool_result'

answers, handles = [], []


def model(messages, info):
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart('read_log', {}, tool_call_id='call_1')])
    if len(returns) == 1:
        handles.append(re.search(r"stored to handle '([^']+)'", returns[0].model_response_str()).group(1))
        return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handles[-1], 'offset': 200, 'limit': 2})])
    answers.append(returns[-1].model_response_str())
    return ModelResponse(parts=[TextPart('done')])


def run(*capabilities):
    answers.clear()
    handles.clear()
    agent = Agent(FunctionModel(model), capabilities=list(capabilities))
    agent.tool_plain(lambda: ''.join(f'entry {n}\\n' for n in range(1, 2_001)), name='read_log')
    result = agent.run_sync('Read line 200.')
    # Offsets: `offset=200` skips 200 lines.
    assert answers[0].splitlines()[1:3] == ['entry 201', 'entry 202'], answers
    return result.run_id


# Handles: the key in a LocalFileStore, the absolute path in the workspace, which upstream git-ignores.
run_id = run(ToolOutputLimits(store=LocalFileStore(base_dir=Path(tempfile.mkdtemp()))))
assert handles == [f'{run_id}/call_1.0'], handles
project = Path(tempfile.mkdtemp()).resolve()
run_id = run(LocalWorkspace(project), ToolOutputLimits())
assert handles == [f'{project}/.pydantic-ai-harness/tool-output/{run_id}/call_1.0'], handles
assert (project / '.pydantic-ai-harness' / '.gitignore').read_text() == '*\\n'

# The default store: a run that can spill and has no workspace fails, naming LocalFileStore.
try:
    run(ToolOutputLimits())
except Exception as error:
    assert 'LocalFileStore' in str(error), error
else:
    raise AssertionError('ran without a workspace')
print('upstream 0.62 is as the guide says')
"""


@pytest.fixture(scope='module')
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A venv holding upstream 0.62.0 and not this project."""
    wheels = fetch_wheels(tmp_path_factory)
    venv = make_venv(tmp_path_factory.mktemp('upstream-venv') / 'venv', wheels)
    venv.install(wheels.upstream)
    return venv


def test_the_guide_s_upstream_column_is_upstream_0_62_s_behaviour(upstream: Venv) -> None:
    checked = upstream.run(UPSTREAM_FACTS)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == 'upstream 0.62 is as the guide says\n'


def test_the_guide_covers_each_upstream_name_and_default() -> None:
    guide = (Path(__file__).resolve().parent.parent / 'docs' / 'migration.md').read_text(encoding='utf-8')
    for text in (
        '`ToolOutputLimits`',
        '`tool_output_limits`',
        '| `Truncate().max_chars` | 4,000 | 5,000 |',
        "`'tool_output_limits'` | `'overflowing_tool_output'`",
        '`pydantic_ai_harness.tool_output_limits` | `pydantic_ai_harness.overflowing_tool_output`',
        '`.pydantic-ai-harness/tool-output/`, git-ignored | `.overflow/`, git-ignored the same way',
        '`<run id>/<tool call id>.<retry>`',
        '`read_tool_result(offset=N)` | skips N lines: starts at line N + 1 | starts at line N',
        '| `Truncate(keep_tail_lines=)` | the same field',
        '`serializer=indented_json` / `json_lines`',
        '`READ_TOOL_RESULT_KIND`',
    ):
        assert text in guide, text


def test_upstream_s_top_level_names_fail_naming_the_replacement() -> None:
    with pytest.raises(ImportError, match=r'this is pydantic-ai-harness-context, where the same capability is `Over'):
        from pydantic_ai_harness import ToolOutputLimits  # noqa: F401
    with pytest.raises(ImportError, match=r'`import pydantic_ai_harness\.overflowing_tool_output`'):
        from pydantic_ai_harness import tool_output_limits  # noqa: F401
    import pydantic_ai_harness

    assert not hasattr(pydantic_ai_harness, 'NoSuchName')


UPSTREAM_HISTORIES = """
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from pydantic_ai_harness import ToolOutputLimits
from pydantic_ai_harness.tool_output_limits import LocalFileStore

LOG = ''.join(f'2026-12-06 12:00:{{n % 60:02d}} INFO step {{n}} ok\\n' for n in range(1, 4_001)).replace(
    'INFO step 2719 ok', 'ERROR step 2719 FAILED: disk full'
)


def model(messages, info):
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('read_log', {{}}, tool_call_id='call_1')])
    return ModelResponse(parts=[TextPart('stored')])


def history(*capabilities):
    agent = Agent(FunctionModel(model), capabilities=list(capabilities))
    agent.tool_plain(lambda: LOG, name='read_log')
    return agent.run_sync('What failed?').all_messages_json()


Path({out!r}, 'local.json').write_bytes(history(ToolOutputLimits(store=LocalFileStore(base_dir=Path({base!r})))))
Path({out!r}, 'workspace.json').write_bytes(history(LocalWorkspace(Path({project!r})), ToolOutputLimits()))
"""


def _continue(history: list[ModelMessage], *capabilities: Any) -> list[str]:
    """Continue an upstream history here: the model reads line 2719 and greps FAILED in the stored result."""
    [handle] = [p.metadata['overflow_handle'] for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages[len(history) :] for p in m.parts if isinstance(p, ToolReturnPart)]
        answers.extend(str(p.content) for p in returns[len(answers) :])
        if not returns:
            return ModelResponse(
                parts=[
                    ToolCallPart('read_tool_result', {'handle': handle, 'offset': 2719, 'limit': 1}),
                    ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'FAILED', 'context_lines': 0}),
                ]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=list(capabilities))
    in_thread(lambda: agent.run_sync('Go on.', message_history=history))
    return answers


def test_a_history_saved_under_upstream_reads_its_spills_here(upstream: Venv, tmp_path: Path) -> None:
    """docs/migration.md, "Histories saved under upstream": upstream's spills (in a LocalFileStore root, and in the
    workspace) are read back by this project's query tools and CLI, the FAILED line included."""
    base, project, out = tmp_path / 'spills', tmp_path / 'project', tmp_path / 'histories'
    project.mkdir()
    out.mkdir()
    made = upstream.run(UPSTREAM_HISTORIES.format(base=str(base), project=str(project), out=str(out)))
    assert made.returncode == 0, made.stderr
    local = ModelMessagesTypeAdapter.validate_json((out / 'local.json').read_bytes())
    workspace = ModelMessagesTypeAdapter.validate_json((out / 'workspace.json').read_bytes())

    for answers in (
        _continue(local, OverflowingToolOutput(store=LocalFileStore(base_dir=base))),
        _continue(workspace, LocalWorkspace(project), OverflowingToolOutput()),
    ):
        [read, grep] = answers
        assert '2719| 2026-12-06 12:00:19 ERROR step 2719 FAILED: disk full' in read
        assert '>2719| 2026-12-06 12:00:19 ERROR step 2719 FAILED: disk full' in grep

    [handle] = [p.metadata['overflow_handle'] for m in local for p in m.parts if isinstance(p, ToolReturnPart)]
    shown = subprocess.run(
        [
            sys.executable,
            '-m',
            'pydantic_ai_harness.overflowing_tool_output',
            '--root',
            str(base),
            'show',
            handle,
            '--lines',
            '2719:2719',
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (shown.returncode, shown.stdout) == (0, '2026-12-06 12:00:19 ERROR step 2719 FAILED: disk full\n')
    assert sorted(p.name for p in base.rglob('*') if p.is_file()) == ['call_1.0']  # read, never written beside
