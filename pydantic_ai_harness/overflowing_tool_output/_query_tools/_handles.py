"""Which handle a model meant, and the payload it opens: handle resolution for the query tools.

The handles a conversation was shown and the near misses that name one of them are pure logic over the message
history (never a store listing, so it stays cheap with a million payloads stored); the store is asked only whether
one handle exists. An unknown handle gets the list of the handles that exist, a failing store guidance text.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ToolReturnPart

from ..._clash import warn_on_clash
from ..._typing import is_list
from .._events import AGED_PREFIX, CONTENT_PREFIX, VALUE_PREFIX, file_handles
from .._search._query import Payload, open_payload
from ..stores._paths import MAX_HANDLE_LENGTH, handle_for_key, is_short_handle
from ..stores._protocol import HandleNotFoundError, OverflowStore, RangeReadableStore
from ._answers import show, storage_error

__all__ = (
    'CARRIED_BYTES',
    'CARRIED_HANDLES',
    'LEDGER_KEY',
    'LISTED_HANDLES',
    'KnownHandle',
    'clean_handle',
    'conversation_handles',
    'handles_to_carry',
    'known_handles',
    'ledger_of',
    'near_misses',
    'open_handle',
    'resolved_answer',
    'unknown_handle_answer',
)

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


LEDGER_KEY = 'overflow_handles'
"""`CompactionPart.metadata` key: the handles of the history a compaction replaced, `[handle, tool, key]` each, so a
search without a handle still covers them (the stubs and previews that named them are gone)."""


def known_handles(messages: Iterable[ModelMessage]) -> list[KnownHandle]:
    """The handles recorded in `messages` (tool returns, each document of a list stored apart, and the ledgers of
    compactions), newest first, each once.
    """
    found: list[KnownHandle] = []
    seen: set[str] = set()

    def add(handle: object, tool_name: object, key: object) -> None:
        # Metadata is untrusted: a handle no store makes (too long, say) names nothing, and a tool name is cut.
        if not isinstance(handle, str) or not 0 < len(handle) <= MAX_HANDLE_LENGTH or handle in seen:
            return
        if isinstance(tool_name, str):
            seen.add(handle)
            key = key if isinstance(key, str) and len(key) <= MAX_HANDLE_LENGTH else None
            found.append(KnownHandle(handle, tool_name[:_TOOL_NAME_CHARS], key))

    documents_left = DOCUMENT_HANDLES_READ
    for message in reversed(list(messages)):
        for part in reversed(message.parts):
            if isinstance(part, CompactionPart):
                for entry in ledger_of(part):
                    add(*entry)
                continue
            if not isinstance(message, ModelRequest):
                continue
            if not isinstance(part, ToolReturnPart) or not _is_metadata(part.metadata):
                continue
            for prefix in (CONTENT_PREFIX, VALUE_PREFIX, AGED_PREFIX):
                add(part.metadata.get(f'{prefix}_handle'), part.tool_name, part.metadata.get(f'{prefix}_key'))
                if documents_left <= 0 or prefix == AGED_PREFIX:
                    continue
                # Each document of a list stored one by one, in list order (`<prefix>_handle` names the first).
                documents = file_handles(part.metadata, prefix)[:documents_left]
                documents_left -= len(documents)
                for handle, key in documents:
                    add(handle, part.tool_name, key)
    return found


DOCUMENT_HANDLES_READ = 10_000
"""The most `<prefix>_file_handles` entries read across a whole history (newest first): metadata a tool forged,
1,000 entries on each of hundreds of returns, would otherwise cost a second on every request."""


def ledger_of(part: CompactionPart) -> list[tuple[object, object, object]]:
    """The `[handle, tool, key]` entries a compaction part's ledger holds, at most `LEDGER_ENTRIES` of them (untrusted
    metadata: shapes checked, and a ledger the capability did not write may be any length).
    """
    ledger = part.metadata.get(LEDGER_KEY) if _is_metadata(part.metadata) else None
    if not is_list(ledger):
        return []
    return [(entry[0], entry[1], entry[2]) for entry in ledger[:LEDGER_ENTRIES] if is_list(entry) and len(entry) == 3]


LEDGER_ENTRIES = 5_000
"""The most entries one compaction part's ledger is read for (the capability writes the newest 5,000)."""

_TOOL_NAME_CHARS = 200
"""A tool name read from metadata is cut to this length before any answer shows it."""


def _is_metadata(value: object) -> TypeGuard[Mapping[str, object]]:
    """Whether a part's metadata is a mapping (the capability's own is a `dict` keyed by strings)."""
    return isinstance(value, Mapping)


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
                f"{opening} A handle is the exact string shown after 'handle' in the preview of an output too large "
                'to show; copy it exactly. An output shown in full has none: read it where it is in the conversation. '
                'If the output you need was not produced yet, or was cleaned up since, call the tool that produces it.'
            )
        more = f' (the newest {len(listed)} of {len(known)})' if len(known) > len(listed) else ''
        lines = [f'{opening} Stored results of this conversation{more}, newest first:']
    lines += [f'{item.handle}  ({item.tool_name})' for item in listed]
    lines.append('Pass one of these handles exactly. A result cleaned up since needs its tool called again.')
    return '\n'.join(lines)


CARRIED_HANDLES = 'overflow_handles'
"""The attribute a durable unit's run context carries the conversation's handles in, when its messages stay behind
(`OverflowTemporalRunContext` adds it)."""

CARRIED_LIMIT = 1_000
"""Most handles carried into a durable unit (the newest): each costs about 100 bytes of the unit's payload."""

