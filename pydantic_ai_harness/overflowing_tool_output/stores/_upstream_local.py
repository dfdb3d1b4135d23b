"""Spills upstream `pydantic-ai-harness` 0.62 wrote into a `LocalFileStore` root, read where this store finds none.

Upstream's `LocalFileStore` keeps a payload as one plain file, `<root>/<run id>/<tool call id>.<retry>` (and
`.<retry>.content` for a return's content), its handle being that key: each `/`-separated segment with every run of
characters outside `[A-Za-z0-9._-]` replaced by `_` (an empty, `.` or `..` segment becomes `_`), and the default root
is the one this store uses (`pyai_harness_overflow-<uid>` in the temp directory). A history saved under upstream
names those handles; this module opens the file such a handle names, with the store's own rules: every component
opened relative to the root without following symlinks, regular files only, nothing that is this store's own
(`.aliases/`, temp files; its payloads' names never end like upstream's). Upstream's files are read, never written or deleted here.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from typing import TypeVar

from ._line_index import LineIndex, LineIndexBuilder
from ._local_fs import NOT_FOUND, O_NONBLOCK, READ_BLOCK, Dir, open_root, read_exact, walk
from ._protocol import HandleNotFoundError

__all__ = ('MAX_UPSTREAM_SEGMENTS', 'index_of_open_file', 'upstream_names', 'with_upstream_file')

_T = TypeVar('_T')

MAX_UPSTREAM_SEGMENTS = 8
"""Most segments an upstream handle is looked up with (upstream's own have two)."""

_UNSAFE = re.compile(r'[^A-Za-z0-9._-]+')
_LAST = re.compile(r'.+\.\d+(?:\.content)?')
"""The last segment of every handle upstream's capability wrote: `<tool call id>.<retry>`, `.<retry>.content`."""


def _segment(part: str) -> str:
    cleaned = _UNSAFE.sub('_', part)
    return '_' if cleaned in ('', '.', '..') else cleaned


def upstream_names(handle: str) -> list[str] | None:
    """The path components (below the root) of the file upstream's `LocalFileStore` keeps `handle` in; `None` when
    `handle` is not one upstream's capability writes or would reach one of this store's own files.
    """
    if len(handle) > 4096:
        return None
    names = [_segment(part) for part in handle.split('/') if part]
    if not 2 <= len(names) <= MAX_UPSTREAM_SEGMENTS or _LAST.fullmatch(names[-1]) is None:
        return None
    if any(name.startswith('.') or len(name.encode()) > 255 for name in names):
        return None  # `.aliases/`, temp files: the store's own
    return names


def with_upstream_file(root_path: str, names: list[str], use: Callable[[int, Dir, list[str]], _T]) -> _T:
    """`use(fd, directory, names)` on the regular file `names` reach below the root, opened without following any
    symlink; `HandleNotFoundError` when there is none.
    """
    root = open_root(root_path, create=False)
    directory: Dir | None = None
    try:
        try:
            directory = walk(root, names, create=False)
            fd = directory.open(names[-1], os.O_RDONLY | O_NONBLOCK)
        except OSError:
            raise HandleNotFoundError(NOT_FOUND) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise HandleNotFoundError(NOT_FOUND)
            return use(fd, directory, names)
        finally:
            os.close(fd)
    finally:
        if directory is not None and directory is not root:
            directory.close()
        root.close()


def index_of_open_file(fd: int) -> LineIndex:
    """The line index of an open upstream file, built in memory: no sidecar is written beside upstream's files."""
    size = os.fstat(fd).st_size
    builder = LineIndexBuilder()
    position = 0
    while position < size:
        block = read_exact(fd, position, READ_BLOCK)
        if not block:
            break
        builder.feed(block)
        position += len(block)
    return builder.finish()
