"""Text or binary: one decision about a stored payload, from its first 64 KiB, made the same way everywhere.

The store's line index records it when the payload is written ([`LineIndex.is_binary`][]), a spill preview makes
it on the very same bytes, and the query tools follow the index: a payload previewed as text is read back as text,
and one previewed as binary is dumped in hex, whatever the tool returned it as (`str` or `bytes`).
"""

from __future__ import annotations

import codecs

__all__ = ('SNIFF_BYTES', 'TextSniffer', 'binary_format', 'looks_binary')

SNIFF_BYTES = 64 * 1024
"""How much of the start of a payload the decision reads."""

_MAX_NOT_TEXT_SHARE = 10
"""A payload is binary when more than one byte in this many of its first `SNIFF_BYTES` is not text."""

_NOT_TEXT_CONTROLS = bytes([*range(0x07), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
"""Control bytes text does not hold: NUL and the other C0 controls but bell, backspace, tab, the line breaks
(newline, vertical tab, form feed, carriage return) and ESC (terminal colours), plus DEL."""

_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b'\x89PNG\r\n\x1a\n', 'PNG image', 'image/png'),
    (b'\xff\xd8\xff', 'JPEG image', 'image/jpeg'),
    (b'GIF87a', 'GIF image', 'image/gif'),
    (b'GIF89a', 'GIF image', 'image/gif'),
    (b'%PDF-', 'PDF document', 'application/pdf'),
    (b'PK\x03\x04', 'ZIP archive (or docx/xlsx/jar)', 'application/zip'),
    (b'\x1f\x8b', 'gzip-compressed data', 'application/gzip'),
    (b'BZh', 'bzip2-compressed data', 'application/x-bzip2'),
    (b'\xfd7zXZ\x00', 'xz-compressed data', 'application/x-xz'),
    (b'(\xb5/\xfd', 'zstd-compressed data', 'application/zstd'),
    (b'\x7fELF', 'ELF executable', 'application/x-executable'),
    (b'SQLite format 3\x00', 'SQLite database', 'application/vnd.sqlite3'),
    (b'OggS', 'Ogg media', 'audio/ogg'),
    (b'ID3', 'MP3 audio', 'audio/mpeg'),
    (b'\x00asm', 'WebAssembly module', 'application/wasm'),
)


def binary_format(head: bytes) -> tuple[str, str] | None:
    """`(description, media type)` of a well-known binary format, from a payload's first 16 bytes."""
    for signature, description, media_type in _SIGNATURES:
        if head.startswith(signature):
            return description, media_type
    if head[:4] == b'RIFF' and head[8:12] == b'WEBP':
        return 'WebP image', 'image/webp'
    if head[:4] == b'RIFF' and head[8:12] == b'WAVE':
        return 'WAV audio', 'audio/wav'
    return None


def looks_binary(head: bytes, *, whole: bool) -> bool:
    """Whether a payload starting with `head` (its first `SNIFF_BYTES`, or all of it) is binary.

    Binary means: more than one byte in ten of `head` is not text, counting NUL and the other control bytes text
    does not hold (`_NOT_TEXT_CONTROLS`; tab, line breaks and the ESC of terminal colours are text) and the bytes
    that are not valid UTF-8. A text with a stray NUL (`find -print0`), ANSI colours, or a Latin-1 file name stays
    text; a PNG, compressed data, UTF-16 or a run of NULs is binary. `whole`: `head` is the entire payload, so a
    character cut at its end is invalid too.
    """
    sniffer = TextSniffer()
    sniffer.feed(head)
    return sniffer.finish(whole=whole)


class TextSniffer:
    """`looks_binary` over a payload fed piece by piece (as a store streams it): only its first `SNIFF_BYTES` count."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder('utf-8')('surrogateescape')
        self._seen = 0
        self._not_text = 0

    def feed(self, data: bytes | bytearray | memoryview, start: int = 0, end: int | None = None) -> None:
        """Account for `data[start:end]`, as far as it lies within the first `SNIFF_BYTES` of the payload."""
        end = len(data) if end is None else end
        end = min(end, start + SNIFF_BYTES - self._seen)
        if end <= start:
            return
        piece = bytes(memoryview(data)[start:end])
        self._not_text += len(piece) - len(piece.translate(None, _NOT_TEXT_CONTROLS))
        self._count_invalid(self._decoder.decode(piece))
        self._seen += len(piece)

    def _count_invalid(self, text: str) -> None:
        # Each invalid byte decodes to one escape character, which only the `surrogateescape` encoding keeps.
        self._not_text += len(text.encode('utf-8', 'surrogateescape')) - len(text.encode('utf-8', 'ignore'))

    @property
    def done(self) -> bool:
        """Whether the first `SNIFF_BYTES` have been fed (later pieces change nothing)."""
        return self._seen >= SNIFF_BYTES

    def finish(self, *, whole: bool) -> bool:
        """Whether the payload is binary. `whole`: everything fed is the entire payload (see `looks_binary`)."""
        if whole:
            self._count_invalid(self._decoder.decode(b'', final=True))
        return self._not_text * _MAX_NOT_TEXT_SHARE > self._seen
