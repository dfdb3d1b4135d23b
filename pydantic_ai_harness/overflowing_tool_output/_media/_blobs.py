"""Base64 blobs inside text: data URLs and long base64 runs found in one linear pass, decoded, and replaced.

A tool that returns a screenshot as `data:image/png;base64,...` inside JSON, or a file as one long base64 string,
floods the context with characters the model cannot read. `find_blobs` finds them, `replace_blobs` swaps each for a
one-line marker (type, size, handle). Pure logic: the band loop stores the decoded bytes and the original text.

What counts as a blob, so base64-looking text that is not one stays exactly as it was (a near miss is left alone):

- a data URL, `data:<type>[;param=value]*;base64,<payload>`, whose payload is at least `DATA_URL_MIN_CHARS`;
- a bare run of at least `BARE_MIN_CHARS` characters of one base64 alphabet (standard or URL-safe), delimited by
  characters outside both alphabets, holding upper case, lower case and digits (a hex digest or a word does not),
  that decodes strictly to binary data of a known format, or uses most of the alphabet as compressed data does (a
  repeated pattern does not). Base64 of text stays: it may hold a secret the redaction cannot see while encoded.

With secret redaction on, every decoded blob, binary or text, is checked (`secrets_in`); one that may hold a secret
is withheld: its marker says so, and nothing of it is stored where the model reads (left encoded, the model could
decode it).

Every step is linear in the text: runs are found by a regex that cannot start inside a run (a lookbehind), data
URL headers by `str.find` and a bounded match, so attacker text costs one pass whatever it holds.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..._gil import hand_over
from .._rendering._markers import format_bytes
from ..stores._sniff import binary_format, looks_binary

__all__ = (
    'BARE_MIN_CHARS',
    'DATA_URL_MIN_CHARS',
    'MAX_BLOBS',
    'Blob',
    'blob_marker',
    'find_blobs',
    'replace_blobs',
)

DATA_URL_MIN_CHARS = 256
"""A data URL with a shorter payload (an icon, a tracking pixel) costs less than its marker would: left as is."""

BARE_MIN_CHARS = 1024
"""A bare base64 run shorter than this is more likely an id, a hash or a token than a file: left as is."""

MAX_BLOBS = 64
"""At most this many blobs are taken out of one return (each costs a store write); later ones stay as they are."""

_STANDARD = '+/'
_URL_SAFE = '-_'
_RUN = re.compile(rf'(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{{{BARE_MIN_CHARS},}}={{0,2}}(?![A-Za-z0-9+/_=-])')
"""A maximal run of base64 characters (either alphabet) and its padding. The lookbehind stops a match from starting
inside a run, so each run is examined from its start only: linear in the text."""

_NOT_RUN = re.compile(r'[^A-Za-z0-9+/_=-]')
_SLICE_CHARS = 256 * 1024

_DATA_URL_HEADER = re.compile(
    r'data:([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63})'
    r'(?:;[A-Za-z0-9!#$&^_.+-]{1,64}=[A-Za-z0-9!#$&^_.+-]{0,64}){0,8};base64,'
)
"""The header of a base64 data URL (RFC 2397), bounded in every part so a match attempt costs a few hundred steps."""

_PAYLOAD = re.compile(r'[A-Za-z0-9+/]*={0,2}')

_VARIETY_SAMPLE = 4096
_MIN_VARIETY = 48
"""A bare run of unknown format must use this many distinct characters in its first `_VARIETY_SAMPLE`: base64 of
compressed or random data uses all 64 within a few hundred characters; a repeated pattern uses a handful."""

_MIXED = (re.compile(r'[A-Z]'), re.compile(r'[a-z]'), re.compile(r'[0-9]'))


@dataclass(frozen=True)
class Blob:
    """One base64 blob found in a text."""

    start: int
    """Where it starts in the text (the `d` of `data:` for a data URL)."""

    end: int
    """One past its last character (padding included)."""

    media_type: str
    """The declared type of a data URL, else the type its bytes start with, else `application/octet-stream`."""

    data: bytes
    """The bytes it encodes."""

    data_url: bool
    """Whether it was written as a data URL."""

    withheld: tuple[str, ...] = field(default=())
    """With secret redaction on: the kinds of secret its bytes may hold (then it is not stored); empty: none."""


SecretCheck = Callable[[bytes], tuple[str, ...]]
"""The kinds of secret a blob's decoded bytes may hold (empty: none)."""


def find_blobs(text: str, *, secrets_in: SecretCheck | None = None) -> list[Blob]:
    """The base64 blobs of `text`, in order, at most `MAX_BLOBS` (see the module docstring for what counts).

    `secrets_in(decoded)` is asked about every blob (the capability's secret check, with redaction on); a blob that
    may hold one is marked `withheld`, so a secret encoded in it, text or binary, is never stored where the model
    reads: not decoded (a hex dump, a page render), nor encoded (the model could decode it).
    """
    blobs: list[Blob] = []
    for blob in _candidates(text, secrets_in):
        blobs.append(blob)
        if len(blobs) >= MAX_BLOBS:
            break
    return blobs


