"""A PDF read for the model: its page count and the text of each page, laid out like a log; a page as an image.

Pure logic over the file's bytes, run by the band loop in a worker thread. The work is bounded whatever the file
holds: pypdf caps every decompressed stream (75 MB), and here the pages read (`MAX_TEXT_PAGES`), the text kept
(`MAX_TEXT_CHARS`) and the time spent (`text_seconds`: 2 s plus 1 s per MB, checked before every content-stream
operator, form XObjects included) are capped too, so a hostile file (a million pages, a page tree that loops, a
stream that inflates to gigabytes, forms that draw each other a billion times) costs seconds at most and says where
it stopped.

pypdf (pure Python, every platform) reads the structure and text; pypdfium2 (Chrome's PDFium, binary wheels for
Linux, macOS and Windows) renders a page. Both come with the `media` extra; without them a PDF is still stored
whole, and the marker says what to install.
"""

from __future__ import annotations

import importlib
import io
import re
import time
from dataclasses import dataclass, field
from typing import Any

from ..._gil import hand_over

__all__ = (
    'MAX_TEXT_CHARS',
    'MAX_TEXT_PAGES',
    'PAGE_LONG_EDGE',
    'TEXT_SECONDS',
    'PdfDigest',
    'can_render',
    'is_pdf',
    'page_line',
    'page_line_template',
    'read_pdf',
    'render_page',
    'text_seconds',
)

MAX_TEXT_PAGES = 5_000
"""Pages whose text is extracted, at most (the count is still reported in full)."""

MAX_TEXT_CHARS = 16 * 1024 * 1024
"""Characters of text kept from one file, at most."""

TEXT_SECONDS = 30.0
"""Seconds of text extraction (CPU time of the thread extracting) per file, at most, however large the file (see
`text_seconds`)."""

TEXT_BASE_SECONDS = 2.0
"""Seconds of text extraction any file gets, before the allowance per MB."""

TEXT_SECONDS_PER_MB = 1.0
"""Seconds of text extraction per MB of file, on top of `TEXT_BASE_SECONDS`."""

PAGE_LONG_EDGE = 1568
"""The long edge, in pixels, a page is rendered at: what Claude reads without scaling down; fits every provider."""


@dataclass
class PdfDigest:
    """What a PDF holds, as far as it could be read."""

    pages: int | None = None
    """The page count, or `None` when the file could not be opened."""

    texts: list[str] = field(default_factory=list[str])
    """The text of pages 1..len(texts), in order (an empty string for a page without text)."""

    stopped: str = ''
    """Why text extraction stopped before the last page (empty when it did not)."""

    error: str = ''
    """Why the file could not be read at all (empty when it could)."""

    missing: str = ''
    """The package that is not installed, when that is why the file was not read."""

    unreadable: int = 0
    """Pages whose text could not be extracted (a damaged or oversized content stream); their text is empty."""

    @property
    def text_chars(self) -> int:
        """Characters of text extracted."""
        return sum(map(len, self.texts))

    def text_log(self) -> str:
        """The pages' text as one log: each page starts with a line `page_line(n, pages)`, then its text."""
        total = self.pages or len(self.texts)
        parts: list[str] = []
        for number, text in enumerate(self.texts, 1):
            parts.append(page_line(number, total))
            if text:
                parts.append(text)
        return '\n'.join(parts) + '\n' if parts else ''


def page_line(number: int, pages: int) -> str:
    """The line a page's text starts with in the text log (what the model greps for to find a page)."""
    return f'=== page {number}/{pages} ==='


def page_line_template(pages: int) -> str:
    """`page_line` with `N` for the page number, as the header describes it."""
    return f'=== page N/{pages} ==='


def text_seconds(nbytes: int) -> float:
    """The text extraction budget of a file of `nbytes`: proportional to its size, never above `TEXT_SECONDS`."""
    return min(round(TEXT_BASE_SECONDS + TEXT_SECONDS_PER_MB * nbytes / (1024 * 1024), 1), TEXT_SECONDS)


_LEADING = b' \t\r\n\f\x00'
_BOM = b'\xef\xbb\xbf'


def is_pdf(data: bytes, media_type: str | None) -> bool:
    """Whether `data` is a PDF: declared so, or starting with the PDF signature (after white space or a UTF-8 BOM
    only, as files in the wild may have; an image or text merely holding `%PDF-` is not one).
    """
    if media_type == 'application/pdf':
        return True
    head = data[:1024].lstrip(_LEADING)
    return head.removeprefix(_BOM).lstrip(_LEADING).startswith(b'%PDF-')


class _OutOfTime(Exception):
    """Raised from the text extraction's operator visitor once the budget is spent."""


