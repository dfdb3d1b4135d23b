"""Key -> handle -> file name encodings: injective, confined, and readable when the input already is.

Two layers, each injective:

1. `handle_for_key` turns a store key (any string) into the handle the model sees. Segments made of
   `[A-Za-z0-9_.:+-]` (not starting with `.`) are kept verbatim, so `run/call_1/0` stays `run/call_1/0`;
   any other byte is written `~xx` (lowercase hex), an empty segment is `~`, and a segment whose
   encoding would exceed `MAX_HANDLE_SEGMENT` characters becomes `=` + its SHA-256. Keys with more than
   `MAX_SEGMENTS` segments keep the rest, escaped, in the last one.
2. `names_for_handle` turns a handle (a string the model may have mangled) into one file name per
   segment. Only `[a-z0-9_-]` is kept verbatim and every other byte becomes `~xx`, so two handles that
   differ only in letter case never share a file on a case-insensitive filesystem, no name contains
   `/`, NUL or `.` (so `.`/`..` cannot occur and the `.out` / `.idx` / `.tmp-` suffixes and prefixes
   cannot collide with a directory), and Windows device names are escaped.
"""

from __future__ import annotations

import hashlib
import re

__all__ = (
    'MAX_HANDLE_LENGTH',
    'MAX_SEGMENTS',
    'handle_for_key',
    'handle_for_names',
    'names_for_handle',
)

MAX_SEGMENTS = 8
"""Most segments a handle has (keys with more keep the rest in the last segment)."""

MAX_HANDLE_SEGMENT = 96
"""Longest readable handle segment; longer ones are replaced by a hash."""

MAX_HANDLE_LENGTH = 1024
"""Longest handle accepted on read (anything produced by `handle_for_key` is shorter)."""

MAX_NAME_BYTES = 250
"""Longest file name produced (most filesystems allow 255 bytes)."""

_HANDLE_KEEP = frozenset(b'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:+-')
_NAME_KEEP = frozenset(b'abcdefghijklmnopqrstuvwxyz0123456789_-')
_WINDOWS_DEVICE_NAMES = frozenset(
    ['con', 'prn', 'aux', 'nul', *(f'com{i}' for i in range(10)), *(f'lpt{i}' for i in range(10))]
)
_ESCAPE = re.compile(r'~([0-9a-f]{2})')


def _escape_segment(segment: str) -> str:
    raw = segment.encode('utf-8', errors='surrogatepass')
    if not raw:
        return '~'
    out: list[str] = []
    for position, byte in enumerate(raw):
        # A leading dot would make `.` / `..` / hidden names readable as such: always escape it.
        if byte in _HANDLE_KEEP and not (position == 0 and byte == 0x2E):
            out.append(chr(byte))
        else:
            out.append(f'~{byte:02x}')
    escaped = ''.join(out)
    if len(escaped) > MAX_HANDLE_SEGMENT:
        # `=` never appears in an escaped segment, so hashed and escaped segments cannot collide.
        return '=' + hashlib.sha256(raw).hexdigest()
    return escaped


def handle_for_key(key: str) -> str:
    """The model-visible handle for a store key: deterministic, short, and the key itself when it is plain."""
    segments = key.split('/')
    if len(segments) > MAX_SEGMENTS:
        segments = [*segments[: MAX_SEGMENTS - 1], '/'.join(segments[MAX_SEGMENTS - 1 :])]
    return '/'.join(_escape_segment(segment) for segment in segments)


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
