"""The media step of the band loop: a unit over its band that is a PDF, or holds base64 blobs, is taken apart first.

- A PDF: the file is stored unchanged; what goes on through the band's action is its text, page by page (a log
  whose page `N` starts with the line `=== page N/<pages> ===`), behind a line saying what the file was. With
  secret redaction on, the text is masked, and a file whose text held a secret (or could not all be read, so
  could hold one) is not stored where the model reads: neither the query tools nor the view tool can show it.
- A text or JSON value holding base64 blobs (data URLs, long base64 runs): each blob is stored as the bytes it
  encodes, the original text unchanged beside them; what goes on is the text with a one-line marker per blob. The
  first `ImageBand.show_blob_images` image blobs are also shown, fitted as the image band fits any image, after the
  text in the tool result itself (where pydantic-ai sends files natively, and where aging finds them). With
  secret redaction on, a blob that may hold a secret is withheld: marked, never stored where the model reads
  (encoded or not), and then neither is the whole output.

Pure wiring over `_pdf` and `_blobs`: the loop passes the unit, this answers what to reduce instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
from pydantic_ai.messages import BinaryImage, ToolReturn

from ..._gil import hand_over
from ..._typing import is_list, is_mapping
from .._actions._unit import ActionContext, Reduced
from .._events import warn
from .._offload import OFF_LOOP_BYTES, off_loop
from .._redaction._withhold import SecretWithholding
from .._rendering._markers import format_bytes
from .._rendering._render import Rendered, stored_form
from ._blobs import BARE_MIN_CHARS, MAX_BLOBS, Blob, SecretCheck, blob_marker, find_blobs, replace_blobs
from ._fit import FittedImage, ImageRefused, PillowMissing, fits, fitted_or_as_is, read_info
from ._images import IMAGES_KEY, Fitter
from ._limits import ImageTarget
from ._markers import VIEW_TOOL_NAME, blob_view_note
from ._pdf import PdfDigest, can_render, is_pdf, page_line_template, read_pdf
from ._pdf_reading import (
    DurablePdfRead,
    Mask,
    PdfReading,
    durable_answer,
    masked_pdf,
    read_masked,
    reading_from_answer,
    unread,
)
from ._setting import ImageBand
from ._sniff import ImageInfo, sniff_image
from ._text_images import keep_for_operator

__all__ = ('UNCHECKED_PDF', 'DurableMedia', 'MediaStep', 'media_step', 'secret_check', 'with_stored_images')

_MISSING_HINT = "install 'pydantic-ai-harness-context[media]' to read its pages"


@dataclass(frozen=True)
class MediaStep:
    """What the band loop reduces instead of a unit that held a document or base64 blobs."""

    header: str
    """The line in front of what the model sees: what the unit held, and the handle of its unchanged original."""

    handle: str | None
    """Where the original is stored, byte for byte; `None`: it is not stored where the model reads (a secret)."""

    nbytes: int
    """Bytes of the original."""

    rendered: Rendered | None
    """What goes on through the band's action (the text, the text with markers); `None`: the header is all."""

    images: tuple[dict[str, Any], ...] = ()
    """What the view tool can show, recorded as the image band records its originals: image blobs, the PDF."""

    shown: tuple[BinaryImage, ...] = ()
    """Image blobs shown to the model (fitted copies), in the order of their markers."""

    shown_markers: tuple[str, ...] = ()
    """The markers of the image blobs shown (`image N below`), in order."""

    def lead(self, sent: str) -> str:
        """What goes before `sent` (the text reduced by the band's action): the header, then the marker of each image
        shown that `sent` does not hold (a spill preview may leave it out), so every image below is named.
        """
        missing = [marker for marker in self.shown_markers if marker not in sent]
        return self.header + ''.join(f'{marker}\n' for marker in missing)


def with_stored_images(result: ToolReturn[Any], value: Reduced | None, content: Reduced | None) -> ToolReturn[Any]:
    """`result` with the images its units stored apart added to its `overflow_images` records (after the image
    band's own), so the view tool is offered for them; the image blobs a unit shows follow its text.
    """
    if value is not None and value.shown:
        result = replace(result, return_value=[result.return_value, *value.shown])
    if content is not None and content.shown:
        result = replace(result, content=[result.content, *content.shown])
    added = [record for unit in (value, content) if unit is not None for record in unit.images]
    if not added or not is_mapping(result.metadata):
        return result
    earlier: object = result.metadata.get(IMAGES_KEY)
    records = [*(earlier if is_list(earlier) else []), *added]
    return replace(result, metadata={**result.metadata, IMAGES_KEY: records})


