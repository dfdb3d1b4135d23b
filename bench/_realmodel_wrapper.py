"""A model wrapper for small open models that write their tool calls as JSON in the reply's text.

Qwen2.5-Coder-1.5B (and other small models) served by llama.cpp often answer a tool-using request with text such as
`{"name": "run_tests", "arguments": {}}`, in a code fence or in `<tool_call>` tags, rather than in the tool-call
form its chat template parses. Without help the agent takes that text as the final answer and the run ends with no
tool called. `TextToolCalls` reads such a reply and turns it into the tool call it describes; a reply that names
no offered tool stays text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponsePart, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

_WRAPPERS = re.compile(r'</?tool_call>|```(?:json)?', re.IGNORECASE)
"""Around a call the model may write: its template's tags, a code fence."""


def text_tool_calls(text: str, offered: set[str]) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls of offered tools that `text` writes as JSON objects, or `None` when it writes none.

    Each object is `{"name": ..., "arguments": {...}}` (`"parameters"` is accepted for `"arguments"`, and arguments
    given as a JSON string are decoded); objects may follow each other. Prose around them is dropped: a reply that
    holds a call is a call.
    """
    cleaned = _WRAPPERS.sub('\n', text)
    decoder = json.JSONDecoder()
    calls: list[tuple[str, dict[str, Any]]] = []
    position = 0
    while (start := cleaned.find('{', position)) != -1:
        try:
            value, end = decoder.raw_decode(cleaned, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        position = end
        call = _as_call(value, offered)
        if call is not None:
            calls.append(call)
    return calls or None


def _as_call(value: Any, offered: set[str]) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(value, dict):
        return None
    fields: dict[str, Any] = value
    name = fields.get('name')
    arguments = fields.get('arguments', fields.get('parameters', {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or '{}')
        except json.JSONDecodeError:
            return None
    if not isinstance(name, str) or name not in offered or not isinstance(arguments, dict):
        return None
    return name, dict(arguments)


@dataclass(init=False)
class TextToolCalls(WrapperModel):
    """Turns a reply whose text writes calls of offered tools as JSON into those tool calls."""

    converted: int = 0
    """Replies turned into tool calls so far."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response = await super().request(messages, model_settings, model_request_parameters)
        tools = {tool.name: tool for tool in model_request_parameters.function_tools}
        if any(isinstance(part, ToolCallPart) for part in response.parts):
            parts = [_taken(part, tools) if isinstance(part, ToolCallPart) else part for part in response.parts]
            return replace(response, parts=parts)
        text = ''.join(part.content for part in response.parts if isinstance(part, TextPart))
        calls = text_tool_calls(text, set(tools))
        if calls is None:
            return response
        self.converted += 1
        new_parts: list[ModelResponsePart] = [
            _taken(
                ToolCallPart(tool_name=name, args=arguments, tool_call_id=f'text_call_{self.converted}_{index}'), tools
            )
            for index, (name, arguments) in enumerate(calls)
        ]
        return replace(response, parts=new_parts)


def _taken(call: ToolCallPart, tools: dict[str, ToolDefinition]) -> ToolCallPart:
    """`call` without the arguments its tool does not take: a small model adds some (`run_tests(output=...)`), and
    the tool's validation would reject the whole call for them."""
    tool = tools.get(call.tool_name)
    schema = tool.parameters_json_schema if tool is not None else {}
    if schema.get('additionalProperties', True) is not False:
        return call
    known = set(schema.get('properties', {}))
    arguments = call.args_as_dict()
    kept = {name: value for name, value in arguments.items() if name in known}
    return call if kept == arguments else replace(call, args=kept)
