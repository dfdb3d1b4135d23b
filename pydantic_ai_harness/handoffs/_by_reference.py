"""A delegate's result by reference: a bounded answer for the calling agent, and a handle to everything it did.

The calling agent's `OverflowingToolOutput` store keeps the delegate's whole run as one readable text payload (its
input, each tool call with its arguments, each tool output and its answer, verbatim, under numbered headings), written
as the capability writes a spill (bounded by its shortest `Spill.timeout`, through its durable operation under a
durable engine). The calling agent reads it with the same query tools it reads a spill with, and hands it to the
next agent tool by handle instead of restating it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ..overflowing_tool_output import OverflowingToolOutput
from ..overflowing_tool_output._query_tools._names import QueryToolNames, run_names
from ._cut import cut_text
from ._delegation import Delegation
from ._long_records import store_timeout
from ._recorded_answer import answer_text, run_overflow
from ._worker import is_large, run_off_loop, value_is_large

__all__ = (
    'DEFAULT_ANSWER_CHARS',
    'MAX_HANDLES',
    'MAX_HANDLE_CHARS',
    'check_answer_chars',
    'handles_prompt',
    'result_by_reference',
    'transcript_text',
)

logger = logging.getLogger('pydantic_ai_harness.handoffs')

DEFAULT_ANSWER_CHARS = 1_000
"""How much of a delegate's answer the calling agent is given inline by default (about 250 tokens)."""

MAX_HANDLES = 20
"""The most handles one agent-tool call passes on (each is written into the agent's prompt)."""

MAX_HANDLE_CHARS = 300
"""The longest handle accepted from the model (a store's handles are far shorter)."""


def check_answer_chars(value: object) -> None:
    """Raise a `UserError` naming the setting unless `value` is an int of at least 500."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 500:
        raise UserError(f'answer_chars must be an int of at least 500, got {value!r}')


def _heading(number: int, title: str) -> str:
    return f'=== {number}. {title} ==='


def _part_section(part: Any) -> tuple[str, str] | None:
    """The heading and body of one part of the delegate's run, or `None` for a part that says nothing."""
    if isinstance(part, UserPromptPart):
        return 'input', part.content if isinstance(part.content, str) else answer_text(list(part.content))
    if isinstance(part, TextPart) and part.content:
        return 'text', part.content
    if isinstance(part, ThinkingPart) and part.content:
        return 'thinking', part.content
    if isinstance(part, ToolCallPart):
        return f'tool call {part.tool_name} ({part.tool_call_id})', part.args_as_json_str()
    if isinstance(part, ToolReturnPart):
        return f'tool output {part.tool_name} ({part.tool_call_id})', part.model_response_str()
    return None


def transcript_text(agent_name: str, messages: Sequence[ModelMessage], answer: str) -> tuple[str, int]:
    """The delegate's run as one readable text, and the line its answer starts on.

    Each input, text, tool call and tool output is a numbered section, verbatim (so `grep` finds a line as it was
    written); the delegate's system prompts are left out; the answer is the last section.
    """
    lines = [f'Transcript of the run of agent {agent_name!r}: each section verbatim, the answer last.']
    number = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                continue
            section = _part_section(part)
            if section is None:
                continue
            number += 1
            lines.append(_heading(number, section[0]))
            lines.extend(section[1].split('\n'))
    lines.append(_heading(number + 1, 'answer'))
    answer_line = len(lines) + 1
    lines.extend(answer.split('\n'))
    return '\n'.join(lines), answer_line


def _note(agent_name: str, handle: str, answer_line: int, names: QueryToolNames, answer_chars: int) -> str:
    shown = (
        'The answer above is whole' if answer_chars == 0 else f'The answer above is cut to {answer_chars} characters'
    )
    return (
        f'\n[{shown}. The whole run of agent {agent_name!r} (its tool calls, their outputs, and its answer from line '
        f"{answer_line}) is saved under handle '{handle}': {names.read}(handle) pages it, {names.grep}(handle, "
        f"pattern) searches it. To give it to another agent, pass handles=['{handle}'] instead of restating it.]"
    )


