"""The rules a model request is held to before it is sent, as one protocol, and the loop that applies them in turn.

Each rule sees the request as the rules before it left it and answers with the messages it replaces, by `id` of the
message it replaces. The loop runs every rule in a guard of its own: one that raises is reported and skipped, and
what the others did stands. Secret redaction runs first and fails closed in itself (a text it cannot mask is
withheld), so no later rule failing can send a masked text unmasked.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.models import AbstractModel
from pydantic_ai.tools import RunContext

from .._actions._summarize import OverflowConfigurationError
from .._events import OverflowingToolOutputWarning, warn
from .._redaction._withhold import UNCHECKED, WITHHELD_KEY, SecretWithholding
from .._rendering._markers import redaction_failed_marker
from ._context_window import model_context
from ._failure_text import FailureReducer, reduce_failures

__all__ = (
    'FailureBands',
    'FailureRedaction',
    'HeldRequest',
    'Replacements',
    'RequestRule',
    'Selected',
    'hold_request',
)

Selected = Callable[[str], Awaitable[bool]]
"""Whether the capability touches the named tool (its `tool_filter`)."""


@dataclass
class HeldRequest:
    """A model request being held to the rules, and what every rule reads of it."""

    ctx: RunContext[Any]
    """The run."""

    messages: list[ModelMessage]
    """The request's messages, as the rules before the current one left them."""

    exempt: frozenset[str]
    """The query tools, by the names this request offers them under (their answers are already bounded)."""

    selected: Selected
    """The `tool_filter`, matched against each tool's definition in this request."""

    model: AbstractModel | None = None
    """The model serving this attempt (a `ModelFallback` may have picked another than the run's); `None`: the run's."""

    replaced: dict[int, ModelMessage] = field(default_factory=dict[int, ModelMessage])
    """`id(original message)` -> its newest replacement, over every rule so far."""

    _originals: dict[int, ModelMessage] = field(default_factory=dict[int, ModelMessage], repr=False)
    """`id(original message)` -> the message itself (kept alive while the request is held, so ids stay unique)."""

    @cached_property
    def context(self) -> tuple[int | None, float | None]:
        """The serving model's context window in tokens and its filled fraction, each `None` when unknown."""
        return model_context(self.ctx, self.model)

    def take(self, replacements: Mapping[int, ModelMessage]) -> None:
        """Apply one rule's replacements (keyed by `id` of a message in `messages`)."""
        if not replacements:
            return
        originals = {id(new): original for original, new in self.replaced.items()}
        for message in self.messages:
            new = replacements.get(id(message))
            if new is not None:
                original = originals.get(id(message), id(message))
                self.replaced[original] = new
                self._originals.setdefault(original, message)
        self.messages = [replacements.get(id(message), message) for message in self.messages]

    def resolve(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`messages` (the originals) with every replacement the rules made."""
        return [self.replaced.get(id(message), message) for message in messages]

    def pairs(self) -> list[tuple[ModelMessage, ModelMessage]]:
        """Each replaced message with its newest replacement."""
        return [(self._originals[original], new) for original, new in self.replaced.items()]


class RequestRule(Protocol):
    """One rule of the request side: returns the messages it replaces, keyed by `id` of the message in `request`."""

    @property
    def name(self) -> str:
        """What the rule is called in a warning."""
        ...

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The replacements this rule makes in `request.messages` (empty: none)."""
        ...


async def hold_request(rules: Sequence[RequestRule], request: HeldRequest) -> None:
    """Apply each rule in turn to `request`; a rule that raises is reported and skipped, the others' work stands."""
    for rule in rules:
        try:
            replacements = await rule.hold(request)
        except (OverflowConfigurationError, OverflowingToolOutputWarning):
            raise  # a configuration that cannot work, or one of our warnings a filter turned into an error
        except Exception as exc:  # noqa: BLE001 - the run must never die here, nor the other rules' work be lost
            warn(f'OverflowingToolOutput: {rule.name} failed and left the request as it was for it: {exc!r}')
            continue
        request.take(replacements)


@dataclass(frozen=True)
class FailureRedaction:
    """Secrets masked in the failure texts of the step (`ModelRetry`, `ToolFailed`), failing closed.

    pydantic-ai builds these texts after every tool hook has run, so they are masked here, before the request is
    sent. A tool whose `tool_filter` check raises is masked too, and a text that masking raises on is withheld
    whole: a failure here never sends a secret.
    """

    withholding: SecretWithholding
    """The compiled `redact_secrets` setting."""

    mask: Callable[[RunContext[Any], str], Awaitable[tuple[str, dict[str, int]]]]
    """Mask one text (on or off the event loop, by its size): the masked text and the counts of what it withheld."""

    name: str = 'secret redaction of failure texts'
    """What the rule is called in a warning."""

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The step's last request with its failure texts masked."""
        new = await reduce_failures(request.messages, self._reducer(request))
        return {} if new is None else {id(request.messages[-1]): new}

    def _reducer(self, request: HeldRequest) -> FailureReducer:
        async def masked(call: ToolCallPart, text: str) -> tuple[str, dict[str, Any]] | None:
            if call.tool_name in request.exempt:
                return None  # our own query tools: they show nothing a tool returned unmasked
            if not await _selected_or_unsure(request, call.tool_name):
                return None
            try:
                new, withheld = await self.mask(request.ctx, text)
            except Exception as exc:  # noqa: BLE001 - fail closed: what could not be masked is not sent
                warn(
                    f'Secret redaction raised on the failure text of `{call.tool_name}`, so the text was withheld '
                    f'from the model: {exc!r}'
                )
                marker = redaction_failed_marker('failure text', call.tool_name, type(exc).__name__)
                return marker, {WITHHELD_KEY: {UNCHECKED: 1}}
            return (new, {WITHHELD_KEY: withheld}) if withheld else None

        return masked


async def _selected_or_unsure(request: HeldRequest, tool_name: str) -> bool:
    """Whether `tool_filter` selects the tool, or `True` when it raises: a filter that cannot decide masks."""
    try:
        return await request.selected(tool_name)
    except Exception:  # noqa: BLE001 - the user's filter raising must not unmask a secret
        return True


@dataclass(frozen=True)
class FailureBands:
    """The failure texts of the step reduced by their tool's bands, as a return would be."""

    reduce: Callable[[HeldRequest, ToolCallPart, str], Awaitable[tuple[str, dict[str, Any]] | None]]
    """Reduce one failure text: the new text and its metadata notes, or `None` to keep it."""

    name: str = 'the bands of failure texts'
    """What the rule is called in a warning."""

    async def hold(self, request: HeldRequest) -> Mapping[int, ModelMessage]:
        """The step's last request with its oversized failure texts reduced."""

        async def reduced(call: ToolCallPart, text: str) -> tuple[str, dict[str, Any]] | None:
            if call.tool_name in request.exempt or not await request.selected(call.tool_name):
                return None
            return await self.reduce(request, call, text)

        new = await reduce_failures(request.messages, reduced)
        return {} if new is None else {id(request.messages[-1]): new}


class Replacements:
    """The messages the rules replaced in a run's history, by identity of the message replaced, so a further attempt
    at the same request (core starts each from the messages `before_model_request` left) sends what the history holds
    now, and the rules are not applied to the originals again. An entry lives as long as the message it replaces.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref[ModelMessage], ModelMessage]] = {}

    def add(self, pairs: Sequence[tuple[ModelMessage, ModelMessage]]) -> None:
        """Record each `(old, new)` pair."""
        table = self._by_id
        for old, new in pairs:
            key = id(old)

            def forget(ref: weakref.ref[ModelMessage], key: int = key) -> None:
                entry = table.get(key)
                if entry is not None and entry[0] is ref:
                    del table[key]

            table[key] = (weakref.ref(old, forget), new)

    def latest(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`messages` with each replaced one swapped for its newest replacement."""
        return [self._latest(message) for message in messages]

    def _latest(self, message: ModelMessage) -> ModelMessage:
        for _ in range(64):  # a chain is one replacement per rule and attempt; never a cycle, but stay bounded
            entry = self._by_id.get(id(message))
            if entry is None or entry[0]() is not message:
                return message
            message = entry[1]
        return message

    def __len__(self) -> int:
        return len(self._by_id)
