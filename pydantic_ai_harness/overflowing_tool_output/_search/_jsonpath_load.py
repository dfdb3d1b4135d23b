"""Reading a stored JSON document in blocks, parsing it, and freeing it in steps. Pure logic for `_jsonpath`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..._gil import hand_over

__all__ = ('SCAN_BLOCK', 'BlockCache', 'load_json', 'release')

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


def load_json(data: bytes) -> Any:
    """`json.loads` of stored text (UTF-8, lone surrogates kept); raises `ValueError` when it is not JSON.

    An int longer than Python's limit for `int(str)` (4,300 digits) is read as the nearest float (an infinity past
    1e308), in a second pass that only a text holding one pays for: filters compare it about right, and reading
    it exactly costs time quadratic in its digits.
    """
    text = data.decode('utf-8', 'surrogatepass')
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # the digit limit
        return json.loads(text, parse_int=_long_int)


def _long_int(digits: str) -> int | float:
    return int(digits) if len(digits) <= _INT_DIGITS else float(digits)


_INT_DIGITS = 4_000


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