def _record(
    handle: str, key: str, data: bytes, media_type: str, shown: tuple[ImageInfo, FittedImage, str] | None = None
) -> dict[str, Any]:
    """The `overflow_images` record of a stored image blob or PDF (the fields the image band writes); `shown`: the
    header read, the copy sent and its identifier, of an image blob shown to the model.
    """
    if shown is not None:
        info, fitted, identifier = shown
        return {
            'handle': handle,
            'key': key,
            'media_type': info.media_type,
            'width': info.width,
            'height': info.height,
            'bytes': len(data),
            'sent': [fitted.width, fitted.height, fitted.media_type],
            'copy': identifier,
        }
    info = sniff_image(data) if media_type.startswith('image/') else None
    return {
        'handle': handle,
        'key': key,
        'media_type': info.media_type if info is not None else media_type,
        'width': info.width if info is not None else None,
        'height': info.height if info is not None else None,
        'bytes': len(data),
        'sent': None,
        'copy': None,
    }


UNCHECKED_PDF = 'a PDF whose text could not be checked for secrets'
"""Why a PDF blob is withheld in durable workflow code when no durable operation can read it."""


def secret_check(withholding: SecretWithholding | None, *, read_pdfs: bool = True) -> SecretCheck | None:
    """With secret redaction on: the kinds of secret a blob's decoded bytes may hold (it is then withheld: nothing of
    it is stored where the model reads, decoded or encoded).

    Every blob is checked, binary or not: its bytes read as Latin-1 (one character per byte, so a token between
    NULs or inside a zip's stored entry is found as the hex dump of the query tools would spell it), and a PDF's
    text as well (its streams are compressed; its pages could be rendered). `read_pdfs` is false in durable workflow
    code, which parses no file: there a PDF blob's text is not checked, so it is withheld.
    """
    if withholding is None:
        return None
    mask = withholding.mask_text

    def secrets_in(data: bytes) -> tuple[str, ...]:
        found = mask(data.decode('latin-1'))[1]
        if found:
            return tuple(sorted(found))
        if not is_pdf(data, None):
            return ()
        if not read_pdfs:  # durable workflow code parses no file: checked by the durable operation (`_pdf_checked`)
            return (UNCHECKED_PDF,)
        masked = masked_pdf(mask, read_pdf(data))
        if masked.withheld:
            return ('PDF text',)
        return () if masked.checked else ('PDF text not all checked',)

    return secrets_in


@dataclass(frozen=True)
class DurableMedia:
    """The capability's durable operations the media step runs under an engine, where workflow code decodes nothing."""

    fit: Fitter
    """Fits an image blob shown to the model (`overflow_fit_image` under an engine; a worker thread otherwise)."""

    read_pdf: DurablePdfRead
    """Reads a PDF's pages (`overflow_read_pdf`)."""


async def media_step(
    unit: ActionContext,
    *,
    timeout: float,
    withholding: SecretWithholding | None,
    images: ImageBand | None = None,
    durable: DurableMedia | None = None,
) -> tuple[MediaStep | None, str]:
    """The media step for `unit`, or `None` (and why, when something failed) when it holds no document or blob.

    `images`: the image band, when image blobs may be shown (`show_blob_images`); `None`: markers only.
    `durable`: the capability's durable operations; without them, workflow code spills a PDF as bytes and shows no
    image blob.
    """
    rendered = unit.rendered
    in_workflow = unit.run.in_durable_context
    if rendered.data is not None:
        if is_pdf(rendered.data, rendered.media_type) and (durable is not None or not in_workflow):
            return await _document(unit, rendered.data, timeout, withholding, durable)
        return None, ''
    secrets_in = secret_check(withholding, read_pdfs=not in_workflow)
    if rendered.kind not in ('text', 'structured'):
        return None, ''
    # A structured value's text is built by the scan, off the loop; with redaction on, a blob's secret check may
    # read a PDF's text (seconds), so the scan is never run on the loop then.
    large = rendered.size_chars > OFF_LOOP_BYTES or secrets_in is not None
    text, blobs = await off_loop(unit.run, partial(_scan, rendered, secrets_in), large=large)
    if not blobs:
        return None, ''
    if secrets_in is not None and in_workflow and durable is not None:
        blobs = [await _pdf_checked(unit, blob, durable) for blob in blobs]
    return await _blobs(unit, text, blobs, timeout, images, withholding, durable)


