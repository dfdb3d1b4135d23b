"""A handoff chain as the delegating run's history records it, and the agent that answered it.

The OpenAI Agents SDK's `result.to_input_list()` holds every agent's turn of a run: each handoff's call with its
output (`{"assistant": "<name>"}`), what each receiving agent did, and the last answer; `result.last_agent` is the
agent that gave it. pydantic-ai answers an output function's call with `Final result processed.` and keeps a
delegate's run in the delegate's own result, so `Handoffs` writes the chain into the delegating run's history
(`chain_messages`), and `last_agent` finds the agent object that answered from that history.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
import weakref
from collections.abc import Sequence
from typing import Any, TypeGuard

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart

from ._cut import cut_text, with_content
from ._delegation import Delegation
from ._history import without_system_prompts
from ._parts import Part, rewrap
from ._recorded_answer import ANSWERED_BY_METADATA_KEY

__all__ = ('ANSWERED_BY_AGENT_METADATA_KEY', 'agent_key', 'chain_messages', 'last_agent', 'with_transfer_output')

ANSWERED_BY_AGENT_METADATA_KEY = 'pydantic_ai_harness_answered_by_agent'
"""`metadata` key of the recorded answer: the key `last_agent` finds the answering agent object under (this
process's agents only; the name, under `ANSWERED_BY_METADATA_KEY`, is the fallback)."""

_agents: weakref.WeakValueDictionary[str, AbstractAgent[Any, Any]] = weakref.WeakValueDictionary()
_keys: dict[int, str] = {}
"""Each live agent's key by `id()` (agents compare by value, so they cannot key a weak dictionary themselves)."""


def agent_key(agent: AbstractAgent[Any, Any]) -> str | None:
    """A key naming `agent` in this process (the same for the agent's lifetime), or `None` for an agent that cannot
    be weakly referenced. The agent is not kept alive by it.
    """
    key = _keys.get(id(agent))
    if key is not None and _agents.get(key) is agent:
        return key
    key = uuid.uuid4().hex
    try:
        _agents[key] = agent
        weakref.finalize(agent, _keys.pop, id(agent), None)
    except TypeError:
        return None
    _keys[id(agent)] = key
    return key


def transfer_output(agent: AbstractAgent[Any, Any]) -> str:
    """The output of a handoff's call, as the OpenAI Agents SDK writes it: `{"assistant": "<name>"}`."""
    return json.dumps({'assistant': agent.name or 'delegate'})


def with_transfer_output(messages: list[ModelMessage], delegation: Delegation[Any]) -> None:
    """Answer the handoff's call in the last request of `messages` with the SDK's handoff output, in place.

    pydantic-ai answers an output function's call with `Final result processed.`; the next turn reads who took
    over instead.
    """
    if not messages or not isinstance(last := messages[-1], ModelRequest):
        return
    parts: list[Part] = [
        dataclasses.replace(part, content=transfer_output(delegation.agent))
        if isinstance(part, ToolReturnPart) and part.tool_call_id == delegation.tool_call_id
        else part
        for part in last.parts
    ]
    messages[-1] = rewrap(last, parts)


def _bounded(messages: Sequence[ModelMessage], max_chars: int | None) -> list[ModelMessage]:
    """`messages` with every tool return longer than `max_chars` cut to it, saying so (`None`: kept whole)."""
    if max_chars is None:
        return list(messages)
    bounded: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and any(_too_long(p, max_chars) for p in message.parts):
            parts: list[Part] = [
                with_content(p, cut_text(p.model_response_str(), max_chars, None)) if _too_long(p, max_chars) else p
                for p in message.parts
            ]
            message = rewrap(message, parts)
        bounded.append(message)
    return bounded


def _too_long(part: Part, max_chars: int) -> TypeGuard[ToolReturnPart]:
    return isinstance(part, ToolReturnPart) and len(part.model_response_str()) > max_chars


def chain_messages(delegation: Delegation[Any], max_chars: int | None) -> list[ModelMessage]:
    """What each agent of the chain `delegation` starts did in its own run, in order, without the last answer.

    Each delegate's turns (its responses, tool calls and returns) follow the handoff that started it; a handoff
    made in a delegate's run is answered with the SDK's handoff output. The last agent's final response is left
    out: `Handoffs` records it held to a tool return's bounds. The delegates' own system prompts are left out too
    (each agent runs under its own). A tool return longer than `max_chars` is cut to it, saying so: every later
    request of the conversation carries these messages (a delegate that inherited the caller's
    `OverflowingToolOutput` has reduced its returns already).
    """
    messages: list[ModelMessage] = []
    link = delegation
    while True:
        own = _bounded(without_system_prompts(link.result.all_messages()[link.given_messages :]), max_chars)
        if link.handed_to is None:
            if own and isinstance(own[-1], ModelResponse):
                own.pop()
            messages.extend(own)
            return messages
        with_transfer_output(own, link.handed_to)
        messages.extend(own)
        link = link.handed_to


def last_agent(
    messages: Sequence[ModelMessage],
    starting_agent: AbstractAgent[Any, Any],
    *,
    agents: Sequence[AbstractAgent[Any, Any]] = (),
) -> AbstractAgent[Any, Any]:
    """The agent that gave the last answer of `messages`: the OpenAI Agents SDK's `result.last_agent`.

    A run that ended with a handoff under [`Handoffs`][pydantic_ai_harness.handoffs.Handoffs] ends with the
    answer of the chain's last agent (refunds, for triage -> billing -> refunds), recorded with that agent; any
    other run was answered by `starting_agent`. Pass the result to the next user turn:
    `last_agent(history, triage).run(prompt, message_history=history)`.

    Args:
        messages: The run's history (`result.all_messages()`).
        starting_agent: The agent the run was started with.
        agents: Agents to look the answering one up in by name, for a history recorded in another process (the
            agent objects of this process are found without it).

    Returns:
        The agent that answered.

    Raises:
        UserError: When the answer was recorded in another process and no agent of `agents` has its name.
    """
    for message in reversed(messages):
        if not isinstance(message, ModelResponse):
            continue
        metadata = message.metadata or {}
        name = metadata.get(ANSWERED_BY_METADATA_KEY)
        if not isinstance(name, str):
            return starting_agent
        key = metadata.get(ANSWERED_BY_AGENT_METADATA_KEY)
        found = _agents.get(key) if isinstance(key, str) else None
        if found is not None:
            return found
        for agent in (starting_agent, *agents):
            if agent.name == name:
                return agent
        raise UserError(
            f'The last answer was given by the agent {name!r}, which is not an agent of this process: '
            f'pass it in agents=[...] so last_agent can find it by name.'
        )
    return starting_agent
