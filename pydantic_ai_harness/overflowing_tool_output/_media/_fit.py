"""Fit an image to a target: decide whether it already fits, else re-encode a copy that does; crop a region.

Blocking and CPU-bound (decoding a 50-megapixel PNG is seconds): the callers run these in a worker thread. Bounded:
an image declaring more than `max_decode_pixels` is refused from its header, never decoded; encoding tries at most a
handful of settings. Pillow is imported here only, when an image needs work: without it, `PillowMissing` says so.
"""

from __future__ import annotations

import importlib.util
import io
import math
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ._exif import exif_orientation
from ._limits import ImageTarget
from ._sniff import ImageInfo, count_frames, sniff_image

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = (
    'DEFAULT_MAX_DECODE_PIXELS',
    'FittedImage',
    'ImageRefused',
    'PillowMissing',
    'crop_image',
    'fit_image',
    'fits',
    'fitted_or_as_is',
    'pillow_available',
    'read_info',
)

DEFAULT_MAX_DECODE_PIXELS = 89_000_000
"""Images declaring more pixels are refused from their header (a decompression bomb); a 50-megapixel screenshot of
a large display is decoded. Just under Pillow's own `MAX_IMAGE_PIXELS` (89,478,485), above which Pillow warns and, at
twice that, refuses. Decoding costs about 4 bytes of memory per pixel (some 360 MB at this limit)."""

_LOSSLESS = frozenset({'image/png', 'image/gif', 'image/bmp', 'image/tiff', 'image/x-icon'})
"""Sources (screenshots, diagrams) whose copy is tried as PNG first: sharp text survives."""

PILLOW_REFUSES_PIXELS = 178_956_970
"""Pillow refuses to open an image of more pixels than this (twice its `MAX_IMAGE_PIXELS`), whatever is set here."""

MAX_JPEG_SCANS = 100
"""A progressive JPEG is decoded once per scan (a photo has about 10): one of 2,000 scans in 160 KB is a minute of
CPU for a 16-megapixel image, and the pixel limit does not see it. More scans than this are refused."""

_DECODES = threading.BoundedSemaphore(2)
"""Images decoded at once in this process: each holds about 4 bytes a pixel while it is, so parallel views of large
originals (a model may ask for 40 in one response) wait their turn rather than add up to gigabytes."""

_JPEG_QUALITIES = (85, 70, 55)
_SHRINK = 0.75
_MAX_SHRINKS = 4


class ImageRefused(ValueError):
    """The image cannot be fitted: not an image Pillow reads, too many pixels to decode, or no setting fits."""


class PillowMissing(ImportError):
    """Pillow is not installed: an image over the limits cannot be re-encoded."""


@dataclass(frozen=True)
class FittedImage:
    """An image as it is sent to the model."""

    data: bytes
    """The encoded image."""

    media_type: str
    """Its type."""

    width: int
    """Pixels."""

    height: int
    """Pixels."""


def pillow_available() -> bool:
    """Whether Pillow is installed, found without importing it (durable workflow code may not import it mid-run)."""
    try:
        return importlib.util.find_spec('PIL') is not None
    except (ImportError, ValueError):
        return False


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:
        raise PillowMissing(
            'Pillow is not installed: install `pydantic-ai-harness-context[media]` to fit images to the model'
        ) from exc
    return Image