async def _pdf_checked(unit: ActionContext, blob: Blob, durable: DurableMedia) -> Blob:
    """A PDF blob that workflow code could not check for secrets, checked by the durable operation that reads PDFs
    (its text and raw bytes, masked as a PDF returned alone is): withheld only when that finds a secret or cannot
    read all of its text.
    """
    if blob.withheld != (UNCHECKED_PDF,):
        return blob
    answer = await durable_answer(durable.read_pdf, unit.run, blob.data, check_only=True)
    if isinstance(answer, str):
        return blob  # the read failed and checked nothing: the blob stays withheld
    reading = reading_from_answer(answer)
    if reading.masked.withheld:
        return replace(blob, withheld=('PDF text',))
    return replace(blob, withheld=() if reading.masked.checked else ('PDF text not all checked',))


def _scan(rendered: Rendered, secrets_in: SecretCheck | None) -> tuple[str, list[Blob]]:
    """The text the blobs are found in, and the blobs.

    A large structured value is read in its stored layout (valid JSON, one element per line), a piece at a time:
    its compact text is never built (a join and decode that hold the GIL, 0.1 s per 10 MB).
    """
    layout = rendered.layout if rendered.kind == 'structured' and rendered.size_chars > OFF_LOOP_BYTES else None
    if layout is None:
        text = rendered.text
        if 'data:' not in text and len(text) < BARE_MIN_CHARS:
            return text, []  # nothing a blob could be
        return text, find_blobs(text, secrets_in=secrets_in)
    texts: list[str] = []
    blobs: list[Blob] = []
    offset = 0
    for piece in layout.pieces:
        hand_over()
        text = piece.decode('utf-8', 'surrogatepass')
        if len(blobs) < MAX_BLOBS and (b'data:' in piece or len(piece) >= BARE_MIN_CHARS):
            found = find_blobs(text, secrets_in=secrets_in)[: MAX_BLOBS - len(blobs)]
            blobs.extend(replace(blob, start=blob.start + offset, end=blob.end + offset) for blob in found)
        texts.append(text)
        offset += len(text)
    return ''.join(texts), blobs


async def _read(unit: ActionContext, data: bytes, mask: Mask | None, durable: DurableMedia | None) -> PdfReading:
    """The file read in a worker thread, or in the durable operation in workflow code (never in place there)."""
    if unit.run.in_durable_context and durable is not None:
        answer = await durable_answer(durable.read_pdf, unit.run, data, check_only=False)
        if isinstance(answer, str):
            return unread(f'the durable read failed ({answer})')
        return reading_from_answer(answer)
    digest, masked = await off_loop(unit.run, partial(read_masked, data, mask), large=True)
    return PdfReading(digest, masked, can_render(), any(digest.texts))


async def _document(
    unit: ActionContext,
    data: bytes,
    timeout: float,
    withholding: SecretWithholding | None,
    durable: DurableMedia | None,
) -> tuple[MediaStep | None, str]:
    mask = withholding.mask_text if withholding is not None else None
    reading = await _read(unit, data, mask, durable)
    digest, masked = reading.digest, reading.masked
    log = masked.log
    rendered = Rendered('text', log) if log else None
    if withholding is not None and (masked.withheld or not masked.checked):
        # Stored where the model reads, the file would give the secret back (a page rendered, the raw stream read).
        await _keep_original(unit, withholding, data, timeout)
        header = withheld_pdf_header(
            unit.call.tool_name, digest, nbytes=len(data), withheld=masked.withheld, reading=reading
        )
        return MediaStep(header, None, len(data), rendered), ''
    handle, reason = await unit.write(f'{unit.key}/original', data, timeout)
    if handle is None:
        return None, reason
    header = pdf_header(
        unit.call.tool_name, digest, handle=handle, nbytes=len(data), pages_as_images=reading.renders, reading=reading
    )
    viewable = digest.pages and reading.renders
    record = (_record(handle, f'{unit.key}/original', data, 'application/pdf'),) if viewable else ()
    return MediaStep(header, handle, len(data), rendered, record), ''


