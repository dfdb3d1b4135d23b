"""Delegation: resolve a handoff's settings, rewrite the delegating run's history with them, and run the delegate."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic_ai import RunContext
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart, UserContent
from pydantic_ai.output import OutputDataT
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import ToolDefinition

from .._typing import is_items, is_object
from ._config import HandoffConfig, SummaryRole, check_flag, with_overrides
from ._data import HandoffHistoryMapper, HandoffInputFilter
from ._delegate_history import DelegateSpills, build_delegate_history, nest_off_loop
from ._history import check_message_history, prepend_system_prompts
from ._spills import agent_overflow, inherited_overflow, readable_here
from ._tracing import DelegationMode, delegation_span

__all__ = (
    'Delegation',
    'RunHandoffs',
    'active_run_handoffs',
    'calling_tool',
    'check_message_history',
    'delegate',
    'delegation_mode',
    'final_handoff',
    'nest_off_loop',
)

logger = logging.getLogger('pydantic_ai_harness.handoffs')

_SERVER_MANAGED_FILTER_ERROR = (
    'Server-managed conversations do not support handoff input filters. Remove Handoff.input_filter or '
    'RunConfig.handoff_input_filter, or disable conversation_id, previous_response_id, and auto_previous_response_id.'
)
_SERVER_MANAGED_NEST_WARNING = (
    'Server-managed conversations do not support nest_handoff_history for handoff %s -> %s. '
    'Disabling nested handoff history and continuing with delta-only input.'
)


@dataclass(frozen=True)
class Delegation(Generic[OutputDataT]):
    """What [`delegate`][pydantic_ai_harness.handoffs.delegate] returns: who answered, its answer, and the messages
    to carry on with.
    """

    agent: AbstractAgent[Any, OutputDataT]
    """The agent that answered (the delegate)."""

    result: AgentRunResult[OutputDataT]
    """The delegate's run result (usage, new messages, ...)."""

    tool_call_id: str | None = None
    """The id of the delegating tool or output-function call."""

    mode: DelegationMode = 'tool'
    """`'handoff'` when made from an output function (the delegate's output is the run's output), else `'tool'`."""

    handed_to: Delegation[Any] | None = None
    """The handoff the delegate's own run ended with, when it handed off in turn (its output is that delegation's):
    the next link of a chain such as triage -> billing -> refunds."""

    given_messages: int = 0
    """How many messages the delegate was given as history: its own run's messages follow them in `messages()`."""

    @property
    def last(self) -> Delegation[Any]:
        """The last delegation of the chain this one starts (itself when the delegate answered on its own)."""
        link: Delegation[Any] = self
        while link.handed_to is not None:
            link = link.handed_to
        return link

    @property
    def last_agent(self) -> AbstractAgent[Any, Any]:
        """The agent that answered, through any chain of handoffs: the OpenAI Agents SDK's `result.last_agent`."""
        return self.last.agent

    @property
    def output(self) -> OutputDataT:
        """The delegate's output."""
        return self.result.output

    @property
    def agent_name(self) -> str | None:
        """The delegate's name, as written into the handoff's tool output."""
        return self.agent.name

    def messages(self) -> list[ModelMessage]:
        """The delegate's whole conversation as it ran (the history it was given, its prompt, its turns and its
        answer): pass it as `message_history=` to run the next user turn on the delegate where it left off.
        """
        return self.result.all_messages()


@dataclass
class RunHandoffs:
    """The handoff state of one run: its settings and the delegations made in it (set by the `Handoffs`
    capability).
    """

    config: HandoffConfig
    """The run-wide settings every `delegate()` of the run uses unless it passes its own `config`."""

    run_id: str | None
    """The id of the run that set them."""

    delegations: list[tuple[str | None, Delegation[Any]]] = field(
        default_factory=list[tuple[str | None, Delegation[Any]]]
    )
    """`(run id of the delegating run, delegation)` for every delegation made while these settings were active."""

    handoff_tools: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    """The definition of each output tool a delegation was made from, by call id: the tool a recorded answer is
    reduced as a return of (the run no longer lists its tools once it ends)."""


_UNRECORDED_WARNING = (
    "delegate() ran in an output function of a run without the Handoffs capability: the delegate's answer becomes "
    "the run's output, but the run's history records only 'Final result processed.' for the call, so the next "
    "turn's history (and its summary) will not hold the answer. Add Handoffs() to the agent or the run "
    '(capabilities=[Handoffs()]) to record it.'
)


