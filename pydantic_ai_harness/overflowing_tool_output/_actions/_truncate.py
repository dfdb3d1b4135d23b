"""Truncation within a character budget, marker included.

Text is cut at its head, tail or both ends, on a nearby line boundary; its first line is a notice saying what was
cut (a model that reads a plausible tail must not take it for the whole text), and a short marker stays where text
was cut from the middle or the end. A structured value (sent as JSON) is cut between whole list items or dict
entries instead, so what is left is still valid JSON, and a marker item says how many were left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from ..._typing import is_dict, is_instance, is_int, is_list, type_of
from .._rendering._markers import NARROWER_ADVICE, cut_here_marker, truncation_marker
from .._rendering._render import Rendered
from ._action import DEFAULT_TRUNCATE_CHARS, MIN_TRUNCATE_CHARS, Action, check_then
from ._unit import ActionContext, Reduced

__all__ = (
    'Cut',
    'Truncate',
    'TruncationStrategy',
    'truncate',
    'truncate_rendered',
    'truncate_structured',
    'truncate_text',
)

_LINE_SNAP_FRACTION = 0.2
"""A cut moves to a line boundary when one lies within this fraction of the kept part (at most `_LINE_SNAP_MAX`)."""

_LINE_SNAP_MAX = 400


class TruncationStrategy(str, Enum):  # noqa: UP042 - public: `str()` of a member stays what it was
    """Which part of an oversized text `Truncate` keeps."""

    head = 'head'
    """Keep the beginning: headers, schemas, the start of a file."""

    tail = 'tail'
    """Keep the end: build and test output, where the errors land last."""

    head_tail = 'head_tail'
    """Keep both ends and elide the middle (the default)."""


@dataclass(frozen=True)
class Truncate(Action):
    """Clamp the text to `max_chars` characters, marker included. Lossy and free.

    Cuts prefer a nearby line boundary. The marker tells the model how much was omitted out of how
    much, and how to see the rest. A binary payload cannot be truncated: `then` runs instead, or the
    value is left as it is.
    """

    strategy: TruncationStrategy = TruncationStrategy.head_tail
    """Which part of the text to keep."""

    max_chars: int = DEFAULT_TRUNCATE_CHARS
    """The character budget of the result, marker included. Always characters, even with `over_tokens`."""

    then: Action | None = None
    """What to do when truncation cannot run (a binary payload)."""

    keep_tail_lines: int = 0
    """Keep the last this many lines of a text whole, within `max_chars`; the strategy spends what is left.

    For command output whose verdict (an exit code, a summary) comes last. When those lines and the marker do not
    fit in `max_chars`, the text is cut as with `strategy=tail`. A structured value is cut between whole items
    instead, as always.
    """

    def __post_init__(self) -> None:
        if is_instance(self.strategy, str) and not is_instance(self.strategy, TruncationStrategy):
            try:
                object.__setattr__(self, 'strategy', TruncationStrategy(self.strategy))
            except ValueError:
                choices = ', '.join(repr(s.value) for s in TruncationStrategy)
                raise ValueError(f'Truncate.strategy must be one of {choices}, got {self.strategy!r}') from None
        if not is_int(self.max_chars):
            raise TypeError(f'Truncate.max_chars must be an int, got {type(self.max_chars).__name__}')
        if self.max_chars < MIN_TRUNCATE_CHARS:
            raise ValueError(
                f'Truncate.max_chars must be at least {MIN_TRUNCATE_CHARS} (room for the marker), got {self.max_chars}'
            )
        if not is_int(self.keep_tail_lines):
            raise TypeError(f'Truncate.keep_tail_lines must be an int, got {type(self.keep_tail_lines).__name__}')
        if self.keep_tail_lines < 0:
            raise ValueError(f'Truncate.keep_tail_lines must be 0 or more, got {self.keep_tail_lines}')
        check_then(self.then, 'Truncate')

    async def reduce(self, unit: ActionContext) -> tuple[Reduced | None, str]:
        """Keep what fits in `max_chars`, with a marker saying what was cut."""
        return truncate(self, unit)


def truncate(action: Truncate, unit: ActionContext) -> tuple[Reduced | None, str]:
    """`Truncate`: keep what fits in `action.max_chars`, with a marker saying what was cut; binary cannot be cut."""
    if unit.rendered.kind == 'binary':
        return None, 'binary data cannot be truncated'
    cut = truncate_rendered(unit.rendered, action.max_chars, action.strategy, keep_tail_lines=action.keep_tail_lines)
    # Advice to call the tool again with narrower arguments only fits a tool that takes some.
    return Reduced(cut if unit.takes_arguments else cut.replace(NARROWER_ADVICE, ''), 'truncate'), ''


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


def _tail_lines_start(text: str, lines: int) -> int:
    """Where the last `lines` lines of `text` start (0 when it has no more); a final newline starts no line."""
    end = len(text) - 1 if text.endswith('\n') else len(text)
    for _ in range(lines):
        newline = text.rfind('\n', 0, end)
        if newline == -1:
            return 0
        end = newline
    return end + 1


def truncate_text(text: str, max_chars: int, strategy: TruncationStrategy, *, keep_tail_lines: int = 0) -> str:
    """Clamp `text` to at most `max_chars` characters, the omission marker included.

    With `keep_tail_lines`, the last that many lines are kept whole and `strategy` cuts what comes before them;
    when they do not fit with the marker, the text is cut as with the `tail` strategy. Text that already fits is
    returned unchanged (so truncating twice changes nothing more).
    """
    total = len(text)
    if total <= max_chars:
        return text
    # Reserve room for the longest notice and cut marker this text could need (their numbers are at most the
    # totals), plus the newlines after the notice and around the marker; line snapping only ever shrinks the kept
    # parts, so the result always fits.
    total_lines = text.count('\n') + 1
    longest = truncation_marker(
        omitted=total, total=total, first_line=total_lines, last_line=total_lines + 1, where='middle'
    ) + cut_here_marker(first_line=total_lines, last_line=total_lines + 1)
    keep = max(max_chars - len(longest) - 3, 0)
    if keep_tail_lines and strategy is not TruncationStrategy.tail:
        reserved = _tail_lines_start(text, keep_tail_lines)
        if reserved and total - reserved <= keep:
            cut = _plan_before(text, keep - (total - reserved), reserved, strategy)
            return _assemble(text, cut, _marker_for(text, cut, total, TruncationStrategy.head_tail))
        strategy = TruncationStrategy.tail
    cut = _plan(text, keep, strategy)
    return _assemble(text, cut, _marker_for(text, cut, total, strategy))


def _plan_before(text: str, keep: int, reserved: int, strategy: TruncationStrategy) -> Cut:
    """The cut of the text before the kept last lines (which start at `reserved`), in `keep` characters."""
    if strategy is TruncationStrategy.head:
        return Cut(_snap_head_end(text, keep), reserved)
    # Both ends: two fifths from the head, the rest just before the kept lines (it leads into them).
    head = keep * 2 // 5
    return Cut(_snap_head_end(text, head), _snap_tail_start(text, reserved - (keep - head)))


_CUT_PLACE: dict[TruncationStrategy, Literal['start', 'middle', 'end']] = {
    TruncationStrategy.head: 'end',
    TruncationStrategy.tail: 'start',
    TruncationStrategy.head_tail: 'middle',
}


def _marker_for(text: str, cut: Cut, total: int, strategy: TruncationStrategy) -> tuple[str, str]:
    """The notice that opens the cut text, and the marker left where the text was cut."""
    omitted = cut.tail_start - cut.head_end
    first_line = text.count('\n', 0, cut.head_end) + 1
    last_line = first_line + text.count('\n', cut.head_end, cut.tail_start)
    if cut.tail_start < total and text[cut.tail_start - 1] == '\n':
        last_line -= 1  # the tail starts on a fresh line, so the newline ended the last omitted line
    elif cut.tail_start == total and text.endswith('\n'):
        last_line -= 1  # a final newline ends the last line; it does not start another
    last_line = max(first_line, last_line)
    where = _CUT_PLACE[strategy]
    notice = truncation_marker(omitted=omitted, total=total, first_line=first_line, last_line=last_line, where=where)
    if not cut.head_end:
        return notice, ''  # the cut is at the start: the notice stands where the text was cut
    # The marker sits on a line of its own.
    before = '' if text[cut.head_end - 1] == '\n' else '\n'
    after = '\n' if cut.tail_start < total else ''
    return notice, f'{before}{cut_here_marker(first_line=first_line, last_line=last_line)}{after}'


def _assemble(text: str, cut: Cut, marker: tuple[str, str]) -> str:
    notice, in_place = marker
    kept = f'{text[: cut.head_end]}{in_place}{text[cut.tail_start :]}'
    return f'{notice}\n{kept}' if kept else notice


# --- structured values ------------------------------------------------------------------------------------

MIN_PART_CHARS = 200
"""A list item or dict entry that does not fit whole is cut down only when at least this much room is left for it."""

_TRUNCATED_KEY = '[truncated]'
"""The key of the marker entry in a truncated dict."""

_AGAIN = f'omitted here and not kept{NARROWER_ADVICE}'


def truncate_rendered(
    rendered: Rendered, max_chars: int, strategy: TruncationStrategy, *, keep_tail_lines: int = 0
) -> str:
    """Truncate what `Truncate` reduces: valid JSON for a structured value, a cut text otherwise."""
    jsonable: object = rendered.jsonable
    if rendered.kind == 'structured' and (is_list(jsonable) or is_dict(jsonable)):
        structured = truncate_structured(jsonable, max_chars, strategy)
        if structured is not None:
            return structured
    return truncate_text(rendered.text, max_chars, strategy, keep_tail_lines=keep_tail_lines)


def truncate_structured(value: list[Any] | dict[str, Any], max_chars: int, strategy: TruncationStrategy) -> str | None:
    """Compact JSON of `value` in at most `max_chars` characters, cut between whole items, always valid JSON.

    A list keeps whole items from its head, its tail or both (per `strategy`) and gets a marker item (a string)
    where the others were, with their positions and count. A dict keeps whole entries the same way, plus a
    `"[truncated]"` entry with the count. An item or entry too big to fit whole is itself truncated this way,
    when it is the only one that can be shown (or, in a dict, when at least `MIN_PART_CHARS` are left for it);
    a long string inside is cut like text. `None` when `value` cannot be dumped (too deep): cut it as text.
    """
    try:
        text = _dump(value)
        if len(text) <= max_chars:
            return text
        budget = max_chars
        for _ in range(8):
            fitted = _dump(_fit(value, budget, strategy))
            if len(fitted) <= max_chars:
                return fitted
            budget -= len(fitted) - max_chars + max(budget // 20, 1)  # the estimate was short: aim lower
    except RecursionError:
        return None
    return _dump([_list_marker(1, len(value), len(value), len(value))])  # pragma: no cover - a safety net


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(',', ':'))


def _fit(value: Any, budget: int, strategy: TruncationStrategy) -> Any:
    """`value`, or a cut copy whose compact JSON takes about `budget` characters at most."""
    kind = type_of(value)
    if kind not in (list, dict, str) or (kind is str and len(value) + 2 <= budget):
        return value  # a number, a bool, null or a short string: nothing to cut
    if len(_dump(value)) <= budget:
        return value
    if kind is list:
        return _fit_list(value, budget, strategy)
    if kind is dict:
        return _fit_dict(value, budget, strategy)
    return _fit_str(value, budget, strategy)


def _order(n: int, strategy: TruncationStrategy) -> Iterator[int]:
    """The positions in the order they are kept: from the head, from the tail, or alternating from both ends."""
    if strategy is TruncationStrategy.head:
        yield from range(n)
    elif strategy is TruncationStrategy.tail:
        yield from range(n - 1, -1, -1)
    else:
        low, high = 0, n - 1
        while low <= high:
            yield low
            if high != low:
                yield high
            low, high = low + 1, high - 1


def _list_marker(first: int, last: int, omitted: int, total: int) -> str:
    where = f'item {first}' if first == last else f'items {first}-{last}'
    return f'[truncated: {where} ({omitted} of {total}) {_AGAIN}]'


def _dict_marker(first: int, last: int, omitted: int, total: int) -> str:
    where = f'entry {first}' if first == last else f'entries {first}-{last}'
    return f'{where} ({omitted} of {total}) {_AGAIN}'


def _select(
    sizes: list[int] | None, items: list[Any], room: int, strategy: TruncationStrategy
) -> tuple[list[int], int]:
    """The positions that fit whole in `room` (each costs its size plus a comma), and the first that did not (-1)."""
    kept: list[int] = []
    used = 0
    for index in _order(len(items), strategy):
        cost = (sizes[index] if sizes is not None else len(_dump(items[index]))) + 1
        if used + cost > room:
            return kept, index
        kept.append(index)
        used += cost
    return kept, -1


def _around_gap(n: int, kept: list[int]) -> tuple[list[int], list[int], tuple[int, int] | None]:
    """Split the kept positions around the omitted run: (before it, after it, its 1-based first and last)."""
    kept_set = set(kept)
    missing = [i for i in range(n) if i not in kept_set]
    if not missing:
        return sorted(kept), [], None
    first, last = missing[0], missing[-1]
    return sorted(i for i in kept if i < first), sorted(i for i in kept if i > last), (first + 1, last + 1)


def _fit_list(items: list[Any], budget: int, strategy: TruncationStrategy) -> list[Any]:
    n = len(items)
    reserve = len(_dump(_list_marker(n, n, n, n))) + 1
    room = budget - 2 - reserve
    kept, _ = _select(None, items, room, strategy)
    partial: tuple[int, Any] | None = None
    if not kept:
        # Not even one item fits whole: show the first one shown by the strategy, cut down, when there is room.
        index = n - 1 if strategy is TruncationStrategy.tail else 0
        part_room = (budget - 2) if n == 1 else room - 1
        if part_room >= MIN_PART_CHARS:
            partial = (index, _fit(items[index], part_room, strategy))
            kept = [index]
    before, after, gap = _around_gap(n, kept)
    out = [partial[1] if partial is not None and i == partial[0] else items[i] for i in before]
    if gap is not None:
        out.append(_list_marker(gap[0], gap[1], gap[1] - gap[0] + 1, n))
    out.extend(partial[1] if partial is not None and i == partial[0] else items[i] for i in after)
    return out


def _fit_dict(mapping: dict[str, Any], budget: int, strategy: TruncationStrategy) -> dict[str, Any]:
    entries = list(mapping.items())
    n = len(entries)
    key = _TRUNCATED_KEY
    while key in mapping:
        key += '*'
    reserve = len(_dump(key)) + 1 + len(_dump(_dict_marker(n, n, n, n))) + 1
    room = budget - 2 - reserve
    sizes = [len(_dump(k)) + 1 + len(_dump(v)) for k, v in entries]
    kept, stopped = _select(sizes, entries, room, strategy)
    partial: tuple[int, Any] | None = None
    if stopped != -1:
        # The entry that did not fit whole (a big list under "items", say) is cut down when there is room for it.
        used = sum(sizes[i] + 1 for i in kept)
        name, inner = entries[stopped]
        part_room = room - used - 1 - len(_dump(name)) - 1
        if len(kept) == n - 1:
            part_room += reserve  # every other entry is kept whole: no marker entry is needed
        if part_room >= MIN_PART_CHARS and isinstance(inner, (list, dict, str)):
            partial = (stopped, _fit(inner, part_room, strategy))
            kept.append(stopped)
    before, after, gap = _around_gap(n, kept)
    out: dict[str, Any] = {}
    for i in [*before, *after]:
        name, inner = entries[i]
        out[name] = partial[1] if partial is not None and i == partial[0] else inner
    if gap is not None:
        out[key] = _dict_marker(gap[0], gap[1], gap[1] - gap[0] + 1, n)
    return out


def _fit_str(text: str, budget: int, strategy: TruncationStrategy) -> str:
    """`text` cut like any text so that its JSON form (quotes and escapes included) fits `budget`."""
    limit = budget - 2
    cut = text
    for _ in range(6):
        cut = truncate_text(text, max(limit, 1), strategy)
        over = len(_dump(cut)) - budget
        if over <= 0:
            break
        limit -= over + 1  # escapes made the JSON form longer than the text: aim lower
    return cut  # possibly still over the budget; the caller's check aims lower then
