"""A page of a stored PDF as an image, for the view tool: rendered in a worker thread, bounded in pixels and time.

PDFium cannot be interrupted inside a page (forms that draw each other ten times per level make a 2 KB page take
minutes), so a render that is not done within `RENDER_SECONDS` is left to finish in its thread while the run goes
on, and the model is told the page is too complex. Renders take turns (PDFium is not thread-safe): a view waiting
for one still going (given up on, or another call's) waits half of `RENDER_SECONDS` at most, then is told to try
again.
"""

from __future__ import annotations

import threading
from functools import partial

import anyio

from ._pdf import is_pdf, render_page

__all__ = ('RENDER_SCALE', 'RENDER_SECONDS', 'page_image')

RENDER_SCALE = 2
"""A page is rendered at this many times the serving model's long edge, so a region of it shows more detail."""

RENDER_SECONDS = 10.0
"""Seconds a page may take to render (waiting for an earlier render included); then the model is told it is too
complex and to read its text instead."""

_PDFIUM = threading.Lock()
"""Held by the thread rendering a page: PDFium is not thread-safe, and a render given up on still holds it."""


class _Busy(Exception):
    """The render lock did not come free in time: another render is still going."""


async def page_image(data: bytes, handle: str, page: int, long_edge: int) -> tuple[bytes, str]:
    """`(png, '')`: page `page` (0 or 1: the first) of the PDF `data`, rendered; `(data, '')` for a payload that is
    not a PDF and no page asked for; `(data, why not)` otherwise, written for the model.
    """
    if not is_pdf(data, None):
        if page:
            return data, f"'{handle}' is not a PDF, so it has no pages: leave page out."
        return data, ''
    number = max(page, 1)
    seconds = RENDER_SECONDS
    render = partial(_render_in_turn, data, number, long_edge * RENDER_SCALE, seconds / 2)
    rendered: bytes | None = None
    try:
        with anyio.move_on_after(seconds):
            rendered = await anyio.to_thread.run_sync(render, abandon_on_cancel=True)
    except ImportError:
        return data, (
            f"The PDF '{handle}' cannot be shown as an image here: pypdfium2 is not installed "
            "(pip install 'pydantic-ai-harness-context[media]')."
        )
    except ValueError as exc:
        return data, f"The PDF '{handle}' cannot be shown: {str(exc).rstrip('.')}."
    except _Busy:
        return data, (
            f"Page {number} of the PDF '{handle}' cannot be rendered right now: another page is still rendering. "
            'Try again in a few seconds.'
        )
    if rendered is None:
        return data, (
            f"Page {number} of the PDF '{handle}' is too complex to render in time ({seconds:g} s). Its text is in "
            f"the PDF's text, after the line starting `=== page {number}/`."
        )
    return rendered, ''


def _render_in_turn(data: bytes, number: int, long_edge: int, wait: float) -> bytes:
    """`render_page` once no other render runs, after `wait` seconds at most."""
    if not _PDFIUM.acquire(timeout=wait):
        raise _Busy
    try:
        return render_page(data, number, long_edge=long_edge)
    finally:
        _PDFIUM.release()
