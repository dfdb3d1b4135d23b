"""The query-tool script of `_scripted_queries`, for one run whose tools change on the way: once a return stores an
image or a PDF, the view tool is offered, and pydantic-ai tells the model so in a request part of its own (which
`Script` would take for a new user prompt). Steps are counted over the whole run instead."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from .._scripted_queries import Script

__all__ = ('RunScript',)


@dataclass
class RunScript(Script):
    """`Script`, its steps counted from the start of the run; the files each answer held are kept too."""

    files: list[list[BinaryContent]] = field(default_factory=list[list[BinaryContent]])
    """The files of each answer in `shown`, in order (empty for a text answer)."""

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            last = messages[-1]
            if isinstance(last, ModelRequest):
                for part in last.parts:
                    if isinstance(part, ToolReturnPart):
                        content: object = part.content
                        items: list[object] = list(content) if isinstance(content, list) else [content]
                        self.shown.append('\n'.join(str(item) for item in items if not isinstance(item, BinaryContent)))
                        self.files.append([item for item in items if isinstance(item, BinaryContent)])
                        if isinstance(part.metadata, dict) and 'overflow_handle' in part.metadata:
                            self.handles[part.tool_name] = part.metadata['overflow_handle']
                    elif isinstance(part, RetryPromptPart):
                        self.shown.append(part.model_response())
                        self.files.append([])
            step = sum(isinstance(message, ModelResponse) for message in messages)
            calls = [self.first, *([call] for call in (self.queries(self.handles) if self.handles else []))]
            if step >= len(calls):
                return ModelResponse(parts=[TextPart('done')])
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f'call_{step}_{i}')
                    for i, (name, args) in enumerate(calls[step])
                ]
            )

        return FunctionModel(respond)
