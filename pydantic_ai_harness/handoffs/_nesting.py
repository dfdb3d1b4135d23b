"""`nest_handoff_history`: collapse a handoff's history into a summary message, forwarding what must stay verbatim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SpeechPart,
    TextPart,
    UserPromptPart,
)

from .._typing import is_items, is_list, is_object
from ._config import SummaryRole, check_history_mapper, check_max_record_chars, check_summary_role
from ._cut import cut_text
from ._data import HandoffHistoryMapper, HandoffInputData
from ._parts import (
    Part,
    answers_tool_calls,
    items_to_messages,
    keep_parts,
    part_category,
    part_to_item,
    render_part,
    rewrap,
    tool_file_ids,
)
from ._transcript import (
    TranscriptItem,
    build_summary_from_records,
    get_conversation_history_wrappers,
    is_summary_candidate,
    parse_summary_text,
    render_item,
)

__all__ = ('default_handoff_history_mapper', 'nest_handoff_history', 'summary_message')


def summary_message(
    records: Sequence[str],
    wrappers: tuple[str, str] | None = None,
    role: SummaryRole = 'assistant',
) -> ModelMessage:
    """One summary message for already rendered records: an assistant response with a single `TextPart`, or with
    `role='user'` a request with a single `UserPromptPart`.
    """
    text = build_summary_from_records(records, wrappers=wrappers)
    if role == 'user':
        return ModelRequest(parts=[UserPromptPart(text)])
    return ModelResponse(parts=[TextPart(text)])


def _cap_item(item: TranscriptItem, cap: int | None) -> TranscriptItem:
    """A parsed record with its `content` / `output` text cut to `cap` characters, when longer."""
    if cap is None:
        return item
    changed: dict[str, Any] = {
        key: cut_text(value, cap, None)
        for key in ('content', 'output', 'arguments')
        if isinstance(value := item.get(key), str) and len(value) > cap
    }
    summary = item.get('summary')
    if is_list(summary) and any(_long_text(entry, cap) for entry in summary):
        changed['summary'] = [
            {**entry, 'text': cut_text(entry['text'], cap, None)} if _long_text(entry, cap) else entry
            for entry in summary
        ]
    return {**item, **changed} if changed else item


def _long_text(entry: Any, cap: int) -> bool:
    return is_object(entry) and isinstance(text := entry.get('text'), str) and len(text) > cap


def _render(part: Part, cap: int | None) -> str | None:
    """The record of `part`; with a cap, a record longer than it is written again from its item, texts cut.

    Rendering the item is what a later hop does with the parsed record, so both hops cut the same way.
    """
    record = render_part(part)
    if cap is None or record is None or len(record) <= cap:
        return record
    item = part_to_item(part)
    return record if item is None else render_item(_cap_item(item, cap))


def _records(messages: Sequence[ModelMessage]) -> list[str]:
    return [record for message in messages for part in message.parts if (record := render_part(part)) is not None]


def default_handoff_history_mapper(transcript: list[ModelMessage]) -> list[ModelMessage]:
    """Summarize a whole transcript into a list holding one assistant message.

    The message's text is the preamble line, the start wrapper, one numbered record per transcript entry (user,
    system and assistant text as `role: text`, tool calls, tool outputs and thinking as JSON) and the end wrapper.

    Args:
        transcript: The messages to summarize, in chronological order.

    Returns:
        `[ModelResponse(parts=[TextPart(summary)])]`.
    """
    return [summary_message(_records(transcript))]


def _history_records(
    history: str | tuple[ModelMessage, ...], wrappers: tuple[str, str], role: SummaryRole, cap: int | None = None
) -> list[str]:
    """The records of the whole input history, earlier summaries replaced by their own records."""
    if isinstance(history, str):
        return [render_item(_cap_item({'content': history, 'role': 'user'}, cap))]
    records: list[str] = []
    for message in history:
        for part in message.parts:
            if role == 'user' and (parsed := _user_summary_records(message, part, wrappers)) is not None:
                records.extend(render_item(_cap_item(item, cap)) for item in parsed)
                continue
            if isinstance(part, TextPart | SpeechPart) and is_summary_candidate(part.content):
                is_assistant = isinstance(part, TextPart) or part.speaker == 'assistant'
                parsed = parse_summary_text(part.content, wrappers=wrappers) if is_assistant else None
                if parsed is not None:
                    records.extend(render_item(_cap_item(item, cap)) for item in parsed)
                    continue
            record = _render(part, cap)
            if record is not None:
                records.append(record)
    return records


def _user_summary_records(message: ModelMessage, part: Part, wrappers: tuple[str, str]) -> list[TranscriptItem] | None:
    """The records of a user-turn summary (a user prompt whose whole text is one), else `None`.

    Never in a request that answers tool calls: pydantic-ai puts a tool's `ToolReturn.content` there as a user
    prompt, and tool output is attacker text, so it must not pass for records of the conversation.
    """
    if (
        isinstance(part, UserPromptPart)
        and isinstance(part.content, str)
        and is_summary_candidate(part.content)
        and not answers_tool_calls(message)
    ):
        return parse_summary_text(part.content, wrappers=wrappers)
    return None


def _summary_records(
    message: ModelMessage, part: Part, wrappers: tuple[str, str], role: SummaryRole
) -> list[TranscriptItem] | None:
    """The records of `part` when it is a summary: assistant text, or with `role='user'` a user-turn summary too."""
    if isinstance(message, ModelResponse) and isinstance(part, TextPart):
        return parse_summary_text(part.content, wrappers=wrappers)
    if role == 'user' and isinstance(message, ModelRequest):
        return _user_summary_records(message, part, wrappers)
    return None


def _history_messages(
    history: str | tuple[ModelMessage, ...], wrappers: tuple[str, str], role: SummaryRole
) -> list[ModelMessage]:
    """The history as messages, earlier summaries replaced by the messages their records map back to."""
    if isinstance(history, str):
        return [ModelRequest(parts=[UserPromptPart(history)])]
    result: list[ModelMessage] = []
    for message in history:
        kept: list[Part] = []
        changed = False
        for part in message.parts:
            records = _summary_records(message, part, wrappers, role)
            if records is None:
                if part_category(part) == 'state':
                    changed = True
                else:
                    kept.append(part)
                continue
            changed = True
            if kept:
                result.append(rewrap(message, kept))
                kept = []
            result.extend(items_to_messages(records))
        if not changed:
            result.append(message)
        elif kept:
            result.append(rewrap(message, kept))
    return result


def _without_state(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    return keep_parts(messages, lambda _message: _not_state)


def _not_state(part: Part) -> bool:
    return part_category(part) != 'state'


def _ordered_parts(message: ModelMessage) -> list[Part]:
    """The parts of `message` in order, each native tool call directly followed by its returns and files.

    So a native call, its return and the files it produced are forwarded together.
    """
    parts: list[Part] = list(message.parts)
    if not isinstance(message, ModelResponse) or not any(isinstance(part, NativeToolCallPart) for part in parts):
        return parts
    ordered: list[Part] = []
    taken: set[int] = set()
    for index, part in enumerate(parts):
        if index in taken:
            continue
        ordered.append(part)
        if isinstance(part, NativeToolCallPart):
            for later in range(index + 1, len(parts)):
                other = parts[later]
                if isinstance(other, NativeToolReturnPart):
                    other_id: str | None = other.tool_call_id
                elif isinstance(other, FilePart):
                    other_id = other.id
                else:
                    continue
                if later not in taken and other_id == part.tool_call_id:
                    ordered.append(other)
                    taken.add(later)
    return ordered


def _nest_default(
    data: HandoffInputData, wrappers: tuple[str, str], role: SummaryRole, cap: int | None
) -> list[ModelMessage]:
    pending = _history_records(data.input_history, wrappers, role, cap)
    # Each summary segment numbers its records from 1, as the OpenAI Agents SDK does.
    # Output entries: a finished message (a summary), or a verbatim group `(source message, parts)`.
    out: list[ModelMessage | tuple[ModelMessage, list[Part]]] = []
    for is_new, messages in ((False, data.pre_handoff_items), (True, data.new_items)):
        for message in messages:
            native_ids = tool_file_ids(message)
            for part in _ordered_parts(message):
                category = part_category(part, native_ids)
                if category == 'state':
                    continue
                if category == 'tool' or (category == 'assistant' and not is_new):
                    record = _render(part, cap)
                    if record is not None:
                        pending.append(record)
                    continue
                if pending or not out:
                    out.append(summary_message(pending, wrappers, role))
                    pending = []
                last = out[-1]
                if isinstance(last, tuple) and last[0] is message:
                    last[1].append(part)
                else:
                    out.append((message, [part]))
    if pending or not out:
        out.append(summary_message(pending, wrappers, role))
    return [entry if not isinstance(entry, tuple) else _verbatim(*entry) for entry in out]


def _verbatim(source: ModelMessage, parts: list[Part]) -> ModelMessage:
    if len(parts) == len(source.parts) and all(a is b for a, b in zip(parts, source.parts)):
        return source
    return rewrap(source, parts)


def _check_mapper_result(mapped: Any) -> tuple[ModelMessage, ...]:
    if not is_items(mapped):
        raise UserError(f'Invalid history mapper result: {mapped}')
    messages = tuple(mapped)
    if not all(isinstance(message, ModelRequest | ModelResponse) for message in messages):
        raise UserError(f'Invalid history mapper result: {mapped}')
    return messages


def nest_handoff_history(
    handoff_input_data: HandoffInputData,
    *,
    history_mapper: HandoffHistoryMapper | None = None,
    summary_role: SummaryRole = 'assistant',
    max_record_chars: int | None = None,
) -> HandoffInputData:
    """Collapse the history before a handoff into a summary message, so the delegate sees one compact record of the
    conversation instead of the previous agent's raw turns.

    Default path (no `history_mapper`): the whole `input_history` (with the records of earlier summaries flattened
    back in, so nesting again never nests summaries inside summaries) is summarized. Then the handoff's own
    messages are walked in order: tool calls, tool returns, thinking and retry feedback are always summarized;
    assistant text is summarized before the handoff turn and forwarded in it; user and system prompts, native
    (provider-executed) tool parts with their files, and compaction are forwarded verbatim. A summary is written
    before each forwarded run of parts that had summarized parts before it, so the output always starts with a
    summary and keeps everything in chronological order. Framework state parts (instruction, settings,
    tool-availability and capability-load deltas) are dropped.

    Custom path: `history_mapper` receives the whole flattened transcript as messages (history, then every message
    of the handoff), and its result becomes the delegate's history as it is.

    The summary is a `ModelResponse` holding one `TextPart` (an assistant turn), in the OpenAI Agents SDK's format:
    the same preamble and wrappers, records in the SDK's key order, numbered from 1 in each summary; an assistant
    message is written `assistant: <text>` (the SDK writes its whole output item as JSON). With `summary_role='user'` it is a `ModelRequest` holding one
    `UserPromptPart` with the same text instead, for models that want a conversation to open with a user turn, and
    earlier user turns whose whole text is a summary are flattened like assistant ones. As in the SDK, the
    conversation is trusted: any assistant turn (and with `summary_role='user'` any user turn) in the summary format
    is read as an earlier summary. Tool output never is: a user prompt in a request that answers tool calls (where
    pydantic-ai puts `ToolReturn.content`) stays one quoted record, whatever `summary_role` is.

    Args:
        handoff_input_data: The handoff input to nest.
        history_mapper: Maps the flattened transcript to the delegate's history in place of the default summary.
        summary_role: Whether the default path writes its summaries as assistant turns (the SDK's choice) or as
            user turns; with `'user'`, earlier user-turn summaries are flattened too (also for a `history_mapper`,
            which decides its own messages).
        max_record_chars: Cut the text of every summarized record (a tool output, a message, tool-call
            arguments) longer than this many characters, saying so in the record; `None` (the default, as in
            the SDK) keeps records whole. A cut record fits the limit, so a later hop never cuts it again.
            [`delegate`][pydantic_ai_harness.handoffs.delegate] saves the full text of a cut tool output to the
            store of the delegate's `OverflowingToolOutput` first, and the cut names its handle.

    Returns:
        A copy whose `input_history` is the nested history, with `pre_handoff_items=()` and `input_items=()`;
        `new_items` is unchanged.

    Raises:
        UserError: If `history_mapper` is not callable or does not return a list of messages, or if `summary_role`
            is neither `'assistant'` nor `'user'`.
    """
    check_summary_role(summary_role)
    check_max_record_chars(max_record_chars)
    data = handoff_input_data
    wrappers = get_conversation_history_wrappers()
    if history_mapper is None:
        nested = _nest_default(data, wrappers, summary_role, max_record_chars)
    else:
        check_history_mapper(history_mapper)
        transcript = _history_messages(data.input_history, wrappers, summary_role)
        transcript.extend(_without_state(data.pre_handoff_items))
        transcript.extend(_without_state(data.new_items))
        mapped: Any = history_mapper(transcript)  # checked: a mapper's result is the user's code
        nested = list(_check_mapper_result(mapped))
    return data.clone(input_history=tuple(nested), pre_handoff_items=(), input_items=())
