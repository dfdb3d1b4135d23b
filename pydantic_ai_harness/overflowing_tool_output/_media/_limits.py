"""What each provider accepts of an image, from its published documentation, and the budget an image is fitted to.

Every number in `PROVIDER_IMAGE_LIMITS` names its source. Where the serving model's provider is not in the table (a
test model, a new provider), `DEFAULT_TARGET` is the intersection of every row: an image fitted to it is accepted by
each of them at once, and is not scaled down again by any of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

__all__ = (
    'DEFAULT_TARGET',
    'PROVIDER_IMAGE_LIMITS',
    'ImageTarget',
    'ProviderImageLimits',
    'base64_size',
    'provider_of',
    'target_for',
)

TokenRule = Literal['pixels_750', 'tiles_512', 'tiles_768']
"""How a provider counts an image's input tokens (see `ProviderImageLimits.tokens`)."""

MIB = 1024 * 1024


def base64_size(nbytes: int) -> int:
    """The length of `nbytes` bytes in base64, as a provider that limits the encoded image counts them."""
    return 4 * math.ceil(nbytes / 3)


@dataclass(frozen=True)
class ProviderImageLimits:
    """What one provider's API accepts of an image in a request, and what it costs there."""

    provider: str
    """The provider (`anthropic`, `openai`, `google`)."""

    max_side: int | None
    """Pixels on either side above which the image is rejected; `None`: none published."""

    max_side_many_images: int | None
    """The tighter side limit that applies when a request holds more than `many_images` images."""

    many_images: int | None
    """See `max_side_many_images`."""

    max_image_bytes: int
    """The largest image the API takes, in bytes (of its base64 form when `base64_limit`)."""

    base64_limit: bool
    """Whether `max_image_bytes` counts the base64-encoded image (the API's error message says so)."""

    max_request_bytes: int | None
    """The request (or its inline image data) size limit, in bytes."""

    max_images: int | None
    """Images per request."""

    scaled_long_edge: int
    """Above this long edge the provider scales the image down itself: sending more pixels costs bytes and latency,
    and adds no detail the model sees."""

    media_types: frozenset[str]
    """The image types the API takes."""

    token_rule: TokenRule
    """How it counts an image's tokens."""

    source: str
    """Where these numbers come from."""

    def tokens(self, width: int, height: int) -> int:
        """The input tokens of a `width` x `height` image as the provider counts them, after its own scaling."""
        long_edge = max(width, height)
        if long_edge > self.scaled_long_edge:
            scale = self.scaled_long_edge / long_edge
            width, height = max(1, int(width * scale)), max(1, int(height * scale))
        if self.token_rule == 'pixels_750':
            return math.ceil(width * height / 750)
        if self.token_rule == 'tiles_512':
            # Fit in 2048 x 2048, then the short side to 768; 170 tokens per 512-px tile plus 85.
            short = min(width, height)
            if short > 768:
                scale = 768 / short
                width, height = int(width * scale), int(height * scale)
            return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)
        if width <= 384 and height <= 384:
            return 258
        return 258 * math.ceil(width / 768) * math.ceil(height / 768)


PROVIDER_IMAGE_LIMITS: dict[str, ProviderImageLimits] = {
    'anthropic': ProviderImageLimits(
        provider='anthropic',
        max_side=8000,
        max_side_many_images=2000,
        many_images=20,
        max_image_bytes=5 * MIB,
        base64_limit=True,
        max_request_bytes=32 * 1_000_000,
        max_images=100,
        scaled_long_edge=1568,
        media_types=frozenset({'image/jpeg', 'image/png', 'image/gif', 'image/webp'}),
        token_rule='pixels_750',
        source=(
            'Anthropic, "Vision" (docs.anthropic.com/en/docs/vision): rejected above 8000x8000 px, 2000x2000 px when '
            'a request holds more than 20 images, up to 100 images and a 32 MB request on standard endpoints, scaled '
            'down above a 1568 px long edge (newer models: 2576) or ~1,600 tokens, tokens ~ w*h/750. The 5 MB image '
            "limit is the API's error: `image.source.base64: image exceeds 5 MB maximum: ... bytes > 5242880 bytes`."
        ),
    ),
    'openai': ProviderImageLimits(
        provider='openai',
        max_side=None,
        max_side_many_images=None,
        many_images=None,
        max_image_bytes=20 * MIB,
        base64_limit=False,
        max_request_bytes=50 * MIB,
        max_images=500,
        scaled_long_edge=2000,
        media_types=frozenset({'image/jpeg', 'image/png', 'image/gif', 'image/webp'}),
        token_rule='tiles_512',
        source=(
            'OpenAI, "Images and vision" guide (platform.openai.com/docs/guides/images-vision): PNG, JPEG, WEBP, '
            'non-animated GIF; up to 20 MB per image, 500 images and 50 MB of image bytes per request; high resolution '
            'is 768 px (short side) x 2000 px (long side); detail "high" fits the image in 2048x2048, then its short '
            'side to 768 px, 170 tokens per 512-px tile plus 85.'
        ),
    ),
    'google': ProviderImageLimits(
        provider='google',
        max_side=None,
        max_side_many_images=None,
        many_images=None,
        max_image_bytes=7 * MIB,
        base64_limit=False,
        max_request_bytes=20 * MIB,
        max_images=3000,
        scaled_long_edge=3072,
        media_types=frozenset({'image/jpeg', 'image/png', 'image/webp', 'image/heic', 'image/heif'}),
        token_rule='tiles_768',
        source=(
            'Google, Gemini API "Image understanding" (ai.google.dev/gemini-api/docs/vision): inline image data in a '
            'request of under 20 MB in total; Vertex AI "Image understanding": 7 MB per inline file, up to 3,000 '
            'images per prompt, PNG, JPEG, WEBP, HEIC, HEIF; tokens (Gemini 2.0): 258 when both sides are at most '
            '384 px, else 258 per 768x768 tile. No resize edge is published: 3072 px (4 tiles a side) is ours.'
        ),
    ),
}
"""The image limits of each major provider, each row with its source."""


