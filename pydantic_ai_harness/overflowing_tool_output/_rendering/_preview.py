"""What the model sees in place of a spilled payload: a header, how to read the rest, and a preview.

Whether that preview is a text's or binary data's is decided from the stored bytes by `looks_binary`, the decision
the store's line index records too, so the preview and the query tools always agree; control characters in a
text are shown escaped (`_visible.py`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from .._query_tools._names import offered_names
from ..stores._sniff import SNIFF_BYTES, binary_format, looks_binary
from ._important_lines import LINE_CHARS, ImportantLine, important_lines
from ._markers import PREVIEW_FOLLOWS, SpillSummary, kept_for, spill_header, spill_how_to_read
from ._visible import INVALID_TO_REPLACEMENT, visible, visible_prefix

__all__ = (
    'binary_preview',
    'count_lines',
    'detect_binary_type',
    'line_shape',
    'text_preview',
    'workspace_file_line',
)


def _clip(line: str) -> str:
    keep = visible_prefix(line, LINE_CHARS)
    return visible(line) if keep == len(line) else f'{visible(line[:keep])}[... line cut, {len(line)} chars]'


def _numbered(lines: list[tuple[int, str]]) -> str:
    return ''.join(f'{number}| {_clip(line)}\n' for number, line in lines)


_WINDOW_BYTES = 64 * 1024
"""The first and last lines of a preview come from this much of each end of the stored text."""

_SHOWN_BYTES = 160
"""Preview lines longer than this (in bytes) are cut, with the byte offset to read the rest from."""


@dataclass(frozen=True)
class _Shown:
    """A line of the stored text, as the preview shows it."""

    number: int
    text: str
    start: int
    """The byte where the line starts."""

    whole: bool
    """Whether `text` is the whole line (else the line goes on past the window it was read from)."""

    cut: bool = False
    """Whether only the start of the line is shown (with a marker saying where to read on)."""


def _windows(text: str | None, pieces: Sequence[bytes] | None, nbytes: int) -> tuple[bytes, bytes, int]:
    """The first and last `_WINDOW_BYTES` or so of the stored text (UTF-8), and the byte where the last ones start."""
    if pieces is not None:
        head = _first_bytes(pieces, _WINDOW_BYTES)
        tail = _last_bytes(pieces, _WINDOW_BYTES)
    else:
        source = text or ''
        head = source[:_WINDOW_BYTES].encode('utf-8', 'surrogatepass')
        tail = source[-_WINDOW_BYTES:].encode('utf-8', 'surrogatepass') if source else b''
    if len(head) >= nbytes:
        return head, head, 0
    return head, tail, nbytes - len(tail)


def _first_bytes(pieces: Sequence[bytes], limit: int) -> bytes:
    taken: list[bytes] = []
    size = 0
    for piece in pieces:
        taken.append(piece[: limit - size])
        size += len(taken[-1])
        if size >= limit:
            break
    return b''.join(taken)


def _last_bytes(pieces: Sequence[bytes], limit: int) -> bytes:
    taken: list[bytes] = []
    size = 0
    for piece in reversed(pieces):
        need = limit - size
        taken.append(piece[-need:] if len(piece) > need else piece)
        size += len(taken[-1])
        if size >= limit:
            break
    return b''.join(reversed(taken))


def _line_text(line: bytes) -> tuple[str, int]:
    """The shown part of a line, escaped (`visible`), and how many of its bytes that is: at most `_SHOWN_BYTES`
    bytes and as many characters once escaped, cut on a character boundary.
    """
    cut = min(len(line), _SHOWN_BYTES)
    while 0 < cut < len(line) and cut > _SHOWN_BYTES - 3 and (line[cut] & 0xC0) == 0x80:
        cut -= 1  # not inside a UTF-8 sequence
    # `surrogateescape` maps each invalid byte to one character, so the bytes of a cut are counted exactly.
    text = line[:cut].decode('utf-8', 'surrogateescape')
    keep = visible_prefix(text, _SHOWN_BYTES)
    if keep < len(text):
        text = text[:keep]
        cut = len(text.encode('utf-8', 'surrogateescape'))
    return visible(text.translate(INVALID_TO_REPLACEMENT)), cut


def _render_shown(line: _Shown) -> str:
    return f'{line.number}| {line.text}\n'


def _shown(number: int, line: bytes, start: int, whole: bool) -> _Shown:
    text, shown_bytes = _line_text(line)
    cut = shown_bytes < len(line) or not whole
    if cut:
        text += f"[... line cut: read on with unit='bytes', offset={start + shown_bytes}]"
    return _Shown(number, text, start, whole, cut)


_BRACKETS = frozenset({b'[', b']', b'{', b'}', b'],', b'},'})
"""Lines of a JSON layout that hold only a bracket: a preview leaves them out (the shape sketch says as much)."""

_WORD = re.compile(rb'[\w\x80-\xff]+')
"""A word of a line shape: letters, digits, underscores, and any non-ASCII UTF-8 (so `é` does not split a word)."""

_JSON_MEMBER = re.compile(rb'\s*"(?:[^"\\]|\\.)*"\s*:')
"""An object member on its own line of a JSON layout (`"next_cursor":null,`): each says something of its own."""

HEAD_REPEATS = 3
"""The first lines of a preview stop before a line of a shape they have shown this many times already."""

TAIL_REPEATS = 2
"""The last lines of a preview stop before a line of a shape they have shown this many times already."""


def line_shape(line: bytes, *, json: bool = False) -> bytes | None:
    """A line with every word (`_WORD`) replaced by one `w`: rows of one record layout (`SKU-16698: bolt costs
    723.21 EUR`, a CSV row, a compact JSON record) share a shape, prose rarely does. `None` for a line that is no
    row: a blank one, or a member of an object in a JSON layout (`json`).

    More rows of a shape already shown tell a model nothing it can use, and a preview is paid for again on every
    later request: the head and the tail stop at the first row past `HEAD_REPEATS` / `TAIL_REPEATS` of one shape.
    A trailing comma is left out, so the last element of an array has the shape of the others.
    """
    line = line[:_SHOWN_BYTES].rstrip().removesuffix(b',')
    if not line or (json and _JSON_MEMBER.match(line)):
        return None
    return _WORD.sub(b'w', line)


def _head_tail_lines(
    windows: tuple[bytes, bytes, int], total_lines: int, budget: int, shown: set[int], *, json: bool = False
) -> tuple[list[_Shown], list[_Shown]]:
    """As many lines from the start (about 60% of `budget`) and then the end as fit, except `shown` ones, each
    stopping where it would repeat a line shape too often (`line_shape`).

    `json`: the text is a JSON layout, whose bracket-only lines are left out.
    """
    head_window, tail_window, tail_base = windows
    whole_text = tail_base == 0 and head_window is tail_window
    head: list[_Shown] = []
    shapes: Counter[bytes] = Counter()
    used = 0
    position = 0
    number = 1
    while number <= total_lines and position < len(head_window):
        end = head_window.find(b'\n', position)
        whole = end != -1 or whole_text
        if end == -1:
            end = len(head_window)
        if number not in shown and not (json and head_window[position:end].strip() in _BRACKETS):
            shape = line_shape(head_window[position:end], json=json)
            if shape is not None and shapes[shape] >= HEAD_REPEATS:
                break
            line = _shown(number, head_window[position:end], position, whole)
            cost = len(_render_shown(line))
            if used + cost > budget * 3 // 5:
                break
            if shape is not None:
                shapes[shape] += 1
            head.append(line)
            used += cost
        if not whole:
            break
        position = end + 1
        number += 1
    tail: list[_Shown] = []
    shapes.clear()
    end = len(tail_window) - 1 if tail_window.endswith(b'\n') else len(tail_window)
    number = total_lines
    while number > (head[-1].number if head else 0) and end >= 0:
        start = tail_window.rfind(b'\n', 0, end) + 1
        if start == 0 and tail_base > 0:
            break  # the line begins before the window: too long to show from the end
        if number not in shown and not (json and tail_window[start:end].strip() in _BRACKETS):
            shape = line_shape(tail_window[start:end], json=json)
            if shape is not None and shapes[shape] >= TAIL_REPEATS:
                break
            line = _shown(number, tail_window[start:end], tail_base + start, True)
            cost = len(_render_shown(line))
            if used + cost > budget:
                break
            if shape is not None:
                shapes[shape] += 1
            tail.append(line)
            used += cost
        number -= 1
        end = start - 1
    return head, tail[::-1]


def _label(which: str, lines: list[_Shown]) -> str:
    """`First lines (2-4)`, or `First line (2)` for one."""
    first, last = lines[0].number, lines[-1].number
    return f'{which} line ({first})' if first == last else f'{which} lines ({first}-{last})'


def count_lines(text: str) -> int:
    """Lines as an editor counts them: a trailing newline does not start a new line."""
    if not text:
        return 0
    return text.count('\n') + (0 if text.endswith('\n') else 1)


def _important_block(found: list[ImportantLine], noisy: bool) -> str:
    block = 'Lines that look important (errors, failures, exit status):\n'
    block += _numbered([(line.number, line.text) for line in sorted(found)])
    return block + ('(many more lines match; grep for what you need)\n' if noisy else '')


def text_preview(
    summary: SpillSummary,
    text: str | None,
    budget: int,
    *,
    shape: str | None = None,
    data: bytes | None = None,
    important: tuple[list[ImportantLine], bool] | None = None,
    pieces: Sequence[bytes] | None = None,
) -> str:
    """The model-visible replacement for a spilled text or structured payload.

    The stored text is `text`, or the UTF-8 `pieces` it was written in (a structured value's layout); `data` is its
    UTF-8, if at hand; `important` the result of `important_lines` when the caller scanned already (beside the
    store write, say).
    """
    windows = _windows(text, pieces, summary.nbytes)
    head = windows[0][:SNIFF_BYTES]
    if looks_binary(head, whole=summary.nbytes <= SNIFF_BYTES):
        # The store takes these bytes for binary data (the same decision, on the same bytes): so does the preview.
        return _binary_preview(
            summary.tool_name,
            summary.handle,
            head,
            summary.nbytes,
            None,
            path=summary.path,
            query_tools=summary.query_tools,
            expires_after=summary.expires_after,
        )
    one_line = summary.lines <= 1 and not summary.json
    parts = [spill_header(summary), spill_how_to_read(one_line=one_line)]
    if summary.path is not None:
        # Without the query tools the file line replaces the paging hint, and closes the header's bracket.
        file_line = workspace_file_line()
        parts[1:] = [parts[1], file_line] if summary.query_tools else [file_line[1:]]
    used = sum(len(p) for p in parts)
    previewless = len(parts)
    if shape:
        sketch = f'Shape: {shape}\n'
        if used + len(sketch) <= budget:
            parts.append(sketch)
            used += len(sketch)
    if important is None:
        important = important_lines(data if data is not None else b''.join(pieces or ()) if text is None else text)
    found, noisy = important
    found = list(found)
    shown: set[int] = set()
    # Important lines may take up to two thirds of what is left; the least important go first when short.
    allowance = max(0, (budget - used) * 2 // 3)
    while found:
        block = _important_block(found, noisy)
        if len(block) <= allowance:
            parts.append(block)
            used += len(block)
            shown = {line.number for line in found}
            break
        found.remove(max(found, key=lambda line: (line.rank, -line.number)))
    head, tail = _head_tail_lines(windows, summary.lines, max(0, budget - used - 60), shown, json=summary.json)
    if head and one_line:
        # One line has no line numbers worth showing: its start, with the byte offset to read on from (or all of it).
        parts.append(f'{"Start of the one line" if head[0].cut else "The one line"}:\n{head[0].text}')
    elif head:
        parts.append(f'{_label("First", head)[:-1]} of {summary.lines}):\n' + ''.join(map(_render_shown, head)))
    if tail:
        parts.append(f'{_label("Last", tail)}:\n' + ''.join(map(_render_shown, tail)))
    if len(parts) == previewless:
        # `preview_chars` left no room for any line: the header must not promise a preview.
        parts[0] = parts[0].replace(f'; {PREVIEW_FOLLOWS}.', '.')
    return ''.join(parts).rstrip('\n')


def detect_binary_type(data: bytes, declared: str | None = None) -> str:
    """A short description of what the bytes are, from their signature (and the declared media type)."""
    known = binary_format(data[:16])
    if known is not None:
        return f'{known[0]}, {known[1]}'
    if declared:
        return f'declared as {declared}'
    return 'unknown binary data'


def binary_preview(
    tool_name: str,
    handle: str,
    data: bytes,
    declared: str | None,
    *,
    budget: int,
    path: str | None = None,
    query_tools: bool = True,
    expires_after: timedelta | None = None,
) -> str:
    """The model-visible replacement for spilled bytes (`path`: its file in the workspace, if any).

    Bytes that are text (`looks_binary` says no: `subprocess` output, a text file read as bytes) get the preview of
    a text, within `budget` characters, as the query tools read them as text; others the binary one.
    """
    head = data[:SNIFF_BYTES]
    if looks_binary(head, whole=len(data) <= SNIFF_BYTES):
        return _binary_preview(
            tool_name,
            handle,
            head,
            len(data),
            declared,
            path=path,
            query_tools=query_tools,
            expires_after=expires_after,
        )
    lines = data.count(b'\n') + (0 if data.endswith(b'\n') or not data else 1)
    summary = SpillSummary(
        tool_name=tool_name,
        handle=handle,
        chars=len(data),
        tokens=math.ceil(len(data) / _BYTES_PER_TOKEN),
        lines=lines,
        nbytes=len(data),
        path=path,
        query_tools=query_tools,
        expires_after=expires_after,
    )
    return text_preview(summary, None, budget, data=data, pieces=(data,))


_BYTES_PER_TOKEN = 4
"""The token estimate of bytes, as the bands measure them (`_render.CHARS_PER_TOKEN`)."""


def _binary_preview(
    tool_name: str,
    handle: str,
    head: bytes,
    size: int,
    declared: str | None,
    *,
    path: str | None,
    query_tools: bool,
    expires_after: timedelta | None,
) -> str:
    """The preview of binary data of `size` bytes starting with `head`."""
    kind = detect_binary_type(head, declared)
    sample = head[:32].hex(' ')
    names = offered_names()
    how = (
        f"{names.read}(handle, unit='bytes', offset=0, limit=512) shows a hex dump of a byte range; "
        f'{names.grep}(handle, pattern) searches it for text.'
    )
    if path is not None:
        where = workspace_file_line()[1:-2] + '.'
        how = f'{how} {where}' if query_tools else where
    return (
        f'[`{tool_name}` returned binary data ({size} bytes, {kind}), which cannot be shown as text. '
        f"Saved verbatim{kept_for(expires_after)} under handle '{handle}'.\n"
        f'{how}]\n'
        f'First bytes: {sample}'
    )


def workspace_file_line() -> str:
    """The preview line saying that the handle is also a file the agent's own tools can open.

    The handle is the file's path, so the path is not repeated: it is stated once, in the header.
    """
    return (
        "[That handle is also the file's path, relative to your workspace's working directory: your own file and "
        'shell tools work on it (grep -n, sed -n, head; jq for JSON).]\n'
    )
