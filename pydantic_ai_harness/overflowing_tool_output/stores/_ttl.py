"""The one rule every store's `cleanup_after` follows: a positive `timedelta` or a positive number of seconds."""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = ('normalize_ttl',)


def normalize_ttl(value: object, where: str) -> timedelta | None:
    """`value` as a positive `timedelta`, or `None` to keep payloads forever.

    Accepts a `timedelta` or a number of seconds (`int` / `float`, not `bool`). Zero or negative would
    delete a payload the moment the model is told it is saved, so they are refused like any other type.

    Raises:
        TypeError: `value` is not `None`, a `timedelta` or a number; the message names `where`.
        ValueError: `value` is zero, negative or not finite; the message names `where`.
    """
    if value is None:
        return None
    accepted = 'a positive timedelta, a positive number of seconds, or None to keep payloads forever'
    if isinstance(value, timedelta):
        ttl = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f'{where} must be {accepted}; got {value!r}')
        try:
            ttl = timedelta(seconds=value)
        except OverflowError:
            raise ValueError(f'{where} must be {accepted}; got {value!r}, which is too large') from None
    else:
        raise TypeError(f'{where} must be {accepted}; got {type(value).__name__} {value!r}')
    if ttl <= timedelta(0):
        raise ValueError(f'{where} must be {accepted}; got {value!r}, which would delete payloads as they are written')
    return ttl
