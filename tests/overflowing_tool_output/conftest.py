from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput


@dataclass
class MemoryStore:
    """A custom store with only the two base methods, as a third-party backend would write it."""

    data: dict[str, bytes] = field(default_factory=dict[str, bytes])
    writes: int = 0

    async def write(self, key: str, data: bytes) -> str:
        self.writes += 1
        self.data[key] = data
        return key

    async def read(self, handle: str) -> bytes:
        return self.data[handle]


class FailingStore:
    async def write(self, key: str, data: bytes) -> str:
        raise OSError(28, 'No space left on device')

    async def read(self, handle: str) -> bytes:
        raise KeyError(handle)


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore()


def call_tools_once(*calls: tuple[str, dict[str, Any]]) -> FunctionModel:
    """A scripted model: call the given tools in one step, then answer 'done' (also when streamed)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f'call_{i}') for i, (name, args) in enumerate(calls)]
            )
        return ModelResponse(parts=[TextPart('done')])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        if len(messages) == 1:
            yield {
                i: DeltaToolCall(name, json.dumps(args), tool_call_id=f'call_{i}')
                for i, (name, args) in enumerate(calls)
            }
        else:
            yield 'done'

    return FunctionModel(respond, stream_function=stream)


@dataclass
class Run:
    messages: list[ModelMessage]

    def returns(self) -> list[ToolReturnPart]:
        return [
            p for m in self.messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
        ]

    def returned(self, index: int = 0) -> Any:
        return self.returns()[index].content

    def user_texts(self) -> list[Any]:
        return [
            p.content
            for m in self.messages[1:]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        ]


async def run_tool(
    capability: OverflowingToolOutput[Any] | None,
    value: Any | Callable[[], Any],
    *,
    tool_name: str = 'big',
    extra_tools: Sequence[Callable[..., Any]] = (),
    metadata: dict[str, Any] | None = None,
    run_id: str = 'run-1',
) -> Run:
    """Run an agent whose only step calls `tool_name`, which returns `value`."""
    agent = Agent(call_tools_once((tool_name, {})), capabilities=[capability] if capability else [])

    def tool() -> Any:
        return value() if callable(value) else value

    agent.tool_plain(name=tool_name, metadata=metadata)(tool)
    for extra in extra_tools:
        agent.tool_plain(extra)
    result = await agent.run('go', run_id=run_id)
    return Run(result.all_messages())
