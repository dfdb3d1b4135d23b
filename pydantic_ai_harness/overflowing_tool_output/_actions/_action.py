"""What every action is: the `Action` base (`reduce`, and what the configuration checks ask of it), `Passthrough`,
the checks the actions' settings share, and the `then` chain.

The band loop runs `action.reduce(unit)` and reads the answers of the properties below; it never asks which action
it holds. `Truncate`, `Spill` and `Summarize` live in modules of their own names, beside the work they do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._unit import ActionContext, Reduced

__all__ = (
    'DEFAULT_PREVIEW_CHARS',
    'DEFAULT_TRUNCATE_CHARS',
    'MIN_TRUNCATE_CHARS',
    'Action',
    'Passthrough',
    'action_chain',
    'check_int',
    'check_seconds',
    'check_then',
)

DEFAULT_TRUNCATE_CHARS = 5_000
"""The default character budget of `Truncate`: half the default spill threshold."""

DEFAULT_PREVIEW_CHARS = 1_000
"""The default character budget of a spill preview."""

MIN_TRUNCATE_CHARS = 200
"""Below this a truncation marker no longer fits with any useful text around it."""


class Action(ABC):
    """A reduction action: `Passthrough`, `Truncate`, `Spill` or `Summarize`.

    The type of `Band.action` and of every `then`. Actions are immutable dataclasses; each takes a `then` action
    used when it cannot run.
    """

    then: Action | None
    """What to do when this action cannot reduce the return."""

    @property
    def reduces(self) -> bool:
        """Whether the action changes what the model sees (`Passthrough` does not, and so never falls back)."""
        return True

    @property
    def writes_store(self) -> bool:
        """Whether the action writes the payload to the store (so the query tools are offered)."""
        return False

    @property
    def spill_timeout(self) -> float | None:
        """The seconds a spill's store write may take, for an action that spills; `None` for the others."""
        return None

    @property
    def summarizes(self) -> bool:
        """Whether the action writes a summary (judged on its length: one not shorter than the output is none)."""
        return False

    @abstractmethod
    async def reduce(self, unit: ActionContext) -> tuple[Reduced | None, str]:
        """Reduce one unit of a tool return: the replacement, or `None` and why it could not (then `then` runs)."""


@dataclass(frozen=True)
class Passthrough(Action):
    """Leave the matching return untouched: an explicit no-op for a band or a `per_tool` list."""

    then: Action | None = None
    """Accepted like every action's `then`, and never used: leaving a return as it is always succeeds."""

    def __post_init__(self) -> None:
        check_then(self.then, 'Passthrough')

    @property
    def reduces(self) -> bool:
        """A passthrough leaves the return as it is."""
        return False

    async def reduce(self, unit: ActionContext) -> tuple[Reduced | None, str]:
        """Nothing to do: the return stays as it is."""
        return None, 'passthrough'


def action_chain(action: Action | None) -> Iterator[Action]:
    """`action`, then its `then` fallback, and so on (a `Passthrough` ends the chain: it cannot fail)."""
    while action is not None:
        yield action
        action = action.then if action.reduces else None


def check_seconds(value: object, where: str) -> None:
    """Refuse anything but a positive number of seconds, naming the setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f'{where} must be a positive number of seconds, got {type(value).__name__} {value!r}')
    if not value > 0:  # also refuses NaN
        raise ValueError(f'{where} must be a positive number of seconds, got {value!r}')


def check_int(value: object, where: str, minimum: int) -> None:
    """Refuse anything but an int of at least `minimum`, naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'{where} must be an int, got {type(value).__name__} {value!r}')
    if value < minimum:
        raise ValueError(f'{where} must be at least {minimum}, got {value}')


def check_then(then: object, owner: str) -> None:
    """Refuse a `then` that is not an action, naming the action it was given to."""
    if then is not None and not isinstance(then, Action):
        raise TypeError(
            f'{owner}.then must be an action (Passthrough, Truncate, Spill or Summarize) or None, '
            f'got {type(then).__name__}'
        )
