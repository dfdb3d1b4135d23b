"""The part adapter: what each pydantic-ai message part is to a handoff, and its transcript record.

One OpenAI Responses input item corresponds to one pydantic-ai part, so filters and nesting work part by part.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CapabilityLoadDeltaPart,
    CompactionPart,
    DocumentUrl,
    FilePart,
    FileUrl,
    ImageUrl,
    InstructionBaselinePart,
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    SpeechPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserContent,
    UserPromptPart,
    VideoUrl,
)

from .._typing import is_list, is_object
from ._transcript import TranscriptItem, dumps, is_summary_candidate, render_item

__all__ = (
    'PARENT_STATE_PARTS',
    'TOOL_STATE_PARTS',
    'Category',
    'Part',
    'answers_tool_calls',
    'items_to_messages',
    'keep_parts',
    'part_category',
    'part_to_item',
    'rewrap',
    'tool_file_ids',
)

Part = ModelRequestPart | ModelResponsePart
"""Any part of a request or a response."""

Category = Literal['user', 'assistant', 'tool', 'hosted', 'state']
"""What a part is to a handoff.

- `'user'`: user or system input (`UserPromptPart`, `SystemPromptPart`, user `SpeechPart`).
- `'assistant'`: assistant content (`TextPart`, assistant `SpeechPart`, a model-generated `FilePart`).
- `'tool'`: summary-only tool traffic (`ToolCallPart`, `ToolReturnPart` and their subclasses, tool-bound
  `RetryPromptPart`, `ThinkingPart`, `RetryFeedbackPart`).
- `'hosted'`: provider-executed tool parts and compaction, forwarded verbatim (`NativeToolCallPart`,
  `NativeToolReturnPart`, the `FilePart`s a native tool produced, `CompactionPart`).
- `'state'`: framework state that carries no conversation (instruction, settings, tool-availability and
  capability-load deltas).
"""

PARENT_STATE_PARTS = (InstructionDeltaPart, InstructionBaselinePart, ModelSettingsDeltaPart, CapabilityLoadDeltaPart)
"""The parent agent's configuration state, never forwarded to another agent."""

TOOL_STATE_PARTS = (ToolAvailabilityDeltaPart, CapabilityLoadDeltaPart)
"""Tool state that `remove_all_tools` strips."""

_STATE_KINDS = frozenset(
    {
        'instruction-delta',
        'instruction-baseline',
        'model-settings-delta',
        'capability-load-delta',
        'tool-availability-delta',
    }
)


def _is_state(part: object) -> bool:
    return getattr(part, 'part_kind', None) in _STATE_KINDS


_TOOL_PARTS = (ToolCallPart, ToolReturnPart, ThinkingPart, RetryFeedbackPart)
_HOSTED_PARTS = (NativeToolCallPart, NativeToolReturnPart, CompactionPart)
_USER_PARTS = (UserPromptPart, SystemPromptPart)


_NO_IDS: frozenset[str] = frozenset()


def tool_file_ids(message: ModelMessage) -> frozenset[str]:
    """The ids of the native tool calls in a response: a `FilePart` with one of these ids was made by that tool."""
    if not isinstance(message, ModelResponse):
        return _NO_IDS
    ids = [part.tool_call_id for part in message.parts if isinstance(part, NativeToolCallPart)]
    return frozenset(ids) if ids else _NO_IDS


def part_category(part: Part, native_ids: frozenset[str] = frozenset()) -> Category:
    """Classify `part`; `native_ids` are the native tool call ids of the response it is in."""
    if isinstance(part, TextPart):
        return 'assistant'
    if isinstance(part, _USER_PARTS):
        return 'user'
    if isinstance(part, _TOOL_PARTS) or part.part_kind == 'retry-prompt':
        return 'tool'
    if isinstance(part, _HOSTED_PARTS):
        return 'hosted'
    if isinstance(part, FilePart):
        return 'hosted' if part.id is not None and part.id in native_ids else 'assistant'
    if isinstance(part, SpeechPart):
        return 'user' if part.speaker == 'user' else 'assistant'
    if _is_state(part):
        return 'state'
    return 'tool'  # pragma: no cover  # a part kind this version does not know: summarized, never forwarded


def _user_content_item(content: UserContent) -> TranscriptItem | None:
    if isinstance(content, str):
        return {'type': 'text', 'text': content}
    if isinstance(content, TextContent):
        return {'type': 'text', 'text': content.content}
    if isinstance(content, FileUrl):
        return {'type': content.kind, 'url': content.url}
    if isinstance(content, BinaryContent):
        return {'type': 'binary', 'media_type': content.media_type, 'identifier': content.identifier}
    if isinstance(content, UploadedFile):
        return {'type': 'uploaded-file', 'file_id': content.file_id}
    return None  # a `CachePoint`: a marker, not content


