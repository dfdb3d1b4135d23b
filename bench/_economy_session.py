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
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
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
from pydantic_ai_harness.overflowing_tool_output import Aging, LocalFileStore, OverflowingToolOutput, overflow_report

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
                offered = {tool.name for tool in info.function_tools}
                if page_back is not None and isinstance(page_back, ToolCallPart) and page_back.tool_name in offered:
                    return self._reply(page_back, usage)
                answer = NOT_FOUND  # nothing to page back with (no query tools: a lossy compaction dropped it)
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
    """The same as the capability reports it (`overflow_report(history).prefix_breaks`; `None`: no capability)."""
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
) -> SessionOutcome:
    """The whole session with `model` under `capability`; the capability's own count of prefix breaks is read off the history."""
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
    with seeded_run_ids(seed):
        for prompt in session_prompts(len(tasks)):
            result = await agent.run(prompt, message_history=history)
            history = result.all_messages()
    reported_breaks = overflow_report(history).prefix_breaks if capability is not None else None
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


def session_root(root: Path, name: str) -> Path:
    """A store directory of its own for one session run."""
    return root / 'session' / name.replace(' ', '-')


async def measure_session(
    windows: dict[str, int | None], root: Path, count: Callable[[str], int]
) -> list[SessionOutcome]:
    """The session under each window and its configurations, with every model (a seed per run, shared by the models)."""
    outcomes: list[SessionOutcome] = []
    for w_index, (window_name, window) in enumerate(windows.items()):
        for c_index, (name, make) in enumerate(session_configurations(window).items()):
            for model_name, model in SESSION_MODELS.items():
                capability = make(session_root(root, f'{window_name}-{c_index}-{model_name}'))
                seed = 8_000 + w_index * 100 + c_index
                outcome = await run_session(capability, model, count, seed=seed, context_window=window)
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


DEFAULT_AGING = 'default + Aging()'
"""The library's default aging: `after_turns=4, min_tokens=200, batch_tokens=8_000`."""

SMALL_BATCH_AGING = 'default + Aging(min_tokens=500, batch_tokens=4_000)'
"""Smaller batches of larger returns (issue 26's example): more savings, more cache-prefix breaks."""

WITHOUT_AGING = 'default, no aging'
"""What aging is compared with, when the window is unknown."""

WINDOW_WITHOUT_AGING = 'share band, no aging'
"""The same under a known window, with the band relative to it."""

WINDOW_AGING = 'share band + Aging()'
"""The band relative to the window, with the default aging."""

WINDOW_SMALL_AGING = 'share band + Aging(after_turns=2, min_tokens=100, batch_share=0.2)'
"""Aging tuned for an 8k-token window: older returns sooner, in batches of a fifth of the window."""

AGINGS: dict[str, Aging] = {
    DEFAULT_AGING: Aging(),
    SMALL_BATCH_AGING: Aging(after_turns=4, min_tokens=500, batch_tokens=4_000),
    WINDOW_AGING: Aging(),
    WINDOW_SMALL_AGING: Aging(after_turns=2, min_tokens=100, batch_share=0.2),
}
"""Each configuration with aging, and its aging."""

BASELINES = {
    'no capability': WITHOUT_AGING,
    WITHOUT_AGING: WITHOUT_AGING,
    DEFAULT_AGING: WITHOUT_AGING,
    SMALL_BATCH_AGING: WITHOUT_AGING,
    WINDOW_WITHOUT_AGING: WINDOW_WITHOUT_AGING,
    WINDOW_AGING: WINDOW_WITHOUT_AGING,
    WINDOW_SMALL_AGING: WINDOW_WITHOUT_AGING,
}
"""Each configuration's run without aging (same model and window), its tokens are compared with."""

SMALL_WINDOW = 8_000
"""Windows up to this size also run with `WINDOW_SMALL_AGING`."""

MAX_AGED_SHARE = 0.5
"""The target: input tokens with aging at most this share of without."""

MAX_BREAKS_PER_REQUEST = 0.1
"""The target: at most one cache-prefix break per ten requests."""

