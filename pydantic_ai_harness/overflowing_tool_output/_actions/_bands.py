"""Size bands and the actions they run: `Passthrough`, `Truncate`, `Spill`, `Summarize`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.tools import RunContext

from ..._typing import is_instance, is_int
from .._rendering._render import estimate_tokens, has_ansi_codes
from .._request._context_window import model_context

__all__ = (
    'Action',
    'Band',
    'Passthrough',
    'Spill',
    'Summarize',
    'SummarizeFunc',
    'Truncate',
    'TruncationStrategy',
    'action_chain',
    'default_bands',
    'sorted_bands',
)

DEFAULT_TRUNCATE_CHARS = 5_000
"""The default character budget of `Truncate`: half the default spill threshold."""

DEFAULT_PREVIEW_CHARS = 1_000
"""The default character budget of a spill preview."""

MIN_TRUNCATE_CHARS = 200
"""Below this a truncation marker no longer fits with any useful text around it."""

DEFAULT_THRESHOLD = 10_000
"""The default band's threshold, in characters."""


class TruncationStrategy(str, Enum):  # noqa: UP042 - public: `str()` of a member stays what it was
    """Which part of an oversized text `Truncate` keeps."""

    head = 'head'
    """Keep the beginning: headers, schemas, the start of a file."""

    tail = 'tail'
    """Keep the end: build and test output, where the errors land last."""

    head_tail = 'head_tail'
    """Keep both ends and elide the middle (the default)."""


@dataclass(frozen=True)
class Passthrough:
    """Leave the matching return untouched: an explicit no-op for a band or a `per_tool` list."""

    then: Action | None = None
    """Accepted like every action's `then`, and never used: leaving a return as it is always succeeds."""

    def __post_init__(self) -> None:
        _check_then(self.then, 'Passthrough')


@dataclass(frozen=True)
class Truncate:
    """Clamp the text to `max_chars` characters, marker included. Lossy and free.

    Cuts prefer a nearby line boundary. The marker tells the model how much was omitted out of how
    much, and how to see the rest. A binary payload cannot be truncated: `then` runs instead, or the
    value is left as it is.
    """

    strategy: TruncationStrategy = TruncationStrategy.head_tail
    """Which part of the text to keep."""

    max_chars: int = DEFAULT_TRUNCATE_CHARS
    """The character budget of the result, marker included. Always characters, even with `over_tokens`."""

    then: Action | None = None
    """What to do when truncation cannot run (a binary payload)."""

    keep_tail_lines: int = 0
    """Keep the last this many lines of a text whole, within `max_chars`; the strategy spends what is left.

    For command output whose verdict (an exit code, a summary) comes last. When those lines and the marker do not
    fit in `max_chars`, the text is cut as with `strategy=tail`. A structured value is cut between whole items
    instead, as always.
    """

    def __post_init__(self) -> None:
        if is_instance(self.strategy, str) and not is_instance(self.strategy, TruncationStrategy):
            try:
                object.__setattr__(self, 'strategy', TruncationStrategy(self.strategy))
            except ValueError:
                choices = ', '.join(repr(s.value) for s in TruncationStrategy)
                raise ValueError(f'Truncate.strategy must be one of {choices}, got {self.strategy!r}') from None
        if not is_int(self.max_chars):
            raise TypeError(f'Truncate.max_chars must be an int, got {type(self.max_chars).__name__}')
        if self.max_chars < MIN_TRUNCATE_CHARS:
            raise ValueError(
                f'Truncate.max_chars must be at least {MIN_TRUNCATE_CHARS} (room for the marker), got {self.max_chars}'
            )
        if not is_int(self.keep_tail_lines):
            raise TypeError(f'Truncate.keep_tail_lines must be an int, got {type(self.keep_tail_lines).__name__}')
        if self.keep_tail_lines < 0:
            raise ValueError(f'Truncate.keep_tail_lines must be 0 or more, got {self.keep_tail_lines}')
        _check_then(self.then, 'Truncate')


def _default_fallback() -> Action:
    return Truncate()


@dataclass(frozen=True)
class Spill:
    """Store the full payload and show the model a preview and a handle to page back with. Lossless.

    The model reads the stored payload with the `read_tool_result` and `grep_tool_result` tools the
    capability registers. When the store cannot take the write (an error or a timeout), `then` runs:
    by default a [`Truncate`][pydantic_ai_harness.overflowing_tool_output.Truncate], so a failing store
    never lets an oversized payload through.
    """

    preview_chars: int = DEFAULT_PREVIEW_CHARS
    """The character budget of the preview the model sees instead of the payload.

    The header (sizes, handle) and the paging guidance always come first, about 450 characters; the budget left after
    them goes to the lines that look important, then the first and last lines. Below about 600 there is little room
    for lines.
    """

    timeout: float = 30.0
    """Seconds a store write may take before it counts as failed and `then` runs."""

    then: Action | None = field(default_factory=_default_fallback)
    """What to do when the store cannot take the write. `None` lets the original through (with a warning)."""

    def __post_init__(self) -> None:
        if not is_int(self.preview_chars):
            raise TypeError(f'Spill.preview_chars must be an int, got {type(self.preview_chars).__name__}')
        if self.preview_chars < MIN_TRUNCATE_CHARS:
            raise ValueError(f'Spill.preview_chars must be at least {MIN_TRUNCATE_CHARS}, got {self.preview_chars}')
        _check_seconds(self.timeout, 'Spill.timeout')
        _check_then(self.then, 'Spill')