def _user_content(content: str | Sequence[UserContent]) -> str | list[TranscriptItem]:
    if isinstance(content, str):
        return content
    items: list[TranscriptItem] = []
    for entry in content:
        item = _user_content_item(entry)
        if item is not None:
            items.append(item)
    return items


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def part_to_item(part: Part) -> TranscriptItem | None:  # noqa: C901 (one branch per part kind)
    """The transcript record of `part`, or `None` for framework state that carries no conversation."""
    if isinstance(part, TextPart):
        return {'role': 'assistant', 'content': part.content}
    if isinstance(part, UserPromptPart):
        return {'role': 'user', 'content': _user_content(part.content)}
    if isinstance(part, SystemPromptPart):
        return {'role': 'system', 'content': part.content}
    if isinstance(part, SpeechPart):
        return {'role': part.speaker, 'content': part.transcript or ''}
    if isinstance(part, ToolCallPart):
        # The OpenAI Agents SDK's key order (its `ResponseFunctionToolCall` fields), with the item `id` when the
        # provider gave one.
        call: TranscriptItem = {
            'arguments': part.args_as_json_str(),
            'call_id': part.tool_call_id,
            'name': part.tool_name,
            'type': 'function_call',
        }
        if part.id is not None:
            call['id'] = part.id
        return call
    if isinstance(part, ToolReturnPart):
        item: TranscriptItem = {
            'call_id': part.tool_call_id,
            'output': part.model_response_str(wrap_if_error=False),
            'type': 'function_call_output',
        }
        if part.outcome != 'success':
            item['outcome'] = part.outcome
        return item
    if part.part_kind == 'retry-prompt':  # the deprecated `RetryPromptPart`, by its kind
        if part.tool_name is None:
            return {'type': 'retry_feedback', 'content': part.model_response()}
        return {
            'type': 'function_call_output',
            'call_id': part.tool_call_id,
            'output': part.model_response(),
            'outcome': 'retried',
        }
    if isinstance(part, RetryFeedbackPart):
        return {'type': 'retry_feedback', 'content': part.model_response()}
    if isinstance(part, ThinkingPart):
        return {'type': 'reasoning', 'summary': [{'type': 'summary_text', 'text': part.content}]}
    if isinstance(part, NativeToolCallPart):
        return {
            'type': 'builtin_tool_call',
            'name': part.tool_name,
            'call_id': part.tool_call_id,
            'arguments': part.args_as_json_str(),
        }
    if isinstance(part, NativeToolReturnPart):
        return {
            'type': 'builtin_tool_return',
            'name': part.tool_name,
            'call_id': part.tool_call_id,
            'output': part.model_response_str(wrap_if_error=False),
        }
    if isinstance(part, FilePart):
        return {'type': 'file', 'media_type': part.content.media_type, 'id': part.id}
    if isinstance(part, CompactionPart):
        return {'type': 'compaction', 'content': part.content}
    if _is_state(part):
        return None
    return {'type': str(getattr(part, 'part_kind', type(part).__name__))}  # pragma: no cover


def _role_record(role: str, content: str) -> str:
    if '\n' in content or '\r' in content:
        return f'{{"role": "{role}", "content": {dumps(content)}}}'
    return f'{role}: {content}'


def render_part(part: Part) -> str | None:
    """`render_item(part_to_item(part))`, with a direct path for the common part kinds (no intermediate dict).

    `None` for framework state that carries no conversation.
    """
    if isinstance(part, TextPart):
        return _role_record('assistant', part.content)
    if isinstance(part, UserPromptPart) and isinstance(part.content, str):
        return _role_record('user', part.content)
    if isinstance(part, SystemPromptPart):
        return _role_record('system', part.content)
    if type(part) is ToolCallPart:
        item_id = '' if part.id is None else f', "id": {dumps(part.id)}'
        return (
            f'{{"arguments": {dumps(part.args_as_json_str())}, "call_id": {dumps(part.tool_call_id)}, '
            f'"name": {dumps(part.tool_name)}, "type": "function_call"{item_id}}}'
        )
    if type(part) is ToolReturnPart:
        output = dumps(part.model_response_str(wrap_if_error=False))
        outcome = '' if part.outcome == 'success' else f', "outcome": "{part.outcome}"'
        return f'{{"call_id": {dumps(part.tool_call_id)}, "output": {output}, "type": "function_call_output"{outcome}}}'
    if isinstance(part, ThinkingPart):
        return f'{{"type": "reasoning", "summary": [{{"type": "summary_text", "text": {dumps(part.content)}}}]}}'
    item = part_to_item(part)
    return None if item is None else render_item(item)


