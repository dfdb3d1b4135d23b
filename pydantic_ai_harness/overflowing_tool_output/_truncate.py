"""Character truncation: head, tail or both ends, cut on a nearby line boundary, marker inside the budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._bands import TruncationStrategy
from ._markers import truncation_marker

__all__ = ('Cut', 'truncate_text')

_LINE_SNAP_FRACTION = 0.2
"""A cut moves to a line boundary when one lies within this fraction of the kept part (at most `_LINE_SNAP_MAX`)."""

_LINE_SNAP_MAX = 400


@dataclass(frozen=True)
class Cut:
    """Where a truncation cut a text: the kept head `[0, head_end)` and tail `[tail_start, len)`."""

    head_end: int
    """End (exclusive) of the kept head; 0 when no head is kept."""

    tail_start: int
    """Start of the kept tail; the text length when no tail is kept."""


def _snap_head_end(text: str, end: int) -> int:
    """Move a head cut back to just after a newline, when one is near."""
    if end >= len(text) or text[end - 1 : end] == '\n':
        return end
    window = min(_LINE_SNAP_MAX, int(end * _LINE_SNAP_FRACTION))
    newline = text.rfind('\n', end - window, end)
    return newline + 1 if newline != -1 else end


def _snap_tail_start(text: str, start: int) -> int:
    """Move a tail cut forward to just after a newline, when one is near."""
    if start <= 0 or text[start - 1] == '\n':
        return start
    window = min(_LINE_SNAP_MAX, int((len(text) - start) * _LINE_SNAP_FRACTION))
    newline = text.find('\n', start, start + window)
    return newline + 1 if newline != -1 else start


def _plan(text: str, keep: int, strategy: TruncationStrategy) -> Cut:
    total = len(text)
    if strategy is TruncationStrategy.head:
        return Cut(_snap_head_end(text, keep), total)
    if strategy is TruncationStrategy.tail:
        return Cut(0, _snap_tail_start(text, total - keep))
    head = keep // 2
    return Cut(_snap_head_end(text, head), _snap_tail_start(text, total - (keep - head)))


def truncate_text(text: str, max_chars: int, strategy: TruncationStrategy) -> str:
    """Clamp `text` to at most `max_chars` characters, the omission marker included.

    Text that already fits is returned unchanged (so truncating twice changes nothing more).
    """
    total = len(text)
    if total <= max_chars:
        return text
    # Reserve room for the longest marker this text could need (its numbers are at most the totals), plus the
    # two newlines around it; line snapping only ever shrinks the kept parts, so the result always fits.
    total_lines = text.count('\n') + 1
    longest = truncation_marker(
        omitted=total, total=total, first_line=total_lines, last_line=total_lines + 1, where='middle'
    )
    keep = max(max_chars - len(longest) - 2, 0)
    cut = _plan(text, keep, strategy)
    return _assemble(text, cut, _marker_for(text, cut, total, strategy))


_CUT_PLACE: dict[TruncationStrategy, Literal['start', 'middle', 'end']] = {
    TruncationStrategy.head: 'end',
    TruncationStrategy.tail: 'start',
    TruncationStrategy.head_tail: 'middle',
}


def _marker_for(text: str, cut: Cut, total: int, strategy: TruncationStrategy) -> str:
    omitted = cut.tail_start - cut.head_end
    first_line = text.count('\n', 0, cut.head_end) + 1
    last_line = first_line + text.count('\n', cut.head_end, cut.tail_start)
    if cut.tail_start < total and text[cut.tail_start - 1] == '\n':
        last_line -= 1  # the tail starts on a fresh line, so the newline ended the last omitted line
    where = _CUT_PLACE[strategy]
    marker = truncation_marker(omitted=omitted, total=total, first_line=first_line, last_line=last_line, where=where)
    # The marker sits on a line of its own.
    before = '\n' if cut.head_end and text[cut.head_end - 1] != '\n' else ''
    after = '\n' if cut.tail_start < total else ''
    return f'{before}{marker}{after}'


def _assemble(text: str, cut: Cut, marker: str) -> str:
    head = text[: cut.head_end]
    tail = text[cut.tail_start :]
    return f'{head}{marker}{tail}'