SummarizeFunc: TypeAlias = Callable[[str, str], str | Awaitable[str]]
"""A custom summarizer: `(tool_name, text) -> summary`, sync or async."""


@dataclass(frozen=True)
class Summarize:
    """Replace the payload with a summary written by a model: one call (or a bounded map-reduce). Lossy.

    With no `model` the run's own model writes the summary. By default the full original is also
    written to the store and the summary names its handle, so nothing is lost.
    """

    model: Model | str | None = None
    """The summarizing model: a `Model` or a model name such as `'openai:gpt-4o-mini'`. `None`: the run's model."""

    summarize: SummarizeFunc | None = None
    """A custom `(tool_name, text) -> summary` function (sync or async) that replaces the built-in prompt."""

    then: Action | None = field(default_factory=_default_fallback)
    """What to do when no summary can be made (a binary payload, an error, empty output, no budget). By default a
    [`Truncate`][pydantic_ai_harness.overflowing_tool_output.Truncate], as for `Spill`: a failed reduction never
    lets an oversized payload through. `None` lets the original through (with a warning)."""

    max_input_chars: int = 100_000
    """The largest text sent in one chunk request; longer payloads are summarized in chunks, then combined.

    The combining request sends the chunk summaries together, which can be longer than this.
    """

    max_chunks: int = 8
    """The most chunks a payload is split into; text beyond them is covered only by the original in the store."""

    keep_original: bool = True
    """Also write the full original to the store and name its handle in the summary."""

    store_timeout: float = 30.0
    """Seconds the write of the original may take; past it the summary is kept without the original."""

    def __post_init__(self) -> None:
        _check_int(self.max_input_chars, 'Summarize.max_input_chars', 1_000)
        _check_int(self.max_chunks, 'Summarize.max_chunks', 1)
        if not is_instance(self.keep_original, bool):
            raise TypeError(f'Summarize.keep_original must be True or False, got {self.keep_original!r}')
        _check_seconds(self.store_timeout, 'Summarize.store_timeout')
        if self.summarize is not None and not callable(self.summarize):
            raise TypeError('Summarize.summarize must be a callable `(tool_name, text) -> str`')
        if isinstance(self.model, str):
            _check_model_name(self.model)
        _check_then(self.then, 'Summarize')


Action: TypeAlias = Passthrough | Truncate | Spill | Summarize
"""Any reduction action."""

_ACTION_TYPES = (Passthrough, Truncate, Spill, Summarize)


def _check_seconds(value: object, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f'{where} must be a positive number of seconds, got {type(value).__name__} {value!r}')
    if not value > 0:  # also refuses NaN
        raise ValueError(f'{where} must be a positive number of seconds, got {value!r}')


def _check_int(value: object, where: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'{where} must be an int, got {type(value).__name__} {value!r}')
    if value < minimum:
        raise ValueError(f'{where} must be at least {minimum}, got {value}')


def _check_model_name(model: str) -> None:
    """Refuse a model name no provider serves, or one whose provider's package is missing, naming the setting.

    The provider is only looked up, not built: its credentials may still be on their way (set later in the
    environment, say), and are checked by the first request as usual.
    """
    from pydantic_ai.models import infer_model, parse_model_id
    from pydantic_ai.providers import infer_provider_class

    provider, _ = parse_model_id(model)
    try:
        if provider is None:
            infer_model(model)  # a name without a provider: 'test', or a legacy name pydantic-ai still knows
        else:
            infer_provider_class(provider)
    except ImportError as exc:
        raise ImportError(f'Summarize.model={model!r}: {exc}') from None
    except Exception as exc:  # noqa: BLE001 - pydantic-ai says why (unknown model, unknown provider) in its own types
        raise ValueError(f'Summarize.model={model!r} is not a model pydantic-ai knows: {exc}') from None


def _check_then(then: object, owner: str) -> None:
    if then is not None and not isinstance(then, _ACTION_TYPES):
        raise TypeError(
            f'{owner}.then must be an action (Passthrough, Truncate, Spill or Summarize) or None, '
            f'got {type(then).__name__}'
        )


