"""`remove_all_tools`: strip every tool artefact from a handoff's history, part by part."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic_ai.messages import (
    FilePart,
    ModelMessage,
    NativeToolCallPart,
    NativeToolReturnPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
)

from ._data import HandoffInputData
from ._parts import TOOL_STATE_PARTS, Part, keep_parts, tool_file_ids

__all__ = ('is_tool_artefact', 'remove_all_tools', 'strip_tool_parts')

_ALWAYS_TOOL_PARTS = (
    ToolCallPart,
    ToolReturnPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    ThinkingPart,
    *TOOL_STATE_PARTS,
)


def is_tool_artefact(part: Part, native_ids: frozenset[str] = frozenset()) -> bool:
    """Whether `remove_all_tools` strips `part`; `native_ids` are the native tool call ids of its response.

    Tool artefacts are tool calls and returns of every kind (function, output, tool-search, capability-load and
    native/builtin tools), the files a native tool produced, tool-bound retry prompts, thinking (which would be
    orphaned without the calls it reasoned about) and tool-availability / capability-load state.
    """
    if isinstance(part, _ALWAYS_TOOL_PARTS):
        return True
    if isinstance(part, FilePart):
        return part.id is not None and part.id in native_ids
    if part.part_kind == 'retry-prompt':  # the deprecated `RetryPromptPart`, by its kind
        return part.tool_name is not None
    return False


def strip_tool_parts(messages: Iterable[ModelMessage]) -> tuple[ModelMessage, ...]:
    """Strip every tool artefact from `messages`; messages left without parts are dropped.

    Messages that lose nothing are returned as they are; the others are rebuilt with their remaining parts and
    every other field unchanged. The input is never mutated.
    """

    def keeps(message: ModelMessage) -> Callable[[Part], bool]:
        native_ids = tool_file_ids(message)
        return lambda part: not is_tool_artefact(part, native_ids)

    return tuple(keep_parts(messages, keeps))


def remove_all_tools(handoff_input_data: HandoffInputData) -> HandoffInputData:
    """Filter out all tool items: the delegate sees the conversation's user, system and assistant text only.

    Every tool artefact (see below) is removed part by part from `input_history`, `pre_handoff_items`,
    `new_items` and, when it is not `None`, `input_items`, so it can be chained after
    [`nest_handoff_history`][pydantic_ai_harness.handoffs.nest_handoff_history] or another filter. Messages left
    without parts are dropped. A `str` history is left untouched, and so are summaries written by
    `nest_handoff_history` (they are assistant text).

    Removed: tool calls and returns of every kind (function and output tools, tool search, capability loading,
    native/builtin tools with the files they produced), retry prompts bound to a tool, thinking, and
    tool-availability / capability-load state. Calls and returns are removed together, so nothing is orphaned.
    Kept: user prompts, system prompts, assistant text, speech, model-generated files, compaction and retry
    feedback that is not bound to a tool.

    Args:
        handoff_input_data: The handoff input to filter.

    Returns:
        A copy without tool artefacts; equal to the input when there was nothing to remove.
    """
    data = handoff_input_data
    history = data.input_history
    return data.clone(
        input_history=history if isinstance(history, str) else strip_tool_parts(history),
        pre_handoff_items=strip_tool_parts(data.pre_handoff_items),
        new_items=strip_tool_parts(data.new_items),
        input_items=None if data.input_items is None else strip_tool_parts(data.input_items),
    )
