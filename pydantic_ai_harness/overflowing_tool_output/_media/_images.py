"""The image band: every image of a tool return (its value, or `ToolReturn.content`) sent as it is when it fits the
serving model, else as a copy that fits, its original stored byte for byte under a handle.

An image that cannot be fitted (a decompression bomb, bytes Pillow cannot read, no Pillow) is stored as it is and
replaced by a line saying why; none is dropped silently. What was stored is recorded in the return's metadata
(`overflow_images`), which aging and the view tool read.
"""

from __future__ import annotations

import base64
import operator
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from pydantic_ai.messages import BinaryContent, BinaryImage, ToolCallPart, ToolReturn
from pydantic_ai.tools import RunContext
from typing_extensions import TypeIs

from ..._typing import is_array
from .._actions._unit import with_notes
from .._events import warn
from .._offload import OFF_LOOP_BYTES, off_loop
from .._redaction._withhold import SecretWithholding
from ._content_images import CONTENT_IMAGES_KEY, content_image_bytes, content_image_records
from ._fit import FittedImage, ImageRefused, PillowMissing, fit_image, fits, pillow_available, read_info
from ._limits import ImageTarget
from ._markers import fitted_marker, not_sent_marker, pillow_missing_why
from ._setting import ImageBand
from ._sniff import ImageInfo
from ._text_images import ImageSecrets, keep_for_operator, text_image_check

__all__ = (
    'IMAGES_KEY',
    'Fitter',
    'ImageWriter',
    'fit_in_worker',
    'fit_result_images',
    'fitted_from_json',
    'fitted_to_json',
    'holds_images',
    'is_image',
)

IMAGES_KEY = 'overflow_images'
"""The metadata key listing the images of a return that were stored: handle, key, type, size and what was sent."""

ImageWriter = Callable[[RunContext[Any], str, bytes, float], Awaitable[tuple[str | None, str]]]
"""The capability's (durable) store write: `(ctx, key, data, timeout)` -> `(handle, '')` or `(None, why not)`."""


Fitter = Callable[[RunContext[Any], bytes, ImageInfo, ImageTarget], Awaitable[FittedImage]]
"""Makes the fitted copy (`fit_image`), raising `ImageRefused`: in a worker thread, or in a durable operation."""


async def fit_in_worker(ctx: RunContext[Any], data: bytes, info: ImageInfo, target: ImageTarget) -> FittedImage:
    """`fit_image` in a worker thread (in place in durable workflow code, which may not start one)."""
    return await off_loop(ctx, partial(fit_image, data, info, target), large=True)


def fitted_to_json(fitted: FittedImage | ImageRefused) -> dict[str, Any]:
    """A fit's outcome as plain data, as a durable operation records it."""
    if isinstance(fitted, ImageRefused):
        return {'error': str(fitted)}
    encoded = base64.b64encode(fitted.data).decode('ascii')
    return {'data': encoded, 'media_type': fitted.media_type, 'width': fitted.width, 'height': fitted.height}


def fitted_from_json(answer: dict[str, Any]) -> FittedImage:
    """The outcome `fitted_to_json` wrote; raises `ImageRefused` for a refusal."""
    if 'error' in answer:
        raise ImageRefused(str(answer['error']))
    data = base64.b64decode(str(answer['data']))
    return FittedImage(data, str(answer['media_type']), int(answer['width']), int(answer['height']))


def is_image(item: object) -> TypeIs[BinaryContent]:
    """Whether `item` is an image given as bytes (`BinaryImage`, or `BinaryContent` with an `image/*` type)."""
    return isinstance(item, BinaryContent) and item.is_image


def holds_images(value: object) -> bool:
    """Whether a return value (or `ToolReturn.content`) is an image or a list or tuple holding one."""
    if is_image(value):
        return True
    if not is_array(value) or not value:
        return False
    # The types first, at C speed: a 200,000-element list of records is decided without a Python-level loop.
    first: type[Any] = value[0].__class__
    kinds = {first} if operator.countOf(map(type, value), first) == len(value) else set(map(type, value))
    if not any(issubclass(kind, BinaryContent) for kind in kinds):
        return False
    return any(is_image(item) for item in value)


