"""Build bands, actions and the store from plain data (YAML / JSON agent specs), naming the bad field on error."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NotRequired, TypeAlias, TypeVar

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from .._typing import is_mapping, is_sequence
from ._actions._bands import Action, Band, Passthrough, Spill, Summarize, Truncate
from ._redaction._secrets import SecretRedaction
from ._request._aging import Aging
from ._request._compaction import LosslessCompaction
from ._request._step_budget import StepBudget
from .stores import LocalFileStore, OverflowStore, WorkspaceSpill
from .stores._ttl import normalize_ttl

__all__ = (
    'ActionSpec',
    'BandSpec',
    'StoreSpec',
    'parse_action',
    'parse_bands',
    'parse_duration',
    'parse_redaction',
    'parse_step_budget',
    'parse_store',
    'parse_workspace',
)

_T = TypeVar('_T')
_D = TypeVar('_D', bound='DataclassInstance')

ActionSpec: TypeAlias = str | dict[str, dict[str, Any] | None]
"""`'Spill'`, or `{'Truncate': {'max_chars': 2000, 'strategy': 'tail', 'then': ...}}`."""


class BandSpec(TypedDict):
    """A band as data: `{'over': 10000, 'action': 'Spill'}`."""

    over: int
    """The inclusive threshold."""

    action: ActionSpec
    """The action, by name or as `{Name: {field: value}}`."""

    share: NotRequired[float]
    """The threshold as a share of the model's context window (see `Band.share`)."""

    tighten: NotRequired[float]
    """How much the share shrinks as the window fills (see `Band.tighten`)."""


class StoreSpec(TypedDict):
    """A `LocalFileStore` as data; `{'RedisStore': {...}}` and `{'ObjectStore': {...}}` name the fleet stores."""

    base_dir: NotRequired[str]
    """The store root; default: a per-user directory under the system temp dir."""

    cleanup_after: NotRequired[int | float | str]
    """Prune payloads older than this: seconds, or a duration such as `'6h'`, `'30m'`, `'2d'`."""


_STORE_FIELDS: dict[str, frozenset[str]] = {
    'LocalFileStore': frozenset({'base_dir', 'cleanup_after'}),
    'RedisStore': frozenset({'url', 'namespace', 'cleanup_after', 'max_bytes', 'socket_timeout'}),
    'ObjectStore': frozenset({'url', 'config', 'client_options', 'prefix', 'cleanup_after', 'max_bytes'}),
}
"""The fields each store takes as data (clients and backends are objects, so they come as URLs)."""


class SpecError(ValueError):
    """A spec value that cannot be turned into a configuration; the message names the field."""


_ACTIONS: dict[str, type[Passthrough | Truncate | Spill | Summarize]] = {
    'passthrough': Passthrough,
    'truncate': Truncate,
    'spill': Spill,
    'summarize': Summarize,
}
_NOT_FROM_DATA = {'summarize'}  # a callable cannot come from YAML


def parse_action(spec: Any, where: str) -> Action:
    """Parse `'Spill'` or `{'Truncate': {...}}` into an action."""
    if isinstance(spec, Action):
        return spec
    options: Mapping[str, Any] = {}
    if isinstance(spec, str):
        name = spec
    elif is_mapping(spec) and len(spec) == 1:
        [(name, raw_options)] = spec.items()
        if raw_options is not None and not is_mapping(raw_options):
            raise SpecError(f'{where}.{name}: expected a mapping of options, got {type(raw_options).__name__}')
        options = raw_options or {}
    else:
        raise SpecError(
            f"{where}: expected an action name such as 'Spill' or a single-key mapping such as "
            f"{{'Truncate': {{'max_chars': 2000}}}}, got {spec!r}"
        )
    cls = _ACTIONS.get(str(name).lower())
    if cls is None:
        raise SpecError(f'{where}: unknown action {name!r}; expected one of Passthrough, Truncate, Spill, Summarize')
    kwargs: dict[str, Any] = dict(options)
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
    """Parse `{'over': N, 'action': ..., 'share': S, 'tighten': T}` (the last two optional) into a band."""
    if isinstance(spec, Band):
        return spec
    if not is_mapping(spec):
        raise SpecError(f"{where}: expected a mapping with 'over' and 'action', got {spec!r}")
    band = spec
    unknown = set(band) - {'over', 'action', 'share', 'tighten'}
    if unknown:
        raise SpecError(
            f"{where}.{min(unknown)}: unknown field; a band has only 'over', 'action', 'share' and 'tighten'"
        )
    for required in ('over', 'action'):
        if required not in band:
            raise SpecError(f'{where}.{required}: missing')
    action = parse_action(band['action'], f'{where}.action')
    try:
        return Band(over=band['over'], action=action, share=band.get('share'), tighten=band.get('tighten', 0.0))
    except (TypeError, ValueError) as exc:
        field_name = next((name for name in ('share', 'tighten') if f'Band.{name}' in str(exc)), 'over')
        raise SpecError(f'{where}.{field_name}: {exc}') from None


