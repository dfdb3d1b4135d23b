"""Reading a stored JSON document in blocks, and freeing a loaded one in steps. Pure logic for `_jsonpath`."""

from __future__ import annotations

from collections.abc import Callable

from .._gil import hand_over

__all__ = ('SCAN_BLOCK', 'BlockCache', 'release')

Reader = Callable[[int, int], bytes]

SCAN_BLOCK = 1 << 20
"""The bytes read at once when scanning a container for its children."""


class BlockCache:
    """Serves small reads from the last two aligned blocks read, so scanning and loading read each byte about once."""

    def __init__(self, read: Reader, size: int) -> None:
        self._read = read
        self._size = size
        self._blocks: dict[int, bytes] = {}

    def _block(self, number: int) -> bytes:
        block = self._blocks.get(number)
        if block is None:
            block = self._read(number * SCAN_BLOCK, min(self._size, (number + 1) * SCAN_BLOCK))
            if len(self._blocks) >= 2:
                self._blocks.pop(max(self._blocks, key=lambda known: abs(known - number)))
            self._blocks[number] = block
        return block

    def __call__(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(self._size, end)
        if end <= start:
            return b''
        first, last = start // SCAN_BLOCK, (end - 1) // SCAN_BLOCK
        base = first * SCAN_BLOCK
        if first == last:
            return self._block(first)[start - base : end - base]
        if last == first + 1:
            return self._block(first)[start - base :] + self._block(last)[: end - base - SCAN_BLOCK]
        return self._read(start, end)


_RELEASE_STEP = 2_000

_Json = dict[str, '_Json'] | list['_Json'] | str | int | float | bool | None


def release(value: _Json) -> None:
    """Free a loaded document a few thousand members at a time, handing the GIL over between.

    Dropping it whole frees its millions of objects in one C call that holds the GIL (and so the event loop):
    126 ms for a 15 MB document, longer on a busy machine.
    """
    if isinstance(value, dict):
        items = list(value.values())
        value.clear()
    elif isinstance(value, list):
        items = value
    else:
        return
    while items:
        tail = items[-_RELEASE_STEP:]
        del items[-_RELEASE_STEP:]
        for item in tail:
            if isinstance(item, (dict, list)) and len(item) > 64:
                release(item)
        del tail
        hand_over()
