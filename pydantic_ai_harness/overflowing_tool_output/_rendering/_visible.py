r"""Stored text as it is shown: every control character written as a visible escape (`\x00`, `\x1b`, `\u202e`).

Tool output is attacker text. The model (through previews and the query tools) and the operator (through the CLI)
see its control characters as escapes, never raw: a NUL, an ESC sequence, a carriage return that would hide a line
behind another, a bidirectional override that reorders it. Tab and newline are text and stay as they are.
"""

from __future__ import annotations

import re

__all__ = ('CONTROL', 'INVALID_TO_REPLACEMENT', 'visible', 'visible_prefix')

CONTROL = re.compile('[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]')
"""What is escaped: C0 and C1 controls (tab and newline aside), DEL, and the Unicode line separators and
bidirectional controls that reorder or hide text."""


INVALID_TO_REPLACEMENT = {code: '\ufffd' for code in range(0xDC80, 0xDD00)}
"""`str.translate` table: the lone surrogates `surrogateescape` decodes invalid UTF-8 bytes to, shown as U+FFFD."""


def _escape(found: re.Match[str]) -> str:
    code = ord(found[0])
    return f'\\x{code:02x}' if code < 0x100 else f'\\u{code:04x}'


def visible(text: str) -> str:
    """`text` with every control character (`CONTROL`) written as a Python-style escape."""
    if CONTROL.search(text) is None:
        return text
    return CONTROL.sub(_escape, text)


def visible_prefix(text: str, max_chars: int) -> int:
    """How many characters of `text` show in at most `max_chars` characters once escaped (`visible`)."""
    if CONTROL.search(text, 0, max_chars) is None:
        return min(len(text), max_chars)
    width = 0
    for index, char in enumerate(text):
        width += 1 if CONTROL.match(char) is None else (4 if ord(char) < 0x100 else 6)
        if width > max_chars:
            return index
    return len(text)