def _candidates(text: str, secrets_in: SecretCheck | None) -> Iterator[Blob]:
    """Data URLs and bare runs merged in text order (a run inside a data URL is its payload, not a second blob)."""
    urls = _data_urls(text, secrets_in)
    runs = _bare_runs(text, secrets_in)
    url = next(urls, None)
    run = next(runs, None)
    while url is not None or run is not None:
        if run is not None and (url is None or run.end <= url.start):
            yield run
            run = next(runs, None)
        elif url is not None:
            yield url
            while run is not None and run.start < url.end:
                run = next(runs, None)
            url = next(urls, None)


def _data_urls(text: str, secrets_in: SecretCheck | None) -> Iterator[Blob]:
    position = text.find('data:')
    while position != -1:
        hand_over()
        header = _DATA_URL_HEADER.match(text, position)
        resume = position + 5
        if header is not None:
            payload = _PAYLOAD.match(text, header.end())
            end = payload.end() if payload is not None else header.end()
            resume = end
            size = end - header.end()
            if size >= DATA_URL_MIN_CHARS and _at_boundary(text, end):
                data = _decode(text[header.end() : end], url_safe=False)
                if data is not None:
                    withheld = secrets_in(data) if secrets_in is not None else ()
                    yield Blob(position, end, header.group(1).lower(), data, data_url=True, withheld=withheld)
        position = text.find('data:', resume)


def _bare_runs(text: str, secrets_in: SecretCheck | None) -> Iterator[Blob]:
    for match in _runs(text):
        run = match.group()
        body = run.rstrip('=')
        standard = any(char in body for char in _STANDARD)
        url_safe = any(char in body for char in _URL_SAFE)
        if standard and url_safe:
            continue  # two alphabets mixed: an identifier or a path, not base64
        if not all(pattern.search(body) for pattern in _MIXED):
            continue  # no upper case, lower case or digit: hex, a word, a number
        data = _decode(run, url_safe=url_safe)
        if data is None or not _is_binary(data):
            continue
        kind = binary_format(data[:16])
        if kind is None and len(set(run[:_VARIETY_SAMPLE])) < _MIN_VARIETY:
            continue  # a pattern repeated (a test token, padding), not the encoding of a file
        withheld = secrets_in(data) if secrets_in is not None else ()
        media_type = kind[1] if kind else 'application/octet-stream'
        yield Blob(match.start(), match.end(), media_type, data, data_url=False, withheld=withheld)


def _runs(text: str) -> Iterator[re.Match[str]]:
    """`_RUN`'s matches, found a slice of about `_SLICE_CHARS` at a time with the GIL handed over between slices
    (`re` holds it for a whole scan). Each slice ends where a run cannot be going on, so no run is cut.
    """
    start = 0
    while start < len(text):
        hand_over()
        end = start + _SLICE_CHARS
        if end < len(text):
            boundary = _NOT_RUN.search(text, end)
            end = boundary.start() if boundary is not None else len(text)
        else:
            end = len(text)
        yield from _RUN.finditer(text, start, end)
        start = end


def _at_boundary(text: str, end: int) -> bool:
    """Whether the payload ends where the data URL does (not cut short by a character base64 does not have)."""
    return end >= len(text) or not (text[end].isalnum() or text[end] in '+/=-_%')


def _decode(run: str, *, url_safe: bool) -> bytes | None:
    """The bytes `run` encodes, or `None` when it is not valid base64 (wrong length, bad padding)."""
    body = run.translate(_FROM_URL_SAFE) if url_safe else run
    missing = -len(body) % 4
    if missing == 3:
        return None
    if missing and not body.endswith('='):
        body += '=' * missing  # unpadded (common in the URL-safe alphabet)
    try:
        return binascii.a2b_base64(body, strict_mode=True)
    except (binascii.Error, ValueError):
        return None


_FROM_URL_SAFE = str.maketrans('-_', '+/')


def _is_binary(data: bytes) -> bool:
    return binary_format(data[:16]) is not None or looks_binary(data[: 64 * 1024], whole=len(data) <= 64 * 1024)


def blob_marker(blob: Blob, handle: str | None, *, view: str | None) -> str:
    """The one line a blob is replaced by: what it was, its size, and how to get it back (or why it is withheld).

    Safe inside a JSON string (no quote, no backslash) so the JSON around it stays valid. `view` is the call that
    shows it to the model (an image), when there is one.
    """
    what = 'data URL' if blob.data_url else 'base64'
    if blob.withheld or handle is None:
        why = f'it may hold a secret ({", ".join(blob.withheld)})' if blob.withheld else 'it could not be stored'
        return f'[{blob.media_type} {what}, {format_bytes(len(blob.data))}, withheld: {why}]'
    get = f'; {view}' if view is not None else ''
    return f"[{blob.media_type} {what}, {format_bytes(len(blob.data))}, saved as handle '{handle}'{get}]"


def replace_blobs(text: str, blobs: list[Blob], markers: list[str]) -> str:
    """`text` with each blob's span replaced by its marker (`blobs` in text order, as `find_blobs` gives them)."""
    pieces: list[str] = []
    kept_from = 0
    for blob, marker in zip(blobs, markers, strict=True):
        pieces.append(text[kept_from : blob.start])
        pieces.append(marker)
        kept_from = blob.end
    pieces.append(text[kept_from:])
    return ''.join(pieces)
