"""`view_tool_result_image`: the model looks again at a stored image, or any region of it, at the most detail the
serving model takes.

Offered only once the conversation holds a stored image (`images_in_conversation`), so a text-only session pays no
tokens for its definition. The answer is a `ToolReturn` whose value holds one line and the image (`BinaryImage`).
Bounded like the query tools: a payload larger than `MAX_VIEW_BYTES` is not read, a header declaring more pixels
than the setting decodes is refused, and decoding runs in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import Any

import anyio
from pydantic_ai import FunctionToolset, RunContext, Tool
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import BinaryImage, CompactionPart, ModelMessage, ModelRequest, ToolReturn, ToolReturnPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from ..._typing import is_list, is_mapping
from .._events import AGED_PREFIX
from .._query_tools._handles import clean_handle
from ..stores._paths import MAX_HANDLE_LENGTH
from ..stores._protocol import HandleNotFoundError, OverflowStore, payload_size
from ._fit import ImageRefused, PillowMissing, crop_image, read_info
from ._images import IMAGES_KEY
from ._markers import VIEW_TOOL_NAME, size_text
from ._pdf_view import page_image
from ._setting import ImageBand

__all__ = (
    'AGED_IMAGES_KEY',
    'IMAGE_LEDGER_KEY',
    'MAX_VIEW_BYTES',
    'VIEW_TOOLSET_ID',
    'build_view_toolset',
    'images_in_conversation',
    'stored_image_handles',
)

VIEW_TOOLSET_ID = 'overflowing_tool_output_images'
"""The id of the toolset holding the view tool."""

AGED_IMAGES_KEY = f'{AGED_PREFIX}_images'
"""The metadata key listing the handles of the images an aged return held."""

MAX_VIEW_BYTES = 256 * 1024 * 1024
"""A stored payload larger than this is not read to be viewed."""

VIEW_MARK = {'overflowing_tool_output': 'view_image'}
"""Marks the view tool's definition, so the capability leaves its answers as they are."""

_VIEW_DOC = (
    'Show a stored image, or the region x,y,width,height of it (original pixels; 0: to the edge) in more detail. '
    'For a stored PDF: page (from 1).'
)

Route = Callable[[RunContext[Any], str], OverflowStore]


IMAGE_LEDGER_KEY = 'overflow_image_handles'
"""`CompactionPart.metadata` key: the handles of the stored images (and PDFs) of the history a compaction replaced,
so the view tool is still offered and still names them (`_request/_ledger`)."""

IMAGE_LEDGER_ENTRIES = 5_000
"""The most entries of one compaction part's image ledger read (untrusted metadata: it may be any length)."""

IMAGE_HANDLES_READ = 20_000
"""The most image handles read across a whole history, newest first (forged ledgers on every part would otherwise
make each offer of the view tool walk millions of entries)."""


def stored_image_handles(messages: Sequence[ModelMessage], limit: int = IMAGE_HANDLES_READ) -> list[str]:
    """The handles of the images (and PDFs) the conversation stored (fitted or aged, or in a compaction's ledger),
    oldest first: the newest `limit` of them. Metadata is untrusted: a handle no store makes (empty, too long) is not
    read, and forged lists cost a bounded walk.
    """
    newest = list(islice(_newest_image_handles(messages), limit))
    newest.reverse()
    return newest


def _newest_image_handles(messages: Sequence[ModelMessage]) -> Iterator[str]:
    """The handles `stored_image_handles` reads, newest first, one part at a time."""
    for message in reversed(messages):
        for part in reversed(message.parts):
            found: list[object] = []
            if isinstance(part, CompactionPart) and is_mapping(part.metadata):
                ledger: object = part.metadata.get(IMAGE_LEDGER_KEY)
                if is_list(ledger):
                    found.extend(ledger[:IMAGE_LEDGER_ENTRIES])
            elif isinstance(message, ModelRequest) and isinstance(part, ToolReturnPart) and is_mapping(part.metadata):
                records: object = part.metadata.get(IMAGES_KEY)
                if is_list(records):
                    found.extend(
                        record.get('handle') for record in records[:IMAGE_LEDGER_ENTRIES] if is_mapping(record)
                    )
                aged: object = part.metadata.get(AGED_IMAGES_KEY)
                if is_list(aged):
                    found.extend(aged[:IMAGE_LEDGER_ENTRIES])
            for handle in reversed(found):
                if isinstance(handle, str) and 0 < len(handle) <= MAX_HANDLE_LENGTH:
                    yield handle


