"""Grep over a binary [`Payload`][]: the byte offsets of the matches, searched block by block in a worker thread.

Blocks overlap by the longest match that can cross their edge, so no match is lost where they meet; regex searches
are paced by the same `Pacer` as line scans, and the scan stops at its deadline with where it got to.
"""

from __future__ import annotations

import time
from functools import partial

import anyio.to_thread

from ..._gil import past
from ._grep import GrepResult, Hit
from ._grep_scan import BlockScan, Pacer
from ._matcher import Buffer, Matcher
from ._query import SCAN_BLOCK, BlockReader, Payload

__all__ = ('grep_bytes',)


async def grep_bytes(
    payload: Payload, matcher: Matcher, *, max_hits: int, deadline: float, start: int = 0
) -> GrepResult:
    """Scan a binary payload for `matcher`; hits are byte offsets (overlapping windows catch matches on edges).

    Like `grep_lines`, the searching runs in a worker thread, regex searches are paced by a `Pacer`, and the first
    search of a call is made whatever the deadline (so a continued search always gets further).
    """
    size = payload.size
    pacer: Pacer | None = None
    if matcher.literal is not None:
        overlap = len(matcher.literal) - 1
    else:
        # A regex match longer than the overlap can be missed where windows meet; the overlap never outweighs the
        # window itself, so a costly pattern's searches stay short.
        pacer = Pacer(matcher)
        overlap = min(4096, pacer.window())
    hits: list[Hit] = []
    total = 0
    position = max(0, start)
    async with BlockReader(payload) as blocks:
        while position < size:
            fresh = position == max(0, start)
            if not fresh and time.monotonic() > deadline:
                return GrepResult(hits, total, False, 0, position, out_of_time=True)
            block = await blocks.read(position, min(size, position + SCAN_BLOCK + overlap))
            if not block:
                break
            # Matches starting in the overlap belong to the next block (unless this is the last one).
            last = position + len(block) >= size
            owned = len(block) if last else SCAN_BLOCK
            search = partial(
                _scan_binary_block,
                block,
                owned,
                overlap,
                matcher,
                pacer,
                room=max_hits - len(hits),
                deadline=deadline,
                check_first=not fresh,
            )
            scan = await anyio.to_thread.run_sync(search)
            hits.extend(Hit(0, position + start, position + start, position + end) for _, _, start, end, _ in scan.hits)
            total += scan.total
            if not scan.finished:
                return GrepResult(hits, total, False, 0, position + scan.resume, out_of_time=True)
            if last:
                break
            position += SCAN_BLOCK
    return GrepResult(hits, total, True, 0, size)


def _scan_binary_block(
    block: Buffer,
    owned: int,
    overlap: int,
    matcher: Matcher,
    pacer: Pacer | None,
    *,
    room: int,
    deadline: float,
    check_first: bool,
) -> BlockScan:
    """Every match starting in `block[:owned]`, searched in paced windows that overlap by `overlap` bytes (the
    deadline checked before each, but the first unless `check_first`).
    """
    hits: list[tuple[int, int, int, int, bool]] = []
    total = 0
    cursor = 0
    while cursor < owned:
        if (check_first or cursor > 0) and past(deadline):
            return BlockScan(hits, total, cursor, False, True)
        window_start = cursor
        window_end = len(block) if pacer is None else min(len(block), cursor + pacer.window() + overlap)
        found, found_end = matcher.search(block, cursor, window_end)
        if found == -1 or found >= owned:
            if window_end >= len(block) or found >= owned:
                break
            cursor = max(window_end - overlap, window_start + 1)  # the next window re-reads the overlap
            continue
        total += 1
        if len(hits) < room:
            hits.append((0, found, found, found_end, False))
        cursor = max(found_end, found + 1)
        if total % 64 == 0 and past(deadline):
            return BlockScan(hits, total, cursor, False, True)
    return BlockScan(hits, total, owned, True, False)
