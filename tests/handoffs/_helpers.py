"""Builders and a compact describer for handoff tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def assistant(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def describe_part(part: Any) -> str:
    if isinstance(part, UserPromptPart | SystemPromptPart | TextPart | ThinkingPart):
        return f'{part.part_kind}: {part.content}'
    if isinstance(part, BaseToolCallPart):
        return f'{type(part).__name__}: {part.tool_name}({part.args_as_json_str()}) [{part.tool_call_id}]'
    if isinstance(part, BaseToolReturnPart):
        return f'{type(part).__name__}: {part.tool_name} -> {part.model_response_str()} [{part.tool_call_id}]'
    if isinstance(part, FilePart):
        return f'file: {part.content.media_type} [{part.id}]'
    if isinstance(part, CompactionPart):
        return f'compaction: {part.content}'
    if isinstance(part, SpeechPart):
        return f'speech ({part.speaker}): {part.transcript}'
    return str(getattr(part, 'part_kind', type(part).__name__))


def describe(messages: Sequence[ModelMessage]) -> list[str]:
    """One line per part, prefixed by the message index and kind: easy to read in a snapshot."""
    lines: list[str] = []
    for index, message in enumerate(messages):
        for part in message.parts:
            lines.append(f'{index} {message.kind}: {describe_part(part)}')
    return lines


def summary_texts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, TextPart) and part.content.startswith('For context, here is the conversation so far')
    ]


class Recorder:
    """A FunctionModel that answers with a fixed text and records every message list it was shown."""

    def __init__(self, answer: str = 'specialist answer') -> None:
        self.answer = answer
        self.seen: list[list[ModelMessage]] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        return ModelResponse(parts=[TextPart(self.answer)])

    @property
    def last(self) -> list[ModelMessage]:
        return self.seen[-1]
