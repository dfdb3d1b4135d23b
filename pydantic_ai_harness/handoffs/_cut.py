"""Cutting a record that is too long for a summary, saying so, so that it is never cut twice."""

from __future__ import annotations

from pydantic_ai.messages import ToolReturnPart

from ..overflowing_tool_output._query_tools._names import offered_names

__all__ = ('cut_text', 'with_content')


def with_content(part: ToolReturnPart, content: str) -> ToolReturnPart:
    """A copy of `part` (of its own class, every other field kept) with `content` in place of its own."""
    new = object.__new__(type(part))
    new.__dict__.update(part.__dict__)
    new.content = content
    return new


_NO_STORE = 'no store to save it in'
"""Why a cut record's rest was not kept, when nothing could have kept it."""


def _cut_note(shown: int, total: int, handle: str | None, not_kept: str) -> str:
    where = (
        f"the full record is saved under handle '{handle}': {offered_names().read}(handle) pages it, "
        f'{offered_names().grep}(handle, pattern) searches it'
        if handle is not None
        else f'the rest was not kept ({not_kept})'
    )
    return f' [... record cut: the first {shown} of {total} characters are shown; {where}.]'


def cut_text(text: str, limit: int, handle: str | None, *, not_kept: str = _NO_STORE) -> str:
    """`text` cut so that, with the note saying so, it is at most `limit` characters long (never cut again).

    The note names `handle`, where the full text is saved; without one it says the rest was not kept, and why.
    """
    if len(text) <= limit:
        return text
    note = _cut_note(0, len(text), handle, not_kept)
    shown = max(limit - len(note) - 8, 0)  # room for the digits of `shown` in the final note
    return text[:shown] + _cut_note(shown, len(text), handle, not_kept)