def _unknown_image(ctx: RunContext[Any], meant: str) -> str:
    """The answer to a handle nothing is stored under: the newest images the conversation stored."""
    try:
        messages = ctx.messages
    except UserError:  # a durable activity: its context carries no messages
        return f"No stored image under '{meant}'. Use a handle exactly as an image's or a PDF's line names it."
    listed = ', '.join(f"'{known_handle}'" for known_handle in stored_image_handles(messages, 5)) or 'none'
    return f"No stored image under '{meant}'. The newest images and PDFs stored in this conversation: {listed}."


def _serving_model(ctx: RunContext[Any]) -> Any:
    """The run's model, or `None` where the run context does not carry it (a Temporal activity): then the image is
    fitted to the defaults every provider accepts.
    """
    try:
        return ctx.model
    except Exception:  # noqa: BLE001 - pydantic-ai's durable run contexts raise their own errors for missing fields
        return None


def images_in_conversation(messages: Sequence[ModelMessage]) -> bool:
    """Whether the conversation holds a stored image (then the view tool is offered)."""
    return next(_newest_image_handles(messages), None) is not None


def is_view_tool(tool_def: ToolDefinition) -> bool:
    """Whether `tool_def` is the view tool (under any name)."""
    return tool_def.toolset_id == VIEW_TOOLSET_ID or VIEW_MARK.items() <= (tool_def.metadata or {}).items()


def build_view_toolset(
    setting: ImageBand,
    route: Route,
    *,
    store_timeout: float = 30.0,
    before_offer: Callable[[RunContext[Any]], None] | None = None,
) -> AbstractToolset[Any]:
    """The view tool over the stores `route` picks, offered once the conversation holds a stored image.

    `before_offer`: run before the conversation is looked at (the capability's ledger settles a compaction made
    since the last request, so the images it took out still count).
    """

    async def view_tool_result_image(
        ctx: RunContext[Any], handle: str, x: int = 0, y: int = 0, width: int = 0, height: int = 0, page: int = 0
    ) -> ToolReturn | str:
        meant = clean_handle(handle)
        if min(x, y, width, height) < 0:
            return 'x, y, width and height must be 0 or more (pixels of the original; width=0: to the right edge).'
        if page < 0:
            return 'page must be 1 or more (the first page is 1), and only for a stored PDF.'
        store = route(ctx, meant)
        try:
            with anyio.fail_after(store_timeout):
                size = await payload_size(store, meant)
                if size > MAX_VIEW_BYTES:
                    return f"The stored payload '{meant}' is {size_text(size)}, too large to view here."
                data = await store.read(meant)
        except (HandleNotFoundError, KeyError, FileNotFoundError):
            if before_offer is not None:
                before_offer(ctx)
            return _unknown_image(ctx, meant)
        except TimeoutError:
            return (
                f"The stored image '{meant}' could not be read right now (the store did not answer). Try again later."
            )
        except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
            return f"The stored image '{meant}' could not be read: {type(exc).__name__}."
        target = setting.target(_serving_model(ctx))
        data, problem = await page_image(data, meant, page, target.long_edge)
        if problem:
            return problem
        try:
            info = await anyio.to_thread.run_sync(partial(read_info, data, setting.max_decode_pixels))
        except (ImageRefused, PillowMissing) as exc:
            return f"The payload '{meant}' cannot be shown as an image: {exc}."
        if x >= info.width or y >= info.height:
            return f'x={x}, y={y} is outside the image, which is {info.width}x{info.height} px.'
        right = info.width if width == 0 else min(info.width, x + width)
        bottom = info.height if height == 0 else min(info.height, y + height)
        lossless = info.media_type != 'image/jpeg'
        try:
            shown = await anyio.to_thread.run_sync(
                partial(crop_image, data, info, (x, y, right, bottom), target, lossless=lossless)
            )
        except (ImageRefused, PillowMissing) as exc:
            return f"The image '{meant}' cannot be shown: {exc}."
        scale = 'full detail' if shown.width >= right - x else f'scaled to {shown.width}x{shown.height}'
        line = f"Region x={x}..{right}, y={y}..{bottom} of the {info.width}x{info.height} image '{meant}' ({scale}):"
        record = {'handle': meant, 'box': [x, y, right, bottom], 'sent': [shown.width, shown.height, shown.media_type]}
        return ToolReturn(
            return_value=[line, BinaryImage(shown.data, media_type=shown.media_type)],
            metadata={'overflow_view': record},
        )

    view_tool_result_image.__doc__ = _VIEW_DOC
    toolset = FunctionToolset[Any](
        [Tool(view_tool_result_image, name=VIEW_TOOL_NAME)],
        id=VIEW_TOOLSET_ID,
        max_retries=5,
        metadata=dict(VIEW_MARK),
    )

    def offered(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        if before_offer is not None:
            before_offer(ctx)
        return images_in_conversation(ctx.messages)

    return toolset.filtered(offered)
