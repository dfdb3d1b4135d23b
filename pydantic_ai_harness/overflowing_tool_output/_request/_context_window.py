"""The serving model's context window as the window-relative rules read it: a positive size in tokens, or unknown.

A model profile is data from a provider, a price list or a user, and a bad value in it (`inf`, `nan`, `'128000'`,
`-1`) must not turn a rule off or fail the request: it is reported once, naming the value, and treated as unknown,
so every rule falls back to its absolute thresholds.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import AbstractModel
from pydantic_ai.tools import RunContext

from ..._typing import is_int
from .._events import warn

__all__ = ('model_context', 'usable_window', 'window_used')

_REPORTED: set[tuple[str, str]] = set()
_REPORTED_LIMIT = 1_000
"""Bad values already reported, by model: a long-lived process reports each once, and keeps at most this many."""
_REPORTED_LOCK = threading.Lock()


def usable_window(value: object, model_name: str) -> int | None:
    """`value` when it is a usable context window (a positive int), else `None`, reported once per model and value."""
    if is_int(value) and value > 0:
        return value
    if value is not None:
        key = (model_name, repr(value)[:100])
        with _REPORTED_LOCK:
            first = key not in _REPORTED and len(_REPORTED) < _REPORTED_LIMIT
            if first:
                _REPORTED.add(key)
        if first:
            warn(
                f'The context window of model {model_name!r} is {key[1]}, not a positive number of tokens; the '
                'window-relative settings (share bands, the aging batch share) treat it as unknown'
            )
    return None


def window_used(messages: Sequence[ModelMessage], window: int | None) -> float | None:
    """How full `window` was at the latest response (its input plus output tokens); `None` when unknown."""
    if window is None:
        return None
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            tokens = message.usage.input_tokens + message.usage.output_tokens
            return tokens / window if tokens else None
    return None


def model_context(ctx: RunContext[Any], model: AbstractModel | None = None) -> tuple[int | None, float | None]:
    """The context window in tokens of `model` (default: the run's) and its filled fraction, each `None` if unknown."""
    try:
        serving = model if model is not None else ctx.model
        messages = ctx.messages
    except UserError:  # a durable run context can leave the live model out at an activity boundary
        return None, None
    try:
        window = usable_window(serving.context_window, serving.model_name)
    except Exception as exc:  # noqa: BLE001 - a profile that cannot even be read is an unknown window
        warn(f'The context window of the model could not be read ({exc!r}); treating it as unknown')
        return None, None
    return window, window_used(messages, window)
