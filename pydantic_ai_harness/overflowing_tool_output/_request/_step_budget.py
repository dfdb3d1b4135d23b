"""A budget across the parallel tool calls of one model response: which returns to reduce, and what to say.

Each return may sit under every band and still, with hundreds of siblings, flood the context. The plan here
depends only on the returns' sizes and their order in the model's response, never on the order the calls
finished in, so a durable replay reduces exactly the same returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from ..._typing import is_instance, is_int, is_list
from .._actions._bands import Action, Band
from .._actions._unit import Reduced, reduction_notes, with_notes
from .._events import VALUE_PREFIX
from .._media._file_items import documents_in, holds_documents
from .._rendering._render import Rendered, render_value
from .._rendering._text_wrapper import render_return

__all__ = (
    'STEP_ACTIONS',
    'StepBudget',
    'StepReturn',
    'StepTools',
    'fit_step',
    'plan_step',
    'step_action',
    'step_calls',
    'step_note',
)

_REDUCIBLE_OUTCOMES = ('success', 'retried', 'failed')
"""Returns whose text the tool wrote: its result, or its own `ModelRetry` / `ToolFailed` message. (Denied and
interrupted calls carry a short text of pydantic-ai's.)"""

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
        if not is_int(self.max_size) or self.max_size < 1:
            raise ValueError(f'step_budget.max_size must be a positive int, got {self.max_size!r}')
        if self.action is not None and not is_instance(self.action, Action):
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


@dataclass(frozen=True)
class StepTools:
    """What the step budget needs from the capability: how it measures, chooses and reduces."""

    measure: Callable[[Rendered], int]
    """The size of a rendered return, in the unit of the bands."""

    action_for: Callable[[str], Action | None]
    """The action a tool's return is reduced with, or `None` when that tool is never reduced."""

    selected: Callable[[str], Awaitable[bool]]
    """Whether the capability's `tool_filter` selects the tool."""

    reduce: Callable[[ToolCallPart, Action, Rendered, Any], Awaitable[Reduced | None]]
    """Reduce one return with one action (the capability's band loop, with that action as the only band)."""

    exempt: Callable[[str], bool]
    """Whether a tool's returns are never counted as reducible (the capability's own query tools)."""

    unit: str
    """`'characters'` or `'tokens'`, for the note."""

    image_size: Callable[[ToolReturnPart], int] | None = None
    """The size of a return's images, in the unit of the bands (the image band's estimate); `None`: not counted."""


async def fit_step(messages: Sequence[Any], budget: StepBudget, tools: StepTools) -> ModelRequest | None:
    """The last request with its largest tool returns reduced until the step fits, or `None` if it fits as it is."""
    found = step_calls(messages)
    if found is None:
        return None
    request, calls = found
    returns: list[StepReturn] = []
    parts: dict[int, tuple[int, ToolReturnPart, Rendered]] = {}  # position -> (index in request, part, rendered)
    for index, part in enumerate(request.parts):
        if not isinstance(part, ToolReturnPart) or part.tool_call_id not in calls:
            continue
        position = calls[part.tool_call_id][0]
        rendered = render_return(part.content)
        reducible = (
            # Files: the image band fitted images already and no action cuts them; documents in a list are reduced
            # one by one, as at tool execution.
            (rendered.kind != 'multimodal' or holds_documents(part.content))
            and not tools.exempt(part.tool_name)
            and part.outcome in _REDUCIBLE_OUTCOMES
            and not _reduced_already(part.metadata)
            and tools.action_for(part.tool_name) is not None
            and await tools.selected(part.tool_name)
        )
        images = tools.image_size(part) if tools.image_size is not None else 0
        returns.append(StepReturn(position, _size(part.content, rendered, tools) + images, reducible))
        parts[position] = (index, part, rendered)
    total = sum(item.size for item in returns)
    new_parts = list(request.parts)
    # Rounds: reduce the largest (assuming each then costs nothing), measure what they became, and go on
    # with the next largest while the step is still over. The order depends on sizes and positions only.
    slots = {item.position: slot for slot, item in enumerate(returns)}
    while plan := plan_step(returns, budget.max_size):
        for position in plan:
            index, part, rendered = parts[position]
            slot = slots[position]
            action = tools.action_for(part.tool_name)
            reduced = (
                None
                if action is None
                else await tools.reduce(calls[part.tool_call_id][1], action, rendered, part.content)
            )
            value: object = reduced.value if reduced is not None else None
            if reduced is None or reduced.action not in STEP_ACTIONS or not (isinstance(value, str) or is_list(value)):
                returns[slot] = replace(returns[slot], reducible=False)
                continue
            note = step_note(
                calls=len(returns),
                total=total,
                budget=budget.max_size,
                size=returns[slot].size,
                action=STEP_ACTIONS[reduced.action],
                unit=tools.unit,
            )
            # (a list whose documents were reduced one by one: the note is its first item)
            content: str | list[Any] = note + value if isinstance(value, str) else [note.rstrip('\n'), *value]
            returns[slot] = StepReturn(position, _size(content, render_value(content), tools), reducible=False)
            notes = {**reduction_notes(VALUE_PREFIX, reduced), 'overflow_step_budget': budget.max_size}
            new_parts[index] = replace(part, content=content, metadata=with_notes(part.metadata, notes))
    if new_parts == list(request.parts):
        return None
    return replace(request, parts=new_parts)


def _size(content: object, rendered: Rendered, tools: StepTools) -> int:
    """A return's size: its text, and the bytes of the documents in it (a list's files are sent natively, so its
    rendering counts its text alone), each measured as a lone document is.
    """
    documents = documents_in(content)
    return tools.measure(rendered) + sum(tools.measure(Rendered('binary', '', data=doc.data)) for doc in documents)


def _reduced_already(metadata: object) -> bool:
    return isinstance(metadata, Mapping) and f'{VALUE_PREFIX}_action' in metadata


def step_action(
    budget: StepBudget,
    per_tool: Mapping[str, Sequence[Band]],
    bands_for: Callable[[str], Sequence[Band]],
    tool_name: str,
) -> Action | None:
    """The action the step budget reduces a return of `tool_name` with: its own, or the tool's smallest band's.

    `None` for a tool with `per_tool={name: []}`: that tool is never reduced.
    """
    if tool_name in per_tool and not per_tool[tool_name]:
        return None
    if budget.action is not None:
        return budget.action
    bands = bands_for(tool_name)
    return bands[-1].action if bands else None