def calling_tool(ctx: RunContext[Any]) -> ToolDefinition | None:
    """The definition of the tool (or output tool) whose call `ctx` runs, when the run knows it."""
    manager = ctx.tool_manager
    if manager is None or ctx.tool_name is None or manager.tools is None:
        return None
    return manager.get_tool_def(ctx.tool_name)


def delegation_mode(ctx: RunContext[Any]) -> DelegationMode:
    """`'handoff'` when `ctx` is an output function's (its call is to an output tool), else `'tool'`."""
    tool_def = calling_tool(ctx)
    return 'handoff' if tool_def is not None and tool_def.kind == 'output' else 'tool'


_active: ContextVar[RunHandoffs | None] = ContextVar('pydantic_ai_harness_run_handoffs', default=None)

_made_in_run: ContextVar[list[Delegation[Any]] | None] = ContextVar(
    'pydantic_ai_harness_delegations_made_in_run', default=None
)
"""The delegations made during the delegate's run that `delegate` is awaiting (to find the handoff it ended on)."""


def final_handoff(messages: Sequence[ModelMessage], delegations: Sequence[Delegation[Any]]) -> Delegation[Any] | None:
    """The delegation whose call the last request of `messages` answers: the output-function handoff a run ended on.

    Args:
        messages: A run's whole history.
        delegations: The delegations made during that run.

    Returns:
        That delegation, or `None` when the run did not end on a handoff.
    """
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest) or not delegations:
        return None
    answered = {part.tool_call_id for part in last.parts if isinstance(part, ToolReturnPart)}
    for delegation in reversed(delegations):
        if delegation.mode == 'handoff' and delegation.tool_call_id in answered:
            return delegation
    return None


def active_run_handoffs() -> ContextVar[RunHandoffs | None]:
    """The context variable the `Handoffs` capability sets for the length of a run (and the runs it starts)."""
    return _active


_DEFAULT_CONFIG = HandoffConfig()


def _safe_run_segment(run_id: str | None) -> str:
    plain = ''.join(c for c in run_id or 'run' if c.isascii() and (c.isalnum() or c in '-_'))[:64]
    return plain or 'run'


def _server_managed(agent: AbstractAgent[Any, Any], run_kwargs: dict[str, Any]) -> bool:
    for settings in (getattr(agent, 'model_settings', None), run_kwargs.get('model_settings')):
        if is_object(settings):
            values = settings
            previous = values.get('openai_previous_response_id')
            if values.get('openai_conversation_id') or (previous and previous != 'auto'):
                return True
    return False


def _check_prompt(prompt: str | Sequence[UserContent] | None, conversation: bool) -> None:
    """Raise a `UserError` naming `prompt` unless it holds something for the delegate to answer (or is `None`, with
    the conversation to answer).
    """
    check_flag('conversation', conversation)
    if prompt is None:
        if not conversation:
            raise UserError('delegate() needs a prompt when the delegate is not given the conversation.')
        return
    entries = [prompt] if isinstance(prompt, str) else list(prompt)
    if all(isinstance(entry, str) and not entry.strip() for entry in entries):
        raise UserError(
            f'delegate() needs a non-empty prompt for the agent taking over, got {prompt!r}: '
            'an empty prompt would send the delegate an empty user turn.'
        )


