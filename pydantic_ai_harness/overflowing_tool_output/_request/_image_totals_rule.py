"""A request's images within what the serving model takes in one request, as a request rule: the wiring from a held
request to the plan of `_media/_request_limits`, and the moves, made as aging makes them (each image stored under a
handle, the return left as a stub that names them; the images of its `ToolReturn.content` go with it). It runs whenever
the image band is on, with or without `Aging`: a request the provider would reject for its images' total is never sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart

from .._media._aging import ImageAging
from .._media._content_images import content_images, has_content_images
from .._media._images import is_image
from .._media._request_limits import ImageEntry, over_request_limits, request_limits
from .._media._sniff import sniff_image
from ._aging import DueReturn, age_items, report_batch
from ._aging_rule import AgingKit
from ._request_rules import HeldRequest

__all__ = ('ImageTotalsRule',)


@dataclass(frozen=True)
class ImageTotalsRule:
    """The oldest tool returns holding images moved out of the request until its images fit the serving model."""

    kit: AgingKit
    """What moving a return out needs from the capability (its `images` is set: the rule exists only then)."""

    name: str = 'image totals'
    """What the rule is called in a warning."""

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The messages with the chosen returns replaced by stubs; empty when the request's images fit."""
        images = self.kit.images
        if images is None:
            return {}
        ctx = request.ctx
        target = images.target(request.model if request.model is not None else ctx.model)
        aging = ImageAging(target, images.keep_newest)
        entries, places = _image_entries(request.messages, aging)
        if not entries:
            return {}
        chosen = over_request_limits(entries, request_limits(target))
        if not chosen:
            return {}
        tools = self.kit.tools(ctx, request.exempt, request.selected, request.context[0], None)
        due: list[DueReturn] = []
        for index in chosen:
            message, position, part = places[index]
            if not await tools.selected(part.tool_name):
                continue  # `per_tool={name: []}` or outside `tool_filter`: the user keeps it where it is
            due.append(DueReturn(message, position, part, aging.image_tokens(part, message, position), None))
        if not due:
            return {}
        batch = await age_items(due, tools)
        await report_batch(ctx, request.messages, batch, tools)
        return batch.replacements


def _image_entries(
    messages: list[ModelMessage], aging: ImageAging
) -> tuple[list[ImageEntry], dict[int, tuple[ModelRequest, int, ToolReturnPart]]]:
    """Every part of the request with images given as bytes, in order, and where each movable one is."""
    entries: list[ImageEntry] = []
    places: dict[int, tuple[ModelRequest, int, ToolReturnPart]] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        sent_with: set[int] = set()  # prompt parts holding a return's `ToolReturn.content`: counted with the return
        for position, part in enumerate(message.parts):
            movable = False
            if type(getattr(part, 'content', None)) is str and not _sent_content_images(part):
                continue  # most parts: a text, no image (this runs every request)
            if isinstance(part, ToolReturnPart):
                files: list[object] = list(part.files)
                if type(part) is ToolReturnPart and aging.holds(part, message, position):
                    movable = True
                    places[len(entries)] = (message, position, part)
                    found = content_images(message, position, verify=False)
                    if found is not None:
                        files += [item for _, item in found.images]
                        sent_with.add(found.part_index)
            elif isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                if position in sent_with:
                    continue
                files = list(part.content)
            else:
                continue
            sizes = tuple(_size(item) for item in files if is_image(item))
            if sizes:
                entries.append(ImageEntry(movable, sizes))
            else:
                places.pop(len(entries), None)
    return entries, places


def _sent_content_images(part: object) -> bool:
    """Whether `part` is a tool return whose `ToolReturn.content` was sent with images (its text is no sign)."""
    return type(part) is ToolReturnPart and has_content_images(part)


def _size(item: BinaryContent) -> tuple[int, int, int]:
    """An image's width, height (0, 0 when its header cannot be read) and bytes."""
    info = sniff_image(item.data)
    return (info.width, info.height, len(item.data)) if info is not None else (0, 0, len(item.data))