def parse_bands(spec: Any, where: str) -> list[Band]:
    """Parse a list of bands."""
    if isinstance(spec, (str, bytes)) or not is_sequence(spec):
        raise SpecError(f'{where}: expected a list of bands, got {type(spec).__name__}')
    return [parse_band(item, f'{where}[{index}]') for index, item in enumerate(spec)]


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
    if ttl is None:  # normalize_ttl maps only None to None, and None was refused above
        raise SpecError(f'{where}: expected {accepted}, got {raw!r}')
    return ttl


def parse_store(spec: Any, where: str) -> OverflowStore:
    """Build the store a spec describes: `{'base_dir': ..., 'cleanup_after': ...}` (a `LocalFileStore`), or
    `{'LocalFileStore' | 'RedisStore' | 'ObjectStore': {field: value}}`.
    """
    if not is_mapping(spec):
        raise SpecError(
            f"{where}: expected a mapping such as {{'base_dir': '/var/tmp/spills', 'cleanup_after': '6h'}} "
            f"or {{'RedisStore': {{'url': 'redis://localhost:6379/0'}}}}"
        )
    if len(spec) == 1 and next(iter(spec)) in _STORE_FIELDS:
        [(kind, raw)] = spec.items()
        if raw is not None and not is_mapping(raw):
            raise SpecError(f'{where}.{kind}: expected a mapping of options, got {type(raw).__name__}')
        return _build_store(kind, raw or {}, f'{where}.{kind}')
    return _build_store('LocalFileStore', spec, where)


def _build_store(kind: str, options: Mapping[str, Any], where: str) -> OverflowStore:
    allowed = _STORE_FIELDS[kind]
    unknown = set(options) - allowed
    if unknown:
        kinds = ', '.join(sorted(_STORE_FIELDS))
        raise SpecError(
            f'{where}.{min(unknown)}: unknown field; {kind} takes {", ".join(sorted(allowed))} '
            f'(a store of another kind is named as a single key: one of {kinds})'
        )
    kwargs: dict[str, Any] = dict(options)
    if kwargs.get('cleanup_after') is not None:
        kwargs['cleanup_after'] = parse_duration(kwargs['cleanup_after'], f'{where}.cleanup_after')
    for name, expected in (
        ('base_dir', 'a directory path'),
        ('url', 'a URL'),
        ('namespace', 'a string'),
        ('prefix', 'a string'),
    ):
        if name in kwargs and kwargs[name] is not None and not isinstance(kwargs[name], str):
            raise SpecError(f'{where}.{name}: expected {expected}, got {type(kwargs[name]).__name__} {kwargs[name]!r}')
    if kind != 'LocalFileStore' and not kwargs.get('url'):
        raise SpecError(f'{where}.url: missing; {kind} is built from a URL as data')
    try:
        if kind == 'LocalFileStore':
            return LocalFileStore(**kwargs)
        if kind == 'RedisStore':
            from .stores._redis import RedisStore

            return RedisStore(**kwargs)
        return _object_store(kwargs, where)
    except ImportError as exc:
        extra = 'redis' if kind == 'RedisStore' else 's3'
        raise SpecError(f'{where}: {kind} needs the `{extra}` extra ({exc})') from None
    except (TypeError, ValueError) as exc:
        raise SpecError(f'{where}: {exc}') from None


def _object_store(kwargs: dict[str, Any], where: str) -> OverflowStore:
    from obstore.store import from_url

    from .stores._object import ObjectStore

    backend_options: dict[str, Any] = {}
    for name in ('config', 'client_options'):
        value = kwargs.pop(name, None)
        if value is not None and not is_mapping(value):
            raise SpecError(f'{where}.{name}: expected a mapping, got {type(value).__name__}')
        if value:
            backend_options[name] = dict(value)
    url = kwargs.pop('url')
    try:
        backend = from_url(url, **backend_options)
    except Exception as exc:  # noqa: BLE001 - obstore raises its own error types for bad URLs and options
        raise SpecError(f'{where}.url: obstore could not open {url!r}: {exc}') from None
    return ObjectStore(store=backend, **kwargs)


