"""A page of a stored PDF as an image, for the view tool: rendered in a worker thread, bounded in pixels."""

from __future__ import annotations

from functools import partial

import anyio

from ._pdf import is_pdf, render_page

__all__ = ('RENDER_SCALE', 'page_image')

RENDER_SCALE = 2
"""A page is rendered at this many times the serving model's long edge, so a region of it shows more detail."""


async def page_image(data: bytes, handle: str, page: int, long_edge: int) -> tuple[bytes, str]:
    """`(png, '')`: page `page` (0 or 1: the first) of the PDF `data`, rendered; `(data, '')` for a payload that is
    not a PDF and no page asked for; `(data, why not)` otherwise, written for the model.
    """
    if not is_pdf(data, None):
        if page:
            return data, f"'{handle}' is not a PDF, so it has no pages: leave page out."
        return data, ''
    try:
        rendered = await anyio.to_thread.run_sync(
            partial(render_page, data, max(page, 1), long_edge=long_edge * RENDER_SCALE)
        )
    except ImportError:
        return data, (
            f"The PDF '{handle}' cannot be shown as an image here: pypdfium2 is not installed "
            "(pip install 'pydantic-ai-harness-context[media]')."
        )
    except ValueError as exc:
        return data, f"The PDF '{handle}' cannot be shown: {exc}."
    return rendered, ''
