"""RE2 behind a typed face: the one module that touches the untyped `re2` binding (google-re2).

RE2 matches in time linear in its input whatever the pattern, which is why every pattern that a model, a user or
tool output can influence runs on it. The binding ships no type information; the protocols here state the part of
its API this package uses, so the rest of the package is checked strictly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import re2 as _typed_re2  # pyright: ignore[reportMissingTypeStubs]

__all__ = ('Match', 'Pattern', 'compile_re2', 'escape')

_re2: Any = _typed_re2
"""The binding, as untyped as it is: what it returns is given its type by the functions below."""


class Match(Protocol):
    """A match, as the binding returns it."""

    def start(self, group: int = 0, /) -> int:
        """Where the match (or a group of it) starts."""
        ...

    def end(self, group: int = 0, /) -> int:
        """Where the match (or a group of it) ends."""
        ...

    def group(self, group: int = 0, /) -> bytes | None:
        """The text of the match, or of one group (`None` when the group did not take part)."""
        ...

    @property
    def lastindex(self) -> int | None:
        """The number of the last group that matched."""
        ...


class Pattern(Protocol):
    """A compiled pattern over bytes."""

    def search(self, text: bytes, pos: int = 0, endpos: int = ..., /) -> Match | None:
        """The first match in `text[pos:endpos]`."""
        ...

    def finditer(self, text: bytes, pos: int = 0, endpos: int = ..., /) -> Iterator[Match]:
        """Every match in `text[pos:endpos]`, left to right, not overlapping."""
        ...


def compile_re2(
    pattern: bytes,
    *,
    never_capture: bool = False,
    never_nl: bool = False,
    latin1: bool = False,
    max_mem: int | None = None,
) -> Pattern:
    """Compile `pattern` for bytes, with errors raised (never logged to stderr by the C++ library).

    Args:
        pattern: The RE2 pattern.
        never_capture: Parse groups as non-capturing: faster, and what a plain search needs.
        never_nl: Never match a newline, unless the pattern spells it out: each line is matched on its own.
        latin1: Read the pattern and the text byte for byte (invalid UTF-8 is literal too), not as UTF-8.
        max_mem: The memory budget of the compiled program (larger DFAs stay on the fast path).

    Raises:
        re2.error: The pattern is not valid RE2 (or exceeds `max_mem`), with the library's message.
    """
    options = _re2.Options()
    options.log_errors = False
    options.never_capture = never_capture
    options.never_nl = never_nl
    if latin1:
        options.encoding = _re2.Options.Encoding.LATIN1
    if max_mem is not None:
        options.max_mem = max_mem
    compiled: Pattern = _re2.compile(pattern, options)
    return compiled


def escape(literal: bytes) -> bytes:
    """`literal` with every byte that has a meaning in a pattern escaped."""
    escaped: bytes = _re2.escape(literal)
    return escaped
