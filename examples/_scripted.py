"""A scripted model that behaves like a careful one: it answers from what it is shown, and pages back when it must.

It never uses its own knowledge of the data: it reads the model-visible text of the last request (tool
returns, previews, markers) and either finds the answer there, or follows the instructions a spill preview
gives (grep for the term the question is about, then read around the hit). When neither works it says the
fact was not found, as an honest model would. Used by `make demo` and the context-economy benchmark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

NOT_FOUND = 'NOT FOUND'

# A spill preview names its handle as `handle "..."`; the query tools echo it as `'...'`.
_PREVIEW_HANDLE = re.compile(r'handle "([^"]+)"')
_TOOL_HANDLE = re.compile(r"handle='([^']+)'")
_GREP_OFFSET = re.compile(r'read from it: offset=(\d+)')


@dataclass
class Question:
    """One thing the user asks, the tool that holds the answer, and how a careful model recognizes it."""

    prompt: str
    """The user's words."""

    tool: str
    """The tool to call first."""

    search: str
    """The literal a model would grep for, taken from the question's wording."""

    extract: Callable[[str], str | None]
    """Finds the answer in a text the model can see, or `None`."""

    args: dict[str, Any] = field(default_factory=dict[str, Any])
    """Arguments of the first tool call."""


@dataclass
class Trace:
    """What the scripted model did, for reports."""

    answers: list[str] = field(default_factory=list[str])
    retrieval_calls: int = 0
    requests: int = 0


def following(term: str, pattern: str) -> Callable[[str], str | None]:
    """An extractor: `pattern` matched where `term` occurs (e.g. the rest of a `FAILED ...` line)."""
    compiled = re.compile(pattern)

    def extract(text: str) -> str | None:
        at = text.find(term)
        while at != -1:
            match = compiled.match(text, at)
            if match:
                return match.group(1) if compiled.groups else match.group(0)
            at = text.find(term, at + 1)
        return None

    return extract


def preceding(term: str, pattern: str, window: int = 300) -> Callable[[str], str | None]:
    """An extractor: the last `pattern` match in the `window` characters before `term` (e.g. a record's id)."""
    compiled = re.compile(pattern)

    def extract(text: str) -> str | None:
        at = text.find(term)
        while at != -1:
            matches = list(compiled.finditer(text, max(0, at - window), at))
            if matches:
                return matches[-1].group(1) if compiled.groups else matches[-1].group(0)
            at = text.find(term, at + 1)
        return None

    return extract


def visible_text(message: ModelMessage) -> str:
    """The text a model is shown for one request: tool returns and user prompts."""
    if not isinstance(message, ModelRequest):
        return ''
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, ToolReturnPart):
            texts.append(part.model_response_str())
        elif isinstance(part, UserPromptPart):
            if isinstance(part.content, str):
                texts.append(part.content)
            else:
                texts.extend(item for item in part.content if isinstance(item, str))
    return '\n'.join(texts)


class CarefulModel:
    """The scripted model's brain: one question after another, each answered from visible text only."""

    def __init__(self, questions: Sequence[Question], *, count_tokens: Callable[[str], int] | None = None) -> None:
        self.questions = list(questions)
        self.trace = Trace()
        self._index = 0
        self._grepped = False
        self._read = False
        self._count = count_tokens or (lambda text: len(text) // 4)
        self._calls = 0

    def model(self) -> FunctionModel:
        """A `FunctionModel` driven by this script."""
        return FunctionModel(self._respond, model_name='careful-scripted-model')

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.trace.requests += 1
        usage = RequestUsage(input_tokens=sum(self._count(visible_text(m)) for m in messages), output_tokens=20)
        question = self.questions[self._index]
        last = visible_text(messages[-1])
        if len(messages) == 1:
            return ModelResponse(parts=[self._call(question.tool, question.args)], usage=usage)
        answer = question.extract(last)
        if answer is None:
            call = self._page_back(question, last)
            if call is not None:
                self.trace.retrieval_calls += 1
                return ModelResponse(parts=[call], usage=usage)
            answer = NOT_FOUND
        return self._next(answer, usage)

    def _page_back(self, question: Question, text: str) -> ToolCallPart | None:
        handle_match = _PREVIEW_HANDLE.search(text) or _TOOL_HANDLE.search(text)
        if handle_match is None:
            return None  # nothing stored to page back into: the fact is lost
        handle = handle_match.group(1)
        if not self._grepped:
            self._grepped = True
            return self._call('grep_tool_result', {'handle': handle, 'pattern': question.search, 'max_matches': 5})
        offset = _GREP_OFFSET.search(text)
        if offset is not None and not self._read:
            self._read = True
            start = max(0, int(offset.group(1)) - 5)
            return self._call('read_tool_result', {'handle': handle, 'offset': start, 'limit': 12})
        return None

    def _call(self, tool: str, args: dict[str, Any]) -> ToolCallPart:
        # Stable call ids keep handles, and so everything the model sees, identical between runs.
        self._calls += 1
        return ToolCallPart(tool, args, tool_call_id=f'call_{self._calls}')

    def _next(self, answer: str, usage: RequestUsage) -> ModelResponse:
        self.trace.answers.append(answer)
        self._index += 1
        self._grepped = self._read = False
        if self._index < len(self.questions):
            question = self.questions[self._index]
            return ModelResponse(parts=[self._call(question.tool, question.args)], usage=usage)
        return ModelResponse(parts=[TextPart(json.dumps(self.trace.answers))], usage=usage)