def parse_workspace(spec: Any, where: str) -> WorkspaceSpill | None:
    """`true` (the default `WorkspaceSpill`), `false` / `null` (never the workspace), or its fields as a mapping."""
    options = _switch_options(spec, WorkspaceSpill, where, "{'directory': '.overflow'}")
    if not isinstance(options, dict):
        return options
    if options.get('cleanup_after') is not None:
        options['cleanup_after'] = parse_duration(options['cleanup_after'], f'{where}.cleanup_after')
    return _built(WorkspaceSpill, options, where)


def parse_redaction(spec: Any, where: str) -> SecretRedaction | None:
    """`true` (the default rules), `false` / `null` (off), or `{'preset': ..., 'patterns': {kind: regex},
    'keep_original_in': <a store spec>}`.
    """
    options = _switch_options(spec, SecretRedaction, where, "{'patterns': {'Ticket': 'TKT-[0-9]+'}}")
    if not isinstance(options, dict):
        return options
    if options.get('keep_original_in') is not None:
        options['keep_original_in'] = parse_store(options['keep_original_in'], f'{where}.keep_original_in')
    patterns = options.get('patterns')
    if patterns is not None and not isinstance(patterns, Mapping):
        raise SpecError(f'{where}.patterns: expected a mapping of kind -> RE2 pattern, got {type(patterns).__name__}')
    return _built(SecretRedaction, options, where)


def parse_aging(spec: Any, where: str) -> Aging | None:
    """`true` (the default `Aging`), `false` / `null` (off), or its fields as a mapping."""
    options = _switch_options(spec, Aging, where, "{'after_turns': 4, 'batch_tokens': 8000}")
    if not isinstance(options, dict):
        return options
    return _built(Aging, options, where)


def parse_compaction(spec: Any, where: str) -> LosslessCompaction | None:
    """`true` (the default `LosslessCompaction`), `false` / `null` (off), or its fields as a mapping."""
    options = _switch_options(spec, LosslessCompaction, where, "{'headroom': 0.2}")
    if not isinstance(options, dict):
        return options
    return _built(LosslessCompaction, options, where)


def parse_step_budget(spec: Any, where: str) -> StepBudget | None:
    """`null`, a size (`40000`), or `{'max_size': 40000, 'action': <an action spec>}`."""
    if spec is None or isinstance(spec, StepBudget):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = {'max_size': spec}
    elif not is_mapping(spec):
        raise SpecError(
            f"{where}: expected a size such as 40000 or {{'max_size': 40000, 'action': 'Spill'}}, got {spec!r}"
        )
    options = _known_fields(spec, ('action', 'max_size'), where)
    if 'max_size' not in options:
        raise SpecError(f'{where}.max_size: missing')
    if options.get('action') is not None:
        options['action'] = parse_action(options['action'], f'{where}.action')
    return _built(StepBudget, options, where)


def _switch_options(spec: Any, setting: type[_D], where: str, example: str) -> _D | dict[str, Any] | None:
    """A setting that is on, off, or on with options: `null` / `false` is off (`None`), an instance of `setting`
    passes through, `true` is its defaults (no options), and a mapping gives its fields, checked by name.
    """
    if spec is None or spec is False:
        return None
    if isinstance(spec, setting):
        return spec
    if spec is True:
        return {}
    if not is_mapping(spec):
        raise SpecError(f'{where}: expected true, false or a mapping such as {example}, got {spec!r}')
    return _known_fields(spec, _field_names(setting), where)


def _field_names(setting: type[DataclassInstance]) -> set[str]:
    return {f.name for f in fields(setting)}


def _known_fields(spec: Mapping[str, Any], allowed: Collection[str], where: str) -> dict[str, Any]:
    """`spec` as keyword arguments, or a `SpecError` naming its first unknown field and the known ones."""
    unknown = set(spec) - set(allowed)
    if unknown:
        raise SpecError(f'{where}.{min(unknown)}: unknown field; expected one of {", ".join(sorted(allowed))}')
    return dict(spec)


def _built(factory: Callable[..., _T], options: dict[str, Any], where: str) -> _T:
    """`factory(**options)`, its `TypeError` / `ValueError` re-raised as a `SpecError` naming `where`."""
    try:
        return factory(**options)
    except (TypeError, ValueError) as exc:
        raise SpecError(f'{where}: {exc}') from None
