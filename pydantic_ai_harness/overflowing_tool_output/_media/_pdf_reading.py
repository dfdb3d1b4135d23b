"""A PDF read for the media step: its digest and its text log, masked when secret redaction is on, read in a worker
thread, or under a durable engine in the capability's `overflow_read_pdf` operation (a DBOS step, a Temporal
activity), never in workflow code (seconds of CPU a replay would repeat, and a library the workflow sandbox may not
import).

What that operation records is what a run without an engine shows: the text log masked as one text (a secret
spanning a page break is masked as a whole), its page count, and whether the whole file was checked and held a
secret, decided on the full text and the raw bytes. Only the log is bounded: kept up to `DURABLE_TEXT_BYTES` as
JSON escapes it (a control character costs six bytes there), under Temporal's 2 MB payload limit, cut at a line.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
from pydantic_ai.tools import RunContext

from .._rendering._markers import format_bytes
from ._pdf import PdfDigest, can_render, read_pdf

__all__ = (
    'DURABLE_TEXT_BYTES',
    'DurablePdfRead',
    'Mask',
    'MaskedPdf',
    'PdfReading',
    'durable_answer',
    'masked_pdf',
    'pdf_answer',
    'read_masked',
    'reading_from_answer',
    'unread',
)

Mask = Callable[[str], tuple[str, dict[str, int]]]
"""Secret redaction's masking: `text` -> (the text masked, the count of each kind of secret masked)."""

DurablePdfRead = Callable[[RunContext[Any], str, bool], Awaitable[dict[str, Any]]]
"""The capability's durable `overflow_read_pdf` operation: `(ctx, the file as base64, check_only)` -> `pdf_answer`'s
outcome."""

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

    has_text: bool
    """Whether any page had text."""

    cut: str = ''
    """Where the log stops when the durable operation kept only part of it (empty: it is whole)."""


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


async def pdf_answer(data_b64: str, mask: Mask | None, *, check_only: bool = False) -> dict[str, Any]:
    """The durable operation's body: the file read and masked in a worker thread; the outcome as plain data.
    `check_only`: whether it held a secret and was checked whole, nothing else (a PDF blob's secret check).
    """
    answer = await anyio.to_thread.run_sync(partial(_answer, base64.b64decode(data_b64), mask))
    return {'withheld': answer['withheld'], 'checked': answer['checked']} if check_only else answer


async def durable_answer(
    read: DurablePdfRead, ctx: RunContext[Any], data: bytes, *, check_only: bool
) -> dict[str, Any] | str:
    """The durable operation's answer for `data`, or, when it failed (a timeout, a worker lost), the failure's type
    name: a failed read checked nothing.
    """
    try:
        return await read(ctx, base64.b64encode(data).decode('ascii'), check_only)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the unit is an unread file, never the run's end
        return type(exc).__name__


def unread(why: str) -> PdfReading:
    """A file the durable read failed on (a timeout, a worker that died): unchecked, so withheld with redaction on."""
    return PdfReading(PdfDigest(error=why), MaskedPdf('', False, False), False, False)


def _answer(data: bytes, mask: Mask | None) -> dict[str, Any]:
    digest, masked = read_masked(data, mask)
    log, cut = _within(masked.log, DURABLE_TEXT_BYTES, digest.pages or 0)
    # pypdf's messages may quote the file's bytes: masked too, as everything the engine records.
    error, stopped = (
        (mask(digest.error)[0], mask(digest.stopped)[0]) if mask is not None else (digest.error, digest.stopped)
    )
    return {
        'pages': digest.pages,
        'log': log,
        'has_text': any(digest.texts),
        'cut': cut,
        'stopped': stopped,
        'error': error,
        'missing': digest.missing,
        'unreadable': digest.unreadable,
        'withheld': masked.withheld,
        'checked': masked.checked,
        'renders': can_render(),
    }


def _within(log: str, budget: int, pages: int) -> tuple[str, str]:
    """`log` cut so that its JSON form (ASCII-escaped, the longest any engine writes) fits `budget` bytes, at a line
    when it can be, and where it stops; `(log, '')` when it fits whole.
    """
    if len(json.dumps(log)) <= budget:
        return log, ''
    kept: list[str] = []
    spent = 2  # the quotes
    for line in log.split('\n', budget // 2):  # each line kept costs 2 bytes at least (its escaped newline)
        size = len(json.dumps(line))  # its escaped form: its quotes stand for the escaped newline after it
        if spent + size > budget:
            kept.append(_prefix_within(line, budget - spent))
            break
        kept.append(line)
        spent += size
    text = '\n'.join(kept)
    page = _last_page(text, pages)
    where = f'page {page} of {pages}' if page else 'its first page'
    return text, f'text cut in {where}, after the first {format_bytes(budget)}'


def _prefix_within(line: str, budget: int) -> str:
    """The longest start of `line` whose JSON form fits `budget` bytes (quotes included)."""
    low, high = 0, len(line)
    while low < high:  # about 25 steps for 16 M characters
        middle = (low + high + 1) // 2
        if len(json.dumps(line[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return line[:low]


def _last_page(text: str, pages: int) -> int:
    """The page `text` (a text log, cut) stops in: its page lines found in order, 1 to `pages` (a page's own text
    can hold a line that looks like another page's: it is not counted out of turn).
    """
    lines = f'\n{text}\n'
    page, position = 0, 0
    while page < pages:
        found = lines.find(f'\n=== page {page + 1}/{pages} ===\n', position)
        if found == -1:
            break
        page, position = page + 1, found + 1
    return page


def reading_from_answer(answer: dict[str, Any]) -> PdfReading:
    """What `pdf_answer` recorded, read back (plain data from an engine: every field's type checked)."""
    pages, unreadable = answer.get('pages'), answer.get('unreadable')
    digest = PdfDigest(  # (its page texts are not recorded: the masked log is)
        pages=pages if isinstance(pages, int) and pages >= 0 else None,
        stopped=str(answer.get('stopped') or ''),
        error=str(answer.get('error') or ''),
        missing=str(answer.get('missing') or ''),
        unreadable=unreadable if isinstance(unreadable, int) else 0,
    )
    log, cut = answer.get('log'), answer.get('cut')
    masked = MaskedPdf(
        log if isinstance(log, str) else '', answer.get('withheld') is True, answer.get('checked') is True
    )
    has_text = answer.get('has_text') is True
    return PdfReading(digest, masked, answer.get('renders') is True, has_text, cut if isinstance(cut, str) else '')
