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
from collections import OrderedDict
from collections.abc import Sequence

from pydantic_ai.messages import CompactionPart, ModelMessage

from .._typing import is_mapping
from ._handles import LEDGER_KEY, KnownHandle, known_handles

__all__ = ('LEDGER_LIMIT', 'HandleLedger', 'record_ledger')

LEDGER_LIMIT = 5_000
"""Most handles one ledger holds (the newest): about 100 bytes each in the persisted history."""

_CONVERSATIONS = 1_024
"""Conversations whose last handles the capability remembers at once (the least recent are forgotten first)."""


def record_ledger(part: CompactionPart, handles: Sequence[KnownHandle]) -> None:
    """Write `handles` (the newest `LEDGER_LIMIT`) into `part`'s metadata, which the model is never sent."""
    ledger = [[known.handle, known.tool_name, known.key] for known in handles[:LEDGER_LIMIT]]
    metadata = dict(part.metadata) if is_mapping(part.metadata) else {}
    part.metadata = {**metadata, LEDGER_KEY: ledger}


def _settled(part: CompactionPart) -> bool:
    return is_mapping(part.metadata) and LEDGER_KEY in part.metadata


class HandleLedger:
    """The handles each conversation's history showed at its last request, to settle the compactions that follow."""

    def __init__(self) -> None:
        self._shown: OrderedDict[str, list[KnownHandle]] = OrderedDict()
        self._lock = threading.Lock()

    def settle(self, conversation: str, messages: Sequence[ModelMessage]) -> int:
        """Give every compaction part of `messages` that has no ledger one: the handles shown before it that the
        history no longer names. Returns how many handles were recorded.
        """
        unsettled = [
            part
            for message in messages
            for part in message.parts
            if isinstance(part, CompactionPart) and not _settled(part)
        ]
        if not unsettled:
            return 0
        with self._lock:
            before = self._shown.get(conversation, [])
        visible = {known.handle for known in known_handles(messages)}
        missing = [known for known in before if known.handle not in visible]
        for part in unsettled[:-1]:
            record_ledger(part, [])  # older ones: a compaction this process did not see before; nothing to add
        record_ledger(unsettled[-1], missing)
        return len(missing[:LEDGER_LIMIT])

    def remember(self, conversation: str, messages: Sequence[ModelMessage]) -> None:
        """What `messages` show now, for the compaction that may follow."""
        shown = known_handles(messages)[:LEDGER_LIMIT]
        with self._lock:
            self._shown[conversation] = shown
            self._shown.move_to_end(conversation)
            while len(self._shown) > _CONVERSATIONS:
                self._shown.popitem(last=False)

    def __len__(self) -> int:
        return len(self._shown)
