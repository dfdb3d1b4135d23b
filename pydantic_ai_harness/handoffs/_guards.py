"""Type guards for values whose shape is only known at run time: parsed JSON, user-supplied sequences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

__all__ = ('is_array', 'is_object', 'is_sequence')


def is_object(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether `value` is a JSON object (a `dict`; its values are unknown, its keys taken to be strings)."""
    return isinstance(value, dict)


def is_array(value: object) -> TypeGuard[list[Any]]:
    """Whether `value` is a JSON array (a `list` of unknown values)."""
    return isinstance(value, list)


def is_sequence(value: object) -> TypeGuard[Sequence[Any]]:
    """Whether `value` is a sequence of unknown items that is not text (`str` or `bytes`)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)
