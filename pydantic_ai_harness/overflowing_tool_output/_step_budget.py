"""A budget across the parallel tool calls of one model response: which returns to reduce, and what to say.

Each return may sit under every band and still, with hundreds of siblings, flood the context. The plan here
depends only on the returns' sizes and their order in the model's response, never on the order the calls
finished in, so a durable replay reduces exactly the same returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart

from ._bands import Action, Passthrough, Spill, Summarize, Truncate

__all__ = ('STEP_ACTIONS', 'StepBudget', 'StepReturn', 'plan_step', 'step_calls', 'step_note')

STEP_ACTIONS = {'spill': 'stored in full, with a preview here', 'truncate': 'truncated', 'summarize': 'summarized'}
"""The reductions the step budget applies, and how its note names each."""


@dataclass(frozen=True)
class StepBudget:
    """At most `max_size` for all the tool returns of one model response together.

    When the returns of one step add up to more, the largest are reduced, one at a time, until the step fits.
    Per-tool bands have already applied to each return by then.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, StepBudget

    capability = OverflowingToolOutput(step_budget=StepBudget(max_size=40_000))
    ```
    """

    max_size: int
    """The budget, in the unit of the bands: characters, or tokens with `over_tokens=True`."""

    action: Action | None = None
    """How a return is reduced: `None` uses the action of the smallest band of its tool; or one action for all,
    e.g. `Spill(preview_chars=500)`. A tool with `per_tool={name: []}` is never reduced."""

    def __post_init__(self) -> None:
        if isinstance(self.max_size, bool) or not isinstance(self.max_size, int) or self.max_size < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f'step_budget.max_size must be a positive int, got {self.max_size!r}')
        if self.action is not None and not isinstance(self.action, (Spill, Truncate, Summarize, Passthrough)):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f'step_budget.action must be an action (Spill, Truncate, Summarize) or None, got {self.action!r}'
            )


@dataclass(frozen=True)
class StepReturn:
    """One return of the step, as the plan sees it."""

    position: int
    """Its place among the step's calls, in the model's response."""

    size: int
    """Its measured size."""

    reducible: bool
    """Whether an action may reduce it (not a query tool, not a tool with no bands, not already reduced)."""


def plan_step(returns: Sequence[StepReturn], budget: int) -> list[int]:
    """The positions to reduce, largest first (ties: the earlier call first), until the rest fits in `budget`.

    Assumes a reduced return costs nothing; the caller re-plans with the real sizes after each round.
    """
    total = sum(item.size for item in returns)
    chosen: list[int] = []
    for item in sorted((r for r in returns if r.reducible), key=lambda r: (-r.size, r.position)):
        if total <= budget:
            break
        chosen.append(item.position)
        total -= item.size
    return chosen


def step_note(*, calls: int, total: int, budget: int, size: int, action: str, unit: str) -> str:
    """The line put above a return the step budget reduced, for the model."""
    return (
        f'[Step budget: the {calls} tool results of this step came to {total} {unit}, over the budget of '
        f'{budget}; this one ({size} {unit}, one of the largest) was {action}.]\n'
    )


def step_calls(messages: Sequence[Any]) -> tuple[ModelRequest, dict[str, tuple[int, ToolCallPart]]] | None:
    """The last request, if it answers the tool calls of the response before it, and those calls by id."""
    if len(messages) < 2 or not isinstance(messages[-1], ModelRequest) or not isinstance(messages[-2], ModelResponse):
        return None
    request, response = messages[-1], messages[-2]
    calls = {part.tool_call_id: (position, part) for position, part in enumerate(response.tool_calls)}
    return (request, calls) if calls else None
