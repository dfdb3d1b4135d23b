"""Fitting an image under a durable engine: the decoding runs in the capability's `overflow_fit_image` operation (a
DBOS step, a Temporal activity), never in workflow code; its outcome (the copy, or the refusal) is what is recorded.

The original crosses the boundary once, as base64 (as the store write's does); the copy comes back within the
target's byte budget (1 MiB by default).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
from pydantic_ai.tools import RunContext

from ._fit import FittedImage, ImageRefused, PillowMissing, fit_image
from ._images import fit_in_worker, fitted_from_json, fitted_to_json
from ._limits import ImageTarget
from ._sniff import ImageInfo

__all__ = ('DurableFit', 'fit_answer', 'fit_through')

DurableFit = Callable[[RunContext[Any], str, dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]
"""The capability's durable `overflow_fit_image` operation: `(ctx, original as base64, info, target)` -> outcome."""


async def fit_through(
    durable: DurableFit, ctx: RunContext[Any], data: bytes, info: ImageInfo, target: ImageTarget
) -> FittedImage:
    """The fitted copy: in a worker thread outside a durable run, else through the durable operation."""
    if not ctx.in_durable_context:
        return await fit_in_worker(ctx, data, info, target)
    described = {
        'media_type': info.media_type,
        'width': info.width,
        'height': info.height,
        'orientation': info.orientation,
        'frames': info.frames,
    }
    return fitted_from_json(await durable(ctx, base64.b64encode(data).decode('ascii'), described, target.to_json()))


async def fit_answer(data_b64: str, info: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The durable operation's body: decode, fit and encode in a worker thread; the outcome as plain data."""
    data = base64.b64decode(data_b64)
    # An operation scheduled by an earlier version (a pending Temporal activity) sends neither: read as 1.
    header = ImageInfo(
        str(info['media_type']),
        int(info['width']),
        int(info['height']),
        len(data),
        orientation=int(info.get('orientation', 1)),
        frames=int(info.get('frames', 1)),
    )
    try:
        fitted = await anyio.to_thread.run_sync(partial(fit_image, data, header, ImageTarget.from_json(target)))
    except ImageRefused as refused:
        return fitted_to_json(refused)
    except PillowMissing as missing:  # the worker lacks Pillow: recorded as a refusal, not retried
        return fitted_to_json(ImageRefused(str(missing)))
    return fitted_to_json(fitted)