def read_pdf(
    data: bytes,
    *,
    max_pages: int = MAX_TEXT_PAGES,
    max_chars: int = MAX_TEXT_CHARS,
    seconds: float | None = None,
) -> PdfDigest:
    """The page count and per-page text of `data`, within the bounds given (`seconds`: `text_seconds` of its size).
    Never raises.
    """
    if seconds is None:
        seconds = text_seconds(len(data))
    try:
        from pypdf import PdfReader
    except ImportError:
        return PdfDigest(missing='pypdf')
    import logging

    logging.getLogger('pypdf').setLevel(logging.ERROR)  # a damaged file logs a warning per object otherwise
    digest = PdfDigest()
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = bool(reader.decrypt(''))  # files encrypted for permissions only open without one
            except Exception:  # noqa: BLE001 - any failure means: no password we know
                opened = False
            if not opened:
                return PdfDigest(error='it is encrypted with a password')
        digest.pages = len(reader.pages)
    except Exception as exc:  # noqa: BLE001 - a damaged or hostile file must not end the run
        return PdfDigest(error=f'it could not be parsed ({type(exc).__name__}: {_short(exc)})')
    # The budget is this thread's CPU time, not the clock's: the work is bounded alike on a busy machine and an idle one.
    deadline = time.thread_time() + seconds
    stopped = f'text extraction stopped after {seconds:g} s'

    def check_time(*_: object) -> None:
        # Called before every operator, in nested forms too: one page of a tiny file cannot run unbounded.
        if time.thread_time() > deadline:
            raise _OutOfTime

    chars = 0
    for index in range(digest.pages):
        hand_over()
        if index >= max_pages:
            digest.stopped = f'text is read from the first {max_pages:,} pages only'
            break
        if time.thread_time() > deadline:
            digest.stopped = stopped
            break
        try:
            text = reader.pages[index].extract_text(visitor_operand_before=check_time) or ''
        except _OutOfTime:
            digest.stopped = f'{stopped}, within page {index + 1}'
            break
        except Exception:  # noqa: BLE001 - one bad page leaves the others readable
            digest.unreadable += 1
            text = ''
        text = _tidy(text)
        if chars + len(text) > max_chars:
            digest.texts.append(text[: max(max_chars - chars, 0)])
            digest.stopped = f'text is kept up to {max_chars:,} characters'
            break
        chars += len(text)
        digest.texts.append(text)
    return digest


_LONE_SURROGATE = re.compile('[\ud800-\udfff]')
"""A surrogate code point in a `str` is always a lone one (a font's ToUnicode map may give one): no JSON encoder a
durable engine uses, and no provider, takes it."""


def _tidy(text: str) -> str:
    """One page's text as lines: line breaks made newlines, trailing spaces and blank edges dropped, a lone
    surrogate made U+FFFD.
    """
    text = _LONE_SURROGATE.sub('\ufffd', text)
    lines = text.replace('\r\n', '\n').replace('\r', '\n').split('\n')
    return '\n'.join(line.rstrip() for line in lines).strip('\n')


def _short(exc: Exception) -> str:
    message = str(exc).replace('\n', ' ')
    return message if len(message) <= 120 else message[:117] + '...'


def can_render() -> bool:
    """Whether pages can be rendered here (pypdfium2 imports)."""
    try:
        importlib.import_module('pypdfium2')
    except ImportError:
        return False
    return True


def render_page(data: bytes, number: int, *, long_edge: int = PAGE_LONG_EDGE) -> bytes:
    """Page `number` (1-based) of the PDF `data` as a PNG whose long edge is `long_edge` pixels at most.

    Raises `ImportError` when pypdfium2 or Pillow is missing, `ValueError` for a page that does not exist or a file
    that cannot be opened.
    """
    # pypdfium2 ships no type information: used through `Any`, its results checked where they come back.
    pdfium: Any = importlib.import_module('pypdfium2')
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise ValueError(f'the PDF could not be opened: {exc}') from None
    try:
        pages = len(document)
        if not 1 <= number <= pages:
            raise ValueError(f'page {number} does not exist: the PDF has {pages} pages (1 to {pages})')
        page = document[number - 1]
        try:
            width, height = page.get_size()  # points
            try:
                bitmap = page.render(scale=_scale(float(width), float(height), long_edge))
            except pdfium.PdfiumError as exc:
                raise ValueError(f'page {number} could not be rendered: {exc}') from None
            try:
                out = io.BytesIO()
                bitmap.to_pil().save(out, format='PNG', optimize=True)
                return out.getvalue()
            finally:
                bitmap.close()
        finally:
            page.close()
    finally:
        document.close()


def _scale(width: float, height: float, long_edge: int) -> float:
    """Pixels per point: the long edge at `long_edge` px (never above 8 px per point, 576 dpi), so the page is at most
    `long_edge` squared pixels whatever its declared size.
    """
    width, height = max(width, 1.0), max(height, 1.0)
    return min(long_edge / max(width, height), 8.0)
