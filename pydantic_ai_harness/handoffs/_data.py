"""`HandoffInputData`, what a handoff input filter receives and returns, and the filter and mapper types."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from .._typing import is_items

__all__ = ('HandoffHistoryMapper', 'HandoffInputData', 'HandoffInputFilter')


def _messages_tuple(value: Any, field_name: str) -> tuple[ModelMessage, ...]:
    if not is_items(value):
        raise TypeError(
            f'`HandoffInputData.{field_name}` must be a tuple of `ModelMessage`, got {type(value).__name__}.'
        )
    items = tuple(value)
    for index, message in enumerate(items):
        if not isinstance(message, ModelRequest | ModelResponse):
            raise TypeError(
                f'`HandoffInputData.{field_name}[{index}]` must be a `ModelRequest` or `ModelResponse`, '
                f'got {type(message).__name__}.'
            )
    return items


@dataclass(frozen=True)
class HandoffInputData:
    """The history a delegate agent is about to receive, split in three segments, as an input filter sees it.

    Build it from a delegating tool's context with
    [`handoff_input_from_context`][pydantic_ai_harness.handoffs.handoff_input_from_context]; filters such as
    [`remove_all_tools`][pydantic_ai_harness.handoffs.remove_all_tools] and
    [`nest_handoff_history`][pydantic_ai_harness.handoffs.nest_handoff_history] return a changed copy made with
    [`clone`][pydantic_ai_harness.handoffs.HandoffInputData.clone], and
    [`to_message_history`][pydantic_ai_harness.handoffs.HandoffInputData.to_message_history] gives the delegate's
    `message_history`.

    Lists are accepted wherever a tuple of messages is expected and stored as tuples.
    """

    input_history: str | tuple[ModelMessage, ...]
    """The history as it stood before the current run's model started generating, including the current user
    prompt. A `str` is a single user prompt."""

    pre_handoff_items: tuple[ModelMessage, ...]
    """The messages this run produced before the turn in which the handoff was made."""

    new_items: tuple[ModelMessage, ...]
    """The messages of the handoff turn: the response that made the delegating call, and the request answering it."""

    run_context: RunContext[Any] | None = None
    """The delegating run's context at handoff time, if known."""

    input_items: tuple[ModelMessage, ...] | None = None
    """When not `None`, what the delegate receives in place of `new_items` (`()` for nothing). `None` means
    `new_items`."""

    def __post_init__(self) -> None:
        if not isinstance(self.input_history, str):
            object.__setattr__(self, 'input_history', _messages_tuple(self.input_history, 'input_history'))
        object.__setattr__(self, 'pre_handoff_items', _messages_tuple(self.pre_handoff_items, 'pre_handoff_items'))
        object.__setattr__(self, 'new_items', _messages_tuple(self.new_items, 'new_items'))
        if self.input_items is not None:
            object.__setattr__(self, 'input_items', _messages_tuple(self.input_items, 'input_items'))

    def clone(self, **changes: Any) -> HandoffInputData:
        """Return a copy with the given fields replaced (as `dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)

    def to_message_history(self) -> list[ModelMessage]:
        """The delegate's `message_history`: `input_history`, then `pre_handoff_items`, then `input_items` if it is
        not `None`, else `new_items`.

        A `str` history becomes one request holding a user prompt; messages without parts are dropped.
        """
        history: list[ModelMessage]
        if isinstance(self.input_history, str):
            history = [ModelRequest(parts=[UserPromptPart(self.input_history)])]
        else:
            history = list(self.input_history)
        history.extend(self.pre_handoff_items)
        history.extend(self.new_items if self.input_items is None else self.input_items)
        return [message for message in history if message.parts]


HandoffInputFilter: TypeAlias = Callable[[HandoffInputData], HandoffInputData | Awaitable[HandoffInputData]]
"""A function that rewrites what a delegate receives: takes a `HandoffInputData`, returns one (sync or async)."""

HandoffHistoryMapper: TypeAlias = Callable[[list[ModelMessage]], list[ModelMessage]]
"""A synchronous function that turns the flattened, chronological transcript of a handoff into the delegate's
history, in place of the default single summary message."""
