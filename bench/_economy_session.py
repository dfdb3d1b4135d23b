"""A long session: ten tasks of four tool calls each (40 returns of 2-8 KB), then questions about the first returns.

Each task is a user turn of its own (an agent run continuing the conversation), so the session runs about 60
model requests. The scripted models do the tasks' calls, then answer the questions from everything they were
sent: a fact still in view is answered at once; one that is not is searched with `grep_tool_result` without a
handle and read as the model's style reads. Besides tokens, we count the requests whose cached prefix was broken:
those whose earlier messages (or tool definitions) differ from the previous request's, which a provider's prompt
cache cannot reuse.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo

from bench._economy_windows import relative_bands
from bench._report import Entry
from bench._session_payloads import FACTS, Call, session_calls
from examples._scripted import (
    NOT_FOUND,
    CarefulModel,
    ClaudeCodeModel,
    ScriptedModel,
    part_text,
    seeded_run_ids,
    tool_definitions_text,
    visible_text,
)
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

CALLS_PER_TASK = 4
"""Tool calls per user turn."""

QUESTIONS_PROMPT = 'Before we stop, a few questions about what we saw early on: ' + ' '.join(q.prompt for q, _ in FACTS)
"""The last user turn."""

FOLLOW_UP = 'Thanks. Anything in there to watch out for?'
"""The user turn after each task: answered in words, without a tool call."""

_ARGUMENT = {'read_file': 'path', 'run_command': 'command', 'http_get': 'url'}

Snapshot = tuple[str, ...]
"""A request as the prompt cache sees it: the tool definitions, then each message, each as text."""


def snapshot(messages: Sequence[ModelMessage], info: AgentInfo) -> Snapshot:
    """The request `messages` make with `info`'s tools, one text per item, in the order a provider caches them."""
    items = [tool_definitions_text(info.function_tools)]
    for message in messages:
        parts = [f'{type(part).__name__}:{part_text(part)}' for part in message.parts]
        instructions = getattr(message, 'instructions', None) or ''
        items.append(json.dumps([type(message).__name__, instructions, parts]))
    return tuple(items)


def prefix_breaks(requests: Sequence[Snapshot]) -> int:
    """The requests that do not start with the whole previous request (its prompt cache is lost)."""
    return sum(current[: len(previous)] != previous for previous, current in itertools.pairwise(requests))


class SessionModel(ScriptedModel):
    """Works through the session's tasks, then answers the questions from what it was sent.

    Subclassed together with a scripted model (`CarefulModel`, `ClaudeCodeModel`), whose search over the stored
    outputs (a search without a handle, then its way of reading) pages back for a fact no longer in view.
    """

    def __init__(self, tasks: Sequence[Sequence[Call]], **kwargs: Any) -> None:
        super().__init__([question for question, _ in FACTS], **kwargs)
        self.tasks = [list(task) for task in tasks]
        """The tool calls of each task, in order."""
        self.requests: list[Snapshot] = []
        """Every request the model was sent."""
        self.request_tokens: list[int] = []
        """The input tokens of each request."""
        self._queue: list[Call] = []
        self._asking = False

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        usage = self._account(messages, info)
        self.requests.append(snapshot(messages, info))
        self.request_tokens.append(usage.input_tokens)
        last = messages[-1]
        prompts = [p.content for p in last.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]
        if prompts and prompts[0] == QUESTIONS_PROMPT:
            self._asking = True
            self._question = 0
            self._new_call()
        elif prompts and prompts[0] != FOLLOW_UP:
            self._queue = self.tasks.pop(0)
        if not self._asking:
            if self._queue:
                call = self._queue.pop(0)
                return self._reply(self._tool_call(call.tool, {_ARGUMENT[call.tool]: call.argument}), usage)
            return self._reply(TextPart('Nothing unusual so far.' if prompts else 'Done.'), usage)
        seen = '\n'.join(visible_text(message) for message in messages)
        last_text = visible_text(last)
        while self._question < len(self.questions):
            question = self.questions[self._question]
            answer = question.extract(seen)
            if answer is None:
                page_back = self._search_all(question, last_text)
                if page_back is not None:
                    return self._reply(page_back, usage)
                answer = NOT_FOUND
            self.trace.answers.append(answer)
            self._question += 1
            self._new_call()
            last_text = ''  # the next question starts from what is in view, not from this one's last answer
        return self._reply(TextPart(json.dumps(self.trace.answers)), usage)


