"""Aging as a request rule: the wiring from a held request to the planning and writes of `_aging`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext

from ._aging import Aging, AgingTools, Place, TokenCounts, age_request
from ._offload import large_texts, off_loop
from ._request_rules import HeldRequest

__all__ = ('AgingRule',)


@dataclass(frozen=True)
class AgingRule:
    """Old tool returns of the request moved out of the context as stubs naming handles (`Aging`)."""

    aging: Aging
    """The setting."""

    counts: TokenCounts
    """The capability's token counts of old returns, kept across requests and runs."""

    count: Callable[[str], int]
    """Tokens of a text (the capability's tokenizer, or about four characters per token)."""

    never_reduced: Callable[[str], bool]
    """Whether the named tool has `per_tool={name: []}`."""

    write: Callable[[RunContext[Any], str, bytes, float], Awaitable[tuple[str | None, str]]]
    """Store `(key, data, timeout)` through the durable store-write operation: `(handle, '')` or `(None, reason)`."""

    stored_size: Callable[[RunContext[Any], str, float], Awaitable[int | None]]
    """The bytes held under a handle where the query tools read it; `None` when missing, failing or too slow."""

    place: Callable[[str], Place]
    """Where a handle lives: how long its store keeps it, and whether it is a file of the run's workspace."""

    timeout: float
    """Seconds each store call may take (`Aging.timeout`, else the capability's `Spill` timeout)."""

    name: str = 'aging'
    """What the rule is called in a warning."""

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The messages with due returns replaced by stubs, when a batch is due (never the last request)."""
        ctx, exempt, selected = request.ctx, request.exempt, request.selected
        count = self.count

        async def ages(tool_name: str) -> bool:
            if tool_name in exempt:
                return True  # the query tools' answers age too: the same call gets them back
            if self.never_reduced(tool_name):
                return False
            return await selected(tool_name)

        async def count_many(texts: list[str]) -> list[int]:
            return await off_loop(ctx, lambda: [count(text) for text in texts], large=large_texts(texts))

        async def stored_size(handle: str) -> int | None:
            return await self.stored_size(ctx, handle, self.timeout)

        async def write(key: str, data: bytes, timeout: float) -> tuple[str | None, str]:
            return await self.write(ctx, key, data, timeout)

        tools = AgingTools(
            count,
            count_many,
            self.counts,
            ages,
            write,
            self.place,
            stored_size,
            self.timeout,
            exempt.__contains__,
            request.context[0],
            ctx.run_id,
            ctx.run_step,
        )
        return await age_request(ctx, request.messages, self.aging, tools)