async def delegate(
    agent: AbstractAgent[Any, Any],
    ctx: RunContext[Any],
    prompt: str | Sequence[UserContent] | None,
    *,
    conversation: bool = True,
    input_filter: HandoffInputFilter | None = None,
    nest_handoff_history: bool | None = None,
    history_mapper: HandoffHistoryMapper | None = None,
    summary_role: SummaryRole | None = None,
    forward_system_prompt: bool | None = None,
    max_record_chars: int | None = None,
    config: HandoffConfig | None = None,
    **run_kwargs: Any,
) -> Delegation[Any]:
    """Run `agent` from a delegating tool or output function, on the conversation so far, filtered as a handoff.

    The delegate's history is built by
    [`handoff_input_from_context`][pydantic_ai_harness.handoffs.handoff_input_from_context], then rewritten with the
    OpenAI Agents SDK's precedence rules:

    1. the filter is `input_filter` if it is not `None`, else `config.input_filter`;
    2. nesting is `nest_handoff_history` if it is not `None`, else `config.nest_handoff_history` (default `False`);
    3. a filter always wins: when there is one, the history is not nested (a filter may call
       [`nest_handoff_history`][pydantic_ai_harness.handoffs.nest_handoff_history] itself);
    4. `history_mapper` (else `config.history_mapper`), `summary_role` (else `config.summary_role`, default
       `'assistant'`) and `max_record_chars` (else `config.max_record_chars`, default 20,000) are used only for
       nesting.

    Spills: a delegate with no `OverflowingToolOutput` of its own inherits the delegating agent's (its store and
    query tools), and passes it on to the delegations it makes; when the delegate cannot read the store a spilled
    tool return is in, that return says so in its history. Before nesting, a tool output longer than
    `max_record_chars` is saved in full to the delegate's store (when its `OverflowingToolOutput` has a `store`) and
    cut with its handle; the writes of one delegation share one deadline, that capability's shortest
    `Spill.timeout`, and a record the store did not take is cut saying so. A long history (over 200 messages,
    1,000 parts and values, or 200,000 characters) is split, filtered by a synchronous filter, nested and checked in
    a worker thread, so it never holds the event loop.

    `config` defaults to the run-wide settings of a
    [`Handoffs`][pydantic_ai_harness.handoffs.Handoffs] capability on the delegating run (or on a run that started
    it), else to `HandoffConfig()`.

    The delegate runs under its own system prompts (static and dynamic, resolved with
    `agent.system_prompt_parts`) and its own instructions; the delegating agent's system prompts are removed from
    the history before filtering unless `forward_system_prompt` (else `config.forward_system_prompt`) is `True`.

    When the run uses server-side conversation state (`openai_conversation_id`, or a concrete
    `openai_previous_response_id`, in the agent's or the run's `model_settings`), a filter raises and nesting is
    switched off with a warning, since the provider would see the parent's unfiltered context anyway.

    The result is checked before the run (no orphaned or unanswered tool calls, no empty messages) and the
    delegate shares the parent's usage and usage limits, so its requests count towards the parent's limits.

    In an output function (a handoff), the delegate's answer is recorded in the run's history only under the
    [`Handoffs`][pydantic_ai_harness.handoffs.Handoffs] capability; without it, a `UserWarning` naming `Handoffs`
    is shown once per call site. With instrumentation on, the delegation is a span (`handoff <from> -> <to>` or
    `agent tool <from> -> <to>`) under the delegating call's span, holding the delegate's run.

    Args:
        agent: The agent taking over.
        ctx: The delegating tool's or output function's run context.
        prompt: A user turn for the delegate after the conversation, or `None` for none: the delegate answers the
            conversation as it stands (an OpenAI Agents SDK handoff; a history ending in an assistant turn then ends
            with an empty request, so pydantic-ai calls the model). Required without `conversation`.
        conversation: Whether the delegate is given the conversation so far (`True`, the default) or only
            `prompt` (the OpenAI Agents SDK's agent as a tool); the settings below apply to the conversation.
        input_filter: The handoff input filter (sync or async).
        nest_handoff_history: Whether to nest the history when there is no filter.
        history_mapper: The mapper to nest with, in place of the default summary.
        summary_role: Whether nesting writes its summaries as assistant turns or as user turns.
        forward_system_prompt: Whether the delegating agent's system prompts reach the delegate.
        max_record_chars: The longest record a nested summary keeps whole (else `config.max_record_chars`).
        config: Defaults for the six settings above; the run-wide `Handoffs` settings when not given.
        **run_kwargs: Passed to `agent.run`; `deps` defaults to `ctx.deps`, `usage` to `ctx.usage` and
            `usage_limits` to `ctx.usage_limits`.

    Returns:
        A [`Delegation`][pydantic_ai_harness.handoffs.Delegation]: the agent that answered, its run result and
        output, and the messages to carry on with.

    Raises:
        UserError: On an invalid filter or filter result, an invalid resulting history, a filter on a server-managed
            conversation, an empty prompt (or none without `conversation`), `input_filter` or
            `nest_handoff_history` without `conversation`, or an invalid setting (named in the message).
    """
    _check_prompt(prompt, conversation)
    if not conversation and (input_filter is not None or nest_handoff_history):
        raise UserError(
            'input_filter and nest_handoff_history apply to the conversation a delegate is given: '
            'pass conversation=True to give it the conversation, or drop them.'
        )
    if 'message_history' in run_kwargs:
        raise UserError('delegate() builds the message history itself; do not pass `message_history`.')
    run_handoffs = _active.get()
    if config is None:
        config = run_handoffs.config if run_handoffs is not None else _DEFAULT_CONFIG
    settings = with_overrides(
        config,
        input_filter=input_filter,
        nest_handoff_history=nest_handoff_history,
        history_mapper=history_mapper,
        summary_role=summary_role,
        forward_system_prompt=forward_system_prompt,
        max_record_chars=max_record_chars,
    )
    mode = delegation_mode(ctx)
    # Under a run-wide `Handoffs` (this run's, or that of a run this one is a delegate of), the answer is recorded
    # where the conversation continues: in the history of the run the capability is on.
    if mode == 'handoff' and run_handoffs is None:
        warnings.warn(_UNRECORDED_WARNING, UserWarning, stacklevel=2)
    if _server_managed(agent, run_kwargs):
        if settings.input_filter is not None:
            raise UserError(_SERVER_MANAGED_FILTER_ERROR)
        if settings.nest_handoff_history:
            from_name = ctx.agent.name if ctx.agent is not None else None
            logger.warning(_SERVER_MANAGED_NEST_WARNING, from_name, agent.name)
            settings = dataclasses.replace(settings, nest_handoff_history=False)
    enclosing = _made_in_run.get()
    made: list[Delegation[Any]] = []
    token = _made_in_run.set(made)
    try:
        with delegation_span(ctx, agent, mode, settings if conversation else _DEFAULT_CONFIG):
            result, given = await _run_delegate(agent, ctx, prompt, settings, run_kwargs, conversation)
    finally:
        _made_in_run.reset(token)
    delegation = Delegation(
        agent=agent,
        result=result,
        tool_call_id=ctx.tool_call_id,
        mode=mode,
        handed_to=final_handoff(result.all_messages(), made),
        given_messages=given,
    )
    if enclosing is not None:
        enclosing.append(delegation)
    if run_handoffs is not None:
        run_handoffs.delegations.append((ctx.run_id, delegation))
        tool_def = calling_tool(ctx)
        if mode == 'handoff' and tool_def is not None and ctx.tool_call_id is not None:
            run_handoffs.handoff_tools[ctx.tool_call_id] = tool_def
    return delegation