async def _keep_original(unit: ActionContext, withholding: SecretWithholding, data: bytes, timeout: float) -> None:
    """The file, for the operator, in `redact_secrets.keep_original_in` when one is set (best effort, as for text)."""
    kept_in = withholding.setting.keep_original_in
    if kept_in is None:
        return
    try:
        with anyio.fail_after(timeout):
            await kept_in.write(f'{unit.key}/original', data)
    except Exception as exc:  # noqa: BLE001 - keeping the original is best effort; withholding it is not
        warn(f'The PDF returned by `{unit.call.tool_name}` (secrets withheld) could not be kept: {type(exc).__name__}')


def withheld_pdf_header(
    tool_name: str, digest: PdfDigest, *, nbytes: int, withheld: bool, reading: PdfReading | None = None
) -> str:
    """The line in front of a PDF's masked text when the file itself is withheld from the model; `reading`: what
    says whether it has text and where a durable read cut it (else `digest`'s texts).
    """
    has_text = reading.has_text if reading is not None else any(digest.texts)
    cut = f'{reading.cut}; the rest is not shown' if reading is not None and reading.cut else ''
    unchecked = digest.stopped or (f'{digest.missing} is not installed' if digest.missing else digest.error)
    if not unchecked and digest.unreadable:
        unchecked = _unreadable_pages(digest.unreadable)
    if withheld:
        why = f'its text held secrets, masked below{f" ({cut})" if cut else ""}' if has_text else 'it holds a secret'
    else:
        why = f'not all of its text could be checked for secrets ({"; ".join(filter(None, (unchecked, cut)))})'
        why += ', the text that was read follows masked' if has_text else ''
    pages = digest.pages
    count = '' if pages is None else (': 1 page' if pages == 1 else f': {pages} pages')
    follows = (
        f', each page starting with the line `{page_line_template(pages)}`' if pages is not None and has_text else ''
    )
    return (
        f'[`{tool_name}` returned a PDF ({format_bytes(nbytes)}){count}; {why}{follows}. The file is not kept where '
        'you can read it, so its pages cannot be shown as images.]\n'
    )


def _unreadable_pages(count: int) -> str:
    return f'the text of {count} page{"s" if count > 1 else ""} could not be read'


def pdf_header(
    tool_name: str,
    digest: PdfDigest,
    *,
    handle: str,
    nbytes: int,
    pages_as_images: bool,
    reading: PdfReading | None = None,
) -> str:
    """The line in front of a PDF's text: what the file is, where it is kept, how its pages are found; `reading`:
    what says whether it has text and where a durable read cut it (else `digest`'s texts).
    """
    has_text = reading.has_text if reading is not None else any(digest.texts)
    cut = reading.cut if reading is not None else ''
    saved = f"`{tool_name}` returned a PDF ({format_bytes(nbytes)}), saved unchanged as handle '{handle}'"
    if digest.missing:
        return f'[{saved}; {_MISSING_HINT} ({digest.missing} is not installed).]\n'
    if digest.pages is None:
        return f'[{saved}; its pages cannot be read: {digest.error}.]\n'
    pages = digest.pages
    count = '1 page' if pages == 1 else f'{pages} pages'
    view = (
        f"{VIEW_TOOL_NAME}(handle='{handle}', page=N) shows page N as an image"
        if pages_as_images
        else 'its pages cannot be shown as images here (pypdfium2 is not installed)'
    )
    unreadable = _unreadable_pages(digest.unreadable) if digest.unreadable else ''
    why = '; '.join(filter(None, (digest.stopped, unreadable, cut)))
    if not has_text:
        return f'[{saved}: {count}, no text read ({why or "scanned images?"}); {view}.]\n'
    why = f' ({why})' if why else ''
    return (
        f'[{saved}: {count}. Its text follows{why}, each page starting with the line `{page_line_template(pages)}`; '
        f'{view}.]\n'
    )