@dataclass(frozen=True)
class ImageTarget:
    """What an image sent to the model must fit: the serving provider's limits, tightened by the user's budget."""

    long_edge: int
    """The longest side, in pixels."""

    max_pixels: int
    """Width times height."""

    max_bytes: int
    """The encoded image, in bytes (raw, not base64)."""

    max_tokens: int | None
    """The provider's token estimate of the image (`None`: not limited)."""

    media_types: frozenset[str]
    """Types the model may be sent as they are; anything else is re-encoded."""

    limits: tuple[ProviderImageLimits, ...]
    """The provider rows this target was built from (their token rules estimate the cost)."""

    def tokens(self, width: int, height: int) -> int:
        """The largest token estimate of any provider row for a `width` x `height` image."""
        return max(row.tokens(width, height) for row in self.limits)

    def to_json(self) -> dict[str, Any]:
        """Plain data, to cross a durable execution boundary (`from_json` reads it back)."""
        return {
            'long_edge': self.long_edge,
            'max_pixels': self.max_pixels,
            'max_bytes': self.max_bytes,
            'max_tokens': self.max_tokens,
            'media_types': sorted(self.media_types),
            'providers': [row.provider for row in self.limits],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ImageTarget:
        """The target `to_json` wrote."""
        return cls(
            long_edge=int(data['long_edge']),
            max_pixels=int(data['max_pixels']),
            max_bytes=int(data['max_bytes']),
            max_tokens=None if data['max_tokens'] is None else int(data['max_tokens']),
            media_types=frozenset(str(media_type) for media_type in data['media_types']),
            limits=tuple(PROVIDER_IMAGE_LIMITS[str(name)] for name in data['providers']),
        )


_ALL = tuple(PROVIDER_IMAGE_LIMITS.values())

DEFAULT_MAX_BYTES = 1 * MIB
"""The default byte budget of an image sent: a 1568-px screenshot is 0.2-1 MB as PNG; a request of 15 such images
stays under Gemini's 20 MB of inline data, and each is far under every per-image limit."""

DEFAULT_MAX_PIXELS = 1_150_000
"""Anthropic's recommendation (about 1.15 megapixels, ~1,600 tokens): larger images are scaled down by the API."""


def _target_of(rows: tuple[ProviderImageLimits, ...]) -> ImageTarget:
    long_edge = min(row.scaled_long_edge for row in rows)
    sides = [row.max_side_many_images or row.max_side for row in rows]
    long_edge = min([long_edge, *(side for side in sides if side is not None)])
    # The per-image byte limit as raw bytes: a base64 limit leaves 3/4 of it.
    max_bytes = min(row.max_image_bytes * 3 // 4 if row.base64_limit else row.max_image_bytes for row in rows)
    media_types = frozenset(rows[0].media_types.intersection(*(row.media_types for row in rows[1:])))
    return ImageTarget(
        long_edge=long_edge,
        max_pixels=DEFAULT_MAX_PIXELS if any(row.provider == 'anthropic' for row in rows) else long_edge * long_edge,
        max_bytes=min(max_bytes, DEFAULT_MAX_BYTES),
        max_tokens=None,
        media_types=media_types,
        limits=rows,
    )


DEFAULT_TARGET = _target_of(_ALL)
"""The target when the serving model's provider is unknown: within every provider's limits at once (1568 px long
edge, 1.15 megapixels, 1 MiB, JPEG/PNG/WebP)."""

_TARGETS = {name: _target_of((row,)) for name, row in PROVIDER_IMAGE_LIMITS.items()}


def provider_of(model: Any) -> str | None:
    """The table row that serves `model` (a pydantic-ai `Model`): by its provider, else by its model name."""
    system = str(getattr(model, 'system', '') or '').lower()
    try:
        name = str(getattr(model, 'model_name', '') or '').lower()
    except Exception:  # noqa: BLE001 - a model whose name cannot be read is served by the defaults
        name = ''
    if system == 'anthropic' or 'claude' in name:
        return 'anthropic'
    if system.startswith('google') or 'gemini' in name:
        return 'google'
    if system == 'openai' or name.startswith(('gpt-', 'o1', 'o3', 'o4')):
        return 'openai'
    return None


def target_for(model: Any) -> ImageTarget:
    """The target of the provider serving `model`, or `DEFAULT_TARGET` when it is not in the table."""
    provider = provider_of(model)
    return _TARGETS[provider] if provider is not None else DEFAULT_TARGET
