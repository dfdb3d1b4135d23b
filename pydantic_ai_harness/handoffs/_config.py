"""`HandoffConfig`, the run-level handoff settings, and the checks every handoff setting gets where it is given."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic_ai.exceptions import UserError

from ._data import HandoffHistoryMapper, HandoffInputFilter

__all__ = (
    'HandoffConfig',
    'SummaryRole',
    'check_flag',
    'check_history_mapper',
    'check_history_settings',
    'check_input_filter',
    'check_max_record_chars',
    'check_summary_role',
    'with_overrides',
)

SummaryRole = Literal['assistant', 'user']
"""Who the summary message speaks as: an assistant turn (as in the OpenAI Agents SDK) or a user turn."""

_MIN_RECORD_CHARS = 500


def check_summary_role(role: object) -> None:
    """Raise a `UserError` naming the choices unless `role` is `'assistant'` or `'user'`."""
    if role not in ('assistant', 'user'):
        raise UserError(f"summary_role must be 'assistant' or 'user', got {role!r}")


def check_max_record_chars(value: object) -> None:
    """Raise a `UserError` naming the setting unless `value` is `None` or an int of at least 500."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < _MIN_RECORD_CHARS:
        raise UserError(f'max_record_chars must be None or an int of at least {_MIN_RECORD_CHARS}, got {value!r}')


def check_flag(name: str, value: object) -> None:
    """Raise a `UserError` naming the setting `name` unless `value` is `True` or `False`."""
    if not isinstance(value, bool):
        raise UserError(f'{name} must be True or False, got {value!r}')


def check_input_filter(value: object) -> None:
    """Raise the OpenAI Agents SDK's `Invalid input filter: ...` unless `value` is `None` or callable."""
    if value is not None and not callable(value):
        raise UserError(f'Invalid input filter: {value}')


def check_history_mapper(value: object) -> None:
    """Raise `Invalid history mapper: ...` unless `value` is `None` or callable."""
    if value is not None and not callable(value):
        raise UserError(f'Invalid history mapper: {value}')


class _HistorySettings(Protocol):
    @property
    def input_filter(self) -> object: ...
    @property
    def nest_handoff_history(self) -> object: ...
    @property
    def history_mapper(self) -> object: ...
    @property
    def summary_role(self) -> object: ...
    @property
    def forward_system_prompt(self) -> object: ...


def check_history_settings(settings: _HistorySettings) -> None:
    """The checks of the settings `HandoffConfig` and `HandoffHistory` share, each naming its setting."""
    check_input_filter(settings.input_filter)
    check_flag('nest_handoff_history', settings.nest_handoff_history)
    check_history_mapper(settings.history_mapper)
    check_summary_role(settings.summary_role)
    check_flag('forward_system_prompt', settings.forward_system_prompt)


@dataclass(frozen=True)
class HandoffConfig:
    """Run-level handoff settings, the analogue of the OpenAI Agents SDK's `RunConfig` handoff fields.

    Values passed to [`delegate`][pydantic_ai_harness.handoffs.delegate] directly take precedence. Every setting is
    checked here, so a mistake is reported where it is made, naming the setting.
    """

    input_filter: HandoffInputFilter | None = None
    """The filter used when `delegate` is not given one."""

    nest_handoff_history: bool = False
    """Whether to nest the history when `delegate` does not say; off by default (an opt-in, as in the SDK)."""

    history_mapper: HandoffHistoryMapper | None = None
    """The mapper used for nesting when `delegate` is not given one; never passed to filters."""

    summary_role: SummaryRole = 'assistant'
    """Whether nesting writes its summaries as assistant turns (the OpenAI Agents SDK's choice) or as user turns."""

    forward_system_prompt: bool = False
    """Whether the delegating agent's system prompts reach the delegate (as they are, or as `system:` records of a
    summary). Off by default: the delegate runs under its own system prompts only, as in the SDK, where the
    receiving agent's instructions always apply and the sender's never do."""

    max_record_chars: int | None = 20_000
    """Nesting cuts the text of every summarized record longer than this (a tool output, a message), saying so;
    a cut tool output is saved in full to the store of the delegate's `OverflowingToolOutput` first, when it has
    one with a `store`, and the cut names its handle. The answer `Handoffs` records for a handoff is cut to it too
    when the run has no `OverflowingToolOutput` to reduce it. `None` keeps records whole, as in the SDK."""

    def __post_init__(self) -> None:
        check_history_settings(self)
        check_max_record_chars(self.max_record_chars)


def with_overrides(config: HandoffConfig, **overrides: Any) -> HandoffConfig:
    """`config` with every override that is not `None` in place of its own value, checked as at construction."""
    given = {name: value for name, value in overrides.items() if value is not None}
    return dataclasses.replace(config, **given) if given else config
