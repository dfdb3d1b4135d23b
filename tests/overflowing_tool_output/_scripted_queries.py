"""A scripted model for query-tool runs: a first step of tool calls, then one query call per step, built from the
handles the model was shown; it records every answer."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

RUN_ID = '019adc3e-8f21-7c4b-9a6e-5d0f2b7c8e13'
"""A uuid7, the shape of pydantic-ai's default run id."""

Call = tuple[str, dict[str, Any]]


@dataclass
class Script:
    """A scripted model: the spill step, then one query call per step built from the handles shown."""

    first: list[Call]
    """The calls of the first step."""

    queries: Callable[[dict[str, str]], list[Call]]
    """The query calls, from the handle of each tool's spill."""

    shown: list[str] = field(default_factory=list[str])
    """Every tool return (or retry prompt) the model was shown, in order."""

    handles: dict[str, str] = field(default_factory=dict[str, str])
    """The handle of each tool's spill, by tool name."""

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            last = messages[-1]
            if isinstance(last, ModelRequest):
                for part in last.parts:
                    if isinstance(part, ToolReturnPart):
                        self.record(part)
                        if isinstance(part.metadata, dict) and 'overflow_handle' in part.metadata:
                            self.handles[part.tool_name] = part.metadata['overflow_handle']
                    elif isinstance(part, RetryPromptPart):
                        self.record(part)
            step = sum(isinstance(message, ModelResponse) for message in messages[self.steps_from(messages) :])
            calls = [self.first] if self.first else []
            calls += [[call] for call in self.queries(self.handles)] if self.handles or not self.first else []
            if step >= len(calls):
                return ModelResponse(parts=[TextPart('done')])
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f'call_{step}_{i}')
                    for i, (name, args) in enumerate(calls[step])
                ]
            )

        return FunctionModel(respond)

    def record(self, part: ToolReturnPart | RetryPromptPart) -> None:
        """Keep what the model was shown of `part`."""
        self.shown.append(str(part.content) if isinstance(part, ToolReturnPart) else part.model_response())

    def steps_from(self, messages: list[ModelMessage]) -> int:
        """The index of the message the script's steps are counted from: the last user prompt."""
        return max(
            i
            for i, message in enumerate(messages)
            if isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)
        )


def call_arguments(call: str) -> dict[str, Any]:
    """The keyword arguments of a call an answer names, exactly as it writes them."""
    node = ast.parse(call, mode='eval').body
    assert isinstance(node, ast.Call) and not node.args
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords if keyword.arg}