class CarefulSession(SessionModel, CarefulModel):
    """The careful model in the long session."""


class ClaudeCodeSession(SessionModel, ClaudeCodeModel):
    """The Claude Code-style model in the long session."""


SESSION_MODELS: dict[str, type[SessionModel]] = {'careful': CarefulSession, 'Claude Code-style': ClaudeCodeSession}
"""The session's scripted models, by the name the report gives them."""


@dataclass
class SessionOutcome:
    """What one long session cost, what it found, and how often it broke the prompt cache's prefix."""

    configuration: str
    """The configuration's name in the report."""
    model: str
    """The scripted model's name in the report."""
    requests: int = 0
    """Model requests over the session."""
    tokens: int = 0
    """Input tokens over every request (cl100k)."""
    peak: int = 0
    """The largest request's input tokens."""
    retrievals: int = 0
    """Calls to `read_tool_result` / `grep_tool_result`."""
    found: int = 0
    """Questions answered with their planted fact exactly."""
    facts: int = 0
    """Questions asked."""
    breaks: int = 0
    """Requests whose earlier messages or tools differ from the previous request's (counted from the requests)."""
    reported_breaks: int | None = None
    """The same as the run's events or metadata report it (`None`: not reported)."""
    answers: list[str] = field(default_factory=list[str])
    """The model's answers, in the order asked."""
    window: int | None = None
    """The model's context window in tokens (`None`: unknown)."""
    over_window: int = 0
    """Requests larger than the window."""


async def run_session(
    capability: OverflowingToolOutput[Any] | None,
    model: type[SessionModel],
    count: Callable[[str], int],
    *,
    seed: int,
    context_window: int | None = None,
    reported: Callable[[Any], int | None] | None = None,
) -> SessionOutcome:
    """The whole session with `model` under `capability`; `reported` reads the prefix breaks off each run's result."""
    calls = session_calls()
    tasks = [calls[i : i + CALLS_PER_TASK] for i in range(0, len(calls), CALLS_PER_TASK)]
    brain = model(tasks, count_tokens=count, seed=seed)
    agent = Agent(brain.model(context_window=context_window), capabilities=[capability] if capability else [])
    pending = iter(calls)

    def take(kind: str, argument: str) -> Any:
        call = next(pending)
        assert (call.tool, call.argument) == (kind, argument), (call, kind, argument)
        return call.make()

    def read_file(path: str) -> Any:
        """Read a file of the repository."""
        return take('read_file', path)

    def run_command(command: str) -> Any:
        """Run a shell command in the repository and return its output."""
        return take('run_command', command)

    def http_get(url: str) -> Any:
        """GET a path of the service's JSON API."""
        return take('http_get', url)

    agent.tool_plain(read_file)
    agent.tool_plain(run_command)
    agent.tool_plain(http_get)
    history: list[ModelMessage] = []
    reported_breaks: int | None = None
    with seeded_run_ids(seed):
        for prompt in session_prompts(len(tasks)):
            result = await agent.run(prompt, message_history=history)
            history = result.all_messages()
            reported_breaks = _add(reported_breaks, reported(result) if reported else None)
    trace = brain.trace
    expected = [answer for _, answer in FACTS]
    return SessionOutcome(
        configuration='',
        model='',
        requests=trace.requests,
        tokens=trace.input_tokens,
        peak=trace.peak_request_tokens,
        retrievals=trace.retrieval_calls,
        found=sum(a == e for a, e in zip(trace.answers, expected)),
        facts=len(expected),
        breaks=prefix_breaks(brain.requests),
        reported_breaks=reported_breaks,
        answers=list(trace.answers),
        window=context_window,
        over_window=sum(size > context_window for size in brain.request_tokens) if context_window else 0,
    )


def session_prompts(tasks: int) -> list[str]:
    """The user turns of the session: each task and its follow-up, then the questions."""
    turns = [[f'Task {n}: look into the next part of the billing service.', FOLLOW_UP] for n in range(1, tasks + 1)]
    return [*itertools.chain.from_iterable(turns), QUESTIONS_PROMPT]


def _add(total: int | None, more: int | None) -> int | None:
    return total if more is None else (total or 0) + more


