"""Build bands, actions and the store from plain data (YAML / JSON agent specs), naming the bad field on error."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import timedelta
from typing import Any, TypeAlias, cast

from typing_extensions import NotRequired, TypedDict

from ._bands import Action, Band, Passthrough, Spill, Summarize, Truncate
from .stores import LocalFileStore
from .stores._ttl import normalize_ttl

__all__ = ('ActionSpec', 'BandSpec', 'StoreSpec', 'parse_action', 'parse_bands', 'parse_duration', 'parse_store')

ActionSpec: TypeAlias = str | dict[str, dict[str, Any] | None]
"""`'Spill'`, or `{'Truncate': {'max_chars': 2000, 'strategy': 'tail', 'then': ...}}`."""


class BandSpec(TypedDict):
    """A band as data: `{'over': 10000, 'action': 'Spill'}`."""

    over: int
    """The inclusive threshold."""

    action: ActionSpec
    """The action, by name or as `{Name: {field: value}}`."""


class StoreSpec(TypedDict):
    """The default `LocalFileStore` as data."""

    base_dir: NotRequired[str]
    """The store root; default: a per-user directory under the system temp dir."""

    cleanup_after: NotRequired[int | float | str]
    """Prune payloads older than this: seconds, or a duration such as `'6h'`, `'30m'`, `'2d'`."""


class SpecError(ValueError):
    """A spec value that cannot be turned into a configuration; the message names the field."""


_ACTIONS: dict[str, type[Action]] = {
    'passthrough': Passthrough,
    'truncate': Truncate,
    'spill': Spill,
    'summarize': Summarize,
}
_NOT_FROM_DATA = {'summarize'}  # a callable cannot come from YAML


def parse_action(spec: Any, where: str) -> Action:
    """Parse `'Spill'` or `{'Truncate': {...}}` into an action."""
    if isinstance(spec, (Passthrough, Truncate, Spill, Summarize)):
        return spec
    if isinstance(spec, str):
        name, options = spec, {}
    elif isinstance(spec, Mapping) and len(cast('Mapping[str, Any]', spec)) == 1:
        [(name, raw_options)] = cast('Mapping[str, Any]', spec).items()
        if raw_options is not None and not isinstance(raw_options, Mapping):
            raise SpecError(f'{where}.{name}: expected a mapping of options, got {type(raw_options).__name__}')
        options = cast('Mapping[str, Any]', raw_options or {})
    else:
        raise SpecError(
            f"{where}: expected an action name such as 'Spill' or a single-key mapping such as "
            f"{{'Truncate': {{'max_chars': 2000}}}}, got {spec!r}"
        )
    cls = _ACTIONS.get(str(name).lower())
    if cls is None:
        raise SpecError(f'{where}: unknown action {name!r}; expected one of Passthrough, Truncate, Spill, Summarize')
    kwargs: dict[str, Any] = dict(options)  # pyright: ignore[reportUnknownArgumentType]
    path = f'{where}.{cls.__name__}'
    allowed = {f.name for f in fields(cls)} - ({'summarize'} if cls is Summarize else set[str]())
    for key in kwargs:
        if key not in allowed:
            hint = ' (a callable cannot be given as data)' if key in _NOT_FROM_DATA else ''
            raise SpecError(f'{path}.{key}: unknown field{hint}; expected one of {", ".join(sorted(allowed))}')
    if 'then' in kwargs and kwargs['then'] is not None:
        kwargs['then'] = parse_action(kwargs['then'], f'{path}.then')
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SpecError(f'{path}: {exc}') from None


def parse_band(spec: Any, where: str) -> Band:
    """Parse `{'over': N, 'action': ...}` into a band."""
    if isinstance(spec, Band):
        return spec
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: expected a mapping with 'over' and 'action', got {spec!r}")
    band = cast('Mapping[str, Any]', spec)
    unknown = set(band) - {'over', 'action'}
    if unknown:
        raise SpecError(f"{where}.{min(unknown)}: unknown field; a band has only 'over' and 'action'")
    for required in ('over', 'action'):
        if required not in band:
            raise SpecError(f'{where}.{required}: missing')
    action = parse_action(band['action'], f'{where}.action')
    try:
        return Band(over=band['over'], action=action)
    except (TypeError, ValueError) as exc:
        raise SpecError(f'{where}.over: {exc}') from None


def parse_bands(spec: Any, where: str) -> list[Band]:
    """Parse a list of bands."""
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence):
        raise SpecError(f'{where}: expected a list of bands, got {type(spec).__name__}')
    return [parse_band(item, f'{where}[{index}]') for index, item in enumerate(spec)]  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]


_DURATION = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$')
_UNIT_SECONDS = {'s': 1, 'm': 60, 'h': 3_600, 'd': 86_400, 'w': 604_800, None: 1}


def parse_duration(value: Any, where: str) -> timedelta:
    """A positive duration: a `timedelta`, seconds as a number, or `'90s'`, `'30m'`, `'6h'`, `'2d'`, `'1w'`.

    The same rule as `LocalFileStore(cleanup_after=...)`, plus the strings; a bad value raises `SpecError` naming
    `where` and what is accepted.
    """
    accepted = 'seconds or a duration such as "90s", "30m", "6h", "2d", "1w", greater than zero'
    raw = value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise SpecError(f'{where}: expected {accepted}, got {value!r}')
        value = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    elif value is None or not isinstance(value, (int, float, timedelta)) or isinstance(value, bool):
        raise SpecError(f'{where}: expected {accepted}, got {type(value).__name__} {value!r}')
    try:
        ttl = normalize_ttl(value, where)
    except (TypeError, ValueError):
        raise SpecError(f'{where}: expected {accepted}, got {raw!r}') from None
    return cast('timedelta', ttl)  # None was refused above


def parse_store(spec: Any, where: str) -> LocalFileStore:
    """Build the `LocalFileStore` a spec describes."""
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: expected a mapping such as {{'base_dir': '/var/tmp/spills', 'cleanup_after': '6h'}}")
    options = cast('Mapping[str, Any]', spec)
    unknown = set(options) - {'base_dir', 'cleanup_after'}
    if unknown:
        raise SpecError(f"{where}.{min(unknown)}: unknown field; expected 'base_dir' or 'cleanup_after'")
    base_dir = options.get('base_dir')
    if base_dir is not None and not isinstance(base_dir, str):
        raise SpecError(f'{where}.base_dir: expected a directory path, got {type(base_dir).__name__} {base_dir!r}')
    cleanup = options.get('cleanup_after')
    return LocalFileStore(
        base_dir=base_dir,
        cleanup_after=parse_duration(cleanup, f'{where}.cleanup_after') if cleanup is not None else None,
    )