def _url_content(kind: Any, url: str) -> UserContent | None:
    if kind == 'image-url':
        return ImageUrl(url=url)
    if kind == 'audio-url':
        return AudioUrl(url=url)
    if kind == 'document-url':
        return DocumentUrl(url=url)
    if kind == 'video-url':
        return VideoUrl(url=url)
    return None


_TEXT_KINDS = frozenset({'text', 'input_text', 'output_text'})
"""Content entries holding plain text: ours (`text`) and the OpenAI Responses ones the SDK writes."""


def _data_or_url(url: str, media_kind: str) -> UserContent:
    """`BinaryContent` for a base64 `data:` URL (as the SDK writes inline images and files), else a URL part."""
    if url.startswith('data:'):
        try:
            return BinaryContent.from_data_uri(url)
        except ValueError:
            pass
    return ImageUrl(url=url) if media_kind == 'image' else DocumentUrl(url=url)


def _sdk_content(entry: dict[str, Any]) -> UserContent | None:
    """An OpenAI Responses input content entry (`input_image`, `input_file`, `input_audio`) as user content."""
    kind = entry.get('type')
    if kind == 'input_image':
        url = entry.get('image_url')
        if isinstance(url, str) and url:
            return _data_or_url(url, 'image')
        file_id = entry.get('file_id')
        return UploadedFile(file_id=file_id, provider_name='openai') if isinstance(file_id, str) and file_id else None
    if kind == 'input_file':
        data = entry.get('file_data')
        if isinstance(data, str) and data.startswith('data:'):
            return _data_or_url(data, 'file')
        url = entry.get('file_url')
        if isinstance(url, str) and url:
            return DocumentUrl(url=url)
        file_id = entry.get('file_id')
        if isinstance(file_id, str) and file_id:
            return UploadedFile(file_id=file_id, provider_name='openai')
        return None
    if kind == 'input_audio':
        audio = entry.get('input_audio')
        if is_object(audio):
            data, audio_format = audio.get('data'), audio.get('format')
            if isinstance(data, str) and isinstance(audio_format, str):
                try:
                    return BinaryContent(data=base64.b64decode(data, validate=True), media_type=f'audio/{audio_format}')
                except ValueError:
                    return None
    return None


def _user_content_back(content: Any, name: Any) -> str | list[UserContent]:
    prefix = f'{name}: ' if isinstance(name, str) and name else ''
    if not is_list(content):
        return prefix + ('' if content is None else _json_text(content))
    result: list[UserContent] = [prefix] if prefix else []
    for entry in content:
        if is_object(entry):
            entry_dict = entry
            kind, text, url = entry_dict.get('type'), entry_dict.get('text'), entry_dict.get('url')
            if kind in _TEXT_KINDS and isinstance(text, str):
                result.append(text)
                continue
            url_content = _url_content(kind, url) if isinstance(url, str) else None
            if url_content is None:
                url_content = _sdk_content(entry_dict)
            if url_content is not None:
                result.append(url_content)
                continue
        result.append(_json_text(entry))
    return result


def _message_text(content: Any) -> str:
    """The text of a role message's content: a string, or the text entries of an SDK content list
    (`output_text`, `input_text`, `refusal`) joined; anything else as JSON.
    """
    if content is None:
        return ''
    if is_list(content):
        texts: list[str] = []
        for entry in content:
            if not is_object(entry):
                return _json_text(content)
            entry_dict = entry
            kind = entry_dict.get('type')
            value = entry_dict.get('refusal') if kind == 'refusal' else entry_dict.get('text')
            if (kind not in _TEXT_KINDS and kind != 'refusal') or not isinstance(value, str):
                return _json_text(content)
            texts.append(value)
        return ''.join(texts)
    return _json_text(content)


def _item_to_part(
    item: TranscriptItem, tool_names: dict[str, str]
) -> UserPromptPart | SystemPromptPart | ToolReturnPart | CompactionPart | TextPart | ToolCallPart | ThinkingPart:
    role, kind, content = item.get('role'), item.get('type'), item.get('content')
    if isinstance(role, str) and kind in (None, 'message'):
        if role == 'assistant':
            return TextPart(_message_text(content))
        if role in ('system', 'developer'):
            return SystemPromptPart(_message_text(content))
        if role == 'user':
            return UserPromptPart(_user_content_back(content, item.get('name')))
        return UserPromptPart(f'{role}: ' + (_json_text(content) if content is not None else ''))
    call_id = str(item.get('call_id') or '')
    if kind == 'function_call':
        name = str(item.get('name') or 'unknown_tool')
        tool_names[call_id] = name
        item_id = item.get('id')
        return ToolCallPart(
            name, _json_text(item.get('arguments') or '{}'), call_id, id=item_id if isinstance(item_id, str) else None
        )
    if kind == 'function_call_output':
        outcome = item.get('outcome', 'success')
        return ToolReturnPart(
            tool_names.get(call_id, 'unknown_tool'),
            item.get('output'),
            call_id,
            outcome=outcome if outcome in ('success', 'failed', 'denied', 'interrupted', 'retried') else 'success',
        )
    if kind == 'reasoning':
        summary = item.get('summary')
        texts = [str(entry.get('text', '')) for entry in (summary if is_list(summary) else []) if is_object(entry)]
        return ThinkingPart('\n'.join(texts))
    if kind == 'compaction' and (content is None or isinstance(content, str)):
        return CompactionPart(content)
    return TextPart(render_item(item))


