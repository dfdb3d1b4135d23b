"""Runtime type checks for values whose static type cannot be trusted: user configuration, tool results, JSON.

pyright reads a typed field and calls an `isinstance` check on it unnecessary, yet a value from a user, a tool or
the wire may be anything. These checks take `object`, so the check stands where it is needed without a cast or an
ignore comment, and they narrow containers of unknown origin to elements of type `Any`, not pyright's `Unknown`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from typing_extensions import TypeIs

__all__ = ('is_array', 'is_bytes_like', 'is_dict', 'is_instance', 'is_int', 'is_list', 'is_mapping', 'is_sequence')


def is_instance(value: object, kind: type[Any] | tuple[type[Any], ...]) -> bool:
    """`isinstance`, for a value typed as `kind` that a caller may still have got wrong."""
    return isinstance(value, kind)


def is_int(value: object) -> TypeIs[int]:
    """An `int` that is not a `bool` (`True` is an `int` to Python, never a size to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_mapping(value: object) -> TypeIs[Mapping[Any, Any]]:
    """Any mapping."""
    return isinstance(value, Mapping)


def is_dict(value: object) -> TypeIs[dict[Any, Any]]:
    """A `dict` (a JSON object, once parsed)."""
    return isinstance(value, dict)


def is_list(value: object) -> TypeIs[list[Any]]:
    """A `list` (a JSON array, once parsed)."""
    return isinstance(value, list)


def is_array(value: object) -> TypeIs[list[Any] | tuple[Any, ...]]:
    """A `list` or a `tuple`: what renders as a JSON array."""
    return isinstance(value, (list, tuple))


def is_sequence(value: object) -> TypeIs[Sequence[Any]]:
    """Any sequence, `str` and `bytes` included (callers that mean a list of items rule those out first)."""
    return isinstance(value, Sequence)


def is_bytes_like(value: object) -> TypeIs[bytes | bytearray | memoryview[int]]:
    """`bytes`, `bytearray` or `memoryview`: what `bytes(value)` copies as it is."""
    return isinstance(value, (bytes, bytearray, memoryview))


def is_set(value: object) -> TypeIs[set[Any] | frozenset[Any]]:
    """A `set` or a `frozenset` (rendered as a sorted JSON array)."""
    return isinstance(value, (set, frozenset))


def type_of(value: object) -> type[Any]:
    """`type(value)`, typed for lookups in tables keyed by type (pyright leaves a bare `type(Any)` unknown)."""
    return type(value)


def is_object(value: object) -> TypeIs[dict[str, Any]]:
    """A JSON object, once parsed (a `dict`; its keys are strings by JSON's rules)."""
    return isinstance(value, dict)


def is_items(value: object) -> TypeGuard[Sequence[Any]]:
    """A sequence of items that is not text: `str` and `bytes` are sequences too, of characters and bytes."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))
