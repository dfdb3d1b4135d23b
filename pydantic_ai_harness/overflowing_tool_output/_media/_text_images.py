"""Images holding secrets under secret redaction: as text (an SVG, text labelled an image), or in a binary file's
bytes (a PNG text chunk, an EXIF comment, bytes after the image's end).

An SVG is an image to a tool and text to a reader: a secret in it (a comment, an attribute, embedded script) would
reach the store the model reads unmasked, for the view tool or a query tool to give back. With redaction on, such an
image is scanned as any text return is; one holding a secret is not stored where the model reads (only, best effort,
in `redact_secrets.keep_original_in`), and the model is told why. A binary image's bytes are scanned one character a
byte: the model reads no pixels of a file like that from the store, only a copy made of its pixels alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio

from .._events import warn
from .._redaction._withhold import SecretWithholding
from ..stores._sniff import SNIFF_BYTES, looks_binary

__all__ = ('ImageSecrets', 'TextImageCheck', 'keep_for_operator', 'text_image_check')

TextImageCheck = Callable[[bytes, str], 'ImageSecrets | None']
"""`(data, declared media type)` -> the secrets its text or bytes hold, or `None` when it holds none."""


@dataclass(frozen=True)
class ImageSecrets:
    """The kinds of secret an image holds, and where."""

    kinds: list[str]
    """The kinds found (`GitHub Token`), sorted."""

    textual: bool
    """Whether the image is text (an SVG): else the secrets are in a binary file's bytes, apart from its pixels."""


def _is_text(data: bytes, media_type: str) -> bool:
    if 'svg' in media_type.lower():
        return True
    return not looks_binary(data[:SNIFF_BYTES], whole=len(data) <= SNIFF_BYTES)


def text_image_check(withholding: SecretWithholding | None) -> TextImageCheck | None:
    """The check of an image's text or bytes for secrets, with redaction on (blocking: run it off the event loop)."""
    if withholding is None:
        return None
    mask = withholding.mask_text

    def secrets_in(data: bytes, media_type: str) -> ImageSecrets | None:
        if not _is_text(data, media_type):
            found = mask(data.decode('latin-1'))[1]  # a binary file's bytes, one character a byte
            return ImageSecrets(sorted(found), textual=False) if found else None
        found = mask(data.decode('utf-8', 'replace'))[1]
        if not found and not data.isascii():
            found = mask(data.decode('latin-1'))[1]  # bytes that are not UTF-8, read one character a byte
        return ImageSecrets(sorted(found), textual=True) if found else None

    return secrets_in


async def keep_for_operator(
    withholding: SecretWithholding, key: str, data: bytes, timeout: float, tool_name: str, what: str = 'An image'
) -> None:
    """A withheld original (`what`: `An image`, `The output`), for the operator, in `redact_secrets.keep_original_in`
    when one is set (best effort, as for text).
    """
    kept_in = withholding.setting.keep_original_in
    if kept_in is None:
        return
    try:
        with anyio.fail_after(timeout):
            await kept_in.write(key, data)
    except Exception as exc:  # noqa: BLE001 - keeping the original is best effort; withholding it is not
        warn(f'{what} returned by `{tool_name}` (secrets withheld) could not be kept: {type(exc).__name__}')