@dataclass
class _Unit:
    """One part of a return being fitted: the run, the call, where its originals go, and what was stored."""

    ctx: RunContext[Any]
    call: ToolCallPart
    key: str
    target: ImageTarget
    setting: ImageBand
    write: ImageWriter
    records: list[dict[str, Any]]
    fit: Fitter
    withholding: SecretWithholding | None = None


async def fit_result_images(
    ctx: RunContext[Any],
    call: ToolCallPart,
    result: object,
    setting: ImageBand,
    write: ImageWriter,
    fit: Fitter = fit_in_worker,
    withholding: SecretWithholding | None = None,
) -> object:
    """`result` with each of its images fitted to the serving model (`result` itself when each fits already).

    A plain return whose images were replaced becomes a `ToolReturn` carrying the `overflow_images` metadata. With
    secret redaction on (`withholding`), an image whose bytes are text (an SVG) holding a secret is not stored.
    """
    envelope = _envelope(result)
    value: Any = envelope.return_value if envelope is not None else result
    content: Any = envelope.content if envelope is not None else None
    if not holds_images(value) and not holds_images(content):
        return _without_forged_records(envelope) or result
    target = setting.target(ctx.model)
    records: list[dict[str, Any]] = []
    base = f'{ctx.run_id}/{call.tool_call_id}/{ctx.retry}'
    unit = _Unit(ctx, call, f'{base}/image', target, setting, write, records, fit, withholding)
    new_value = await _fit_value(unit, value)
    new_content = await _fit_value(replace(unit, key=f'{base}/content/image'), content) if content is not None else None
    # The images `ToolReturn.content` is sent with are recorded, so they age with this return (`_content_images`).
    sent_with: list[dict[str, Any]] = []
    if holds_images(new_content):
        large = content_image_bytes(new_content) > OFF_LOOP_BYTES
        sent_with = await off_loop(ctx, partial(content_image_records, new_content), large=large)
    if new_value is value and new_content is content and not sent_with:
        return result  # every image fits as it is
    notes: dict[str, Any] = {IMAGES_KEY: records} if records else {}
    if sent_with:
        notes[CONTENT_IMAGES_KEY] = sent_with
    metadata = envelope.metadata if envelope is not None else None
    return ToolReturn(
        return_value=new_value,
        content=new_content,
        metadata=with_notes(metadata, notes) if notes else metadata,
        tools=envelope.tools if envelope is not None else None,
    )


def _without_forged_records(envelope: ToolReturn[Any] | None) -> ToolReturn[Any] | None:
    """`envelope` without the content images record a tool wrote itself (it sent none): aging moves only images the
    band recorded, never a user's; `None` when there is none.
    """
    metadata: object = envelope.metadata if envelope is not None else None
    if envelope is None or not isinstance(metadata, dict) or CONTENT_IMAGES_KEY not in metadata:
        return None
    kept = {key: note for key, note in metadata.items() if key != CONTENT_IMAGES_KEY}  # pyright: ignore[reportUnknownVariableType]
    return replace(envelope, metadata=kept)


def _envelope(result: object) -> ToolReturn[Any] | None:
    return result if isinstance(result, ToolReturn) else None  # pyright: ignore[reportUnknownVariableType]


async def _fit_value(unit: _Unit, value: Any) -> Any:
    """The value with each image replaced by what the model is sent for it."""
    if is_image(value):
        replaced = await _fit_one(unit, value, 0)
        if replaced == [value]:
            return value
        return replaced[0] if len(replaced) == 1 else replaced  # a lone image not shown: its marker alone
    if not is_array(value) or not holds_images(value):
        return value
    items: Sequence[Any] = value
    out: list[Any] = []
    changed = False
    for index, item in enumerate(items):
        if not is_image(item):
            out.append(item)
            continue
        replaced = await _fit_one(unit, item, index)
        changed = changed or replaced != [item]
        out.extend(replaced)
    return out if changed else value


