"""`read_tool_result` without `path`: a window of lines (from the start or the end, optionally only the lines
holding a literal), a window of bytes of a text result, or a hex dump of a binary one.

Argument mistakes raise `ModelRetry` with a precise message; every answer is capped in lines and characters and
ends with the call that reads on.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic_ai import ModelRetry

from .._rendering._visible import INVALID_TO_REPLACEMENT, visible, visible_prefix
from .._search._grep import grep_lines, grep_lines_backward
from .._search._matcher import Matcher
from .._search._query import (
    ByteWindow,
    Payload,
    hex_dump,
    line_of_offset,
    read_byte_window,
    read_lines,
    read_lines_at,
    sniff_type,
)
from ..stores._protocol import OverflowStore
from ._answers import (
    DEFAULT_LIMIT,
    FRAME_RESERVE,
    QueryLimits,
    check_pattern,
    counted,
    fit,
    grep_call,
    number_width,
    read_call,
    render_line,
    same_limit,
    show,
    storage_error,
)
from ._grep_texts import incomplete, line_for_hit
from ._handles import open_handle
from ._names import offered_names

__all__ = ('read_tool_result',)

_HEX_ROW_CHARS = 80


async def read_tool_result(
    store: OverflowStore,
    caps: QueryLimits,
    handle: str,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
    from_end: bool = False,
    pattern: str | None = None,
    unit: Literal['lines', 'bytes'] = 'lines',
) -> str:
    """The answer to `read_tool_result` without `path`, for the result `handle` holds in `store`."""
    if offset < 0:
        raise ModelRetry(
            f'offset must be 0 or more (the line to start at, 1-based), got {offset}. Pass from_end=True and a '
            'positive offset to count from the end.'
        )
    if limit < 1:
        raise ModelRetry(f'limit must be 1 or more, got {limit}. Leave it out for 200 lines.')
    if pattern == '':
        pattern = None
    if pattern is not None:
        if unit == 'bytes':
            raise ModelRetry(
                "pattern filters lines, so it cannot be combined with unit='bytes'. Drop pattern to read bytes, "
                'or unit to filter lines.'
            )
        check_pattern(pattern, caps)
    payload = await open_handle(store, handle)
    if isinstance(payload, str):
        return payload
    try:
        if payload.size == 0:
            return f'The stored result {show(payload.handle)} is empty (0 bytes).'
        if payload.index.is_binary:
            if pattern is not None:
                raise ModelRetry(
                    f'The stored result {show(payload.handle)} is binary, so it has no lines to filter. '
                    f'Use {offered_names().grep} to find bytes in it, or read it without pattern (a hex dump).'
                )
            return await _read_hex(payload, offset, limit, from_end, unit, caps)
        if unit == 'bytes':
            return await _read_text_bytes(payload, offset, limit, from_end, caps)
        # Lines are numbered from 1 and `offset` is the number of the first line shown, so any number the model
        # was shown can be passed back as it is (0 and 1 both mean the start). From the end it counts lines back.
        skip = offset if from_end else max(offset - 1, 0)
        notes: list[str] = []
        if limit > caps.max_lines:
            notes.append(f'limit capped at {caps.max_lines} lines')
            limit = caps.max_lines
        if pattern is not None:
            return await _read_matching(payload, pattern, skip, limit, from_end, caps, notes)
        return await _read_window(payload, skip, limit, from_end, caps, notes)
    except ModelRetry:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing store must not crash the run
        return storage_error(payload.handle, exc)


async def _read_window(
    payload: Payload, offset: int, limit: int, from_end: bool, caps: QueryLimits, notes: list[str]
) -> str:
    handle = payload.handle
    total = payload.index.line_count
    if offset >= total:
        side = 'from the end ' if from_end else ''
        return (
            f'offset={offset if from_end else offset + 1} {side}is past the end: the stored result {show(handle)} has '
            f'{total} lines. '
            + (f'Use an offset from 0 to {total - 1}.' if from_end else 'Use from_end=True to read the last lines.')
        )
    if from_end:
        end = total - offset
        first = max(0, end - limit)
    else:
        first = offset
        end = min(total, offset + limit)
    lines = await read_lines(payload, first, end - first, caps.max_line_chars)
    if not lines:  # pragma: no cover - only with an index that does not match its payload
        return f'The stored result {show(handle)} could not be read at offset {offset}.'
    width = number_width(lines)
    rendered = [render_line(line, width) for line in lines]
    fitted = fit(rendered, caps.max_output_chars - FRAME_RESERVE, keep_tail=from_end)
    if fitted < len(lines):
        notes.append(f'output capped at {caps.max_output_chars} characters')
        if from_end:
            lines, rendered = lines[-fitted:], rendered[-fitted:]
        else:
            lines, rendered = lines[:fitted], rendered[:fitted]
    first_shown, last_shown = lines[0].number, lines[-1].number
    which = 'last lines' if from_end and last_shown == total else 'lines'
    header = f'Stored result {show(handle)}: {which} {first_shown}-{last_shown} of {total} ({payload.size} bytes)'
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: list[str] = []
    if from_end:
        if first_shown > 1:
            footer.append(
                f'{counted(first_shown - 1, "earlier line")}. Previous page: '
                f'{read_call(handle, offset=total - first_shown + 1, from_end=True, **same_limit(limit))}.'
            )
        else:
            footer.append('This is the start of the result.')
        if last_shown < total:
            footer.append(
                f'{counted(total - last_shown, "later line")}: {read_call(handle, offset=last_shown + 1, **same_limit(limit))}.'
            )
    elif last_shown < total:
        footer.append(
            f'{counted(total - last_shown, "more line")}. Next page: {read_call(handle, offset=last_shown + 1, **same_limit(limit))}.'
        )
    else:
        footer.append(f'End of the result: line {total} is the last line.')
    return '\n'.join([header, *rendered, f'({" ".join(footer)})'])


async def _read_matching(
    payload: Payload, pattern: str, offset: int, limit: int, from_end: bool, caps: QueryLimits, notes: list[str]
) -> str:
    handle = payload.handle
    total = payload.index.line_count
    if offset >= total:
        shown_offset = offset if from_end else offset + 1
        return f'offset={shown_offset} is past the end: the stored result {show(handle)} has {total} lines.'
    matcher = Matcher.compile(pattern, is_regex=False)
    deadline = time.monotonic() + caps.time_budget
    caveats: list[str] = []
    further_back = ''
    if from_end:
        end_line = total - offset
        result = await grep_lines_backward(payload, matcher, end_line=end_line, max_hits=limit, deadline=deadline)
        scanned = f'lines {result.stopped_at_line + 1}-{end_line}'
        further_back = read_call(
            handle, offset=total - result.stopped_at_line, from_end=True, pattern=pattern, **same_limit(limit)
        )
        if result.out_of_time:
            caveats.append(
                f'Incomplete: the time budget ({caps.time_budget:g} s) ran out after reaching back to line '
                f'{result.stopped_at_line + 1}; lines 1-{result.stopped_at_line} were not searched. Continue further '
                f'back: {further_back}.'
            )
    else:
        result = await grep_lines(
            payload, matcher, first_line=offset, max_hits=limit, stop_when_full=True, deadline=deadline
        )
        last = result.stopped_at_line + 1 if result.mid_line else result.stopped_at_line
        scanned = f'lines {offset + 1}-{last}'
        if result.mid_line:
            scanned += f' (line {last} only before byte {result.stopped_at_byte})'
        if result.out_of_time:
            # Inside a line, only the grep tool starts at a byte: the same literal search, from there.
            resume = (
                grep_call(handle, pattern, start=result.stopped_at_byte)
                if result.mid_line
                else read_call(handle, offset=result.stopped_at_line + 1, pattern=pattern, **same_limit(limit))
            )
            caveats.append(incomplete(payload, result, caps.time_budget, resume))
    described = f'containing {show(pattern)} (literal, case-sensitive)'
    if not result.hits:
        text = f'No line {described} in {scanned} of the stored result {show(handle)} ({counted(total, "line")}).'
        if not result.complete:
            text = f'No line {described} in the part searched, {scanned} of the stored result {show(handle)} ({counted(total, "line")}).'
        if notes:
            text += f' [{"; ".join(notes)}]'
        if result.complete:
            text += (
                f' For a case-insensitive or regex search use {offered_names().grep} with is_regex=True, '
                "e.g. '(?i)error'."
            )
        return '\n'.join([*caveats, text])
    hits = result.hits
    # Only as many lines as can fit are rendered (the tail of them when reading from the end).
    most = max(1, (caps.max_output_chars - FRAME_RESERVE) // 8)
    hits = hits[-most:] if from_end else hits[:most]
    plain = await read_lines_at(payload, [(hit.line, hit.line_start) for hit in hits], caps.max_line_chars)
    lines = [
        await line_for_hit(payload, hit, caps) if line.cut else line for hit, line in zip(hits, plain, strict=True)
    ]
    width = number_width(lines) if not from_end else len(str(max(line.number for line in lines)))
    rendered = [render_line(line, width) for line in lines]
    budget = caps.max_output_chars - FRAME_RESERVE - sum(len(text) + 1 for text in caveats)
    fitted = fit(rendered, budget, keep_tail=from_end)
    if fitted < len(lines):
        notes.append(f'output capped at {caps.max_output_chars} characters')
        lines, rendered = (lines[-fitted:], rendered[-fitted:]) if from_end else (lines[:fitted], rendered[:fitted])
    which = 'the last ' if from_end else ''
    header = (
        f'Stored result {show(handle)}: {which}{counted(len(lines), "line")} {described}, from {scanned} of {total}'
    )
    header += f' [{"; ".join(notes)}]:' if notes else ':'
    footer: str | None
    if from_end:
        # Earlier matches may sit just before the first line shown when some were left out; otherwise everything
        # from where the scan reached back to is shown (and a scan the budget stopped says so first).
        full = len(lines) < len(result.hits) or len(result.hits) >= limit
        earlier = lines[0].number - 1 if full else result.stopped_at_line
        earlier_call = read_call(handle, offset=total - earlier, from_end=True, pattern=pattern, **same_limit(limit))
        if not earlier:
            footer = 'This reaches the start of the result.'
        else:
            footer = None if earlier_call == further_back and caveats else f'Earlier matches, if any: {earlier_call}.'
    elif len(lines) < len(result.hits) or (not result.complete and not result.out_of_time):
        # More hits than shown, or the scan stopped once full: the next page goes on after the last line shown.
        next_offset = lines[-1].number + 1 if len(lines) < len(result.hits) else result.stopped_at_line + 1
        footer = f'More may follow. Next page: {read_call(handle, offset=next_offset, pattern=pattern, **same_limit(limit))}.'
    elif result.complete:
        footer = 'No more matching lines: the scan reached the end.'
    else:
        footer = None  # the caveat above says where to go on
    return '\n'.join([*caveats, header, *rendered, *([f'({footer})'] if footer else [])])


async def _read_text_bytes(payload: Payload, offset: int, limit: int, from_end: bool, caps: QueryLimits) -> str:
    handle = payload.handle
    size = payload.size
    note = ''
    if limit > caps.max_bytes:
        note = f' [limit capped at {caps.max_bytes} bytes]'
        limit = caps.max_bytes
    if offset >= size:
        return f'offset={offset} is past the end: the stored result {show(handle)} has {size} bytes.'
    start = max(0, size - offset - limit) if from_end else offset
    length = (size - offset - start) if from_end else limit
    window = await read_byte_window(payload, start, length, utf8_edges=True)
    # Control characters are shown escaped, up to four characters each: the window ends where that fills the answer.
    decoded = window.data.decode('utf-8', 'surrogateescape')
    keep = visible_prefix(decoded, caps.max_output_chars - FRAME_RESERVE)
    if keep < len(decoded):
        decoded = decoded[:keep]
        window = ByteWindow(window.start, window.start + len(decoded.encode('utf-8', 'surrogateescape')), b'')
        note += f' [output capped at {caps.max_output_chars} characters]'
    text = visible(decoded.translate(INVALID_TO_REPLACEMENT))
    line = await line_of_offset(payload, window.start) + 1
    header = (
        f'Stored result {show(handle)}: bytes {window.start}-{window.end - 1} of {size}, starting in line {line}'
        f' (edges moved to whole UTF-8 characters){note}:'
    )
    footer: list[str] = []
    if window.end < size:
        footer.append(
            f'{counted(size - window.end, "more byte")}: {read_call(handle, unit="bytes", offset=window.end, limit=limit)}.'
        )
    else:
        footer.append('End of the result.')
    if from_end and window.start > 0:
        footer.append(
            f'Earlier bytes: {read_call(handle, unit="bytes", offset=size - window.start, limit=limit, from_end=True)}.'
        )
    return '\n'.join([header, text, f'({" ".join(footer)})'])


async def _read_hex(payload: Payload, offset: int, limit: int, from_end: bool, unit: str, caps: QueryLimits) -> str:
    handle = payload.handle
    size = payload.size
    max_rows = max(1, (caps.max_output_chars - FRAME_RESERVE) // _HEX_ROW_CHARS)
    rows_unit = unit == 'lines'
    scale = 16 if rows_unit else 1
    requested = limit
    limit = min(limit, max_rows if rows_unit else max_rows * 16)
    total_units = -(-size // 16) if rows_unit else size
    if offset >= total_units:
        what = f'{total_units} rows of 16 bytes' if rows_unit else f'{size} bytes'
        return f'offset={offset} is past the end: the binary stored result {show(handle)} has {what}.'
    first_unit = max(0, total_units - offset - limit) if from_end else offset
    last_unit = (total_units - offset) if from_end else min(total_units, offset + limit)
    start, end = first_unit * scale, min(size, last_unit * scale)
    data = await payload.read_range(start, end)
    head = data[:16] if start == 0 else await payload.read_range(0, 16)
    kind = sniff_type(head)
    described = f'{size} bytes' + (f', looks like a {kind}' if kind else '')
    units = 'offset and limit count 16-byte rows' if rows_unit else 'offset and limit count bytes'
    capped = f' [limit capped at {limit}]' if limit < requested else ''
    header = (
        f'Stored result {show(handle)} is binary ({described}). Hex dump of bytes {start}-{end - 1}; '
        f'offsets on the left are hexadecimal; {units}{capped}:'
    )
    footer: list[str] = []
    if last_unit < total_units:
        footer.append(
            f'{counted(size - end, "more byte")}. Next: {read_call(handle, offset=last_unit, limit=limit, unit=unit)}.'
        )
    else:
        footer.append('End of the result.')
    if from_end and first_unit > 0:
        footer.append(
            f'Earlier: {read_call(handle, offset=total_units - first_unit, limit=limit, from_end=True, unit=unit)}.'
        )
    return '\n'.join([header, *hex_dump(data, start), f'({" ".join(footer)})'])
