"""Images of `ToolReturn.content` belong to their tool return: recorded when the band fits them, found again when the
return ages.

pydantic-ai sends a tool's `ToolReturn.content` as a `UserPromptPart` of its own, in the same request, after the
request's tool return parts. Aging moves those images out with the return they came with, and never a user's own
prompt images: so the band records in the return's metadata (`CONTENT_IMAGES_KEY`) each image it left in the content,
by its size and a digest of its bytes (which, unlike a tool's own `identifier`, survive a serialized history), and
aging claims the first `UserPromptPart` after the return, in its request, whose images are exactly those.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import BinaryContent, ModelRequest, ToolReturnPart, UserPromptPart
from typing_extensions import TypeIs

from ..._typing import is_array, is_list, is_mapping
from ._markers import VIEW_TOOL_NAME

__all__ = (
    'CONTENT_IMAGES_KEY',
    'ContentImages',
    'aged_prompt_part',
    'content_image_bytes',
    'content_image_records',
    'content_images',
    'has_content_images',
    'prompt_stub',
)

CONTENT_IMAGES_KEY = 'overflow_content_images'
"""The metadata key listing the images a return's `ToolReturn.content` was sent with: `{'sha1', 'bytes'}` each."""


def _digest(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


def _items(content: object) -> list[Any]:
    return list(content) if is_array(content) else [content]


def _is_image(item: object) -> TypeIs[BinaryContent]:
    return isinstance(item, BinaryContent) and item.is_image


def content_image_bytes(content: object) -> int:
    """The bytes of the images in `content`."""
    return sum(len(item.data) for item in _items(content) if _is_image(item))


def content_image_records(content: object) -> list[dict[str, Any]]:
    """The records of the images in `content` (the `ToolReturn.content` the model is sent), in order."""
    return [{'sha1': _digest(item.data), 'bytes': len(item.data)} for item in _items(content) if _is_image(item)]


def _records(part: ToolReturnPart) -> list[tuple[str, int]]:
    records: object = part.metadata.get(CONTENT_IMAGES_KEY) if is_mapping(part.metadata) else None
    if not is_list(records):
        return []
    return [
        (record['sha1'], record['bytes'])
        for record in records
        if is_mapping(record) and isinstance(record.get('sha1'), str) and type(record.get('bytes')) is int
    ]


def has_content_images(part: ToolReturnPart) -> bool:
    """Whether `part`'s metadata says its `ToolReturn.content` was sent with images."""
    return bool(_records(part))


@dataclass(frozen=True)
class ContentImages:
    """The `UserPromptPart` a return's content was sent as, and its images."""

    part_index: int
    """The prompt part's place among the request's parts."""

    part: UserPromptPart
    """The prompt part."""

    images: list[tuple[int, BinaryContent]]
    """Each image's place in the prompt part's content, and the image, in order."""


def _images_of(part: UserPromptPart) -> list[tuple[int, BinaryContent]]:
    if isinstance(part.content, str):
        return []
    return [(index, item) for index, item in enumerate(_items(part.content)) if _is_image(item)]


def _matches(images: list[tuple[int, BinaryContent]], records: list[tuple[str, int]], verify: bool) -> bool:
    """The sizes first (no hashing unless they agree), then, with `verify`, the digests."""
    if len(images) != len(records) or any(len(item.data) != size for (_, item), (_, size) in zip(images, records)):
        return False
    return not verify or all(_digest(item.data) == digest for (_, item), (digest, _) in zip(images, records))


def content_images(message: ModelRequest, return_index: int, *, verify: bool = True) -> ContentImages | None:
    """The prompt part the return at `return_index` of `message` had its content sent as; `None` when none is found.

    Returns claim prompt parts in order, each the first unclaimed one after it whose images are exactly its records,
    so two returns that sent the same images each find their own, and a prompt part no return recorded is never
    claimed. Without `verify`, images are matched by their sizes alone (no hashing: whether a return may age is
    asked of every old return on every request); aging itself verifies the digests before it moves anything.
    """
    claimed: set[int] = set()
    for index, part in enumerate(message.parts):
        if not isinstance(part, ToolReturnPart) or index > return_index:
            continue
        records = _records(part)
        if not records:
            continue
        found = _claim(message, index, records, claimed, verify)
        if index == return_index:
            return found
        if found is not None:
            claimed.add(found.part_index)
    return None


def _claim(
    message: ModelRequest, return_index: int, records: list[tuple[str, int]], claimed: set[int], verify: bool
) -> ContentImages | None:
    for index in range(return_index + 1, len(message.parts)):
        part = message.parts[index]
        if index in claimed or not isinstance(part, UserPromptPart):
            continue
        images = _images_of(part)
        if images and _matches(images, records, verify):
            return ContentImages(index, part, images)
    return None


def prompt_stub(tool_name: str, handle: str) -> str:
    """The text in place of an image of `ToolReturn.content` that aged with its return."""
    return (
        f"[Image from `{tool_name}` moved out of context, stored under '{handle}': {VIEW_TOOL_NAME}(handle) shows it.]"
    )


def aged_prompt_part(found: ContentImages, tool_name: str, handles: list[str]) -> UserPromptPart:
    """`found`'s prompt part with each image replaced by its stub (`handles`, in order), and the band's marker in
    front of a fitted copy left out (the copy's stub names the same original). Markers of images not sent stay.
    """
    stubs = {index: prompt_stub(tool_name, handle) for (index, _), handle in zip(found.images, handles, strict=True)}
    content: list[Any] = []
    for index, item in enumerate(_items(found.part.content)):
        if index in stubs:
            content.append(stubs[index])
        elif not (isinstance(item, str) and item.startswith('[Image ') and any(f"'{h}'" in item for h in handles)):
            content.append(item)
    return replace(found.part, content=content)
