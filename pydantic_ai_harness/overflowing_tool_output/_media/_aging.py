"""Images age too: an old tool return holding images leaves the context as a stub naming their handles.

Aging (`_request/_aging`) asks this module three things of a return that holds images: whether it may age (every
file in it is an image given as bytes, or it was sent with images in `ToolReturn.content`), what it costs (its text's
tokens plus each image's, as the serving provider counts them), and, when its batch goes, the stub. An image whose
original was stored when it arrived (a fitted copy) is named by that original's handle; one sent as it was is written
now. The return's own text (not the image band's markers, which only name handles) is written as text, as aging
writes any return; a caption (up to `_INLINE_TEXT_CHARS`) stays in the stub instead. The images of its
`ToolReturn.content` (a prompt part of the same request, `_content_images`) go with it, each replaced by a one-line
stub naming its handle; a return that only captions them keeps its caption as it is. Nothing is dropped: the first
write that fails keeps the return, and its content, where they are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from pydantic_ai.messages import BinaryContent, ModelRequest, ToolReturnPart, UserPromptPart

from ..._typing import is_list, is_mapping
from .._offload import OFF_LOOP_BYTES
from .._query_tools._names import offered_names
from ._content_images import ContentImages, aged_prompt_part, content_images, has_content_images
from ._images import IMAGES_KEY, is_image
from ._limits import ImageTarget
from ._markers import VIEW_TOOL_NAME
from ._sniff import sniff_image
from ._view_tool import AGED_IMAGES_KEY

__all__ = ('AgedImages', 'ImageAging', 'OffLoop', 'aged_image_notes')

_UNKNOWN_IMAGE_TOKENS = 1_600
"""The token estimate of an image whose header cannot be read (Anthropic's cost of an image at its resize edge)."""

_INLINE_TEXT_CHARS = 120
"""A return's own text up to this long stays in its stub (a caption such as `screen 4 taken`): a handle and the read
that gets it back would cost more than the text."""

Write = Callable[[str, bytes, float], Awaitable[tuple[str | None, str]]]

_T = TypeVar('_T')


class OffLoop(Protocol):
    """Runs a CPU-bound step in a worker thread when `large` (in place in durable workflow code): `_offload.off_loop`
    for the run.
    """

    def __call__(self, work: Callable[[], _T], large: bool) -> Awaitable[_T]:
        """`work()`, off the event loop when `large`."""
        ...


async def _in_place(work: Callable[[], _T], large: bool) -> _T:
    return work()


@dataclass(frozen=True)
class AgedImages:
    """What aging one return that holds images produced."""

    stub: str | None
    """The text the model reads in its place; `None`: it keeps its own, a caption of images sent in its
    `ToolReturn.content` (their stubs in the prompt part name the handles)."""

    image_handles: list[str]
    """The handles of its images, oldest first."""

    text_handle: str | None
    """Where its own text was written, if it had any."""

    text_chars: int
    """The characters of its text (markers included) before aging."""

    prompt: tuple[int, UserPromptPart] | None = None
    """The prompt part its `ToolReturn.content` was sent as, its images replaced by stubs, and its place in the
    request; `None`: it had none."""


@dataclass(frozen=True)
class ImageAging:
    """How returns holding images age, for one request."""

    target: ImageTarget
    """The serving model's image target: its token rule prices each image."""

    keep_newest: int | None
    """Only the newest this many returns holding images keep them (`ImageBand.keep_newest`)."""

    def holds(self, part: ToolReturnPart, message: ModelRequest, index: int) -> bool:
        """Whether `part` (at `index` of `message`) holds files, all of them images given as bytes (other files stay
        where they are), or holds none and its `ToolReturn.content` was sent with images, found in `message`.
        """
        files = part.files
        if files:
            return all(is_image(item) for item in files)
        return has_content_images(part) and content_images(message, index, verify=False) is not None

    def tokens(
        self, part: ToolReturnPart, count: Callable[[str], int], message: ModelRequest | None = None, index: int = 0
    ) -> int:
        """Tokens of `part` (at `index` of `message`): its text, counted, and each image as the provider counts it,
        the images of its `ToolReturn.content` included.
        """
        text = part.model_response_str()
        return (count(text) if text else 0) + self.image_tokens(part, message, index)

    def image_tokens(self, part: ToolReturnPart, message: ModelRequest | None = None, index: int = 0) -> int:
        """Tokens of `part`'s images alone, as the provider counts them (0 for a part without images); with its
        `message`, those of its `ToolReturn.content` too.
        """
        own = sum(self._image_tokens(item) for item in part.files if is_image(item))
        # Pricing needs no proof the images are the ones recorded (sizes agree); moving them does (`age`).
        found = (
            content_images(message, index, verify=False) if message is not None and has_content_images(part) else None
        )
        return own + (sum(self._image_tokens(item) for _, item in found.images) if found is not None else 0)

    def _image_tokens(self, item: object) -> int:
        if not isinstance(item, BinaryContent):
            return _UNKNOWN_IMAGE_TOKENS
        info = sniff_image(item.data)
        return self.target.tokens(info.width, info.height) if info is not None else _UNKNOWN_IMAGE_TOKENS

    async def age(
        self,
        part: ToolReturnPart,
        key: str,
        write: Write,
        timeout: float,
        message: ModelRequest | None = None,
        index: int = 0,
        off_loop: OffLoop | None = None,
    ) -> AgedImages | str:
        """Store what is not stored yet and build the stub (and, with `message`, the prompt part of its
        `ToolReturn.content` with stubs for its images, found by their digests, computed `off_loop`); the reason
        instead when a write failed.
        """
        records = _records(part.metadata)
        by_copy = {record['copy']: record['handle'] for record in records if isinstance(record.get('copy'), str)}
        stored = [record['handle'] for record in records if isinstance(record.get('handle'), str)]
        found = await _verified(part, message, index, off_loop or _in_place)
        if found is None and not part.files:
            return 'the images of its `ToolReturn.content` are not in its request as they were sent'
        images: list[tuple[str, object]] = [(f'{key}/image{n}', item) for n, item in enumerate(part.files)]
        if found is not None:
            images += [(f'{key}/content-image{n}', item) for n, (_, item) in enumerate(found.images)]
        handles: list[str] = []
        described: list[str] = []
        for image_key, item in images:
            assert isinstance(item, BinaryContent)  # `holds` let only images given as bytes through
            handle = by_copy.get(item.identifier)
            if handle is None:
                handle, reason = await write(image_key, item.data, timeout)
                if handle is None:
                    return reason
            handles.append(handle)
            described.append(_described(handle, records, item))
        prompt = _aged_prompt(found, part.tool_name, handles[len(part.files) :])
        text = part.model_response_str()
        if not part.files and len(text) <= _INLINE_TEXT_CHARS:
            # Only its content's images go: the caption stays as the tool wrote it, each image's stub beside it.
            return AgedImages(None, handles, None, len(text), prompt)
        # Images the band stored but did not send (a bomb, no Pillow) are named by their markers: keep their handles.
        for handle in stored:
            if handle not in handles:
                handles.append(handle)
                described.append(f"'{handle}'")
        own = _own_text(part, stored)
        text_handle: str | None = None
        if len(own) > _INLINE_TEXT_CHARS:
            text_handle, reason = await write(key, own.encode('utf-8', 'surrogatepass'), timeout)
            if text_handle is None:
                return reason
        inline = own if text_handle is None else ''
        stub = _stub(part.tool_name, described, text_handle, inline)
        return AgedImages(stub, handles, text_handle, len(text), prompt)


async def _verified(
    part: ToolReturnPart, message: ModelRequest | None, index: int, off_loop: OffLoop
) -> ContentImages | None:
    """The prompt part of `part`'s `ToolReturn.content`, its images' digests checked against the band's records."""
    if message is None or not has_content_images(part):
        return None
    candidate = content_images(message, index, verify=False)
    if candidate is None:
        return None
    large = sum(len(item.data) for _, item in candidate.images) > OFF_LOOP_BYTES
    return await off_loop(partial(content_images, message, index), large)


def _aged_prompt(found: ContentImages | None, tool_name: str, handles: list[str]) -> tuple[int, UserPromptPart] | None:
    return (found.part_index, aged_prompt_part(found, tool_name, handles)) if found is not None else None


def _records(metadata: object) -> list[dict[str, Any]]:
    records: object = metadata.get(IMAGES_KEY) if is_mapping(metadata) else None
    return [dict(record) for record in records if is_mapping(record)] if is_list(records) else []


def _described(handle: str, records: list[dict[str, Any]], item: BinaryContent) -> str:
    """`'handle' (4880x2560 PNG)`: the original's size where the band recorded it, else the image's own."""
    record = next((record for record in records if record.get('handle') == handle), None)
    width, height = (record.get('width'), record.get('height')) if record is not None else (None, None)
    media_type = record.get('media_type') if record is not None else item.media_type
    if not isinstance(width, int) or not isinstance(height, int):
        info = sniff_image(item.data)
        width, height = (info.width, info.height) if info is not None else (None, None)
    kind = str(media_type).removeprefix('image/').upper()
    return f"'{handle}' ({width}x{height} {kind})" if width is not None else f"'{handle}' ({kind})"


def _own_text(part: ToolReturnPart, stored: list[str]) -> str:
    """The return's text without the image band's markers (each names the handle of a stored original)."""
    content: Any = part.content
    items: list[Any] = list(content) if is_list(content) else [content]
    kept: list[str] = []
    for item in items:
        if is_image(item):
            continue
        if isinstance(item, str) and item.startswith('[Image ') and any(f"'{handle}'" in item for handle in stored):
            continue
        kept.append(item if isinstance(item, str) else ToolReturnPart(part.tool_name, item).model_response_str())
    return '\n\n'.join(text for text in kept if text)


def _stub(tool_name: str, described: list[str], text_handle: str | None, inline: str = '') -> str:
    count = f'{len(described)} image' + ('s' if len(described) != 1 else '')
    saved = (
        f'[Moved out of context: the output of `{tool_name}` ({count}). Stored under {", ".join(described)}: '
        f'{VIEW_TOOL_NAME}(handle) shows one again'
    )
    if text_handle is None:
        return f'{saved}. Its text: {inline}]' if inline else f'{saved}.]'
    return f"{saved}; its text is saved under handle '{text_handle}': {offered_names().read} gets it back.]"


def aged_image_notes(aged: AgedImages) -> dict[str, Any]:
    """The metadata an aged return that held images gets beside aging's own notes."""
    return {AGED_IMAGES_KEY: aged.image_handles}
