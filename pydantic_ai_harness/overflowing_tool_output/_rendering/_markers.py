"""The markers of a reduction (truncation, the spill header and its paging advice, the summary label, a failed
redaction), written for a model reading them cold. The query tools write their answers beside them (`_query_tools`),
aging its stub in `_request/_aging`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from .._query_tools._names import offered_names

__all__ = (
    'SpillSummary',
    'cut_here_marker',
    'format_bytes',
    'kept_for',
    'redaction_failed_marker',
    'spill_header',
    'spill_how_to_read',
    'summary_marker',
    'truncation_marker',
    'unrenderable_note',
)


@dataclass(frozen=True)
class SpillSummary:
    """The facts the header states about a spilled text payload."""

    tool_name: str
    """The tool that returned it."""

    handle: str
    """Where it is stored."""

    chars: int
    """Characters in the model-visible text."""

    tokens: int
    """Estimated or counted tokens."""

    lines: int
    """Lines in the stored (pageable) text."""

    nbytes: int
    """Bytes stored."""

    path: str | None = None
    """The file in the run's workspace that holds it (relative to the working directory), when it went there."""

    query_tools: bool = True
    """Whether `read_tool_result` / `grep_tool_result` are offered to page it back."""

    json: bool = False
    """Whether it is stored as JSON with one element per line (a structured value, or a text that is JSON)."""

    expires_after: timedelta | None = None
    """How long the store keeps it (its `cleanup_after`), when it deletes old payloads; `None`: it keeps them."""


def format_bytes(n: int) -> str:
    """`1.2 MB`, `340 KB`, `87 bytes` (decimal units)."""
    if n < 1_000:
        return f'{n} bytes'
    for unit, scale in (('GB', 1e9), ('MB', 1e6), ('KB', 1e3)):
        if n >= scale:
            return f'{n / scale:.1f} {unit}'
    raise AssertionError('unreachable')  # pragma: no cover


NARROWER_ADVICE = '; call the tool again with narrower arguments to see them'
"""The advice a truncation marker ends with; left out for a tool that takes no arguments."""


def truncation_marker(
    *, omitted: int, total: int, first_line: int, last_line: int, where: Literal['start', 'middle', 'end', 'all']
) -> str:
    """The notice that opens a text `Truncate` cut: the first line says what was lost, before any kept text.

    Args:
        omitted: Characters cut.
        total: Characters in the full text.
        first_line: First (1-based) line touched by the cut.
        last_line: Last line touched by the cut.
        where: Which part was cut.
    """
    what = {'start': 'the first', 'middle': 'the middle', 'end': 'the last', 'all': 'all'}[where]
    lines = _line_span(first_line, last_line)
    return f'[truncated: {what} {omitted} of {total} characters ({lines}) omitted and not kept{NARROWER_ADVICE}]'


def cut_here_marker(*, first_line: int, last_line: int) -> str:
    """The short note left where a cut removed text from the middle or the end (the first line has the notice)."""
    return f'[{_line_span(first_line, last_line)} omitted here]'


def _line_span(first_line: int, last_line: int) -> str:
    return f'line {first_line}' if first_line == last_line else f'lines {first_line}-{last_line}'


def unrenderable_note(type_name: str) -> str:
    """Appended when a value could not be serialized as-is and a best-effort rendering is shown instead."""
    return (
        f'\n[note: the tool returned a {type_name} that cannot be serialized exactly; this is a best-effort rendering]'
    )


def spill_header(summary: SpillSummary) -> str:
    """The first line of a spill preview: what happened, how big it was, where it is.

    The sizes are those of the stored text, as the query tools read it: lines and bytes.
    """
    layout = ' as JSON, one element per line' if summary.json else ''
    lines = '1 line' if summary.lines == 1 else f'{summary.lines} lines'
    return (
        f'[`{summary.tool_name}` returned too much to show (~{summary.tokens} tokens). '
        f'Saved in full{kept_for(summary.expires_after)} under handle '
        f"'{summary.handle}'{layout}: {lines}, {summary.nbytes} bytes; {PREVIEW_FOLLOWS}.\n"
    )


_UNITS = ((86_400, 'day'), (3_600, 'hour'), (60, 'minute'), (1, 'second'))


def kept_for(ttl: timedelta | None) -> str:
    """` for 7 days` when the store deletes payloads after `ttl` (the largest whole unit), else nothing."""
    if ttl is None:
        return ''
    seconds = max(1, int(ttl.total_seconds()))
    count, unit = next((seconds // size, unit) for size, unit in _UNITS if seconds % size == 0 or size == 1)
    return f' for {count} {unit}' if count == 1 else f' for {count} {unit}s'


PREVIEW_FOLLOWS = 'a preview follows'
"""The header's promise of a preview, dropped when the budget leaves room for no line."""


def spill_how_to_read(*, one_line: bool = False) -> str:
    """Exactly how to get the rest. The handle is stated once, in the header, to keep the preview short.

    `one_line`: the payload is a single line (minified JSON, say), so lines are no unit to page it by: bytes are.
    """
    names = offered_names()
    if one_line:
        return (
            f'{names.grep}(handle, pattern) finds each match and its byte offset; '
            f"{names.read}(handle, unit='bytes', offset=N, limit=16000) reads 16000 bytes from byte N.]\n"
        )
    return (
        f'{names.grep}(handle, pattern) finds lines; '
        f'{names.read}(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]\n'
    )


def summary_marker(
    *,
    tool_name: str,
    chars: int,
    lines: int,
    handle: str | None,
    chunks: int,
    uncovered_chars: int,
    by_model: bool = True,
) -> str:
    """The label in front of a summary: what it is, of how much output, and where the full output is.

    `by_model`: a model wrote it; otherwise the application's own `summarize` function did, and the label says
    nothing of who.
    """
    how = f' in {chunks} parts' if chunks > 1 else ''
    lead = f'[Summary, written by a model{how}, of what' if by_model else '[Summary of what'
    where = (
        f"The full original is saved under handle '{handle}': {offered_names().grep}(handle, pattern) checks a "
        f'detail; {offered_names().read}(handle, from_end=True) reads the end.'
        if handle is not None
        else 'The full original was not kept.'
    )
    uncovered = ''
    if uncovered_chars:
        kept = 'are only in the original' if handle is not None else 'were left out'
        uncovered = f' The last {uncovered_chars} characters were too many to summarize and {kept}.'

    return (
        f'{lead} `{tool_name}` returned ({chars} characters, {lines} lines; '
        f'too many to keep). It may miss details. {where}{uncovered}]\n'
    )


def redaction_failed_marker(what: str, tool_name: str, error: str) -> str:
    """In place of a text (`what`: output, failure text) that secret redaction raised on: it is not shown."""
    return f'[The {what} of `{tool_name}` is withheld: checking it for secrets failed ({error}).]'
