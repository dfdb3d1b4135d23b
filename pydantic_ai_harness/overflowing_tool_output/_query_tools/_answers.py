"""What the query tools' answers share: their caps ([`QueryLimits`][]), how a model-supplied string, a line and a
paging call are shown, and the guidance for a failing store.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_ai import ModelRetry

from .._rendering._visible import visible
from .._search._query import Line
from ._names import offered_names

__all__ = (
    'AROUND_LIMIT',
    'DEFAULT_LIMIT',
    'FRAME_RESERVE',
    'QueryLimits',
    'check_pattern',
    'counted',
    'fit',
    'grep_call',
    'number_width',
    'read_call',
    'render_line',
    'same_limit',
    'show',
    'storage_error',
)

FRAME_RESERVE = 600
"""Characters kept free for the header and footer when fitting lines into the output cap."""


DEFAULT_LIMIT = 200
"""`read_tool_result`'s default `limit`: a paging hint repeats any other limit the model chose."""

AROUND_LIMIT = 12
"""The lines a read suggested around a match asks for: the few leading to it and a few after. A dozen answer what a
match raises; the default page of 200 costs a small model minutes to read."""


@dataclass(frozen=True)
class QueryLimits:
    """Caps that keep every query tool answer small and fast, whatever the arguments."""

    max_lines: int = 1000
    """Most lines one `read_tool_result` call returns (`limit` is clamped to it)."""

    max_line_chars: int = 1000
    """Longer lines are cut, with a marker saying how to read the rest."""

    max_output_chars: int = 20_000
    """Most characters in one answer."""

    max_bytes: int = 16_000
    """Most bytes one `unit='bytes'` read returns."""

    max_matches: int = 100
    """Most matching lines one `grep_tool_result` call shows."""

    max_context_lines: int = 10
    """Most context lines around each grep match."""

    max_pattern_chars: int = 1000
    """Longest accepted pattern."""

    max_scan_bytes: int = 64_000_000
    """Most bytes one `grep_tool_result` call without a handle scans across the conversation's stored results."""

    time_budget: float = 0.5
    """Seconds a scan may run before it stops and reports how far it got."""

    store_timeout: float = 10.0
    """Seconds one tool call may wait on the store in all; past it the model is told to try again later."""


def show(text: str, limit: int = 120) -> str:
    """A quoted, escaped, bounded rendering of a model-supplied string."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + '...'


def counted(number: int, noun: str) -> str:
    """`number` and `noun`, plural unless the number is 1 (`2 lines`, `2 matches`)."""
    if number == 1:
        return f'{number} {noun}'
    return f'{number} {noun}es' if noun.endswith(('ch', 's', 'x')) else f'{number} {noun}s'


def read_call(handle: str, **arguments: object) -> str:
    """The `read_tool_result` call with these arguments, as an answer suggests it."""
    rendered = ', '.join(f'{name}={value!r}' for name, value in arguments.items())
    return f'{offered_names().read}(handle={handle!r}, {rendered})'


def grep_call(handle: str, pattern: str, **arguments: object) -> str:
    """The `grep_tool_result` call of one stored result with these arguments, as an answer suggests it."""
    rendered = ''.join(f', {name}={value!r}' for name, value in arguments.items())
    return f'{offered_names().grep}(handle={handle!r}, pattern={pattern!r}{rendered})'


def same_limit(limit: int) -> dict[str, int]:
    """The `limit` argument a paging hint carries so the next page is as long as this one asked for."""
    return {} if limit == DEFAULT_LIMIT else {'limit': limit}


def storage_error(handle: str, exc: BaseException) -> str:
    """The guidance for a store that failed underneath a read."""
    # The exception type only: a message could contain paths or other details the model must not see.
    return (
        f'The stored result {show(handle)} could not be read right now (storage error: {type(exc).__name__}). '
        'Try again later, or call the original tool again.'
    )


def check_pattern(pattern: str, limits: QueryLimits) -> None:
    """`ModelRetry` for a pattern no line can match (a newline in it) or that is too long."""
    if '\n' in pattern:
        raise ModelRetry(
            'pattern must not contain a newline: lines are matched one at a time. Search for one line of the text.'
        )
    if len(pattern) > limits.max_pattern_chars:
        raise ModelRetry(
            f'pattern is {len(pattern)} characters long; the limit is {limits.max_pattern_chars}. '
            'Search for a shorter part of the line.'
        )


def number_width(lines: list[Line]) -> int:
    """How wide the line numbers of `lines` are when shown."""
    return len(str(lines[-1].number)) if lines else 1


def render_line(line: Line, width: int, mark: str = '') -> str:
    """`line` as shown: its number, its text with control characters escaped, and where it was cut, how to read the
    rest.
    """
    text = f'{mark}{line.number:>{width}}| {visible(line.text)}'
    if line.cut:
        remaining = line.length - line.shown_bytes
        text += (
            f"... [line cut: {remaining} more bytes; read them with unit='bytes', "
            f'offset={line.start + line.shown_bytes}]'
        )
    return text


def fit(rendered: list[str], budget: int, *, keep_tail: bool) -> int:
    """How many of `rendered` fit in `budget` characters (from the head, or from the tail)."""
    used = 0
    count = 0
    for text in reversed(rendered) if keep_tail else rendered:
        used += len(text) + 1
        if used > budget and count:
            break
        count += 1
    return count
