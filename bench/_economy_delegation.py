"""Delegation: a manager consulting three specialists whose answers are large, in tokens and facts.

The manager asks three specialists (agents as tools) in its first turn, each answering with a 50 KB report; the user then
asks six questions, one a turn, two per report, whose facts sit deep in the reports (never in their first lines). Three ways to hand an
answer back:

- **passing text**: `agent_tool(agent)`, the whole answer as the tool's return, no capability on the manager;
- **passing text, spilled**: the same with `OverflowingToolOutput()` (default bands) on the manager, which spills
  each answer as it would any tool return (a preview and a handle);
- **by reference**: `agent_tool(agent, by_reference=True)` with `OverflowingToolOutput()`: the answer's first 1,000
  characters and a handle to the specialist's whole run.

The manager is scripted (a `FunctionModel`) and reads only what it is sent: it answers a question when the fact is
in its context; otherwise it greps the handle the specialist's return names for the question's term, then reads the
lines the grep answer suggests, as given. Tokens are counted with `cl100k_base` over every request the manager's
model is sent (messages and tool definitions); the specialists' own runs are the same in every form and not counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._report import Entry
from examples._scripted import NOT_FOUND, part_text, tool_definitions_text
from pydantic_ai_harness.handoffs import agent_tool
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

SPECIALISTS = ('sales', 'finance', 'logistics')
"""The three specialists the manager consults."""

REPORT_LINES = 900
"""Lines of each specialist's report (about 50 KB)."""

FORMS = ('passing text', 'passing text, spilled', 'by reference')
"""The three ways an answer is handed back, as the table names them."""


@dataclass(frozen=True)
class Fact:
    """One question of the manager, the report that holds its answer, and the answer."""

    specialist: str
    """Whose report holds it."""

    term: str
    """The literal the manager greps for."""

    value: str
    """The answer, as the report writes it."""

    line: int
    """Its line in the report (0-based)."""


FACTS = tuple(
    Fact(name, f'{name.upper()}-KEY-{n}', f'{name}-value-{n * 7 + len(name)}', line)
    for name in SPECIALISTS
    for n, line in ((1, 310), (2, 820))
)
"""Two facts per report, at lines 310 and 820: never in the answer's first 1,000 characters or a spill's preview."""


def report(specialist: str) -> str:
    """A specialist's 50 KB answer: routine lines, and its two facts."""
    lines = [f'{specialist} record {n:04d}: reviewed, figures in the usual range' for n in range(REPORT_LINES)]
    for fact in FACTS:
        if fact.specialist == specialist:
            lines[fact.line] = f'{fact.term}: {fact.value}'
    return '\n'.join(lines)


@dataclass
class DelegationTrace:
    """What the manager did and what it cost."""

    answers: dict[str, str] = field(default_factory=dict[str, str])
    """The answer to each fact's term (`NOT FOUND` when it could not see it)."""

    requests: int = 0
    """Requests the manager's model was sent."""

    input_tokens: int = 0
    """Tokens sent over the manager's whole run."""

    peak_request_tokens: int = 0
    """The largest single request."""

    retrievals: int = 0
    """`grep_tool_result` and `read_tool_result` calls."""

    @property
    def found(self) -> int:
        """Facts answered right."""
        return sum(self.answers.get(fact.term) == fact.value for fact in FACTS)


_HANDLE = re.compile(r"handle '([^']+)'")
_OFFSET = re.compile(r'read around it: .*?offset=(\d+)')


