"""A request's images as a whole: how many, how many bytes, and how large may go in one request to the serving
model, and which tool returns must leave the context (oldest first) for the rest to fit.

Each image is fitted when it arrives, but the limits of a request are on all of its images together: Anthropic takes
100 images and 32 MB a request, and only 2000x2000 px each when a request holds more than 20; Gemini 20 MB of inline
data. A session that keeps its screenshots reaches those totals whatever each one weighs. Pure logic: the rule that
applies it (`_request/_image_totals_rule`) moves the chosen returns out as aging does, each image under a handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._limits import ImageTarget, base64_size

__all__ = ('REQUEST_SHARE', 'ImageEntry', 'RequestImageLimits', 'over_request_limits', 'request_limits')

REQUEST_SHARE = 0.8
"""The share of a provider's request size the images may take (the base64 of each): the rest is the text."""


@dataclass(frozen=True)
class RequestImageLimits:
    """What the images of one request may add up to, for every provider of a target at once."""

    max_images: int
    """Images in a request."""

    max_bytes: int
    """Their base64 size together."""

    many_images: int | None
    """Above this many images in a request, each must be within `max_side_many` px a side."""

    max_side_many: int | None
    """See `many_images`."""


def request_limits(target: ImageTarget) -> RequestImageLimits:
    """The tightest per-request limits of the target's provider rows."""
    rows = target.limits
    thresholds = [
        (row.many_images, row.max_side_many_images)
        for row in rows
        if row.many_images is not None and row.max_side_many_images is not None
    ]
    many, side = min(thresholds) if thresholds else (None, None)
    request_bytes = min((row.max_request_bytes for row in rows if row.max_request_bytes is not None), default=None)
    return RequestImageLimits(
        max_images=min((row.max_images for row in rows if row.max_images is not None), default=1_000),
        max_bytes=int(request_bytes * REQUEST_SHARE) if request_bytes is not None else 1 << 62,
        many_images=many,
        max_side_many=side,
    )


@dataclass(frozen=True)
class ImageEntry:
    """The images of one part of the request, in the order the request holds them."""

    movable: bool
    """Whether the part can leave the context (a tool return holding only images); a user's own images cannot."""

    sizes: tuple[tuple[int, int, int], ...]
    """Each image's width, height (0 when unknown) and bytes."""

    @property
    def encoded(self) -> int:
        """The base64 size of its images together."""
        return sum(base64_size(nbytes) for _, _, nbytes in self.sizes)


def over_request_limits(entries: Sequence[ImageEntry], limits: RequestImageLimits) -> list[int]:
    """The indexes of the movable entries to move out, oldest first, until the rest fit `limits`; `[]` when they do.

    When even moving every movable entry cannot make them fit (a user's own images over the limits), every movable
    entry is chosen: what is left is the user's.
    """
    count = sum(len(entry.sizes) for entry in entries)
    total = sum(entry.encoded for entry in entries)
    chosen: list[int] = []
    gone: set[int] = set()

    def fits() -> bool:
        if count > limits.max_images or total > limits.max_bytes:
            return False
        if limits.many_images is None or limits.max_side_many is None or count <= limits.many_images:
            return True
        side = limits.max_side_many
        return not any(
            max(width, height) > side or width == 0
            for index, entry in enumerate(entries)
            if index not in gone
            for width, height, _ in entry.sizes
        )

    for index, entry in enumerate(entries):
        if fits():
            break
        if not entry.movable:
            continue
        chosen.append(index)
        gone.add(index)
        count -= len(entry.sizes)
        total -= entry.encoded
    return chosen