async def _blobs(
    unit: ActionContext,
    text: str,
    blobs: list[Blob],
    timeout: float,
    images: ImageBand | None,
    withholding: SecretWithholding | None = None,
    durable: DurableMedia | None = None,
) -> tuple[MediaStep | None, str]:
    rendered = unit.rendered
    original = await off_loop(unit.run, partial(_original_bytes, rendered), large=rendered.size_chars > OFF_LOOP_BYTES)
    withheld = sum(1 for blob in blobs if blob.withheld)
    handle: str | None = None
    if withheld and withholding is not None:
        # The output holds a blob that may encode a secret: not stored where the model reads, even encoded.
        key, name = f'{unit.key}/original', unit.call.tool_name
        await keep_for_operator(withholding, key, original, timeout, name, 'The output')
    else:
        handle, reason = await unit.write(f'{unit.key}/original', original, timeout)
        if handle is None:
            return None, reason
    markers: list[str] = []
    records: list[dict[str, Any]] = []
    shown: list[BinaryImage] = []
    shown_markers: list[str] = []
    tried = 0
    # Workflow code under a durable engine decodes nothing: a copy is made by the durable operation, if there is one.
    can_fit = durable is not None or not unit.run.in_durable_context
    show = images.show_blob_images if images is not None and can_fit else 0
    target = images.target(unit.run.model) if images is not None and show else None
    for number, blob in enumerate(blobs, 1):
        if blob.withheld:
            markers.append(blob_marker(blob, None, view=None))
            continue
        key = f'{unit.key}/blob-{number}'
        blob_handle, reason = await unit.write(key, blob.data, timeout)
        if blob_handle is None:
            return None, reason
        if sniff_image(blob.data) is None:
            markers.append(blob_marker(blob, blob_handle, view=None))
            continue
        sent = None
        if images is not None and target is not None and tried < show:
            tried += 1  # attempts, not successes, are bounded: blobs that fail to decode cost a decode each
            sent = await _shown(unit, blob.data, images.max_decode_pixels, target, durable)
        if sent is None:
            markers.append(blob_marker(blob, blob_handle, view=blob_view_note(None, None)))
            records.append(_record(blob_handle, key, blob.data, blob.media_type))
            continue
        info, fitted = sent
        copy = BinaryImage(fitted.data, media_type=fitted.media_type)
        shown.append(copy)
        markers.append(blob_marker(blob, blob_handle, view=blob_view_note(info, len(shown))))
        shown_markers.append(markers[-1])
        records.append(_record(blob_handle, key, blob.data, blob.media_type, (info, fitted, copy.identifier)))
    replaced = await off_loop(unit.run, partial(replace_blobs, text, blobs, markers), large=len(text) > OFF_LOOP_BYTES)
    decoded = format_bytes(sum(len(blob.data) for blob in blobs))
    what = 'a base64 blob' if len(blobs) == 1 else f'{len(blobs)} base64 blobs'
    head = f'[`{unit.call.tool_name}` returned {format_bytes(len(original))} holding {what} ({decoded} decoded)'
    if handle is None:
        held = (
            f'{withheld} may hold secrets'
            if withheld > 1
            else ('it' if len(blobs) == 1 else 'one') + ' may hold a secret'
        )
        header = f'{head}, marked below; {held}, so the whole output is not kept.]\n'
    else:
        header = f"{head}, saved apart and marked below; the whole output, unchanged, is handle '{handle}'.]\n"
    body = Rendered('text', replaced)
    return MediaStep(header, handle, len(original), body, tuple(records), tuple(shown), tuple(shown_markers)), ''


async def _shown(
    unit: ActionContext, data: bytes, max_decode_pixels: int, target: ImageTarget, durable: DurableMedia | None
) -> tuple[ImageInfo, FittedImage] | None:
    """An image blob's header and what the model is sent for it (`fitted_or_as_is`); in workflow code its header is
    read without Pillow and a copy is made by the durable operation.
    """
    if not unit.run.in_durable_context or durable is None:
        return await off_loop(unit.run, partial(fitted_or_as_is, data, max_decode_pixels, target), large=True)
    try:
        info = read_info(data, max_decode_pixels, use_pillow=False)
        if fits(info, target):
            return info, FittedImage(data, info.media_type, info.width, info.height)
        return info, await durable.fit(unit.run, data, info, target)
    except (ImageRefused, PillowMissing):
        return None


def _original_bytes(rendered: Rendered) -> bytes:
    """A text exactly as the tool returned it (UTF-8, lone surrogates kept); a structured value in its stored JSON
    layout, as a spill stores it.
    """
    if rendered.kind == 'text':
        return rendered.text.encode('utf-8', 'surrogatepass')
    return stored_form(rendered)[1]
