"""Key -> handle -> file name encodings: injective, bounded, confined, and readable when the input already is.

Two layers, each injective:

1. `handle_for_key` turns a store key (any string, of any length) into the handle the model sees. Segments
   made of `[A-Za-z0-9_.:+-]` (not starting with `.`) are kept verbatim, so `run/call_1/0` stays
   `run/call_1/0`; any other byte is written `~xx` (lowercase hex) and an empty segment is `~`. A segment
   whose escaped form is longer than `MAX_HANDLE_SEGMENT` characters, or whose file name would be longer
   than `MAX_NAME_BYTES` minus room for a candidate suffix, becomes a readable prefix of its escaped form
   (at most `HASHED_PREFIX` characters, cut between escapes), `=`, and the SHA-256 of the whole segment:
   `=` never occurs in an escaped segment, so a hashed segment never equals an escaped one. Keys with more
   than `MAX_SEGMENTS` segments keep the rest, escaped, in the last one.
2. `names_for_handle` turns a handle (a string the model may have mangled) into one file name per
   segment. Only `[a-z0-9_-]` is kept verbatim and every other byte becomes `~xx`, so two handles that
   differ only in letter case never share a file on a case-insensitive filesystem, no name contains
   `/`, NUL or `.` (so `.`/`..` cannot occur and the `.out` / `.idx` / `.tmp-` suffixes and prefixes
   cannot collide with a directory), and Windows device names are escaped. `handle_for_names` inverts it
   exactly, so listing a store gives back handles that read their payloads.

A store never overwrites a payload with another: when the handle of a key already holds different bytes,
it tries `candidate_handles(handle)` in order, which appends `~~2`, `~~3`, ... to the last segment. An
escaped or hashed segment never contains `~~` (in an escaped segment `~` is always followed by two hex
digits, and the empty segment is `~` alone), so a candidate never equals the handle of another key.

What the model sees is shorter still: a built-in store records an alias from a short id to the full handle
and returns the short id. `short_handles(handle)` gives the candidates, derived from the SHA-256 of the full
handle (so the same key gets the same short id in every process and on every replay): its first
`SHORT_HANDLE_LENGTH` characters in lowercase Crockford base32 (no `i`, `l`, `o` or `u`, which read like
`1` and `0`), then one character longer each time the shorter one is already another handle's alias.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

__all__ = (
    'MAX_CANDIDATES',
    'MAX_HANDLE_LENGTH',
    'MAX_SEGMENTS',
    'MAX_SHORT_HANDLE_LENGTH',
    'MAX_WRITTEN_HANDLE_LENGTH',
    'SHORT_ALPHABET',
    'SHORT_HANDLE_LENGTH',
    'as_handle',
    'candidate_handles',
    'handle_for_key',
    'handle_for_names',
    'is_short_handle',
    'is_valid_handle',
    'names_for_handle',
    'short_handles',
)

MAX_SEGMENTS = 8
"""Most segments a handle has (keys with more keep the rest in the last segment)."""

MAX_HANDLE_SEGMENT = 96
"""Longest readable handle segment; longer ones are replaced by a prefix and a hash."""

HASHED_PREFIX = 30
"""Most characters of a long segment's escaped form kept, readable, in front of its hash."""

MAX_CANDIDATES = 1000
"""Most distinct payloads a store keeps under one key (the handle and its `~~2` ... `~~1000` candidates)."""

MAX_HANDLE_LENGTH = 1024
"""Longest handle accepted on read (anything a store returns is shorter)."""

MAX_NAME_BYTES = 250
"""Longest file name produced, before the `.out` / `.idx` suffix (most filesystems allow 255 bytes)."""

_CANDIDATE_SEPARATOR = '~~'

MAX_WRITTEN_HANDLE_LENGTH = (
    MAX_SEGMENTS * MAX_HANDLE_SEGMENT + (MAX_SEGMENTS - 1) + len(f'{_CANDIDATE_SEPARATOR}{MAX_CANDIDATES}')
)
"""Longest handle a store's `write` can return (781 characters, all ASCII)."""

SHORT_HANDLE_LENGTH = 10
"""Characters of a short handle (50 bits: two of a million payloads share a first candidate about once in 2,000
stores of that size, and then the second gets one character more)."""

MAX_SHORT_HANDLE_LENGTH = 16
"""Longest short handle; a handle whose candidates up to this length are all taken stays in its full form."""

SHORT_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'
"""Crockford's base32 alphabet, lowercase: no `i`, `l`, `o` or `u`, so nothing reads like another character."""

_SHORT = re.compile(f'[{SHORT_ALPHABET}]{{{SHORT_HANDLE_LENGTH},{MAX_SHORT_HANDLE_LENGTH}}}')

_HANDLE_KEEP = frozenset(b'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:+-')
_NAME_KEEP = frozenset(b'abcdefghijklmnopqrstuvwxyz0123456789_-')
_WINDOWS_DEVICE_NAMES = frozenset(
    ['con', 'prn', 'aux', 'nul', *(f'com{i}' for i in range(10)), *(f'lpt{i}' for i in range(10))]
)
_ESCAPE = re.compile(r'~([0-9a-f]{2})')
_SUFFIX_NAME_BYTES = 3 * len(_CANDIDATE_SEPARATOR) + len(str(MAX_CANDIDATES))
_MAX_BASE_NAME_BYTES = MAX_NAME_BYTES - _SUFFIX_NAME_BYTES
"""A handle segment is hashed when its file name would leave no room for the longest candidate suffix."""