class _Manager:
    """The scripted manager: on the first turn it asks every specialist; on each later turn it answers the user's
    question from its context, or by one grep and one read of the handle the specialist's return names.
    """

    def __init__(self, trace: DelegationTrace, count: Callable[[str], int]) -> None:
        self.trace, self.count = trace, count
        self.step = 0  # for the current question: 0 not tried, 1 grepped, 2 read
        self.calls = 0

    def _call(self, name: str, args: dict[str, Any]) -> ToolCallPart:
        self.calls += 1
        if name in ('grep_tool_result', 'read_tool_result'):
            self.trace.retrievals += 1
        return ToolCallPart(name, args, f'm{self.calls}')

    def _account(self, messages: list[ModelMessage], info: AgentInfo) -> None:
        tokens = sum(self.count(part_text(p)) for m in messages for p in m.parts)
        tokens += self.count(tool_definitions_text(info.function_tools))
        self.trace.requests += 1
        self.trace.input_tokens += tokens
        self.trace.peak_request_tokens = max(self.trace.peak_request_tokens, tokens)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self._account(messages, info)
        returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
        prompts = [
            p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
        ]
        fact = next((f for f in FACTS if prompts and f.term in str(prompts[-1])), None)
        if fact is None:  # the first turn: ask every specialist, then say so
            if not returns:
                return ModelResponse(
                    parts=[self._call(f'ask_{n}', {'input': f'Send me your full {n} report.'}) for n in SPECIALISTS]
                )
            return ModelResponse(parts=[TextPart('I have the three reports.')])
        seen = '\n'.join(part.model_response_str() for part in returns)
        found = re.search(rf'{re.escape(fact.term)}: ([\w-]+)', seen)
        if found is not None:
            return self._answer(fact, found.group(1))
        own = next(p.model_response_str() for p in returns if p.tool_name == f'ask_{fact.specialist}')
        handle = _HANDLE.search(own)
        if handle is not None and self.step == 0:
            self.step = 1
            args = {'handle': handle.group(1), 'pattern': fact.term, 'max_matches': 5}
            return ModelResponse(parts=[self._call('grep_tool_result', args)])
        offset = _OFFSET.search(returns[-1].model_response_str())
        if handle is not None and self.step == 1 and offset is not None:
            self.step = 2
            args = {'handle': handle.group(1), 'offset': int(offset.group(1)), 'limit': 12}
            return ModelResponse(parts=[self._call('read_tool_result', args)])
        return self._answer(fact, NOT_FOUND)

    def _answer(self, fact: Fact, value: str) -> ModelResponse:
        self.trace.answers[fact.term] = value
        self.step = 0
        return ModelResponse(parts=[TextPart(f'{fact.term} is {value}.')])


def _specialist(name: str) -> Agent[None, str]:
    text = report(name)
    return Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart(text)])), name=name)


async def measure_delegation(root: Path, count: Callable[[str], int]) -> dict[str, DelegationTrace]:
    """The manager's run in each form, by form."""
    traces: dict[str, DelegationTrace] = {}
    for number, form in enumerate(FORMS):
        trace = DelegationTrace()
        by_reference = form == 'by reference'
        tools = [agent_tool(_specialist(n), tool_name=f'ask_{n}', by_reference=by_reference) for n in SPECIALISTS]
        capabilities: list[Any] = []
        if form != 'passing text':
            capabilities.append(OverflowingToolOutput(store=LocalFileStore(base_dir=root / f'delegation-{number}')))
        manager = Agent(FunctionModel(_Manager(trace, count).respond), tools=tools, capabilities=capabilities)
        history = (await manager.run('Ask the three specialists for their reports.')).all_messages()
        for fact in FACTS:  # one question a turn, on the whole conversation
            history = (await manager.run(f'What is {fact.term}?', message_history=history)).all_messages()
        traces[form] = trace
    return traces


def delegation_table(traces: dict[str, DelegationTrace]) -> str:
    """The scenario's table: one row per form."""
    rows = [
        '| answer handed back as | facts found | manager input tokens | peak request | requests | retrieval calls |',
        '|---|---|---|---|---|---|',
    ]
    for form, trace in traces.items():
        rows.append(
            f'| {form} | {trace.found}/{len(FACTS)} | {trace.input_tokens:,} | {trace.peak_request_tokens:,} '
            f'| {trace.requests} | {trace.retrievals} |'
        )
    return '\n'.join(rows)


def delegation_entries(traces: dict[str, DelegationTrace]) -> tuple[list[Entry], str]:
    """The entries (by reference against passing text) and the section's text."""
    text, spilled, by_reference = (traces[form] for form in FORMS)
    saved = 1 - by_reference.input_tokens / text.input_tokens
    entries = [
        Entry(
            'economy',
            'delegation, 3 specialists of 50 KB: manager input tokens saved by reference vs passing text',
            saved * 100,
            '%',
            f'>= 80%, {len(FACTS)}/{len(FACTS)} facts',
            saved >= 0.8 and by_reference.found == len(FACTS),
            detail=f'{text.input_tokens:,} -> {by_reference.input_tokens:,} tokens; '
            f'{by_reference.found}/{len(FACTS)} facts ({spilled.input_tokens:,} tokens spilled as plain returns)',
        )
    ]
    section = (
        'Delegation: a manager asks three specialists (agents as tools) for their reports, 50 KB each, in its first '
        f'turn; the user then asks {len(FACTS)} questions, one a turn, whose facts sit deep in the reports '
        '(`bench/_economy_delegation.py`). Passing text puts all three reports in every later request; the capability '
        'spills each as a tool return '
        '(a preview and a handle); by reference hands back the first 1,000 characters and a handle to each '
        "specialist's whole run. The manager finds every fact it cannot see with one grep and one read.\n\n"
        + delegation_table(traces)
    )
    return entries, section