async def _run_delegate(
    agent: AbstractAgent[Any, Any],
    ctx: RunContext[Any],
    prompt: str | Sequence[UserContent] | None,
    settings: HandoffConfig,
    run_kwargs: dict[str, Any],
    conversation: bool,
) -> tuple[AgentRunResult[Any], int]:
    """Build the delegate's history from `ctx` with `settings` (none without `conversation`), check it, and run
    `agent` on it; return its result and the number of messages it was given.
    """
    # Spills: the delegate inherits the delegating agent's OverflowingToolOutput unless it has its own.
    own = agent_overflow(agent, run_kwargs.get('capabilities'))
    source = agent_overflow(ctx.agent) or inherited_overflow().get()
    effective = own
    if own is None and source is not None:
        given: object = run_kwargs.get('capabilities')
        run_kwargs['capabilities'] = [*(given if is_items(given) else ()), source]
        effective = source
    spills = DelegateSpills(readable_here(effective, source), effective, f'handoff/{_safe_run_segment(ctx.run_id)}')
    history = await build_delegate_history(ctx, agent.name, settings, spills) if conversation else []

    run_kwargs.setdefault('deps', ctx.deps)
    run_kwargs.setdefault('usage', ctx.usage)
    run_kwargs.setdefault('usage_limits', ctx.usage_limits)
    # pydantic-ai adds an agent's system prompts only to a run without history; a delegate always has one.
    own_prompts = await agent.system_prompt_parts(
        deps=run_kwargs['deps'],
        model=run_kwargs.get('model'),
        message_history=history,
        prompt=prompt,
        usage=run_kwargs['usage'],
        model_settings=run_kwargs.get('model_settings'),
    )
    history = prepend_system_prompts(history, own_prompts)
    if prompt is None and history and isinstance(history[-1], ModelResponse):
        # No new user turn (an OpenAI Agents SDK handoff): the delegate answers the conversation as it stands. An
        # empty request has pydantic-ai call the model (it carries the delegate's instructions only); without it,
        # a history ending in a response would be taken as already answered.
        history = [*history, ModelRequest(parts=[])]
    token = inherited_overflow().set(effective)
    try:
        result = await agent.run(prompt, message_history=history or None, **run_kwargs)
    finally:
        inherited_overflow().reset(token)
    return result, len(history)
