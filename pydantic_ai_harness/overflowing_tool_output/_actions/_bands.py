"""Size bands: which action a return of a given size runs (the actions live in `_action`, `_truncate`, `_spill` and
`_summarize`, and are named here too, as the public package names them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai.tools import RunContext

from ..._typing import is_instance, is_int
from .._rendering._render import estimate_tokens, has_ansi_codes
from .._request._context_window import model_context
from ._action import Action, Passthrough, action_chain
from ._spill import Spill
from ._summarize import Summarize, SummarizeFunc
from ._truncate import Truncate, TruncationStrategy

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
    'summarize_actions',
)

DEFAULT_THRESHOLD = 10_000
"""The default band's threshold, in characters."""


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
        if not is_instance(self.action, Action):
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


def default_bands() -> list[Band]:
    """The default: spill returns of 10,000 characters or more, truncating if the store fails."""
    return [Band(over=DEFAULT_THRESHOLD, action=Spill(then=Truncate()))]


def summarize_actions(band_lists: Iterable[Sequence[Band]]) -> tuple[Summarize, ...]:
    """Every `Summarize` action reachable from the bands (through `then` chains), in a deterministic order.

    Durable summarizer operations address their action by its position here: an int crosses a durable boundary,
    a model or a function does not, and every worker builds the same tuple from the same configuration.
    """
    found: list[Summarize] = []
    for bands in band_lists:
        for band in bands:
            for action in action_chain(band.action):
                if isinstance(action, Summarize) and not any(known is action for known in found):
                    found.append(action)
    return tuple(found)