@dataclass(frozen=True)
class Band:
    """A size band: returns whose measured size reaches `over` run `action`."""

    over: int
    """The inclusive threshold, in characters (or tokens with `over_tokens=True`); with `share`, the fallback used
    when the model's context window is unknown. Bands are tried from the largest `over` down."""

    action: Action
    """What to do with a return in this band."""

    _: KW_ONLY

    share: float | None = None
    """Opt-in: the threshold as this share of the model's context window, in tokens (the return is measured in
    tokens for this band); `over` applies when the window is unknown. Between 0 (exclusive) and 1."""

    tighten: float = 0.0
    """With `share`: how much the share shrinks as the window fills; the share used is
    `share * (1 - tighten * used)`, `used` being the filled fraction of the window (0 to 1). Between 0 and 1."""

    def __post_init__(self) -> None:
        if not is_int(self.over):
            raise TypeError(f'Band.over must be an int, got {type(self.over).__name__}')
        if self.over < 0:
            raise ValueError(f'Band.over must not be negative, got {self.over}')
        if self.share is not None and not (is_instance(self.share, (int, float)) and 0 < self.share <= 1):
            raise ValueError(f'Band.share must be a number in (0, 1], got {self.share!r}')
        if not (is_instance(self.tighten, (int, float)) and 0 <= self.tighten <= 1):
            raise ValueError(f'Band.tighten must be a number in [0, 1], got {self.tighten!r}')
        if self.tighten and self.share is None:
            raise ValueError('Band.tighten needs Band.share: it tightens the share of the context window')
        if not is_instance(self.action, _ACTION_TYPES):
            raise TypeError(
                f'Band.action must be Passthrough(), Truncate(), Spill() or Summarize(), got {type(self.action).__name__}'
            )


def sorted_bands(bands: Sequence[Band], where: str) -> tuple[Band, ...]:
    """Validate a band list and return it sorted by descending threshold.

    Raises:
        TypeError: an item is not a `Band`.
        ValueError: two bands share a threshold.
    """
    seen: dict[int, int] = {}
    for index, band in enumerate(bands):
        if not is_instance(band, Band):
            raise TypeError(f'{where}[{index}] must be a Band, got {type(band).__name__}')
        if band.over in seen:
            raise ValueError(
                f'{where}[{index}] repeats the threshold over={band.over} of {where}[{seen[band.over]}]; '
                'each band needs its own threshold'
            )
        seen[band.over] = index
    return tuple(sorted(bands, key=lambda band: band.over, reverse=True))


def uses_context(bands: tuple[Band, ...]) -> bool:
    """Whether a band's threshold is a share of the model's context window."""
    return any(band.share is not None for band in bands)


def plainly_below(
    text: str,
    bands: tuple[Band, ...],
    over_tokens: bool,
    tokenizer: Callable[[str], int] | None,
    strip_ansi: bool,
) -> bool:
    """Whether a plain string return is below every one of its tool's `bands` and needs no cleaning: nothing to do.

    Only sizes known without running a tokenizer qualify; everything else takes the full path.
    """
    if over_tokens and tokenizer is not None:
        return False
    if strip_ansi and has_ansi_codes(text):
        return False
    if not bands:
        return True
    if uses_context(bands):
        return False  # a share of the context window is known only in the run
    size = estimate_tokens(text) if over_tokens else len(text)
    return size < bands[-1].over


def context_of(ctx: RunContext[Any], bands: tuple[Band, ...]) -> tuple[int | None, float | None]:
    """The model's context window in tokens and its filled fraction, each `None` when unknown or not needed."""
    if not uses_context(bands):
        return None, None
    return model_context(ctx)


def context_threshold(band: Band, window: int | None, used: float | None) -> int | None:
    """A `share` band's threshold in tokens for a `window`-token context filled to `used`; `None`: use `over`."""
    if band.share is None or window is None or window <= 0:
        return None
    filled = min(max(used or 0.0, 0.0), 1.0)
    return max(1, int(window * band.share * (1 - band.tighten * filled)))


def pick_band(
    bands: tuple[Band, ...],
    size: int,
    *,
    tokens: Callable[[], int] | None = None,
    window: int | None = None,
    used: float | None = None,
) -> Band | None:
    """The first band, from bands sorted descending by `over`, whose threshold `size` reaches.

    A `share` band with a known `window` compares the return's token count (`tokens()`, counted once) to its
    share of the window instead.
    """
    counted: int | None = None
    for band in bands:
        threshold = context_threshold(band, window, used)
        if threshold is None or tokens is None:
            if size >= band.over:
                return band
            continue
        counted = tokens() if counted is None else counted
        if counted >= threshold:
            return band
    return None


def action_chain(action: Action | None) -> Iterator[Action]:
    """`action`, then its `then` fallback, and so on (a `Passthrough` ends the chain: it cannot fail)."""
    while action is not None:
        yield action
        action = None if isinstance(action, Passthrough) else action.then


def default_bands() -> list[Band]:
    """The default: spill returns of 10,000 characters or more, truncating if the store fails."""
    return [Band(over=DEFAULT_THRESHOLD, action=Spill(then=Truncate()))]
