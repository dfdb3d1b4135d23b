"""A PDF read for the media step: its digest and its text log, masked when secret redaction is on, read in a worker
thread, or under a durable engine in the capability's `overflow_read_pdf` operation (a DBOS step, a Temporal
activity), never in workflow code (seconds of CPU a replay would repeat, and a library the workflow sandbox may not
import).

What that operation records is what the model may read, bounded: each page's text masked on its own (a secret
that only the whole text shows, split across two pages, withholds the text), kept up to `DURABLE_TEXT_BYTES` (under
Temporal's 2 MB payload limit), and whether the whole file was checked and held a secret, decided on the full text
and the raw bytes before anything was cut.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
from pydantic_ai.tools import RunContext

from ..._typing import is_list
from .._rendering._markers import format_bytes
from ._pdf import PdfDigest, can_render, read_pdf

__all__ = (
    'DURABLE_TEXT_BYTES',
    'DurablePdfRead',
    'Mask',
    'MaskedPdf',
    'PdfReading',
    'masked_pdf',
    'pdf_answer',
    'read_masked',
    'reading_from_answer',
)

Mask = Callable[[str], tuple[str, dict[str, int]]]
"""Secret redaction's masking: `text` -> (the text masked, the count of each kind of secret masked)."""

DurablePdfRead = Callable[[RunContext[Any], str], Awaitable[dict[str, Any]]]
"""The capability's durable `overflow_read_pdf` operation: `(ctx, the file as base64)` -> `pdf_answer`'s outcome."""

DURABLE_TEXT_BYTES = 1024 * 1024
"""UTF-8 bytes of page text the durable operation records at most; the file itself is stored whole."""


@dataclass(frozen=True)
class MaskedPdf:
    """A PDF's text log with its secrets masked."""

    log: str
    """The text log, masked."""

    withheld: bool
    """Whether a secret was masked (in its text, or its raw bytes)."""

    checked: bool
    """Whether all of its text was read (else a page not read could hold a secret)."""


@dataclass(frozen=True)
class PdfReading:
    """What the media step knows of a PDF."""

    digest: PdfDigest
    """Its page count and page texts (masked, under a durable engine), and where reading stopped."""

    masked: MaskedPdf
    """Its text log as the model may read it, and what redaction found."""

    renders: bool
    """Whether its pages can be rendered where the view tool runs (pypdfium2 imports)."""


def masked_pdf(mask: Mask, digest: PdfDigest) -> MaskedPdf:
    """`digest`'s text log masked by `mask`."""
    log = digest.text_log() if digest.pages is not None else ''
    masked, found = mask(log)
    checked = digest.pages is not None and not digest.stopped and not digest.unreadable
    return MaskedPdf(masked, bool(found), checked)


def read_masked(data: bytes, mask: Mask | None) -> tuple[PdfDigest, MaskedPdf]:
    """`read_pdf`, then (with redaction on) its text masked, and its raw bytes checked too (text in an
    uncompressed stream is readable in the stored file): in one worker-thread call.
    """
    digest = read_pdf(data)
    if mask is None:
        return digest, MaskedPdf(digest.text_log() if digest.pages is not None else '', False, True)
    masked = masked_pdf(mask, digest)
    if not masked.withheld and mask(data.decode('latin-1'))[1]:
        masked = replace(masked, withheld=True)
    return digest, masked


async def pdf_answer(data_b64: str, mask: Mask | None) -> dict[str, Any]:
    """The durable operation's body: the file read and masked in a worker thread; the outcome as plain data."""
    return await anyio.to_thread.run_sync(partial(_answer, base64.b64decode(data_b64), mask))


def _answer(data: bytes, mask: Mask | None) -> dict[str, Any]:
    digest, masked = read_masked(data, mask)
    texts = digest.texts
    stopped = digest.stopped
    if mask is not None and texts:
        texts = [mask(text)[0] for text in texts]
        if masked.withheld and mask(PdfDigest(digest.pages, texts).text_log())[1]:
            # A secret the page-by-page masking left readable (split across pages): no page text is recorded.
            texts, stopped = [''] * len(texts), 'its text is not shown: a secret in it spans pages'
    texts, cut = _within(texts, DURABLE_TEXT_BYTES)
    return {
        'pages': digest.pages,
        'texts': texts,
        'stopped': cut or stopped,
        'error': digest.error,
        'missing': digest.missing,
        'unreadable': digest.unreadable,
        'withheld': masked.withheld,
        'checked': masked.checked,
        'renders': can_render(),
    }


def _within(texts: list[str], budget: int) -> tuple[list[str], str]:
    """The page texts that fit `budget` UTF-8 bytes (the last one cut at a character), and why they were cut."""
    kept: list[str] = []
    spent = 0
    for text in texts:
        size = len(text.encode('utf-8', 'surrogatepass'))
        if spent + size > budget:
            room = text.encode('utf-8', 'surrogatepass')[: budget - spent].decode('utf-8', 'ignore')
            kept.append(room)
            return kept, f'text is kept up to {format_bytes(budget)} in a durable run'
        kept.append(text)
        spent += size
    return kept, ''


def reading_from_answer(answer: dict[str, Any]) -> PdfReading:
    """What `pdf_answer` recorded, read back (plain data from an engine: every field's type checked)."""
    pages, texts, unreadable = answer.get('pages'), answer.get('texts'), answer.get('unreadable')
    digest = PdfDigest(
        pages=pages if isinstance(pages, int) and pages >= 0 else None,
        texts=[text if isinstance(text, str) else '' for text in texts] if is_list(texts) else [],
        stopped=str(answer.get('stopped') or ''),
        error=str(answer.get('error') or ''),
        missing=str(answer.get('missing') or ''),
        unreadable=unreadable if isinstance(unreadable, int) else 0,
    )
    log = digest.text_log() if digest.pages is not None else ''
    masked = MaskedPdf(log, bool(answer.get('withheld')), bool(answer.get('checked')))
    return PdfReading(digest, masked, bool(answer.get('renders')))
