"""Benchmark entries and the markdown report they are published as."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One measured figure, compared with its target."""

    section: str
    """The report section, e.g. `'overhead'` or `'store'`."""

    name: str
    """What was measured, in a few words."""

    value: float
    """The measured figure."""

    unit: str
    """Its unit: `'x'` for a ratio, `'ms'`, `'MB'`, ..."""

    target: str
    """The target, as text (e.g. `'<= 1.05x'`)."""

    ok: bool
    """Whether the figure meets the target."""

    detail: str = ''
    """The raw measurements behind a ratio, for the curious reader."""


def format_value(entry: Entry) -> str:
    """`1.02x`, `12.3 ms`, ..."""
    if entry.unit == 'x':
        return f'{entry.value:.2f}x'
    if entry.unit == '%':
        return f'{entry.value:.2f}%'
    if entry.unit.startswith('of '):
        return f'{entry.value:g} {entry.unit}'
    return f'{entry.value:,.2f} {entry.unit}'


def markdown_table(entries: Sequence[Entry]) -> str:
    """The entries of one section as a markdown table."""
    lines = ['| measurement | result | target | met | detail |', '|---|---|---|---|---|']
    for entry in entries:
        met = 'yes' if entry.ok else '**no**'
        lines.append(f'| {entry.name} | {format_value(entry)} | {entry.target} | {met} | {entry.detail} |')
    return '\n'.join(lines)
