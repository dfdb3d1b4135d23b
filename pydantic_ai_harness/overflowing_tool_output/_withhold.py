"""Apply secret masking to a tool's result before anything else sees it (previews, truncation, summaries, store)."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ToolCallPart, ToolReturn
from pydantic_ai.tools import RunContext

from .._typing import is_dict, is_instance, is_list
from ._events import OverflowingToolOutputWarning
from ._render import render_value, stored_form
from ._secrets import Redactor, SecretRedaction
from ._unit import is_tool_return, with_notes

__all__ = ('ORIGINAL_HANDLE_KEY', 'WITHHELD_KEY', 'SecretWithholding', 'build_withholding', 'withhold_secrets')

WITHHELD_KEY = 'secrets_withheld'
"""Metadata key: how many secrets of each kind were withheld from the return."""

ORIGINAL_HANDLE_KEY = 'secrets_original_handle'
"""Metadata key: where `SecretRedaction.keep_original_in` stored the original."""

_STORE_TIMEOUT = 10.0


@dataclass(frozen=True)
class SecretWithholding:
    """`redact_secrets` in force: the setting and the redactor built from it."""

    setting: SecretRedaction
    """What the user configured."""

    redactor: Redactor
    """The compiled rules."""

    async def __call__(self, ctx: RunContext[Any], call: ToolCallPart, result: Any) -> Any:
        """`result` with its secrets masked, or `result` itself (the same object) when it holds none."""
        return await withhold_secrets(self.redactor, self.setting, ctx, call, result)

    def mask_text(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with its secrets masked, and how many of each kind were withheld."""
        masked, found = self.redactor.mask(text)
        return (masked, dict(found)) if found else (text, {})


def build_withholding(setting: SecretRedaction | None) -> SecretWithholding | None:
    """What `redact_secrets` asks for; a bad setting raises at construction, naming it."""
    if setting is None:
        return None
    if not is_instance(setting, SecretRedaction):
        raise TypeError(f'redact_secrets must be a SecretRedaction or None, got {type(setting).__name__}')
    if setting.keep_original_in is not None and not callable(getattr(setting.keep_original_in, 'write', None)):
        raise TypeError('redact_secrets.keep_original_in must be an OverflowStore (with an async write(key, data))')
    try:
        return SecretWithholding(setting, Redactor.from_setting(setting))
    except ImportError as exc:
        raise UserError(f'redact_secrets: {exc}') from None


async def withhold_secrets(
    redactor: Redactor, setting: SecretRedaction, ctx: RunContext[Any], call: ToolCallPart, result: Any
) -> Any:
    """`result` with its secrets masked, or `result` itself (the same object) when it holds none."""
    counts: Counter[str] = Counter()
    if is_tool_return(result):
        envelope = result
        value = _mask_value(redactor, envelope.return_value, counts)
        content = _mask_content(redactor, envelope.content, counts)
        if not counts:
            return envelope
        metadata: Any = envelope.metadata
        original: Any = envelope.return_value
    else:
        value = _mask_value(redactor, result, counts)
        if not counts:
            return result
        content, metadata, original = None, None, result
        envelope = None
    notes: dict[str, Any] = {WITHHELD_KEY: dict(counts)}
    if setting.keep_original_in is not None:
        handle = await _keep_original(setting, ctx, call, original)
        if handle is not None:
            notes[ORIGINAL_HANDLE_KEY] = handle
    return ToolReturn[Any](
        return_value=value,
        content=content,
        metadata=with_notes(metadata, notes),
        tools=envelope.tools if envelope is not None else None,
    )


def _mask_value(redactor: Redactor, value: Any, counts: Counter[str]) -> Any:
    if isinstance(value, str):
        masked, found = redactor.mask(value)
        counts.update(found)
        return masked if found else value
    rendered = render_value(value)
    if rendered.kind == 'text':
        masked, found = redactor.mask(rendered.text)
        counts.update(found)
        return masked if found else value
    if rendered.kind != 'structured' or rendered.jsonable is None:
        return value  # binary and files are passed on as they are
    masked, found = redactor.mask(rendered.text)
    if not found:
        return value
    counts.update(found)
    try:
        # The masked JSON, parsed back: the model reads the same document, with markers where secrets were.
        return json.loads(masked)
    except ValueError:
        # A match crossed the JSON syntax: mask each string on its own instead.
        return _mask_leaves(redactor, rendered.jsonable, Counter())


def _mask_leaves(redactor: Redactor, value: Any, counts: Counter[str]) -> Any:
    if isinstance(value, str):
        masked, found = redactor.mask(value)
        counts.update(found)
        return masked
    if is_dict(value):
        return {key: _mask_leaves(redactor, item, counts) for key, item in value.items()}
    if is_list(value):
        return [_mask_leaves(redactor, item, counts) for item in value]
    return value


def _mask_content(redactor: Redactor, content: Any, counts: Counter[str]) -> Any:
    if content is None:
        return None
    if isinstance(content, str):
        masked, found = redactor.mask(content)
        counts.update(found)
        return masked if found else content
    items: Sequence[Any] = content
    texts = [item for item in items if isinstance(item, str)]
    if len(texts) == len(items):
        # Masked as the one text they are read as, so a secret split across two parts is still found.
        joined = '\n\n'.join(texts)
        masked, found = redactor.mask(joined)
        counts.update(found)
        return masked if found else content
    masked_items: list[Any] = []
    for item in items:
        if isinstance(item, str):
            text, found = redactor.mask(item)
            counts.update(found)
            masked_items.append(text)
        else:
            masked_items.append(item)
    return masked_items if sum(counts.values()) else content


async def _keep_original(
    setting: SecretRedaction, ctx: RunContext[Any], call: ToolCallPart, original: Any
) -> str | None:
    data = (
        original.encode('utf-8', 'surrogatepass')
        if isinstance(original, str)
        else stored_form(render_value(original))[1]
    )
    key = f'{ctx.run_id}/{call.tool_call_id}/{ctx.retry}/original'
    try:
        with anyio.fail_after(_STORE_TIMEOUT):
            handle = await setting.keep_original_in.write(key, data)
    except Exception as exc:  # noqa: BLE001 - keeping the original is best effort; masking is not
        warnings.warn(
            f'The original of `{call.tool_name}` (secrets withheld) could not be kept: {type(exc).__name__}',
            OverflowingToolOutputWarning,
            stacklevel=2,
        )
        return None
    return handle if isinstance(handle, str) else None