def _hashed(escaped: str, raw: bytes) -> str:
    end = 0
    while end < len(escaped):
        step = 3 if escaped[end] == '~' else 1  # Never split an escape: `~4` alone would read as something else.
        if end + step > HASHED_PREFIX:
            break
        end += step
    return f'{escaped[:end]}={hashlib.sha256(raw).hexdigest()}'


def _escape_segment(segment: str) -> str:
    raw = segment.encode('utf-8', errors='surrogatepass')
    if not raw:
        return '~'
    out: list[str] = []
    length = name_bytes = 0
    for position, byte in enumerate(raw):
        # A leading dot would make `.` / `..` / hidden names readable as such: always escape it.
        if byte in _HANDLE_KEEP and not (position == 0 and byte == 0x2E):
            out.append(chr(byte))
            length += 1
            name_bytes += 1 if byte in _NAME_KEEP else 3
        else:
            out.append(f'~{byte:02x}')
            length += 3
            name_bytes += 5  # `~` is escaped again in a file name (`~7e`), the hex digits are kept.
        if length > MAX_HANDLE_SEGMENT or name_bytes > _MAX_BASE_NAME_BYTES:
            # Stop escaping here: a 10 MB segment costs its hash, not a 30 MB string.
            return _hashed(''.join(out), raw)
    return ''.join(out)


def handle_for_key(key: str) -> str:
    """The model-visible handle for a store key: deterministic, short, and the key itself when it is plain."""
    segments = key.split('/')
    if len(segments) > MAX_SEGMENTS:
        segments = [*segments[: MAX_SEGMENTS - 1], '/'.join(segments[MAX_SEGMENTS - 1 :])]
    return '/'.join(_escape_segment(segment) for segment in segments)


def candidate_handles(handle: str) -> Iterator[str]:
    """The handles a store tries, in order, for a key whose `handle_for_key` is `handle`.

    `handle` itself, then `handle~~2` ... `handle~~1000`: a store takes the first that is free or already
    holds the same bytes, so a payload is never overwritten by another and writing the same bytes again
    returns the same handle.
    """
    yield handle
    for number in range(2, MAX_CANDIDATES + 1):
        yield f'{handle}{_CANDIDATE_SEPARATOR}{number}'


def short_handles(handle: str) -> Iterator[str]:
    """The short ids a store tries, in order, as the alias of the full `handle` (the first free or already its own)."""
    digest = int.from_bytes(hashlib.sha256(handle.encode('utf-8', errors='surrogatepass')).digest()[:10], 'big')
    chars = ''.join(SHORT_ALPHABET[(digest >> (5 * (15 - position))) & 31] for position in range(16))
    for length in range(SHORT_HANDLE_LENGTH, MAX_SHORT_HANDLE_LENGTH + 1):
        yield chars[:length]


_SEGMENT = r'[A-Za-z0-9_:+~=-][A-Za-z0-9_.:+~=-]*'
_HANDLE = re.compile(rf'{_SEGMENT}(?:/{_SEGMENT}){{0,{MAX_SEGMENTS - 1}}}')


def is_valid_handle(handle: object) -> bool:
    """Whether `handle` has the shape of a handle `handle_for_key` produces (anything else is not found)."""
    return isinstance(handle, str) and 0 < len(handle) <= MAX_HANDLE_LENGTH and _HANDLE.fullmatch(handle) is not None


def as_handle(text: str) -> str:
    """The handle `text` names: `text` itself when it has a handle's shape, else the handle of `text` as a key.

    A store key that cannot be a handle (an empty or spaced tool call id: `run//0`, `run/call 1/0`) then reads
    back the payload written under it. Unambiguous: such a text is never another payload's handle, and
    `handle_for_key` is injective.
    """
    if is_valid_handle(text) or not text or len(text) > MAX_HANDLE_LENGTH:
        return text
    return handle_for_key(text)


def is_short_handle(text: str) -> bool:
    """Whether `text` has the shape of a short id (a store then looks it up as an alias before as a handle)."""
    return _SHORT.fullmatch(text) is not None


def _name_for_segment(segment: str) -> str | None:
    raw = segment.encode('utf-8', errors='surrogatepass')
    name = ''.join(chr(byte) if byte in _NAME_KEEP else f'~{byte:02x}' for byte in raw)
    if name in _WINDOWS_DEVICE_NAMES:
        # Device names are made of kept characters only, so escaping their first one is unambiguous.
        name = f'~{raw[0]:02x}{name[1:]}'
    if len(name) > MAX_NAME_BYTES:
        return None
    return name


def names_for_handle(handle: str) -> list[str] | None:
    """One confined file name per handle segment, or `None` when the handle cannot name a stored payload."""
    if not handle or len(handle) > MAX_HANDLE_LENGTH or '\x00' in handle:
        return None
    segments = handle.split('/')
    if len(segments) > MAX_SEGMENTS or any(not segment for segment in segments):
        return None
    names: list[str] = []
    for segment in segments:
        name = _name_for_segment(segment)
        if name is None:
            return None
        names.append(name)
    return names


def handle_for_names(names: list[str]) -> str | None:
    """Invert `names_for_handle` (for listing); `None` for names this store did not produce."""
    segments: list[str] = []
    for name in names:
        if not name or any(ch != '~' and ord(ch) not in _NAME_KEEP for ch in name):
            return None
        raw = bytearray()
        position = 0
        while position < len(name):
            match = _ESCAPE.match(name, position)
            if match is not None:
                raw.append(int(match.group(1), 16))
                position = match.end()
            elif name[position] == '~':
                return None
            else:
                raw.append(ord(name[position]))
                position += 1
        try:
            segments.append(raw.decode('utf-8', errors='surrogatepass'))
        except UnicodeDecodeError:
            return None
    return '/'.join(segments)
