"""The shape sketch of a structured payload: keys and types, array lengths, two levels deep."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..._typing import is_array, is_dict, type_of

__all__ = ('shape_sketch',)


def shape_sketch(value: Any, depth: int = 2, plain: Callable[[Any], Any] | None = None) -> str:
    """Keys and types, array lengths, two levels deep: enough to know what to grep for.

    An array is sketched from a sample of its elements spread over all of it (`_SAMPLE`), their keys and types
    merged: a key missing from some is marked `?`, differing types are joined with `|`, and nested array lengths
    are given as a range. `plain` turns an object (a model, a dataclass) into its JSON-compatible form, and a NaN
    or an infinity into what the serializer writes for it (pydantic-core: `null`).
    """
    return _merged([value], depth, plain or (lambda item: item))


_MAX_KEYS = 12

_SAMPLE = 50
"""How many elements of an array, evenly spread over it (first and last included), its sketch merges."""

_MAX_ALTERNATIVES = 3
"""Past this many different types, a sketch says `mixed`."""

_SCALARS: dict[type, str] = {bool: 'bool', int: 'int', float: 'float', str: 'str', type(None): 'null'}


def _sample(items: Sequence[Any]) -> list[Any]:
    if len(items) <= _SAMPLE:
        return list(items)
    step = (len(items) - 1) / (_SAMPLE - 1)
    return [items[round(i * step)] for i in range(_SAMPLE)]


def _merged(values: list[Any], depth: int, plain: Callable[[Any], Any]) -> str:
    """One sketch for all of `values` (elements of the same place in a document)."""
    values = [_as_json(value, plain) for value in values]
    dicts = [value for value in values if is_dict(value)]
    arrays: list[Sequence[Any]] = [value for value in values if is_array(value)]
    alternatives: list[str] = []
    if dicts:
        alternatives.append(_merged_objects(dicts, depth, plain))
    if arrays:
        alternatives.append(_merged_arrays(arrays, depth, plain))
    for value in values:
        kind = type_of(value)
        name = _SCALARS.get(kind, kind.__name__)
        if not isinstance(value, (dict, list, tuple)) and name not in alternatives:
            alternatives.append(name)
    if len(alternatives) > _MAX_ALTERNATIVES:
        return 'mixed'
    return ' | '.join(alternatives)


def _as_json(value: Any, plain: Callable[[Any], Any]) -> Any:
    kind = type_of(value)
    if kind is float and not math.isfinite(value):
        return plain(value)  # no JSON number: the serializer writes something else in its place
    return value if kind in _SCALARS or kind in (dict, list, tuple) else plain(value)


def _count_range(counts: Sequence[int]) -> str:
    low, high = min(counts), max(counts)
    return str(low) if low == high else f'{low}-{high}'


def _merged_objects(dicts: list[dict[Any, Any]], depth: int, plain: Callable[[Any], Any]) -> str:
    if depth <= 0:
        return f'object({_count_range([len(d) for d in dicts])} keys)'
    keys: dict[Any, None] = {}
    for mapping in dicts:
        for key in mapping:
            keys.setdefault(key, None)
            if len(keys) > _MAX_KEYS:
                break
    shown: list[str] = []
    for key in list(keys)[:_MAX_KEYS]:
        present = [mapping[key] for mapping in dicts if key in mapping]
        optional = '?' if len(present) < len(dicts) else ''
        shown.append(f'{key}{optional}: {_merged(present, depth - 1, plain)}')
    most = max(len(mapping) for mapping in dicts)
    more = f', ... {most - _MAX_KEYS} more keys' if most > _MAX_KEYS else ''
    return f'{{{", ".join(shown)}{more}}}'


def _merged_arrays(arrays: list[Sequence[Any]], depth: int, plain: Callable[[Any], Any]) -> str:
    length = _count_range([len(array) for array in arrays])
    elements = [element for array in _sample(arrays) for element in _sample(array)]
    if not elements:
        return f'array[{length}]'
    if depth <= 0:
        return f'array[{length}]'
    return f'array[{length}] of {_merged(_sample(elements), depth, plain)}'  # elements sit at the array's own level
