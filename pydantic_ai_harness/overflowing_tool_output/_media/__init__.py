"""Images, documents and base64 blobs in tool returns: provider limits, fitting, storing originals, and looking at
them again.

The reusable core of the image band: `_limits` (each provider's published image limits, with sources, and the
defaults every provider accepts), `_sniff` (type and size from the header, so bombs are refused undecoded), `_fit`
(fit or crop with Pillow, blocking: run it in a worker thread), `_images` (a tool return's images fitted and their
originals stored), `_content_images` (which images of `ToolReturn.content` are a return's, so they age with it),
`_view_tool` (the model's crop/zoom read by handle) and `_markers` (what the model reads).
Documents and blobs: `_pdf` (a PDF's pages and text, a page rendered), `_blobs` (data URLs and base64 runs found
and replaced), `_steps` (the band loop's step that takes them apart) and `_file_items` (each document of a list
reduced on its own).
"""

from __future__ import annotations

from ._content_images import CONTENT_IMAGES_KEY
from ._fit import (
    DEFAULT_MAX_DECODE_PIXELS,
    FittedImage,
    ImageRefused,
    PillowMissing,
    crop_image,
    fit_image,
    fits,
    pillow_available,
    read_info,
)
from ._images import IMAGES_KEY, fit_result_images, holds_images, is_image
from ._limits import DEFAULT_TARGET, PROVIDER_IMAGE_LIMITS, ImageTarget, ProviderImageLimits, provider_of, target_for
from ._setting import ImageBand
from ._sniff import ImageInfo, sniff_image
from ._view_tool import AGED_IMAGES_KEY, build_view_toolset, images_in_conversation, is_view_tool, stored_image_handles

__all__ = (
    'AGED_IMAGES_KEY',
    'CONTENT_IMAGES_KEY',
    'DEFAULT_MAX_DECODE_PIXELS',
    'DEFAULT_TARGET',
    'IMAGES_KEY',
    'PROVIDER_IMAGE_LIMITS',
    'FittedImage',
    'ImageBand',
    'ImageInfo',
    'ImageRefused',
    'ImageTarget',
    'PillowMissing',
    'ProviderImageLimits',
    'build_view_toolset',
    'crop_image',
    'fit_image',
    'fit_result_images',
    'fits',
    'holds_images',
    'images_in_conversation',
    'is_image',
    'is_view_tool',
    'pillow_available',
    'provider_of',
    'read_info',
    'sniff_image',
    'stored_image_handles',
    'target_for',
)