def read_info(data: bytes, max_decode_pixels: int, *, use_pillow: bool = True) -> ImageInfo:
    """The image's type, size, EXIF orientation and frame count from its header; Pillow reads the header of a format
    the sniffer does not know (unless `use_pillow` is false: durable workflow code, which may not import it; the
    orientation of a JPEG, WebP or PNG is then read by `exif_orientation`).

    Raises:
        ImageRefused: not an image, or more than `max_decode_pixels` pixels.
        PillowMissing: a format only Pillow reads, without Pillow.
    """
    info = sniff_image(data)
    if info is None and not use_pillow:
        raise ImageRefused('not a PNG, JPEG, GIF or WebP header, and other formats are not read in a durable workflow')
    if info is not None:
        _check_pixels(info, max_decode_pixels)  # before Pillow opens it: a bomb's header is all that is read
    if use_pillow and (info is None or pillow_available()):
        # Pillow's header read too, when it is there: a GIF's logical screen or a JPEG's first frame header may
        # declare less than the frame Pillow decodes; the larger size is the one checked.
        image_module = _pil()
        try:
            with image_module.open(io.BytesIO(data)) as image:  # lazy: reads the header only
                orientation = _orientation(image)
                declared = ImageInfo(_media_type(image.format), image.width, image.height, len(data))
        except Exception as exc:  # noqa: BLE001 - Pillow's errors (and its bomb check) name the problem
            if type(exc).__name__ == 'DecompressionBombError':
                raise ImageRefused(
                    f'its header declares more than {PILLOW_REFUSES_PIXELS:,} pixels (a decompression bomb), so it was '
                    'not decoded'
                ) from None
            raise ImageRefused(_unreadable(exc)) from None
        if info is None or declared.pixels > info.pixels:
            media_type = info.media_type if info is not None else declared.media_type
            info = ImageInfo(media_type, declared.width, declared.height, len(data))
        if orientation in _TURNED:  # shown turned a quarter: the displayed width is the stored height
            info = replace(info, width=info.height, height=info.width)
        info = replace(info, orientation=orientation)
    elif not use_pillow and info is not None and (orientation := exif_orientation(data)) != 1:
        # Durable workflow code, which may not import Pillow: the image is still shown upright, by a copy made in the
        # durable operation. (Where Pillow is missing, no copy can be made: the image is sent as stored.)
        turned = orientation in _TURNED
        info = replace(info, width=info.height if turned else info.width, height=info.width if turned else info.height)
        info = replace(info, orientation=orientation)
    assert info is not None
    _check_pixels(info, max_decode_pixels)
    frames, exact = count_frames(data)
    if frames > 1:
        info = replace(info, frames=frames, frames_exact=exact)
    if info.media_type == 'image/jpeg' and (scans := data.count(b'\xff\xda')) > MAX_JPEG_SCANS:
        raise ImageRefused(
            f'it is a JPEG of {scans:,} scans, each decoded in turn (a photo has about 10); more than {MAX_JPEG_SCANS} '
            'are not decoded here'
        )
    return info


def _check_pixels(info: ImageInfo, max_decode_pixels: int) -> None:
    if info.pixels > max_decode_pixels:
        raise ImageRefused(
            f'its header declares {info.width}x{info.height} px ({info.pixels:,} pixels), over the '
            f'{max_decode_pixels:,} decoded here (a decompression bomb, or too large to process), so it was not decoded'
        )


def _plain(exc: Exception) -> str:
    """Pillow's error without the object it names (`<_io.BytesIO object at 0x...>` means nothing to a model)."""
    if type(exc).__name__ == 'UnidentifiedImageError':
        return 'its bytes are in no image format Pillow reads'
    return f'{type(exc).__name__}: {exc}'


def _unreadable(exc: Exception) -> str:
    """Why Pillow could not read an image's header, for the model."""
    if type(exc).__name__ == 'UnidentifiedImageError':
        return 'not an image: its bytes are in no format Pillow reads'
    return f'not an image Pillow can read ({_plain(exc)})'


def stills_only(target: ImageTarget) -> bool:
    """Whether an animated image is sent as its first frame: OpenAI takes only non-animated GIFs, so an unknown
    provider's target (which fits every provider at once) does too.
    """
    return any(row.provider == 'openai' for row in target.limits)


def fits(info: ImageInfo, target: ImageTarget) -> bool:
    """Whether the image can be sent as it is (an image shown turned or flipped, or animated where only stills are
    taken, is not: its copy is upright, or its first frame).
    """
    return (
        info.orientation == 1
        and (info.frames == 1 or not stills_only(target))
        and info.media_type in target.media_types
        and max(info.width, info.height) <= target.long_edge
        and info.pixels <= target.max_pixels
        and info.nbytes <= target.max_bytes
        and (target.max_tokens is None or target.tokens(info.width, info.height) <= target.max_tokens)
    )


def fitted_size(width: int, height: int, target: ImageTarget) -> tuple[int, int]:
    """The size a `width` x `height` image is scaled to: within the long edge, the pixels and the token budget."""
    scale = min(1.0, target.long_edge / max(width, height), math.sqrt(target.max_pixels / (width * height)))
    size = max(1, int(width * scale)), max(1, int(height * scale))
    for _ in range(64):
        if target.max_tokens is None or target.tokens(*size) <= target.max_tokens or max(size) <= 16:
            break
        size = max(1, int(size[0] * 0.9)), max(1, int(size[1] * 0.9))
    return size


