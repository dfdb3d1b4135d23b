"""The long session through a window it overflows mid-session: what each way of compacting keeps.

The session of `_economy_session` (40 returns of 2-8 KB, then questions about the first ones) against a model whose
context window the history outgrows around the fifteenth call. The model rejects every request over its window with
pydantic-ai's `ModelContextWindowExceededError`, as a provider does; core then compacts through the capabilities'
`compact_history` hooks and sends the request once more. Compared:

- **no capability**: nothing compacts, so the run fails at the first overflow;
- **OverflowingToolOutput()**: lossless compaction (the default): old returns become stubs naming handles;
- **OverflowingToolOutput() + a summarizer after it**: the summarizer compacts only when the lossless compaction
  cannot make the request fit;
- **a summarizer alone**: everything before the request being answered becomes a one-paragraph summary.

Scored on the facts found (the questions are about the first returns, which every compaction moves), input tokens,
requests, and prefix breaks (each compaction breaks the cached prefix once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.exceptions import ModelContextWindowExceededError, UnexpectedModelBehavior
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.models.function import AgentInfo

from bench._economy_session import (
    CALLS_PER_TASK,
    SESSION_MODELS,
    SessionModel,
    prefix_breaks,
    session_prompts,
)
from bench._report import Entry
from bench._session_payloads import FACTS, session_calls
from examples._scripted import part_text, seeded_run_ids, tool_definitions_text
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

OVERFLOW_WINDOW = 20_000
"""The model's window in tokens: the session's history outgrows it around its fifteenth tool call."""


@dataclass
class SummarizingCompaction(AbstractCapability[Any]):
    """A user's own lossy compaction: everything before the request being answered becomes one short summary."""

    calls: int = 0
    """How many times it compacted."""

    async def compact_history(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
        self.calls += 1
        first = request.messages[0]
        system = [p for p in first.parts if isinstance(p, SystemPromptPart)] if isinstance(first, ModelRequest) else []
        calls = sum(len(m.tool_calls) for m in request.messages if isinstance(m, ModelResponse))
        part = CompactionPart(content=f'Earlier, {calls} tool calls were made while working on the billing service.')
        return CompactionResult(
            messages=[ModelRequest(parts=[*system, part]), request.messages[-1]], part=part, handler='summarizing'
        )


class _Window(SessionModel):
    """Rejects a request over the window as a provider does, before the scripted model sees it (put in front of a
    session model: `type(name, (_Window, CarefulSession), {})`)."""

    window: int = OVERFLOW_WINDOW
    rejected: int = 0

    def _request_tokens(self, messages: list[ModelMessage], info: AgentInfo) -> int:
        parts = sum(self._count(part_text(part)) for message in messages for part in message.parts)
        return parts + self._count(tool_definitions_text(info.function_tools))

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tokens = self._request_tokens(messages, info)
        if tokens > self.window:
            self.rejected += 1
            raise ModelContextWindowExceededError('scripted', f'{tokens} tokens > the {self.window}-token window')
        return super()._respond(messages, info)


@dataclass
class OverflowOutcome:
    """One session through the overflowing window."""

    configuration: str
    """The configuration's name in the report."""
    model: str
    """The scripted model's name in the report."""
    finished: bool = False
    """Whether the session reached its last answer (no capability: it fails at the first overflow)."""
    requests: int = 0
    """Model requests sent (rejected ones included)."""
    rejected: int = 0
    """Requests the model rejected for exceeding its window."""
    tokens: int = 0
    """Input tokens of the requests the model accepted (cl100k)."""
    found: int = 0
    """Questions answered with their planted fact exactly."""
    facts: int = len(FACTS)
    """Questions asked."""
    breaks: int = 0
    """Requests that do not start with the whole previous request."""
    compactions: dict[str, int] | None = None
    """Compactions by handler."""
    failure: str = ''
    """Why the session stopped early, if it did."""


Configure = Callable[[Path], list[AbstractCapability[Any]]]


def overflow_configurations() -> dict[str, Configure]:
    """The four ways through the overflowing window."""
    return {
        'no capability': lambda _root: [],
        'OverflowingToolOutput() (lossless compaction)': lambda root: [
            OverflowingToolOutput(store=LocalFileStore(base_dir=root))
        ],
        'OverflowingToolOutput() + a summarizer after it': lambda root: [
            OverflowingToolOutput(store=LocalFileStore(base_dir=root)),
            SummarizingCompaction(),
        ],
        'a summarizer alone': lambda _root: [SummarizingCompaction()],
    }


async def run_overflow_session(
    capabilities: list[AbstractCapability[Any]], model: type[SessionModel], count: Callable[[str], int], *, seed: int
) -> OverflowOutcome:
    """The long session through `OVERFLOW_WINDOW` with `capabilities`."""
    calls = session_calls()
    tasks = [calls[i : i + CALLS_PER_TASK] for i in range(0, len(calls), CALLS_PER_TASK)]
    windowed: type[_Window] = type(f'Windowed{model.__name__}', (_Window, model), {})
    brain = windowed(tasks, count_tokens=count, seed=seed)
    agent = Agent(brain.model(context_window=OVERFLOW_WINDOW), capabilities=capabilities)
    pending = iter(calls)

    def take(kind: str, argument: str) -> Any:
        call = next(pending)
        assert (call.tool, call.argument) == (kind, argument), (call, kind, argument)
        return call.make()

    agent.tool_plain(name='read_file', description='Read a file of the repository.')(
        lambda path: take('read_file', path)
    )
    agent.tool_plain(name='run_command', description='Run a shell command in the repository.')(
        lambda command: take('run_command', command)
    )
    agent.tool_plain(name='http_get', description="GET a path of the service's JSON API.")(
        lambda url: take('http_get', url)
    )
    history: list[ModelMessage] = []
    compactions: dict[str, int] = {}
    outcome = OverflowOutcome('', '')
    with seeded_run_ids(seed):
        try:
            for prompt in session_prompts(len(tasks)):
                result = await agent.run(prompt, message_history=history)
                history = result.all_messages()
                for record in result.compactions:
                    compactions[record.handler] = compactions.get(record.handler, 0) + 1
            outcome.finished = True
        except (ModelContextWindowExceededError, UnexpectedModelBehavior) as exc:
            outcome.failure = f'{type(exc).__name__}: {exc}'[:120]
    trace = brain.trace
    expected = [answer for _, answer in FACTS]
    outcome.requests = trace.requests + brain.rejected
    outcome.rejected = brain.rejected
    outcome.tokens = trace.input_tokens
    outcome.found = sum(a == e for a, e in zip(trace.answers, expected))
    outcome.breaks = prefix_breaks(brain.requests)
    outcome.compactions = compactions
    return outcome


async def measure_overflow(root: Path, count: Callable[[str], int]) -> list[OverflowOutcome]:
    """Every configuration with every model."""
    outcomes: list[OverflowOutcome] = []
    for c_index, (name, make) in enumerate(overflow_configurations().items()):
        for model_name, model in SESSION_MODELS.items():
            directory = root / 'overflow' / f'{c_index}-{model_name.replace(" ", "-")}'
            outcome = await run_overflow_session(make(directory), model, count, seed=9_000 + c_index)
            outcome.configuration, outcome.model = name, model_name
            outcomes.append(outcome)
    return outcomes


def overflow_table(outcomes: Sequence[OverflowOutcome]) -> str:
    """The sessions as a markdown table."""
    rows = [
        f'| {o.configuration} | {o.model} | {"yes" if o.finished else f"no: {o.failure}"} '
        f'| {o.requests} | {o.rejected} | {o.tokens:,} | {o.found}/{o.facts} | {o.breaks} '
        f'| {", ".join(f"{k} {v}" for k, v in (o.compactions or {}).items()) or "none"} |'
        for o in outcomes
    ]
    return (
        f'| configuration ({OVERFLOW_WINDOW:,}-token window) | model | finished | requests | rejected for the window '
        '| input tokens (cl100k) | facts found | prefix breaks | compactions (by handler) |\n'
        '|---|---|---|---:|---:|---:|---|---:|---|\n' + '\n'.join(rows)
    )


def overflow_entries(outcomes: Sequence[OverflowOutcome]) -> list[Entry]:
    """The lossless configurations finish with every fact; each compaction costs one prefix break."""
    entries: list[Entry] = []
    for name in ('OverflowingToolOutput() (lossless compaction)', 'OverflowingToolOutput() + a summarizer after it'):
        runs = [o for o in outcomes if o.configuration == name]
        compactions = [sum((o.compactions or {}).values()) for o in runs]
        entries.append(
            Entry(
                'economy',
                f'window overflowing mid-session, {name}: sessions that finish with every fact found',
                sum(o.finished and o.found == o.facts for o in runs),
                f'of {len(runs)}',
                f'{len(runs)} of {len(runs)}',
                all(o.finished and o.found == o.facts for o in runs),
                detail='; '.join(
                    f'{o.model}: {o.found}/{o.facts} facts, {o.requests} requests ({o.rejected} rejected), '
                    f'{o.tokens:,} tokens, {o.breaks} prefix breaks, compactions {o.compactions}'
                    for o in runs
                ),
            )
        )
        entries.append(
            Entry(
                'economy',
                f'window overflowing mid-session, {name}: prefix breaks per compaction (worst model)',
                max(o.breaks / max(1, c) for o, c in zip(runs, compactions)),
                'breaks',
                '<= 1 (plus the aging batches, none here)',
                all(o.breaks <= max(1, c) for o, c in zip(runs, compactions)),
            )
        )
    return entries
