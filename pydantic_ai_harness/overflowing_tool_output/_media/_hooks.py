"""`ImageHooks`: the image band's part of `OverflowingToolOutput`, a base class of it so the capability's own class
stays within its size: the `images` field, the view tool offered beside the query tools, the fitting step its
`after_tool_execute` runs, and the durable operations the media work runs in under an engine: `overflow_fit_image`
(an image, or an image blob shown) and `overflow_read_pdf` (a PDF's pages).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic_ai.capabilities import AbstractCapability, durable_operation
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import AgentDepsT, RunContext, ToolDefinition, ToolSelector, matches_tool_selector
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset

from ..._typing import is_instance
from .._redaction._withhold import SecretWithholding
from ..stores._protocol import OverflowStore
from ..stores._workspace import WorkspaceSpill, route_for_run
from ._durable import fit_answer, fit_through
from ._images import fit_result_images
from ._pdf_reading import pdf_answer
from ._setting import ImageBand
from ._steps import DurableMedia
from ._view_tool import build_view_toolset

__all__ = ('ImageHooks',)

Writer = Callable[[RunContext[Any], str, bytes, float], Awaitable[tuple[str | None, str]]]


@dataclass
class ImageHooks(AbstractCapability[AgentDepsT]):
    """The image band of `OverflowingToolOutput` (its `images` field), apart from the capability's other hooks."""

    images: ImageBand | None = field(default_factory=ImageBand, kw_only=True)
    """Images in tool returns: sent as they are when they fit the serving model, else as a copy that fits, the
    original stored under a handle the model looks at again with `view_tool_result_image`. `None`: images pass as
    they are. See [`ImageBand`][pydantic_ai_harness.overflowing_tool_output.ImageBand]."""

    _view_toolset: AbstractToolset[Any] | None = field(default=None, init=False, repr=False, compare=False)
    _image_write: Writer | None = field(default=None, init=False, repr=False, compare=False)
    _image_withholding: SecretWithholding | None = field(default=None, init=False, repr=False, compare=False)

    def _set_up_images(
        self,
        store: OverflowStore,
        workspace: WorkspaceSpill | None,
        write: Writer,
        withholding: SecretWithholding | None = None,
    ) -> None:
        """Check `images` and build the view tool once (its schema is generated with it, not on every run)."""
        if self.images is not None and not is_instance(self.images, ImageBand):
            raise TypeError(f'images must be an ImageBand or None, got {type(self.images).__name__}')
        self._image_write = write
        self._image_withholding = withholding
        if self.images is None:
            return

        def route(ctx: RunContext[Any], handle: str) -> OverflowStore:
            return route_for_run(store, workspace)(ctx, handle) if workspace is not None else store

        self._view_toolset = build_view_toolset(
            self.images, route, store_timeout=self.images.timeout, before_offer=self._settle_ledger
        )

    def get_toolset(self) -> AbstractToolset[AgentDepsT] | None:
        """The query tools the model pages back into spills with, and the image view tool; none when no setting can
        ever store an output and images are off.

        Tool definitions are sent with every request, so a configuration that only truncates (or summarizes
        without keeping the original) pays nothing for the query tools. When one can store, they are offered from
        the first request on, so the tool list never changes within a run. The view tool is offered only once the
        conversation holds a stored image: a text-only session pays nothing for it.
        """
        toolset = self._text_toolset()
        if self._view_toolset is None:
            return toolset
        return self._view_toolset if toolset is None else CombinedToolset([toolset, self._view_toolset])

    def _text_toolset(self) -> AbstractToolset[AgentDepsT] | None:
        """The query tools (the capability's)."""
        raise NotImplementedError

    def bands_for(self, tool_name: str) -> tuple[Any, ...]:
        """The bands that apply to `tool_name` (the capability's)."""
        raise NotImplementedError

    def _settle_ledger(self, ctx: RunContext[Any]) -> None:
        """Settle a compaction made since the last request (the capability's)."""
        raise NotImplementedError

    async def _fit_images(
        self,
        ctx: RunContext[AgentDepsT],
        call: ToolCallPart,
        tool_def: ToolDefinition,
        result: Any,
        tools: ToolSelector[AgentDepsT],
    ) -> Any:
        """`result` with its images fitted, for a tool `tools` selects that has bands (`per_tool={name: []}`: as is)."""
        if self.images is None or self._image_write is None or not self.bands_for(tool_def.name):
            return result
        if not await matches_tool_selector(tools, ctx, tool_def):
            return result
        fit = partial(fit_through, self._fit_image_durably)
        return await fit_result_images(
            ctx, call, result, self.images, self._image_write, fit, withholding=self._image_withholding
        )

    def _durable_media(self) -> DurableMedia:
        """The durable operations the media step runs in workflow code: fitting an image blob, reading a PDF."""
        return DurableMedia(partial(fit_through, self._fit_image_durably), self._read_pdf_durably)

    @durable_operation(name='overflow_read_pdf')
    async def _read_pdf_durably(
        self, ctx: RunContext[AgentDepsT], data_b64: str, check_only: bool = False
    ) -> dict[str, Any]:
        """Read one PDF's pages, masked with secret redaction on: a durable unit under an engine (never workflow code,
        and a replay reuses the recorded text). `check_only`: only whether it held a secret and was checked whole.
        A file that cannot be read is an answer too.
        """
        withholding = self._image_withholding
        mask = withholding.mask_text if withholding is not None else None
        return await pdf_answer(data_b64, mask, check_only=check_only)

    @durable_operation(name='overflow_fit_image')
    async def _fit_image_durably(
        self, ctx: RunContext[AgentDepsT], data_b64: str, info: dict[str, Any], target: dict[str, Any]
    ) -> dict[str, Any]:
        """Fit one image: a durable unit under an engine (never workflow code, and a replay reuses the recorded copy).
        Refusals are returned, not raised, so they are recorded too.
        """
        return await fit_answer(data_b64, info, target)