def items_to_messages(items: Iterable[TranscriptItem]) -> list[ModelMessage]:
    """Map transcript records back to messages: user and system records and tool outputs become requests,
    everything else responses; consecutive parts of the same side share a message.

    This is lossy for records that have no part of their own (a `name`, hosted tool records, files):
    they are kept as text.
    """
    tool_names: dict[str, str] = {}
    messages: list[ModelMessage] = []
    request_parts: list[ModelRequestPart] = []
    response_parts: list[ModelResponsePart] = []

    def flush_request() -> None:
        if request_parts:
            messages.append(ModelRequest(parts=list(request_parts)))
            request_parts.clear()

    def flush_response() -> None:
        if response_parts:
            messages.append(ModelResponse(parts=list(response_parts)))
            response_parts.clear()

    for item in items:
        part = _item_to_part(item, tool_names)
        if isinstance(part, UserPromptPart | SystemPromptPart | ToolReturnPart | CompactionPart):
            flush_response()
            request_parts.append(part)
        else:
            flush_request()
            response_parts.append(part)
    flush_request()
    flush_response()
    return messages


def _is_tool_answer(part: Part) -> bool:
    if isinstance(part, ToolReturnPart):
        return True
    return part.part_kind == 'retry-prompt' and part.tool_name is not None


def answers_tool_calls(message: ModelMessage) -> bool:
    """Whether `message` is a request answering tool calls, so its user prompts may be tool output, not user input.

    pydantic-ai sends a tool's `ToolReturn.content` as a `UserPromptPart` in the request that carries the tool's
    return, so a user prompt there is attacker text as far as a handoff is concerned.
    """
    return isinstance(message, ModelRequest) and any(_is_tool_answer(part) for part in message.parts)


def _as_content_list(part: Part) -> Part:
    """A text user prompt that starts like a handoff summary, as a one-item content list; any other part as it is."""
    if isinstance(part, UserPromptPart) and isinstance(part.content, str) and is_summary_candidate(part.content):
        return dataclasses.replace(part, content=[part.content])
    return part


def rewrap(message: ModelMessage, parts: Sequence[Part]) -> ModelMessage:
    """A copy of `message` with `parts` in place of its own, keeping every other field (provider, model, run id, ...).

    A response whose parts changed loses its `history_digest`, so no model continues server-side state from it.
    Kept parts are left as they were, with one exception: in a request that answered tool calls and keeps none of its
    tool returns, a text user prompt (tool output, `ToolReturn.content`) that starts like a handoff summary becomes a
    one-item content list. The model reads the same text, but only a plain string prompt is ever read as a summary,
    and the list survives pydantic-ai merging the request into its neighbours (which drops message `metadata`), so
    tool output never passes for a summary of the conversation.
    The parts must come from `message` (they are not checked again); `message` itself is never mutated.
    """
    changes: dict[str, Any]
    if isinstance(message, ModelResponse):
        changes = {'parts': list(parts), 'history_digest': None}
    else:
        kept = list(parts)
        if answers_tool_calls(message) and not any(_is_tool_answer(part) for part in kept):
            kept = [_as_content_list(part) for part in kept]
        changes = {'parts': kept}
    state = getattr(message, '__dict__', None)
    if state is None:  # pragma: no cover (a future slotted message class)
        return dataclasses.replace(message, **changes)
    # A copy by hand: `dataclasses.replace` would run `__post_init__` and validation again, for every message.
    new = object.__new__(type(message))
    new.__dict__.update(state)
    new.__dict__.update(changes)
    return new


def keep_parts(
    messages: Iterable[ModelMessage], keeps: Callable[[ModelMessage], Callable[[Part], bool]]
) -> list[ModelMessage]:
    """`messages` with only the parts `keeps(message)` accepts; messages left without parts are dropped.

    A message that loses nothing is kept as it is; the others are rebuilt by `rewrap`. `keeps` is called once per
    message, so a predicate can depend on the whole message (its native tool file ids, say).
    """
    result: list[ModelMessage] = []
    for message in messages:
        keep = keeps(message)
        kept = [part for part in message.parts if keep(part)]
        if len(kept) == len(message.parts):
            result.append(message)
        elif kept:
            result.append(rewrap(message, kept))
    return result
