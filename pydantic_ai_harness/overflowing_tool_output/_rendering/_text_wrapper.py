"""A structured return that only wraps a text (`{"content": "<text>"}`) is reduced as that text.

MCP servers that declare an output schema send their text twice, as a text block and as `structuredContent`, and
pydantic-ai's `MCPToolset` hands the tool's return over as the structured form: the official filesystem server
returns every file, tree, search and listing as `{'content': '<text>'}`. As a structured value that is one JSON
line, its newlines and quotes escaped: nothing to page by line, a preview of escapes, and a grep that finds one
matching line for every match. Reduced as the text it wraps, it is stored, previewed, read and grepped as the lines
it has.

Only wraps a text: a `dict` with exactly one member, whose key is a `str` of at most `MAX_KEY_CHARS` characters (a
field name, which the preview states) and whose value is a `str`; nothing else. (pydantic-ai already unwraps the
`{'result': ...}` the MCP SDK wraps other values in.) The text is stored exactly; the preview names the key it came
under. The unit is measured as the model would see it as returned (the mapping's JSON, escapes included), and a
return below every band reaches the model as the tool returned it: only a reduction replaces it.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from ..._typing import is_dict
from ._render import Rendered, TextWrapper, render_value

__all__ = ('MAX_KEY_CHARS', 'render_return', 'wrapped_text')

MAX_KEY_CHARS = 64
"""A longer key is no field name: a mapping under it is reduced as the structured value it is."""


def wrapped_text(value: object) -> tuple[str, str] | None:
    """`(key, text)` when `value` only wraps a text: a `dict` whose one member is a `str` under a short `str` key."""
    if not is_dict(value) or len(value) != 1:
        return None
    ((key, text),) = value.items()
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS or not isinstance(text, str):
        return None
    return key, text


def render_return(value: Any, *, strip_ansi: bool = False) -> Rendered:
    """Render a tool's return value (`render_value`), a wrapped text as the text it wraps. Never raises."""
    found = wrapped_text(value)
    if found is None:
        return render_value(value, strip_ansi=strip_ansi)
    key, text = found
    chars = _compact_chars(value)
    if chars is None:
        return render_value(value, strip_ansi=strip_ansi)  # a text pydantic-core cannot write: rendered as before
    rendered = render_value(text, strip_ansi=strip_ansi)
    return Rendered('text', rendered.text, wrapper=TextWrapper(key=key, chars=chars))


def _compact_chars(value: dict[str, str]) -> int | None:
    """Characters of the compact JSON the model would see of `value` (its escapes counted), or `None` if none."""
    try:
        data = pydantic_core.to_json(value)
    except (pydantic_core.PydanticSerializationError, ValueError):
        return None
    return len(data) if data.isascii() else len(data.decode('utf-8', 'surrogatepass'))