def fit_image(data: bytes, info: ImageInfo, target: ImageTarget) -> FittedImage:
    """A copy of the image that fits `target`: scaled, and encoded as PNG (lossless sources) or JPEG.

    Raises:
        ImageRefused: Pillow cannot decode it, or no setting fits the byte budget.
        PillowMissing: Pillow is not installed.
    """
    image_module = _pil()
    try:
        with _DECODES, image_module.open(io.BytesIO(data)) as source:
            # The EXIF orientation read from the file itself (a durable fit gets the stored size only).
            orientation = _orientation(source)
            turned = orientation in _TURNED
            width, height = fitted_size(*_displayed(source.size, turned), target)
            stored_size = _displayed((width, height), turned)  # the copy's size in the stored orientation
            if source.format == 'JPEG':
                source.draft('RGB', stored_size)  # decode at 1/2, 1/4 or 1/8 scale when that is enough
            # Only the first frame of an animation is decoded (Pillow opens at frame 0).
            frame = _reduced(_eight_bit(source), stored_size)
            frame = frame.convert('RGBA' if _has_alpha(source) else 'RGB')
            frame = _upright(frame, orientation)  # on the decoded, bounded frame
    except Exception as exc:  # noqa: BLE001
        raise ImageRefused(f'Pillow could not decode it ({_plain(exc)})') from None
    lossless = info.media_type in _LOSSLESS or info.frames > 1  # an animation's frame: sharp edges, few colours
    return _encode_within(frame, (width, height), target, lossless=lossless)


_REDUCIBLE_MODES = frozenset({'RGB', 'RGBA', 'L', 'LA'})
"""Modes `Image.reduce` averages correctly (not a palette's indices)."""


