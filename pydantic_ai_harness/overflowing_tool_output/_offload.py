"""Off-loop helpers: CPU-bound steps on large inputs run in a worker thread, so the event loop keeps serving."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sized
from typing import Any, TypeVar

import anyio
import pydantic
from pydantic_ai.tools import RunContext
from typing_extensions import TypeIs

__all__ = ('OFF_LOOP_BYTES', 'in_worker', 'large_container', 'large_text', 'large_texts', 'off_loop')

_T = TypeVar('_T')

OFF_LOOP_BYTES = 256 * 1024
"""Payloads larger than this are cleaned, indented and previewed in a worker thread (outside durable workflow code),
so one large return never holds up the other tasks of the event loop."""

_OFF_LOOP_STRIP_CHARS = 32 * 1024
"""Texts longer than this are ANSI-stripped in a worker thread: on hostile text (a sequence every two characters)
stripping costs a few microseconds per sequence."""

_LARGE_CONTAINER = 1024
"""A value holding a list, tuple or dict of more members than this (itself, or one of its first few members) is
rendered in a worker thread."""


async def off_loop(ctx: RunContext[Any], work: Callable[[], _T], *, large: bool) -> _T:
    """Run a CPU-bound step in a worker thread when its input is large, in place otherwise.

    Workflow code under a durable engine must not start threads, so there it always runs in place.
    """
    if large and not ctx.in_durable_context:
        return await anyio.to_thread.run_sync(work)
    return work()


async def in_worker(work: Callable[[], object]) -> None:
    """Run `work` in a worker thread (a task of a task group running beside a write)."""
    await anyio.to_thread.run_sync(work)


def large_text(value: object) -> bool:
    """Whether `value` is a text long enough to clean off the loop."""
    return isinstance(value, str) and len(value) > _OFF_LOOP_STRIP_CHARS


def large_texts(texts: Iterable[str]) -> bool:
    """Whether texts are together long enough to tokenize off the loop (a tokenizer costs about as much as stripping)."""
    return sum(map(len, texts)) > _OFF_LOOP_STRIP_CHARS


def large_container(value: object) -> bool:
    """Whether a return is a large container, or holds one at its first level (`{'items': [...]}`, a model)."""
    if _is_large(value):
        return True
    members: Iterable[object] = ()
    if _is_dict(value):
        members = value.values()
    elif isinstance(value, pydantic.BaseModel):
        members = (member for _, member in value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        members = (getattr(value, field.name, None) for field in dataclasses.fields(value))
    return any(_is_large(member) for member in itertools.islice(members, 64))


def _is_dict(value: object) -> TypeIs[Mapping[Any, Any]]:
    return isinstance(value, dict)


def _is_large(value: object) -> bool:
    # `issubclass` rather than `isinstance`: the length is all that is read, so no element type is needed.
    return isinstance(value, Sized) and issubclass(type(value), (list, tuple, dict)) and len(value) > _LARGE_CONTAINER