async def _fit_one(unit: _Unit, image: BinaryContent, index: int) -> list[Any]:
    """What the model is sent for one image: itself, or a marker and a fitted copy, or a marker alone."""
    data = image.data
    setting = unit.setting
    info: ImageInfo | None = None
    if unit.withholding is not None and (withheld := await _secrets_in(unit, image)):
        # Its text or bytes would reach the store the model reads unmasked: kept from it, as a text's secret is.
        await keep_for_operator(unit.withholding, f'{unit.key}{index}', data, setting.timeout, unit.call.tool_name)
        if withheld.textual:
            why = f'its text holds a secret ({", ".join(withheld.kinds)})'
            return [not_sent_marker(None, image.media_type, len(data), why, None)]
        return await _pixels_only(unit, image, f'its bytes hold a secret ({", ".join(withheld.kinds)})')
    try:
        info = await _read_info(unit, data)
    except ImageRefused as exc:
        return [await _not_sent(unit, image, index, None, str(exc))]
    except PillowMissing:
        return [await _not_sent(unit, image, index, None, 'its format is read only by Pillow, which is not installed')]
    if fits(info, unit.target):
        if image.media_type != info.media_type:  # a JPEG labelled PNG: a provider refuses the label, not the image
            return [BinaryImage(data, media_type=info.media_type)]
        return [image]
    if not pillow_available():
        why = pillow_missing_why(unit.target)
        warn(f'An image returned by `{unit.call.tool_name}` was not shown to the model: {why}')
        return [await _not_sent(unit, image, index, info, why)]
    try:
        fitted = await unit.fit(unit.ctx, data, info, unit.target)
    except ImageRefused as exc:
        return [await _not_sent(unit, image, index, info, str(exc))]
    copy = BinaryImage(fitted.data, media_type=fitted.media_type)
    handle, reason = await _store(unit, image, index, info, fitted, copy.identifier)
    return [fitted_marker(info, fitted, handle, reason), copy]


async def _secrets_in(unit: _Unit, image: BinaryContent) -> ImageSecrets | None:
    check = text_image_check(unit.withholding)
    if check is None:
        return None
    return await off_loop(
        unit.ctx, partial(check, image.data, image.media_type), large=len(image.data) > OFF_LOOP_BYTES
    )


async def _read_info(unit: _Unit, data: bytes) -> ImageInfo:
    """`read_info` of `data` in a worker thread, without Pillow in durable workflow code (which may not import it)."""
    read = partial(read_info, data, unit.setting.max_decode_pixels, use_pillow=not unit.ctx.in_durable_context)
    return await off_loop(unit.ctx, read, large=True)


async def _pixels_only(unit: _Unit, image: BinaryContent, why: str) -> list[Any]:
    """A binary image whose bytes hold a secret: sent as a copy of its pixels alone (a new file, fitted to the
    target, whatever its size), its original stored nowhere the model reads; a marker alone when it cannot be decoded.
    """
    data = image.data
    try:
        info = await _read_info(unit, data)
    except (ImageRefused, PillowMissing):
        return [not_sent_marker(None, image.media_type, len(data), why, None)]
    try:
        fitted = await unit.fit(unit.ctx, data, info, unit.target)
    except (ImageRefused, PillowMissing):
        return [not_sent_marker(info, image.media_type, len(data), why, None)]
    if await _secrets_in(unit, BinaryContent(fitted.data, media_type=fitted.media_type)):
        return [not_sent_marker(info, image.media_type, len(data), why, None)]  # never sent: checked, not assumed
    return [
        fitted_marker(info, fitted, None, f'withheld: {why}'),
        BinaryImage(fitted.data, media_type=fitted.media_type),
    ]


async def _not_sent(unit: _Unit, image: BinaryContent, index: int, info: ImageInfo | None, why: str) -> str:
    handle, reason = await _store(unit, image, index, info, None)
    return not_sent_marker(info, image.media_type, len(image.data), why, handle, reason)


async def _store(
    unit: _Unit,
    image: BinaryContent,
    index: int,
    info: ImageInfo | None,
    sent: FittedImage | None,
    copy: str | None = None,
) -> tuple[str | None, str]:
    """Write the original byte for byte; record it in the return's metadata."""
    key = f'{unit.key}{index}'
    handle, reason = await unit.write(unit.ctx, key, image.data, unit.setting.timeout)
    if handle is None:
        warn(f'The original of an image returned by `{unit.call.tool_name}` could not be stored: {reason}')
        return None, reason
    unit.records.append(
        {
            'handle': handle,
            'key': key,
            'media_type': info.media_type if info is not None else image.media_type,
            'width': info.width if info is not None else None,
            'height': info.height if info is not None else None,
            'bytes': len(image.data),
            'sent': [sent.width, sent.height, sent.media_type] if sent is not None else None,
            'copy': copy,
        }
    )
    return handle, ''
