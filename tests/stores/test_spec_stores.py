"""Fleet stores built from an agent spec: a YAML file names the store and its URL, and a run spills into it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

from .conftest import RedisServer, S3Server

pytestmark = pytest.mark.anyio

LOG = ''.join(f'{i:05d} INFO step {i}\n' for i in range(3_000)) + 'ERROR disk full on /var\n'


def _spill_then_grep(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the tool, grep its spill for ERROR, then answer with what grep said."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart('logs', {}, tool_call_id='call_1')])
    if returns and returns[0].tool_name == 'logs':
        handle = returns[0].metadata['overflow_handle']
        return ModelResponse(parts=[ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'ERROR'})])
    return ModelResponse(parts=[TextPart(str(returns[0].content))])


def _capability(agent: Agent[Any, Any]) -> OverflowingToolOutput[Any]:
    found: list[OverflowingToolOutput[Any]] = []
    agent.root_capability.apply(lambda c: found.append(c) if isinstance(c, OverflowingToolOutput) else None)
    return found[0]


async def _run(spec_text: str, tmp_path: Path) -> tuple[str, OverflowingToolOutput[Any]]:
    spec = tmp_path / 'agent.yaml'
    spec.write_text(spec_text)
    agent = Agent.from_file(spec, custom_capability_types=[OverflowingToolOutput])
    agent.tool_plain(name='logs')(lambda: LOG)
    result = await agent.run('find the error', model=FunctionModel(_spill_then_grep))
    return result.output, _capability(agent)


async def test_a_redis_store_from_a_yaml_spec(redis_server: RedisServer, tmp_path: Path) -> None:
    output, capability = await _run(
        f"""\
model: test
capabilities:
  - OverflowingToolOutput:
      workspace: false
      store:
        RedisStore: {{url: '{redis_server.url}', namespace: spec-test, cleanup_after: 6h}}
""",
        tmp_path,
    )
    assert '3001| ERROR disk full on /var' in output
    from pydantic_ai_harness.overflowing_tool_output.stores import RedisStore

    assert isinstance(capability.store, RedisStore) and capability.store.namespace == 'spec-test'
    await capability.store.aclose()


async def test_an_object_store_from_a_yaml_spec(s3_server: S3Server, tmp_path: Path) -> None:
    output, capability = await _run(
        f"""\
model: test
capabilities:
  - OverflowingToolOutput:
      workspace: false
      store:
        ObjectStore:
          url: s3://{s3_server.bucket}
          config: {{endpoint: '{s3_server.endpoint}', region: us-east-1, access_key_id: testing,
                    secret_access_key: testing, virtual_hosted_style_request: false}}
          client_options: {{allow_http: true}}
          prefix: spec-test
""",
        tmp_path,
    )
    assert '3001| ERROR disk full on /var' in output
    from pydantic_ai_harness.overflowing_tool_output.stores import ObjectStore

    assert isinstance(capability.store, ObjectStore) and capability.store.prefix == 'spec-test'