CARRIED_BYTES = 128 * 1024
"""Most characters the carried handles take in a durable unit's payload, whatever their ids' lengths."""

_CARRIED_KEY_CHARS = 256
"""A key longer than this is not carried (the handle still is): it only serves near misses of a mistyped handle."""


def conversation_handles(ctx: RunContext[Any]) -> list[KnownHandle] | None:
    """The handles the run's messages carry; `None` where the context has no messages (a Temporal activity's)
    and carries no handles in their place.
    """
    try:
        messages = ctx.messages
    except UserError:
        return _carried(vars(ctx).get(CARRIED_HANDLES))
    return known_handles(messages)


def handles_to_carry(messages: Iterable[ModelMessage]) -> list[list[str | None]]:
    """The newest handles of `messages` as plain data, for a durable unit's serialized context: at most
    `CARRIED_LIMIT` of them in at most `CARRIED_BYTES` characters (call ids a provider makes 1,000 characters long
    would otherwise put a megabyte into every activity's input).
    """
    carried: list[list[str | None]] = []
    spent = 0
    for known in known_handles(messages)[:CARRIED_LIMIT]:
        key = known.key if known.key is not None and len(known.key) <= _CARRIED_KEY_CHARS else None
        cost = len(known.handle) + len(known.tool_name) + len(key or '') + 16  # JSON quotes, commas, brackets
        if spent + cost > CARRIED_BYTES:
            break
        carried.append([known.handle, known.tool_name, key])
        spent += cost
    return carried


def _carried(value: object) -> list[KnownHandle] | None:
    if not is_list(value):
        return None
    found: list[KnownHandle] = []
    for item in value:
        if is_list(item) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[1], str):
            found.append(KnownHandle(item[0], item[1], item[2] if isinstance(item[2], str) else None))
    return found


def clean_handle(handle: str) -> str:
    """`handle` without the quotes or backticks models sometimes wrap it in."""
    # Models sometimes wrap a handle in quotes or backticks; no valid handle starts or ends with them.
    return handle.strip().strip('`\'"').strip()


def _unknown_handle(handle: str) -> str:
    return unknown_handle_answer(show(handle), [])


@dataclass(frozen=True)
class _Resolution:
    """Which handle a tool call reads: `handle` (with a `note` when it was a near miss), or `answer` instead."""

    handle: str = ''
    note: str = ''
    answer: str = ''


async def _exists(store: OverflowStore, handle: str) -> bool:
    """Whether `store` holds `handle`; a storage error counts as yes (the read that follows reports it)."""
    try:
        if isinstance(store, RangeReadableStore):
            await store.size(handle)
        else:
            await store.read(handle)
    except (HandleNotFoundError, KeyError, FileNotFoundError):
        return False
    except Exception:  # noqa: BLE001 - reported by the read itself
        return True
    return True


async def _resolve(store: OverflowStore, raw_handle: str, known: list[KnownHandle]) -> _Resolution:
    """The handle the model meant, from the handles its conversation was shown (never a listing of the store).

    A handle the conversation was shown is read as it is. Else the store is asked; when it has nothing, an
    unambiguous near miss (wrapping, letter case, a dropped or added prefix, the full form of a short handle or
    the other way round) is read with a one-line note, and anything else gets the list of the handles that exist.
    """
    handle = clean_handle(raw_handle)
    if any(item.handle == raw_handle for item in known):
        return _Resolution(raw_handle)  # the common case: no store call before the read itself
    by_key = [item for item in known if item.key is not None and handle == item.key]
    if len(by_key) > 1:  # one key, several payloads (a reused tool call id): only the short handles tell them apart
        return _Resolution(answer=unknown_handle_answer(show(handle), by_key, ambiguous=True))
    if by_key:
        return _Resolution(by_key[0].handle, _resolved_note(raw_handle, by_key[0].handle))
    if handle and await _exists(store, handle):
        return _Resolution(handle, _resolved_note(raw_handle, handle) if handle != raw_handle else '')
    if handle and is_short_handle(handle.lower()) and await _exists(store, handle.lower()):
        return _Resolution(handle.lower(), _resolved_note(raw_handle, handle.lower()))
    matches = near_misses(raw_handle, known)
    if len(matches) == 1:
        return _Resolution(matches[0].handle, _resolved_note(raw_handle, matches[0].handle))
    shown = show(handle or raw_handle)
    return _Resolution(answer=unknown_handle_answer(shown, matches or known, ambiguous=len(matches) > 1))


def _resolved_note(given: str, meant: str) -> str:
    return f'(Read {show(given)} as the handle {meant!r}.)\n'


async def resolved_answer(
    store: OverflowStore, raw_handle: str, known: list[KnownHandle], answer: Callable[[str], Awaitable[str]]
) -> str:
    """`answer` for the handle the model meant (with a note when it was a near miss), or the unknown-handle answer."""
    resolution = await _resolve(store, raw_handle, known)
    if resolution.answer:
        return resolution.answer
    return resolution.note + await answer(resolution.handle)


async def open_handle(store: OverflowStore, raw_handle: str) -> Payload | str:
    """The payload stored under `raw_handle`, or the answer to give instead (unknown handle, failing store)."""
    warn_on_clash()  # once per process: the query tools are ours whichever distribution was installed last
    handle = clean_handle(raw_handle)
    if not handle:
        return _unknown_handle(raw_handle)
    try:
        return await open_payload(store, handle)
    except (HandleNotFoundError, KeyError, FileNotFoundError):
        return _unknown_handle(handle)
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return storage_error(handle, exc)
