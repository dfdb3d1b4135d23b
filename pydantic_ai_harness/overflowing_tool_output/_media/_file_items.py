"""Documents given as bytes inside a list (a return value, or `ToolReturn.content`) are reduced one by one, each as a
lone return of it would be.

A list holding files is sent natively and measured by its text alone, so a 300-page PDF in it used to pass whole.
Here each document in it (a `BinaryContent` that is not an image: a PDF, a Word file, a CSV given as bytes) goes
through the band loop on its own, measured by its bytes, under a key of its own (`file<N>`, its place in the list):
a PDF over its band is stored unchanged and replaced by its header and its text reduced by the band's action, its
pages viewable; a document within its band stays. Images are the image band's; text items stay where they are.
Pure wiring: the loop passes the list and a way to reduce one file, this answers the list to go on with.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import BinaryContent

from ..._typing import is_array
from .._actions._unit import Reduced
from .._rendering._render import Rendered
from ._pdf import is_pdf

__all__ = ('FileItems', 'ReduceFile', 'documents_in', 'holds_documents', 'reduce_file_items')

ReduceFile = Callable[[Rendered, BinaryContent, str], Awaitable[Reduced | None]]
"""Reduces one file through the band loop: `(rendered, the file, the name of its key's part)`; `None`: it stays."""


def _is_document(item: object) -> bool:
    """A file given as bytes that is not an image: a document as pydantic-ai knows them, or a PDF by its signature."""
    if not isinstance(item, BinaryContent) or item.is_image:
        return False
    return item.is_document or is_pdf(item.data[:1024], item.media_type)


def holds_documents(value: object) -> bool:
    """Whether `value` is a list or tuple holding a document given as bytes."""
    return is_array(value) and any(_is_document(item) for item in value)


def documents_in(value: object) -> list[BinaryContent]:
    """The documents given as bytes in `value`, a list or tuple (none in anything else)."""
    return [item for item in value if _is_document(item)] if is_array(value) else []


@dataclass(frozen=True)
class FileItems:
    """A list with its documents reduced."""

    items: list[Any]
    """The list, each reduced document replaced by what the model reads for it (its header and text)."""

    reduced: list[Reduced]
    """What each reduced document became, in order."""

    document_bytes: int
    """The bytes of the reduced documents."""

    def stored(self) -> Reduced | None:
        """The first reduction that stored something, to name in the return's metadata (`<prefix>_handle`)."""
        return next((reduced for reduced in self.reduced if reduced.handle is not None), None)

    def handles(self) -> tuple[tuple[str, str | None], ...]:
        """The handle and key of every document stored, in list order (`<prefix>_file_handles`): each is known to
        the query tools, not only the first.
        """
        return tuple((reduced.handle, reduced.key) for reduced in self.reduced if reduced.handle is not None)

    def images(self) -> tuple[dict[str, Any], ...]:
        """What the view tool can show of them (a PDF's pages), as the image band records its originals."""
        return tuple(record for reduced in self.reduced for record in reduced.images)


async def reduce_file_items(items: Sequence[Any], reduce_file: ReduceFile) -> FileItems | None:
    """`items` with each document reduced by `reduce_file`; `None` when none was (each stays, as does the list)."""
    out: list[Any] = []
    reduced: list[Reduced] = []
    nbytes = 0
    for index, item in enumerate(items):
        if not _is_document(item):
            out.append(item)
            continue
        assert isinstance(item, BinaryContent)
        rendered = Rendered('binary', '', data=item.data, media_type=item.media_type)
        result = await reduce_file(rendered, item, f'file{index}')
        if result is None or not isinstance(result.value, str):
            out.append(item)
            continue
        out.append(result.value)
        reduced.append(result)
        nbytes += len(item.data)
    return FileItems(out, reduced, nbytes) if reduced else None
