"""Aging as a request rule: the wiring from a held request to the planning and writes of `_aging`, and the toolkit
lossless compaction moves returns with too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext

from .._media._aging import ImageAging
from .._media._setting import ImageBand
from .._offload import large_texts, off_loop
from ._aging import Aging, AgingTools, Place, TokenCounts, age_request
from ._request_rules import HeldRequest, Selected

__all__ = ('AgingKit', 'AgingRule')

_T = TypeVar('_T')


@dataclass(frozen=True)
class AgingKit:
    """What moving returns out of the context needs from the capability, for aging and for lossless compaction."""

    counts: TokenCounts
    """The capability's token counts of old returns, kept across requests and runs."""

    count: Callable[[str], int]
    """Tokens of a text (the capability's tokenizer, or about four characters per token)."""

    never_reduced: Callable[[str], bool]
    """Whether the named tool has `per_tool={name: []}`."""

    write: Callable[[RunContext[Any], str, bytes, float], Awaitable[tuple[str | None, str]]]
    """Store `(key, data, timeout)` through the durable store-write operation: `(handle, '')` or `(None, reason)`."""

    stored_size: Callable[[RunContext[Any], str, float], Awaitable[tuple[int | None, bool]]]
    """The bytes held under a handle where the query tools read it (`None`: none), and whether the store answered."""

    place: Callable[[str], Place]
    """Where a handle lives: how long its store keeps it, and whether it is a file of the run's workspace."""

    timeout: float
    """Seconds each store call may take when the setting gives none (the capability's `Spill` timeout)."""

    images: ImageBand | None = None
    """The image band: returns holding images age too, priced as the serving model counts them."""

    def tools(
        self,
        ctx: RunContext[Any],
        exempt: frozenset[str],
        selected: Selected,
        window: int | None,
        timeout: float | None,
    ) -> AgingTools:
        """Aging's toolkit for one request of `ctx`: `exempt` are the query tools by their offered names."""
        count = self.count
        seconds = timeout or self.timeout

        async def ages(tool_name: str) -> bool:
            if tool_name in exempt:
                return True  # the query tools' answers age too: the same call gets them back
            if self.never_reduced(tool_name):
                return False
            return await selected(tool_name)

        async def count_many(texts: list[str]) -> list[int]:
            return await off_loop(ctx, lambda: [count(text) for text in texts], large=large_texts(texts))

        async def stored_size(handle: str) -> tuple[int | None, bool]:
            return await self.stored_size(ctx, handle, seconds)

        async def write(key: str, data: bytes, timeout: float) -> tuple[str | None, str]:
            return await self.write(ctx, key, data, timeout)

        async def in_worker(work: Callable[[], _T], large: bool) -> _T:
            return await off_loop(ctx, work, large=large)

        return AgingTools(
            count,
            count_many,
            self.counts,
            ages,
            write,
            self.place,
            stored_size,
            seconds,
            exempt.__contains__,
            window,
            ctx.run_id,
            ctx.run_step,
            ImageAging(self.images.target(ctx.model), self.images.keep_newest) if self.images is not None else None,
            in_worker,
        )


@dataclass(frozen=True)
class AgingRule:
    """Old tool returns of the request moved out of the context as stubs naming handles (`Aging`)."""

    aging: Aging
    """The setting."""

    kit: AgingKit
    """What moving a return out needs from the capability."""

    name: str = 'aging'
    """What the rule is called in a warning."""

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The messages with due returns replaced by stubs, when a batch is due (never the last request)."""
        ctx = request.ctx
        tools = self.kit.tools(ctx, request.exempt, request.selected, request.context[0], self.aging.timeout)
        return await age_request(ctx, request.messages, self.aging, tools)
