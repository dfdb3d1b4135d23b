"""What a grep looks for: a [`Matcher`][] (a literal, or an RE2 regex with the literals its matches require).

Patterns are compiled once per call; a regex is refused (`PatternError`) when it is invalid or its RE2 program is
too large to search quickly. `LiteralSearch` finds a literal faster than `bytes.find` by skipping to its rarest byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ._literals import max_match_bytes, required_literals

__all__ = ('MAX_PROGRAM_SIZE', 'Buffer', 'LiteralSearch', 'Matcher', 'PatternError')

MAX_PROGRAM_SIZE = 20_000
"""Patterns compiling to more RE2 instructions are refused: at the worst cost, 1 KiB would take 0.2 s."""

Buffer = bytes | bytearray
"""A block being scanned: `bytes`, or a `bytearray` reused from block to block."""


_TOO_COMPLEX = (
    'the pattern is too complex to search quickly (counted repetitions such as {200} or \\pL{50} multiply its '
    'size); use smaller counts, or search for a literal part of it'
)


class PatternError(ValueError):
    """A pattern that cannot be used (invalid regular expression, too complex)."""


class Regex(Protocol):
    """A compiled RE2 pattern, as far as searching uses it."""

    @property
    def programsize(self) -> int:
        """Instructions in the compiled program."""
        ...

    def search(self, text: Buffer, pos: int = ..., endpos: int = ...) -> RegexMatch | None:
        """The first match in `text[pos:endpos]`."""
        ...


class RegexMatch(Protocol):
    """A match RE2 found: only its span is used."""

    def start(self) -> int:
        """Where the match starts."""
        ...

    def end(self) -> int:
        """Just past where the match ends."""
        ...


def compile_re2(pattern: bytes, *, line_bound: bool, latin1: bool = False) -> Regex:
    """Compile `pattern` with RE2, spans only (no capture groups); RE2's own error when it cannot.

    `line_bound`: every match stays inside one line, `^` and `$` anchor at lines, and a small memory budget bounds
    the compile itself (~20 ms; bigger programs fail fast). `latin1`: bytes are matched byte for byte (invalid UTF-8
    too), for literals.
    """
    import re2  # pyright: ignore[reportMissingTypeStubs]

    options: Any = re2.Options()
    options.log_errors = False
    # Only the span of the whole match is used: tracking groups would run RE2's slow NFA (~1,000x on capture-heavy
    # patterns such as `((.)*)` repeated).
    options.never_capture = True
    if line_bound:
        # `never_nl` keeps every match inside one line; `(?m)` makes ^ and $ line anchors.
        options.never_nl = True
        options.max_mem = 2 << 20
        pattern = b'(?m)' + pattern
    if latin1:
        options.encoding = options.Encoding.LATIN1
    compiled: Regex = re2.compile(pattern, options)  # pyright: ignore[reportUnknownMemberType]
    return compiled


@dataclass(frozen=True)
class Matcher:
    """A literal or an RE2 regular expression, matched within one line (never across a newline)."""

    literal: bytes | None
    """The literal to find, or `None` for a regex."""

    regex: Regex | None
    """The compiled RE2 object when `literal` is `None`."""

    program_size: int = 0
    """Instructions in the compiled RE2 program (0 for a literal): what bounds the cost of a search per byte."""

    required: tuple[bytes, ...] = ()
    """For a regex: literals one of which every match contains (see `_literals`); lines holding none of them are
    skipped without running RE2. Empty when the pattern has no such literals."""

    finders: tuple[LiteralSearch, ...] = ()
    """How to find the literal (or each of `required`), faster than `bytes.find`."""

    max_width: int | None = None
    """The most bytes a match can span (the literal's length, or a regex's bound); `None` when unbounded or unknown.
    A long line searched in overlapping windows misses no match up to the overlap long."""

    @classmethod
    def compile(cls, pattern: str, *, is_regex: bool) -> Matcher:
        """Build a matcher; `PatternError` for an invalid or too complex regex."""
        encoded = pattern.encode('utf-8', errors='surrogatepass')
        if not is_regex:
            return cls(encoded, None, finders=(LiteralSearch(encoded),), max_width=len(encoded))
        try:
            compiled = compile_re2(encoded, line_bound=True)
        except Exception as exc:  # noqa: BLE001 - re2.error, and anything odd the binding raises
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode('utf-8', errors='replace')
            if 'too large' in str(detail):
                raise PatternError(_TOO_COMPLEX) from None
            # RE2 quotes the pattern it compiled, with the line-anchor flag this module put in front of it.
            raise PatternError(str(detail).replace('(?m)', '', 1)) from None
        program_size = int(compiled.programsize)
        if program_size > MAX_PROGRAM_SIZE:
            raise PatternError(_TOO_COMPLEX)
        required = required_literals(pattern)
        finders = tuple(LiteralSearch(literal) for literal in required)
        return cls(None, compiled, program_size, required, finders, max_match_bytes(pattern))

    def search(self, buffer: Buffer, start: int, end: int) -> tuple[int, int]:
        """The first match in `buffer[start:end]` as `(start, end)`, or `(-1, -1)`."""
        if self.regex is None:
            literal = self.literal or b''
            found = self.finders[0].find(buffer, start, end) if self.finders else buffer.find(literal, start, end)
            return (found, found + len(literal)) if found != -1 else (-1, -1)
        match = self.regex.search(buffer, start, end)
        if match is None:
            return -1, -1
        return match.start(), match.end()


_COMMON_BYTES = frozenset(b' etaoinsrhldcumfpgwybvk')
_USUAL_BYTES = frozenset(b'jqxz0123456789.,:;-/_=()[]{}"\'\t')


def _rarity(byte: int) -> int:
    """How rare `byte` is in typical text and logs, roughly: 0 (a space, common letters) to 3 (symbols, non-ASCII)."""
    if byte in _COMMON_BYTES:
        return 0
    if byte in _USUAL_BYTES:
        return 1
    return 2 if 0x41 <= byte <= 0x5A else 3


class LiteralSearch:
    """Finds a literal (leftmost first) by letting RE2 skip to its rarest byte with `memchr`.

    RE2 accelerates the first byte of a literal pattern; starting the pattern at the literal's rarest byte (and
    checking the bytes before it) makes the skips long, several times faster than `bytes.find` on typical text.
    Which byte is rarest is guessed from typical text, then counted in the first 64 KiB searched: in a log without
    an `f`, ` failed` is found by its `f`, not by its space. After a few false candidates in one call, `bytes.find`
    takes over, so text full of that byte costs no more.
    """

    _FALSE_CANDIDATES = 8

    _SAMPLE = 64 << 10
    """Bytes counted, at the start of the first large search, to pick the rarest byte of the literal."""

    def __init__(self, literal: bytes) -> None:
        self.literal = literal
        self._skip = 0
        self._regex: Regex | None = None
        self._sampled = not literal or b'\n' in literal
        if self._sampled:
            return  # RE2's line-bound options would never match a newline: `bytes.find` serves
        self._start_at(max(range(len(literal)), key=lambda offset: (_rarity(literal[offset]), -offset)))

    def _start_at(self, skip: int) -> None:
        self._skip = skip
        try:
            self._regex = compile_re2(_escape(self.literal[skip:]), line_bound=False, latin1=True)
        except Exception:  # noqa: BLE001 - re2.error, or anything odd the binding raises: `bytes.find` serves
            self._regex = None

    def _sample(self, sample: Buffer) -> None:
        """Start at the byte of the literal rarest in `sample`, the typical-text guess breaking ties."""
        self._sampled = True
        literal = self.literal
        counts = {byte: sample.count(byte) for byte in set(literal)}
        skip = min(range(len(literal)), key=lambda offset: (counts[literal[offset]], -_rarity(literal[offset]), offset))
        if skip != self._skip:
            self._start_at(skip)

    def find(self, buffer: Buffer, start: int, end: int) -> int:
        """The first position of the literal in `buffer[start:end]`, or -1."""
        if not self._sampled and end - start >= self._SAMPLE:
            self._sample(buffer[start : start + self._SAMPLE])
        regex = self._regex
        if regex is None:
            return buffer.find(self.literal, start, end)
        skip = self._skip
        prefix = self.literal[:skip]
        position = start + skip
        for _ in range(self._FALSE_CANDIDATES):
            if position >= end:
                return -1
            found = regex.search(buffer, position, end)
            if found is None:
                return -1
            at = found.start() - skip
            if not skip or buffer.startswith(prefix, at):
                return at
            position = found.start() + 1
        return buffer.find(self.literal, position - skip, end)


def _escape(literal: bytes) -> bytes:
    r"""`literal` as an RE2 pattern matching it exactly (every byte outside `[A-Za-z0-9_]` escaped as `\xHH`)."""
    return b''.join(bytes((byte,)) if _WORD_BYTE[byte] else b'\\x%02x' % byte for byte in literal)


_WORD_BYTE = [chr(byte).isascii() and (chr(byte).isalnum() or byte == 0x5F) for byte in range(256)]
