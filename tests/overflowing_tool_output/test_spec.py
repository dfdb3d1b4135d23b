from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Passthrough,
    SecretRedaction,
    Spill,
    StepBudget,
    Summarize,
    Truncate,
    TruncationStrategy,
    WorkspaceSpill,
)

SPEC_YAML = """\
model: test
capabilities:
  - OverflowingToolOutput:
      bands:
        - over: 100000
          action: Spill
        - over: 20000
          action:
            Summarize:
              model: test
              then: {Spill: {then: Truncate}}
        - over: 5000
          action: {Truncate: {strategy: tail, max_chars: 4000}}
      per_tool:
        read_file:
          - over: 8000
            action: {Truncate: {strategy: head}}
        ping: []
      tool_filter: [read_file, run_shell]
      over_tokens: true
      strip_ansi: true
      store: {base_dir: STORE_DIR, cleanup_after: 6h}
"""


def _capability(agent: Agent[Any, Any]) -> OverflowingToolOutput[Any]:
    found: list[OverflowingToolOutput[Any]] = []
    agent.root_capability.apply(lambda c: found.append(c) if isinstance(c, OverflowingToolOutput) else None)
    [capability] = found
    return capability


def test_from_file_loads_bands_as_data(tmp_path: Path) -> None:
    spec = tmp_path / 'agent.yaml'
    spec.write_text(SPEC_YAML.replace('STORE_DIR', str(tmp_path / 'spills')))
    agent = Agent.from_file(spec, custom_capability_types=[OverflowingToolOutput])
    capability = _capability(agent)
    assert capability.bands == [
        Band(over=100_000, action=Spill()),
        Band(over=20_000, action=Summarize(model='test', then=Spill(then=Truncate()))),
        Band(over=5_000, action=Truncate(strategy=TruncationStrategy.tail, max_chars=4_000)),
    ]
    assert capability.per_tool == {
        'read_file': [Band(over=8_000, action=Truncate(strategy=TruncationStrategy.head))],
        'ping': [],
    }
    assert capability.tool_filter == ['read_file', 'run_shell']
    assert capability.over_tokens and capability.strip_ansi
    assert isinstance(capability.store, LocalFileStore)
    assert capability.store.cleanup_after == timedelta(hours=6)


def test_from_spec_with_a_dict_and_defaults() -> None:
    agent = Agent.from_spec(
        {'model': 'test', 'capabilities': ['OverflowingToolOutput']}, custom_capability_types=[OverflowingToolOutput]
    )
    assert _capability(agent).bands == [Band(over=10_000, action=Spill(then=Truncate()))]


def test_spec_action_names_are_case_insensitive_and_passthrough_works() -> None:
    capability = OverflowingToolOutput.from_spec(bands=[{'over': 1, 'action': 'passthrough'}])
    assert capability.bands == [Band(over=1, action=Passthrough())]


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        (
            {'bands': [{'over': 10, 'action': {'Truncate': {'max_chars': 5}}}]},
            r'bands\[0\]\.action\.Truncate: .*at least 200',
        ),
        ({'bands': [{'over': -1, 'action': 'Spill'}]}, r'bands\[0\]\.over: Band.over must not be negative'),
        ({'bands': [{'over': 1, 'action': 'Squash'}]}, r"bands\[0\]\.action: unknown action 'Squash'"),
        (
            {'bands': [{'over': 1, 'action': {'Truncate': {'size': 3}}}]},
            r'bands\[0\]\.action\.Truncate\.size: unknown field',
        ),
        ({'bands': [{'over': 1}]}, r'bands\[0\]\.action: missing'),
        ({'bands': [{'over': 1, 'action': 'Spill', 'when': 'x'}]}, r'bands\[0\]\.when: unknown field'),
        (
            {'bands': [{'over': 1, 'action': {'Spill': {'then': 'Nope'}}}]},
            r"bands\[0\]\.action\.Spill\.then: unknown action 'Nope'",
        ),
        (
            {'bands': [{'over': 1, 'action': {'Summarize': {'summarize': 'x'}}}]},
            r'Summarize\.summarize: unknown field \(a callable',
        ),
        ({'bands': 'Spill'}, r'bands: expected a list of bands'),
        ({'per_tool': {'ls': [{'over': 1, 'action': 7}]}}, r'per_tool\.ls\[0\]\.action: expected an action name'),
        ({'store': {'cleanup_after': 'soon'}}, r'store\.cleanup_after: expected seconds or a duration'),
        ({'store': {'path': '/tmp'}}, r'store\.path: unknown field'),
    ],
)
def test_a_wrong_spec_names_the_bad_field(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OverflowingToolOutput.from_spec(**options)


def test_a_wrong_spec_through_agent_from_spec_names_the_field() -> None:
    spec = {'model': 'test', 'capabilities': [{'OverflowingToolOutput': {'bands': [{'over': 1, 'action': 'Squash'}]}}]}
    with pytest.raises(ValueError, match=r"bands\[0\]\.action: unknown action 'Squash'"):
        Agent.from_spec(spec, custom_capability_types=[OverflowingToolOutput])


def test_json_schema_with_the_capability_is_generated() -> None:
    from pydantic_ai.agent.spec import AgentSpec

    schema = AgentSpec.model_json_schema_with_capabilities(custom_capability_types=[OverflowingToolOutput])
    assert 'OverflowingToolOutput' in str(schema)


def test_a_yaml_spec_takes_passthrough_then_and_cleanup_after_in_seconds(tmp_path: Path) -> None:
    spec = tmp_path / 'agent.yaml'
    spec.write_text(f"""\
model: test
capabilities:
  - OverflowingToolOutput:
      bands:
        - over: 1000
          action: {{Passthrough: {{then: Truncate}}}}
      store: {{base_dir: {tmp_path / 'spills'}, cleanup_after: 21600}}
""")
    capability = _capability(Agent.from_file(spec, custom_capability_types=[OverflowingToolOutput]))
    assert capability.bands == [Band(over=1_000, action=Passthrough(then=Truncate()))]
    assert isinstance(capability.store, LocalFileStore)
    assert capability.store.cleanup_after == timedelta(hours=6)


def _two_calls_then_done(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """First step: call `a` and `b` in parallel; then finish."""
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('a', {}, tool_call_id='c1'), ToolCallPart('b', {}, tool_call_id='c2')])
    return ModelResponse(parts=[TextPart('done')])