def _key(ctx: RunContext[Any], payload: bytes) -> str:
    """The store key: the calling tool call's id (plain characters) and the payload's hash, so a replay of the same
    call writes the same key.
    """
    call = ''.join(c for c in ctx.tool_call_id or 'call' if c.isascii() and (c.isalnum() or c in '-_'))[:40]
    return f'agent-result/{call or "call"}-{hashlib.sha256(payload).hexdigest()[:16]}'


async def _write(
    overflow: OverflowingToolOutput[Any], ctx: RunContext[Any], key: str, data: bytes
) -> tuple[str | None, str]:
    # The capability's own bounded write (its durable operation under a durable engine, its workspace routing):
    # the same path a spill takes, so the payload is where its query tools read.
    return await overflow._write(ctx, key, data, store_timeout(overflow))  # pyright: ignore[reportPrivateUsage]


async def result_by_reference(
    ctx: RunContext[Any], delegation: Delegation[Any], *, answer_chars: int = DEFAULT_ANSWER_CHARS
) -> str:
    """The delegate's result for the calling agent: its answer, cut to `answer_chars`, and a handle to its whole run.

    The whole run (`transcript_text`) is written to the store of the calling run's `OverflowingToolOutput` (the
    agent's, the run's own, or the one its delegation inherited), bounded by the capability's shortest
    `Spill.timeout`; the text returned names the handle and the query tools as the run offers them. When the store
    does not take it, the answer is cut saying the rest was not kept, and why (the store's error goes to the log).

    Args:
        ctx: The run context of the calling agent's tool.
        delegation: What [`delegate`][pydantic_ai_harness.handoffs.delegate] returned.
        answer_chars: The longest answer returned inline (at least 500).

    Returns:
        The text to return from the tool.

    Raises:
        UserError: When the calling run has no `OverflowingToolOutput` to store the run in, or `answer_chars` is
            under 500.
    """
    check_answer_chars(answer_chars)
    overflow = run_overflow(ctx)
    if overflow is None:
        raise UserError(
            "A result by reference is stored with the calling agent's OverflowingToolOutput, and this run has none: "
            'add OverflowingToolOutput() to the calling agent (Agent(capabilities=[...])).'
        )
    name = delegation.agent_name or 'delegate'
    output = delegation.output
    answer = await run_off_loop(ctx, functools.partial(answer_text, output), large=value_is_large(output))
    own = delegation.result.all_messages()[delegation.given_messages :]
    if own and not isinstance(own[-1], ModelRequest):
        own = own[:-1]  # its final response is the answer, written last
    build = functools.partial(transcript_text, name, own, answer)
    text, answer_line = await run_off_loop(ctx, build, large=is_large(own) or len(answer) > 200_000)
    data = text.encode('utf-8', 'surrogatepass')
    handle, reason = await _write(overflow, ctx, _key(ctx, data), data)
    if handle is None:
        logger.warning('A result by reference of agent %r was not stored, so its answer is cut: %s', name, reason)
        return cut_text(answer, answer_chars, None, not_kept='the store did not save it')
    note = _note(name, handle, answer_line, run_names(ctx), 0 if len(answer) <= answer_chars else answer_chars)
    shown = answer if len(answer) <= answer_chars else answer[:answer_chars]
    return shown + note


def handles_prompt(prompt: str, handles: Sequence[str], names: QueryToolNames) -> str:
    """`prompt` followed by the handles of earlier results the agent is to read itself."""
    if not handles:
        return prompt
    quoted = ', '.join(f"'{handle}'" for handle in handles)
    return (
        f'{prompt}\n\n[Earlier results to use, saved under handle {quoted}: read them with {names.read}(handle) '
        f'or search them with {names.grep}(handle, pattern).]'
    )
