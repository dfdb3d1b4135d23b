"""Which handle a model meant: the handles a conversation was shown, and the near misses that name one of them.

Pure logic over the message history (never a store listing, so it stays cheap with a million payloads stored):
the query tools use it to resolve a mangled handle and to list the handles that exist when one is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from ._events import CONTENT_PREFIX, VALUE_PREFIX
from .stores._paths import MAX_HANDLE_LENGTH, handle_for_key

__all__ = ('LISTED_HANDLES', 'KnownHandle', 'known_handles', 'near_misses', 'unknown_handle_answer')

LISTED_HANDLES = 10
"""Most handles an unknown-handle answer lists."""

_MIN_PARTIAL = 8
"""A dropped or added prefix is only recognised when what is left has at least this many characters (so `0`
never names every `.../0`)."""

_WRAPPING = ' \t\r\n`\'"<>()[]{},;.'
_LABEL = re.compile(r'^(?:handle|id)\s*[=:]\s*', re.IGNORECASE)
_BOUNDARIES = '/:= #'


@dataclass(frozen=True)
class KnownHandle:
    """A handle the conversation was shown, read from the metadata of a reduced tool return."""

    handle: str
    """The handle as the model saw it (a short id with the built-in stores)."""

    tool_name: str
    """The tool whose output it holds."""

    key: str | None = None
    """The store key it was written under (its full form), when the metadata has it."""


def known_handles(messages: Iterable[ModelMessage]) -> list[KnownHandle]:
    """The handles recorded in `messages`, newest first, each once."""
    found: list[KnownHandle] = []
    seen: set[str] = set()
    for message in reversed(list(messages)):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            raw: object = part.metadata if isinstance(part, ToolReturnPart) else None
            if not isinstance(raw, Mapping):
                continue
            metadata = cast('Mapping[str, Any]', raw)
            for prefix in (CONTENT_PREFIX, VALUE_PREFIX):
                handle, key = metadata.get(f'{prefix}_handle'), metadata.get(f'{prefix}_key')
                if isinstance(handle, str) and handle and handle not in seen:
                    seen.add(handle)
                    tool_name = cast(ToolReturnPart, part).tool_name
                    found.append(KnownHandle(handle, tool_name, key if isinstance(key, str) else None))
    return found


def _normal(text: str) -> str:
    """`text` without wrapping (quotes, backticks, brackets, whitespace, a trailing full stop) or a `handle=` label."""
    previous = None
    while previous != text:
        previous = text
        text = _LABEL.sub('', text.strip(_WRAPPING))
    return text.lower()


def _forms(known: KnownHandle) -> set[str]:
    forms = {_normal(known.handle)}
    if known.key is not None:
        forms |= {_normal(known.key), _normal(handle_for_key(known.key))}
    return {form for form in forms if form}


def _names(given: str, form: str) -> bool:
    """Whether `given` (normalized) names the handle form `form`: the same, or with a prefix dropped or added."""
    if given == form:
        return True
    if len(given) >= _MIN_PARTIAL and form.endswith(given) and form[-len(given) - 1] == '/':
        return True  # A dropped prefix: `call_Xq3v.../0` for `<run id>/call_Xq3v.../0`.
    # An added prefix: `.overflow/k3x9m2p7qd`, `spill:k3x9m2p7qd`.
    return len(form) >= _MIN_PARTIAL and given.endswith(form) and given[-len(form) - 1] in _BOUNDARIES


def near_misses(given: str, known: Sequence[KnownHandle]) -> list[KnownHandle]:
    """The known handles `given` names up to wrapping, letter case, or a dropped or added prefix (of either form).

    More than one means `given` is ambiguous. Anything longer than a handle can be names nothing (and costs nothing).
    """
    if len(given) > MAX_HANDLE_LENGTH + 64:
        return []
    normal = _normal(given)
    if not normal:
        return []
    return [item for item in known if any(_names(normal, form) for form in _forms(item))]


def unknown_handle_answer(shown: str, known: Sequence[KnownHandle], *, ambiguous: bool = False) -> str:
    """The answer for a handle no stored result has: the handles this conversation has, newest first, with tools.

    `shown` is the handle as the answer quotes it. Without known handles, the general guidance.
    """
    listed = known[:LISTED_HANDLES]
    if ambiguous:
        lines = [f'The handle {shown} could mean any of these stored results, newest first:']
    else:
        opening = f'No stored result found under handle {shown}.'
        if not known:
            return (
                f"{opening} A handle is the exact string shown after 'handle' in a stored tool result's preview; "
                'copy it exactly. Stored results can also be cleaned up after a while: if so, call the original tool '
                'again.'
            )
        more = f' (the newest {len(listed)} of {len(known)})' if len(known) > len(listed) else ''
        lines = [f'{opening} Stored results of this conversation{more}, newest first:']
    lines += [f'{item.handle}  ({item.tool_name})' for item in listed]
    lines.append('Pass one of these handles exactly. A result cleaned up since needs its tool called again.')
    return '\n'.join(lines)
