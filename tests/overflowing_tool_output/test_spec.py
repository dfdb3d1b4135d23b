from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Passthrough,
    Spill,
    Summarize,
    Truncate,
    TruncationStrategy,
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
