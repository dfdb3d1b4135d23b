"""`ImageBand`: the user's setting for images in tool returns."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ._fit import DEFAULT_MAX_DECODE_PIXELS, PILLOW_REFUSES_PIXELS
from ._limits import ImageTarget, target_for

__all__ = ('ImageBand',)


def _check_positive(value: object, where: str) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f'ImageBand.{where} must be a positive int or None, got {value!r}')


@dataclass(frozen=True)
class ImageBand:
    """How images in tool returns reach the model: as they are when they fit, else as a copy that fits, the original
    stored losslessly under a handle the model can look at again, region by region.

    An image fits when its type, long edge, pixels and bytes are within the serving model's provider's limits
    (`PROVIDER_IMAGE_LIMITS`; for a provider not in it, limits every provider accepts at once) and within the budgets
    set here. Old images leave the context with `aging`, like text.

    ```python
    from pydantic_ai_harness.overflowing_tool_output import ImageBand, OverflowingToolOutput

    capability = OverflowingToolOutput(images=ImageBand(max_long_edge=1024))
    ```
    """

    max_long_edge: int | None = None
    """The longest side an image is sent with, in pixels; `None`: the provider's (1568 when unknown)."""

    max_pixels: int | None = None
    """Width times height of an image sent; `None`: the provider's (1,150,000 when unknown)."""

    max_bytes: int | None = None
    """The encoded size of an image sent; `None`: 1 MiB (within every provider's per-image limit)."""

    max_tokens: int | None = None
    """The provider's token estimate of an image sent (`ProviderImageLimits.tokens`); `None`: not limited."""

    max_decode_pixels: int = DEFAULT_MAX_DECODE_PIXELS
    """Images declaring more pixels are refused from their header, never decoded (decompression bombs); they are
    stored as they are and the model is told so."""

    keep_newest: int | None = None
    """With `aging`: only the newest this many tool returns holding images keep them; older ones leave the context as
    stubs naming handles, in the same batches as text. `None`: images age like text, by `Aging.after_turns`."""

    timeout: float = 30.0
    """Seconds the write of an original may take."""

    show_blob_images: int = 4
    """Images found as base64 in a text or JSON return (a data URL, a long base64 run) are stored and replaced by a
    marker; the first this many of one return are also shown to the model as images, each fitted like any image
    (the rest stay markers, viewable with `view_tool_result_image`; one that cannot be decoded uses up its turn too,
    bounding the decoding a return costs). `0`: none shown."""

    def __post_init__(self) -> None:
        for name in ('max_long_edge', 'max_pixels', 'max_bytes', 'max_tokens', 'keep_newest'):
            _check_positive(getattr(self, name), name)
        if type(self.max_decode_pixels) is not int or not 1 <= self.max_decode_pixels <= PILLOW_REFUSES_PIXELS:
            raise ValueError(
                f'ImageBand.max_decode_pixels must be an int from 1 to {PILLOW_REFUSES_PIXELS:,} (Pillow refuses larger '
                f'images whatever is set here), got {self.max_decode_pixels!r}'
            )
        if type(self.show_blob_images) is not int or self.show_blob_images < 0:
            raise ValueError(
                f'ImageBand.show_blob_images must be an int of 0 or more (0: none shown), got {self.show_blob_images!r}'
            )
        if type(self.timeout) not in (int, float) or not 0 < self.timeout < float('inf'):
            raise ValueError(f'ImageBand.timeout must be a positive number of seconds, got {self.timeout!r}')

    def target(self, model: Any) -> ImageTarget:
        """What an image sent to `model` must fit: its provider's limits, tightened by this setting's budgets."""
        base = target_for(model)
        return replace(
            base,
            long_edge=min(base.long_edge, self.max_long_edge or base.long_edge),
            max_pixels=min(base.max_pixels, self.max_pixels or base.max_pixels),
            max_bytes=min(base.max_bytes, self.max_bytes) if self.max_bytes is not None else base.max_bytes,
            max_tokens=self.max_tokens,
        )
