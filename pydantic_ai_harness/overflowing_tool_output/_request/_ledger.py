"""Spills outlive every compaction: the handles a compaction took out of the history go into its part's ledger.

Any capability may compact (a summarizer, `NativeCompaction`, this one), and a compaction replaces the messages
whose metadata named the conversation's handles. The capability remembers, per conversation, the handles the
history showed at its last request; at the next hook after a compaction it writes the ones the history no longer
shows into the compaction part's metadata (`LEDGER_KEY`), which is never sent to the model and persists with the
history. A search without a handle reads the ledgers as it reads the returns' metadata, so every earlier spill stays
findable within the conversation, and only there: the ledger is part of the conversation's own history.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic_ai.messages import CompactionPart, ModelMessage

from ..._typing import is_mapping
from .._media._view_tool import IMAGE_LEDGER_KEY, stored_image_handles
from .._query_tools._handles import LEDGER_ENTRIES, LEDGER_KEY, KnownHandle, known_handles

__all__ = ('LEDGER_LIMIT', 'HandleLedger', 'record_ledger')

LEDGER_LIMIT = LEDGER_ENTRIES
"""Most handles one ledger holds (the newest): about 100 bytes each in the persisted history."""

_CONVERSATIONS = 1_024
"""Conversations whose handles the capability remembers at once (the least recent are forgotten first)."""

_HANDLES = 100_000
"""Handles remembered across all conversations at once (about 20 MB at most); the least recent conversations go first."""


def record_ledger(part: CompactionPart, handles: Sequence[KnownHandle], images: Sequence[str] = ()) -> None:
    """Write `handles` (the newest `LEDGER_LIMIT`) into `part`'s metadata, which the model is never sent, and the
    handles of the stored images (and PDFs) the history no longer names (`images`, oldest first), so the view tool
    still offers and names them.
    """
    ledger = [[known.handle, known.tool_name, known.key] for known in handles[:LEDGER_LIMIT]]
    metadata = dict(part.metadata) if is_mapping(part.metadata) else {}
    metadata[LEDGER_KEY] = ledger
    if images:
        metadata[IMAGE_LEDGER_KEY] = list(images[-LEDGER_LIMIT:])
    part.metadata = metadata


def _settled(part: CompactionPart) -> bool:
    return is_mapping(part.metadata) and LEDGER_KEY in part.metadata


def _unsettled(messages: Iterable[ModelMessage]) -> list[CompactionPart]:
    return [
        part
        for message in messages
        for part in message.parts
        if isinstance(part, CompactionPart) and not _settled(part)
    ]


@dataclass
class _Shown:
    """What one conversation's history showed at its last request."""

    handles: dict[str, KnownHandle]
    """Its handles, oldest first, at most `LEDGER_LIMIT`."""

    length: int
    """How many messages the history had."""

    first: weakref.ref[ModelMessage] | None
    """Its first message: a history that still starts with it and still has `last` where it was only grew since."""

    last: weakref.ref[ModelMessage] | None
    """Its last message."""

    images: dict[str, None]
    """The handles of its stored images (and PDFs), oldest first, at most `LEDGER_LIMIT` (an ordered set)."""

    @property
    def size(self) -> int:
        """The handles it remembers."""
        return len(self.handles) + len(self.images)

    def grown(self, messages: Sequence[ModelMessage]) -> bool:
        """Whether `messages` is this history with messages appended, nothing before them replaced."""
        if not self.length or len(messages) < self.length or self.first is None or self.last is None:
            return False
        return messages[0] is self.first() and messages[self.length - 1] is self.last()


class HandleLedger:
    """The handles each conversation's history showed at its last request, to settle the compactions that follow.

    A request that only appended messages costs a look at what it appended: the history is walked whole only after
    something replaced its earlier messages (a compaction).
    """

    def __init__(self) -> None:
        self._shown: OrderedDict[str, _Shown] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def settle(self, conversation: str, messages: Sequence[ModelMessage]) -> int:
        """Give every compaction part of `messages` that has no ledger one: the handles shown before it that the
        history no longer names. Returns how many handles were recorded.
        """
        with self._lock:
            shown = self._shown.get(conversation)
        fresh = messages[shown.length :] if shown is not None and shown.grown(messages) else messages
        unsettled = _unsettled(fresh)
        if not unsettled:
            return 0
        visible = {known.handle for known in known_handles(messages)}
        before = list(reversed(shown.handles.values())) if shown is not None else []
        missing = [known for known in before if known.handle not in visible]
        images_visible = set(stored_image_handles(messages))
        images = [handle for handle in (shown.images if shown is not None else ()) if handle not in images_visible]
        for part in unsettled[:-1]:
            record_ledger(part, [])  # older ones: a compaction this process did not see before; nothing to add
        record_ledger(unsettled[-1], missing, images)
        return len(missing[:LEDGER_LIMIT])

    def remember(
        self, conversation: str, messages: Sequence[ModelMessage], changed: Sequence[ModelMessage] = ()
    ) -> None:
        """What `messages` show now (`changed`: messages a rule replaced), for the compaction that may follow."""
        with self._lock:
            shown = self._shown.get(conversation)
        if shown is not None and shown.grown(messages):
            handles = dict(shown.handles)
            added = [*messages[shown.length :], *changed]
            for known in reversed(known_handles(added)):
                handles.pop(known.handle, None)
                handles[known.handle] = known
            images = {**shown.images, **dict.fromkeys(stored_image_handles(added))}
        else:
            handles = {known.handle: known for known in reversed(known_handles(messages))}
            images = dict.fromkeys(stored_image_handles(messages))
        if len(handles) > LEDGER_LIMIT:  # the newest are last: keep them (one slice, not one deletion at a time)
            handles = dict(list(handles.items())[-LEDGER_LIMIT:])
        if len(images) > LEDGER_LIMIT:
            images = dict.fromkeys(list(images)[-LEDGER_LIMIT:])
        entry = _Shown(
            handles,
            len(messages),
            weakref.ref(messages[0]) if messages else None,
            weakref.ref(messages[-1]) if messages else None,
            images,
        )
        with self._lock:
            previous = self._shown.pop(conversation, None)
            self._total += entry.size - (previous.size if previous is not None else 0)
            self._shown[conversation] = entry
            while self._shown and (len(self._shown) > _CONVERSATIONS or self._total > _HANDLES):
                _, dropped = self._shown.popitem(last=False)
                self._total -= dropped.size

    def __len__(self) -> int:
        return len(self._shown)