Make = Callable[[Path], 'OverflowingToolOutput[Any] | None']
"""Builds a configuration's capability over a store directory (`None`: no capability)."""


def session_configurations(window: int | None) -> dict[str, Make]:
    """The configurations the session runs under: the defaults when the window is unknown, else the share band."""
    if window is None:
        return {
            'no capability': lambda _root: None,
            WITHOUT_AGING: lambda root: OverflowingToolOutput(store=LocalFileStore(base_dir=root)),
            **{name: _aged(AGINGS[name]) for name in (DEFAULT_AGING, SMALL_BATCH_AGING)},
        }
    made: dict[str, Make] = {WINDOW_WITHOUT_AGING: relative_bands, WINDOW_AGING: _relative(AGINGS[WINDOW_AGING])}
    if window <= SMALL_WINDOW:
        made[WINDOW_SMALL_AGING] = _relative(AGINGS[WINDOW_SMALL_AGING])
    return made


def _aged(aging: Aging) -> Make:
    return lambda root: OverflowingToolOutput(store=LocalFileStore(base_dir=root), aging=aging)


def _relative(aging: Aging) -> Make:
    return lambda root: relative_bands(root, aging)


def session_entries(outcomes: Sequence[SessionOutcome]) -> list[Entry]:
    """Every fact found in every session; with aging, the tokens against without and the prefix breaks."""
    complete = sum(o.found == o.facts for o in outcomes)
    missed = '; '.join(
        f'{o.model}, {o.configuration}, window {o.window}: {o.found}/{o.facts}' for o in outcomes if o.found < o.facts
    )
    entries = [
        Entry(
            'economy',
            'long session: sessions that found every fact about the first returns (every configuration, model, window)',
            complete,
            f'of {len(outcomes)}',
            f'{len(outcomes)} of {len(outcomes)}',
            complete == len(outcomes),
            detail=missed,
        )
    ]
    tokens = {(o.configuration, o.model, o.window): o.tokens for o in outcomes}
    groups: dict[tuple[str, int | None], list[SessionOutcome]] = {}
    for o in outcomes:
        if o.configuration in AGINGS:
            groups.setdefault((o.configuration, o.window), []).append(o)
    for (configuration, window), runs in groups.items():
        where = 'window unknown' if window is None else f'{window:,}-token window'
        # Under a known window the band already spills the returns; the 50% target is the session's as specified
        # (window unknown), the windows are shown for comparison.
        targeted = window is None
        shares = [o.tokens / tokens[(BASELINES[configuration], o.model, window)] for o in runs]
        found = all(o.found == o.facts for o in runs)
        entries.append(
            Entry(
                'economy',
                f'long session, {configuration}, {where}: input tokens vs without aging (worst model)',
                max(shares) * 100,
                '%',
                f'<= {MAX_AGED_SHARE:.0%}, every fact found' if targeted else 'for comparison; every fact found',
                found and (max(shares) <= MAX_AGED_SHARE or not targeted),
                detail='; '.join(
                    f'{o.model}: {tokens[(BASELINES[configuration], o.model, window)]:,} -> {o.tokens:,} tokens, '
                    f'{o.requests} requests, {o.found}/{o.facts} facts, {o.retrievals} retrieval calls'
                    for o in runs
                ),
            )
        )
        worst = max(runs, key=lambda o: o.breaks / o.requests)
        entries.append(
            Entry(
                'economy',
                f'long session, {configuration}, {where}: cache-prefix breaks per 10 requests (worst model)',
                worst.breaks / worst.requests * 10,
                'breaks',
                f'<= {MAX_BREAKS_PER_REQUEST * 10:g}',
                all(o.breaks <= MAX_BREAKS_PER_REQUEST * o.requests for o in runs),
                detail='; '.join(
                    f'{o.model}: {o.breaks} of {o.requests} requests counted from the requests sent, '
                    f'{o.reported_breaks} reported by the capability (`overflow_report(...).prefix_breaks`)'
                    for o in runs
                ),
            )
        )
    return entries