def session_root(root: Path, name: str) -> Path:
    """A store directory of its own for one session run."""
    return root / 'session' / name.replace(' ', '-').replace(',', '').replace('=', '')


async def measure_session(
    configurations: dict[str, Callable[[Path], OverflowingToolOutput[Any] | None]],
    windows: dict[str, int | None],
    root: Path,
    count: Callable[[str], int],
    reported: Callable[[Any], int | None] | None = None,
) -> list[SessionOutcome]:
    """The session under each configuration and window, with every model (one seed per run, shared by the models)."""
    outcomes: list[SessionOutcome] = []
    for w_index, (window_name, window) in enumerate(windows.items()):
        for c_index, (name, make) in enumerate(configurations.items()):
            for model_name, model in SESSION_MODELS.items():
                capability = make(session_root(root, f'{window_name}-{name}-{model_name}'))
                seed = 8_000 + w_index * 100 + c_index
                outcome = await run_session(
                    capability, model, count, seed=seed, context_window=window, reported=reported
                )
                outcome.configuration, outcome.model = name, model_name
                outcomes.append(outcome)
    return outcomes


def session_table(outcomes: Sequence[SessionOutcome], baselines: dict[str, str]) -> str:
    """The sessions as a markdown table, tokens also as a share of the configuration's baseline (`baselines`).

    The baseline is the run of the configuration `baselines` names, with the same model and window.
    """
    tokens = {(o.configuration, o.model, o.window): o.tokens for o in outcomes}
    rows: list[str] = []
    for o in outcomes:
        window = 'unknown' if o.window is None else f'{o.window:,}'
        base = tokens.get((baselines.get(o.configuration, ''), o.model, o.window))
        share = f'{o.tokens / base:.0%}' if base else ''
        reported = '' if o.reported_breaks is None else str(o.reported_breaks)
        rows.append(
            f'| {o.configuration} | {window} | {o.model} | {o.requests} | {o.tokens:,} | {share} | {o.peak:,} '
            f'| {o.over_window if o.window else ""} | {o.retrievals} | {o.found}/{o.facts} | {o.breaks} | {reported} |'
        )
    return (
        '| configuration | context window | model | requests | input tokens (cl100k) | vs without aging '
        '| largest request | requests over the window | retrieval calls | facts found '
        '| prefix breaks (counted from the requests) | prefix breaks (reported by the run) |\n'
        '|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n' + '\n'.join(rows)
    )


WITHOUT_AGING = 'default, no aging'
"""The configuration the session's tokens are compared with, when the window is unknown."""

WINDOW_WITHOUT_AGING = 'share band, no aging'
"""The same under a known window."""

BASELINES = {'no capability': WITHOUT_AGING, WITHOUT_AGING: WITHOUT_AGING, WINDOW_WITHOUT_AGING: WINDOW_WITHOUT_AGING}
"""Each configuration's run without aging (same model and window), its tokens are compared with."""


def session_configurations() -> dict[str, Callable[[Path], OverflowingToolOutput[Any] | None]]:
    """The configurations the session runs under, with the model's context window unknown."""
    return {
        'no capability': lambda _root: None,
        WITHOUT_AGING: lambda root: OverflowingToolOutput(store=LocalFileStore(base_dir=root)),
    }


def window_configurations() -> dict[str, Callable[[Path], OverflowingToolOutput[Any] | None]]:
    """The configurations the session runs under with a known context window: the band relative to it."""
    return {WINDOW_WITHOUT_AGING: relative_bands}


def session_entries(outcomes: Sequence[SessionOutcome]) -> list[Entry]:
    """Every fact found in every session; the prefix breaks per 10 requests."""
    entries: list[Entry] = []
    for o in outcomes:
        where = '' if o.window is None else f', {o.window:,}-token window'
        entries.append(
            Entry(
                'economy',
                f'{o.model}, long session ({o.requests} requests, 40 returns of 2-8 KB), {o.configuration}{where}: '
                'facts about the first returns found',
                o.found,
                f'of {o.facts}',
                f'{o.facts} of {o.facts}',
                o.found == o.facts,
                detail=f'{o.tokens:,} input tokens, {o.retrievals} retrieval calls, {o.breaks} prefix breaks',
            )
        )
    return entries