SECRET_YAML = """\
model: test
capabilities:
  - OverflowingToolOutput:
      store: {base_dir: STORE_DIR}
      workspace: false
      redact_secrets:
        preset: none
        patterns: {Ticket Key: 'TKT-[0-9A-F]{16}'}
        keep_original_in: {base_dir: ORIGINALS_DIR}
      step_budget: {max_size: 12000, action: {Spill: {then: Truncate}}}
"""


@pytest.mark.anyio
async def test_a_yaml_spec_sets_workspace_secrets_and_step_budget(tmp_path: Path) -> None:
    """The capability's opt-ins load from YAML too, and a run honours each of them."""
    spec = tmp_path / 'agent.yaml'
    spec.write_text(
        SECRET_YAML.replace('STORE_DIR', str(tmp_path / 'spills')).replace('ORIGINALS_DIR', str(tmp_path / 'kept'))
    )
    agent = Agent.from_file(spec, custom_capability_types=[OverflowingToolOutput])
    capability = _capability(agent)
    assert capability.workspace is None
    assert capability.redact_secrets is not None and capability.redact_secrets.preset == 'none'
    assert isinstance(capability.redact_secrets.keep_original_in, LocalFileStore)
    assert capability.step_budget == StepBudget(max_size=12_000, action=Spill(then=Truncate()))

    @agent.tool_plain
    def a() -> str:
        return 'ticket TKT-0123456789ABCDEF was filed\n' + 'x' * 7_000

    @agent.tool_plain
    def b() -> str:
        return 'y' * 7_000

    result = await agent.run('go', model=FunctionModel(_two_calls_then_done))
    returns = {
        p.tool_name: p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    shown = str(returns['a'].content)
    # Both returns fit the bands (10,000) but not the step (14,000 > 12,000): the larger one, `a`, is spilled.
    assert 'TKT-0123456789ABCDEF' not in shown and '[secret withheld: Ticket Key]' in shown
    assert returns['a'].metadata is not None and 'overflow_handle' in returns['a'].metadata
    assert str(returns['b'].content) == 'y' * 7_000
    assert returns['a'].metadata.get('secrets_original_handle')


def test_workspace_and_step_budget_forms() -> None:
    assert OverflowingToolOutput.from_spec().workspace == WorkspaceSpill()
    assert OverflowingToolOutput.from_spec(
        workspace={'directory': '.cache/spills', 'cleanup_after': '2d'}
    ).workspace == (WorkspaceSpill(directory='.cache/spills', cleanup_after=timedelta(days=2)))
    assert OverflowingToolOutput.from_spec(step_budget=40_000).step_budget == StepBudget(max_size=40_000)
    assert OverflowingToolOutput.from_spec(redact_secrets=True).redact_secrets == SecretRedaction()


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'workspace': {'directory': '../out'}}, r'workspace: '),
        ({'workspace': {'dir': 'x'}}, r'workspace\.dir: unknown field; expected one of cleanup_after, directory'),
        ({'workspace': 'yes'}, r'workspace: expected true, false or a mapping'),
        ({'workspace': {'cleanup_after': 0}}, r'workspace\.cleanup_after: expected seconds or a duration'),
        ({'redact_secrets': {'rules': {}}}, r'redact_secrets\.rules: unknown field'),
        ({'redact_secrets': {'patterns': ['x']}}, r'redact_secrets\.patterns: expected a mapping'),
        ({'redact_secrets': {'keep_original_in': {'path': 'x'}}}, r'redact_secrets\.keep_original_in\.path: unknown'),
        ({'step_budget': 0}, r'step_budget: step_budget\.max_size must be a positive int'),
        ({'step_budget': {'size': 5}}, r'step_budget\.size: unknown field'),
        ({'step_budget': {'action': 'Spill'}}, r'step_budget\.max_size: missing'),
        ({'step_budget': {'max_size': 5, 'action': 'Squash'}}, r"step_budget\.action: unknown action 'Squash'"),
        ({'step_budget': 'big'}, r'step_budget: expected a size'),
        ({'store': {'RedisStore': {}}}, r'store\.RedisStore\.url: missing'),
        (
            {'store': {'RedisStore': {'url': 'redis://x', 'db': 1}}},
            r'store\.RedisStore\.db: unknown field; RedisStore takes',
        ),
        ({'store': {'ObjectStore': {'url': 'nope://bucket'}}}, r'store\.ObjectStore\.url: obstore could not open'),
        ({'store': {'LocalFileStore': {'base_dir': 3}}}, r'store\.LocalFileStore\.base_dir: expected a directory path'),
    ],
)
def test_a_wrong_opt_in_spec_names_the_bad_field(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OverflowingToolOutput.from_spec(**options)