def _reduced(image: Image, size: tuple[int, int]) -> Image:
    """`image` shrunk by whole factors while it stays at least twice `size` a side: the first step `resize` takes
    with `reducing_gap=2.0` anyway, taken before the conversion and the turn so they copy a small frame, not 150 MB.
    """
    if image.mode not in _REDUCIBLE_MODES:
        return image
    factors = max(1, image.width // (2 * size[0])), max(1, image.height // (2 * size[1]))
    return image.reduce(factors) if factors != (1, 1) else image


def fitted_or_as_is(data: bytes, max_decode_pixels: int, target: ImageTarget) -> tuple[ImageInfo, FittedImage] | None:
    """The image's header and what the model is sent for it: itself when it fits `target`, else a fitted copy;
    `None` when it cannot be sent (refused, or Pillow missing for an image that needs a copy).
    """
    try:
        info = read_info(data, max_decode_pixels)
        if fits(info, target):
            return info, FittedImage(data, info.media_type, info.width, info.height)
        return info, fit_image(data, info, target)
    except (ImageRefused, PillowMissing):
        return None


def crop_image(
    data: bytes, info: ImageInfo, box: tuple[int, int, int, int], target: ImageTarget, *, lossless: bool
) -> FittedImage:
    """The region `box` (left, top, right, bottom in the image's displayed pixels: upright, as the model was shown
    it) at the most detail that fits `target`.
    """
    image_module = _pil()
    try:
        with _DECODES, image_module.open(io.BytesIO(data)) as source:
            orientation = _orientation(source)
            stored_box = stored_region(box, _displayed(source.size, orientation in _TURNED), orientation)
            region = _eight_bit(source.crop(stored_box))
            region = _upright(region.convert('RGBA' if _has_alpha(region) else 'RGB'), orientation)
    except Exception as exc:  # noqa: BLE001
        raise ImageRefused(f'Pillow could not decode it ({_plain(exc)})') from None
    size = fitted_size(region.width, region.height, target)
    return _encode_within(region, size, target, lossless=lossless)


_TURNED = frozenset({5, 6, 7, 8})
"""EXIF orientations shown turned a quarter (their displayed width is the stored height)."""

_EXIF_ORIENTATION = 0x0112


def _orientation(image: Image) -> int:
    """The EXIF orientation of an opened image (read from its header) still to be applied, 1 when it has none or a
    bad one. Pillow turns a TIFF upright itself as it loads it (and reports the turned size): 1 for a TIFF.
    """
    if image.format == 'TIFF':
        return 1
    if image.format == 'PNG' and 'exif' not in image.info:
        return 1  # an eXIf chunk after the pixels: Pillow would decode them all to find it (0.3 s for 50 MP)
    try:
        value = image.getexif().get(_EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block: shown as stored
        return 1
    return value if type(value) is int and 1 <= value <= 8 else 1


def _displayed(size: tuple[int, int], turned: bool) -> tuple[int, int]:
    return (size[1], size[0]) if turned else size


def _upright(image: Image, orientation: int) -> Image:
    """`image` turned and flipped as its EXIF orientation says it is displayed (what `ImageOps.exif_transpose`
    does, on a frame already decoded and bounded, and without copying its metadata).
    """
    if orientation == 1:
        return image
    transpose = _pil().Transpose
    method = {
        2: transpose.FLIP_LEFT_RIGHT,
        3: transpose.ROTATE_180,
        4: transpose.FLIP_TOP_BOTTOM,
        5: transpose.TRANSPOSE,
        6: transpose.ROTATE_270,
        7: transpose.TRANSVERSE,
        8: transpose.ROTATE_90,
    }[orientation]
    return image.transpose(method)


def stored_region(
    box: tuple[int, int, int, int], displayed: tuple[int, int], orientation: int
) -> tuple[int, int, int, int]:
    """The stored pixels of the displayed region `box` (left, top, right, bottom) of an image `displayed` (width,
    height) on screen: its corners mapped back through the orientation's inverse.
    """
    if orientation == 1:
        return box
    width, height = displayed
    left, top, right, bottom = box
    corners = [_to_stored(x, y, width, height, orientation) for x, y in ((left, top), (right - 1, bottom - 1))]
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    return min(xs), min(ys), max(xs) + 1, max(ys) + 1


def _to_stored(x: int, y: int, width: int, height: int, orientation: int) -> tuple[int, int]:
    """The stored pixel shown at (x, y) of a `width` x `height` displayed image."""
    mapped = {
        2: (width - 1 - x, y),
        3: (width - 1 - x, height - 1 - y),
        4: (x, height - 1 - y),
        5: (y, x),
        6: (y, width - 1 - x),
        7: (height - 1 - y, width - 1 - x),
        8: (height - 1 - y, x),
    }
    return mapped[orientation]


def _encode_within(frame: Image, size: tuple[int, int], target: ImageTarget, *, lossless: bool) -> FittedImage:
    """Encode `frame` scaled to `size`, shrinking and lowering quality until it fits the byte budget."""
    image_module = _pil()
    for _ in range(_MAX_SHRINKS):
        scaled = frame if frame.size == size else frame.resize(size, image_module.Resampling.BICUBIC, reducing_gap=2.0)
        if lossless and 'image/png' in target.media_types:
            encoded = _save(scaled, 'PNG', compress_level=6)
            if len(encoded) <= target.max_bytes:
                return FittedImage(encoded, 'image/png', *scaled.size)
        opaque = _on_white(scaled, image_module)
        for quality in _JPEG_QUALITIES:
            encoded = _save(opaque, 'JPEG', quality=quality)
            if len(encoded) <= target.max_bytes:
                return FittedImage(encoded, 'image/jpeg', *scaled.size)
        size = max(1, int(size[0] * _SHRINK)), max(1, int(size[1] * _SHRINK))
    raise ImageRefused(f'no encoding of it fits {target.max_bytes:,} bytes')


def _save(image: Image, image_format: str, **options: Any) -> bytes:
    """`image` encoded as its pixels alone: a copy carries none of the source's comments, text chunks or profiles
    (Pillow would write a JPEG's comment back), which are not for the model and may hold what redaction withholds.
    """
    image.info = {}
    out = io.BytesIO()
    image.save(out, image_format, **options)
    return out.getvalue()


def _eight_bit(image: Image) -> Image:
    """A 16-bit or float image scaled to its own range in 8 bits (`convert('RGB')` would clip it to near white)."""
    if image.mode not in ('I', 'F') and not image.mode.startswith('I;16'):
        return image
    floats = image.convert('F')
    low, high = floats.getextrema()
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or high <= low:
        return floats.convert('L')
    scale = 255.0 / (high - low)
    offset = -low * scale
    return floats.point(lambda value: value * scale + offset).convert('L')


def _has_alpha(image: Image) -> bool:
    return image.mode in ('RGBA', 'LA', 'PA') or (image.mode == 'P' and 'transparency' in image.info)


def _on_white(image: Image, image_module: Any) -> Image:
    """An RGB image for JPEG: transparency flattened onto white."""
    if image.mode != 'RGBA':
        return image.convert('RGB') if image.mode != 'RGB' else image
    background = image_module.new('RGB', image.size, (255, 255, 255))
    background.paste(image, mask=image.getchannel('A'))
    return background


def _media_type(image_format: str | None) -> str:
    return f'image/{(image_format or "unknown").lower()}'
