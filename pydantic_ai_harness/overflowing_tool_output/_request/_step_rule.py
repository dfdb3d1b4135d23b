"""The step budget as a request rule: the wiring from a held request to the pure plan in `_step_budget`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ToolCallPart, ToolReturnPart

from .._actions._bands import Action
from .._actions._unit import Reduced
from .._media._aging import ImageAging
from .._media._setting import ImageBand
from .._rendering._render import Rendered
from ._request_rules import HeldRequest
from ._step_budget import StepBudget, StepTools, fit_step

__all__ = ('StepBudgetRule',)


@dataclass(frozen=True)
class StepBudgetRule:
    """The tool returns of the step held to `budget`, largest first."""

    budget: StepBudget
    """The budget."""

    reduce: Callable[[HeldRequest, ToolCallPart, Action, Rendered, Any], Awaitable[Reduced | None]]
    """Reduce one return with one action (the capability's band loop, with that action as the only band)."""

    measure: Callable[[Rendered], int]
    """The size of a rendered return, in the unit of the bands."""

    action_for: Callable[[str], Action | None]
    """The action a tool's return is reduced with, or `None` when that tool is never reduced."""

    unit: str
    """What the sizes count, for the note: `characters` or `tokens`."""

    name: str = 'the step budget'
    """What the rule is called in a warning."""

    images: ImageBand | None = None
    """The image band: a return's images count toward the budget, as the serving model's provider prices them."""

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The step's last request with its largest returns reduced until the step fits."""

        async def reduce(call: ToolCallPart, action: Action, rendered: Rendered, original: Any) -> Reduced | None:
            return await self.reduce(request, call, action, rendered, original)

        tools = StepTools(
            measure=self.measure,
            action_for=self.action_for,
            selected=request.selected,
            reduce=reduce,
            exempt=request.exempt.__contains__,
            unit=self.unit,
            image_size=self._image_size(request),
        )
        new = await fit_step(request.messages, self.budget, tools)
        return {} if new is None else {id(request.messages[-1]): new}

    def _image_size(self, request: HeldRequest) -> Callable[[ToolReturnPart], int] | None:
        """A return's images in the unit of the budget: tokens, or about four characters per token."""
        if self.images is None:
            return None
        pricing = ImageAging(self.images.target(request.ctx.model), None)
        per_token = 1 if self.unit == 'tokens' else 4

        def size(part: ToolReturnPart) -> int:
            return per_token * pricing.image_tokens(part)

        return size
