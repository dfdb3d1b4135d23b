"""The real-model benchmark's scenarios and one agent run of a scenario against an OpenAI-compatible endpoint.

Each scenario gives the agent tools whose returns are the economy benchmark's seeded payloads, asks its questions
as a user would, and scores the final answer by the planted facts it names. The model decides every call itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from bench._economy_windows import relative_bands
from bench._query_tool_offer import OfferedOnceStored
from bench._realmodel_server import Endpoint
from bench._realmodel_wrapper import TextToolCalls
from bench._session_payloads import FACTS, session_calls
from examples import _payloads as payloads
from pydantic_ai_harness.overflowing_tool_output import Aging, LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import QUERY_TOOL_NAMES

INSTRUCTIONS = 'You help with a software project. Use the tools to look things up; answer briefly.'
"""The system prompt of every run, with and without the capability."""

TEST_LOG_LINES = 3_150
"""About 200 KB of test log (issue 36's)."""

PAGE_CHARS = 12_000
"""Each catalog page: over the default 10,000-character threshold, so every page is stored."""

PAGES = 4
"""Catalog pages; the fact is on `FACT_PAGE`."""

FACT_PAGE = 3

Fact = tuple[str, tuple[str, ...]]
"""A fact's name and the strings any of which, in the answer, shows it was found."""

MakeCapability = Callable[[Path], OverflowingToolOutput[Any] | None]


@dataclass(frozen=True)
class RealScenario:
    """Tools, the user turns that use them, and the facts the last answer should name."""

    name: str
    """The scenario's name in the report."""
    tools: Callable[[], list[Callable[..., Any]]]
    """Makes the tool functions for one run (fresh state per run)."""
    prompts: list[str]
    """The user turns, in order; the last one asks the questions."""
    facts: list[Fact]
    """What the last answer should name."""
    with_capability: MakeCapability
    """The capability the scenario runs with (its store under the given directory)."""
    offered_once_stored: bool = False
    """Whether it also runs with the query tools offered only once something is stored (`OfferedOnceStored`)."""


def _test_log_tools() -> list[Callable[..., Any]]:
    log = payloads.test_log(TEST_LOG_LINES)

    def run_tests() -> str:
        """Run the project's test suite and return its output."""
        return log

    return [run_tests]


def _pages_tools() -> list[Callable[..., Any]]:
    def get_page(page: int) -> str:
        """Get one page of the product catalog API (pages 1 to 4)."""
        if not 1 <= page <= PAGES:
            return f'No page {page}: the catalog has pages 1 to {PAGES}.'
        # The economy's catalog pages, with the one holding the fact served as page FACT_PAGE.
        served = payloads.PAGE_FACT_PAGE if page == FACT_PAGE else page
        return payloads.catalog_page(served, size=PAGE_CHARS)

    return [get_page]


def _session_tools(tasks: int) -> Callable[[], list[Callable[..., Any]]]:
    calls = session_calls()[: tasks * 4]

    def make() -> list[Callable[..., Any]]:
        pending = list(calls)

        def take(tool: str, argument: str) -> Any:
            # The next call the tasks listed with this tool and argument; else the next of this tool, as a real
            # service answers a call the task did not ask for.
            same_tool = [call for call in pending if call.tool == tool]
            call = next((c for c in same_tool if c.argument == argument.strip()), None) or next(iter(same_tool), None)
            if call is None:
                return f'{tool}: nothing more to return for {argument!r}'
            pending.remove(call)
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

        return [read_file, run_command, http_get]

    return make


def _session_prompts(tasks: int) -> list[str]:
    calls = session_calls()[: tasks * 4]
    arguments = {'read_file': 'path', 'run_command': 'command', 'http_get': 'url'}
    prompts: list[str] = []
    for number in range(tasks):
        steps = [
            f'{call.tool}({arguments[call.tool]}={call.argument!r})' for call in calls[number * 4 : number * 4 + 4]
        ]
        prompts.append(f'Task {number + 1}: make these calls one after another, then say "done": {"; ".join(steps)}.')
    return prompts


def _session_facts(tasks: int) -> tuple[str, list[Fact]]:
    # The questions whose facts the session's first `tasks` tasks returned (a fact's call is its index in FACTS order).
    fact_calls = [0, 2, 5, 7, 9, 11]
    kept = [(question, answer) for (question, answer), index in zip(FACTS, fact_calls) if index < tasks * 4]
    prompt = 'A few questions about what we saw: ' + ' '.join(question.prompt for question, _ in kept)
    return prompt, [(question.prompt, (answer,)) for question, answer in kept]


def _default(root: Path) -> OverflowingToolOutput[Any]:
    return OverflowingToolOutput(store=LocalFileStore(base_dir=root))


def offered_once_stored(root: Path) -> OverflowingToolOutput[Any]:
    """The default capability with its query tools offered only once a result is stored."""
    return OfferedOnceStored(store=LocalFileStore(base_dir=root))


def scenarios(session_tasks: int) -> list[RealScenario]:
    """The test log, the paginated catalog (several outputs stored) and the first tasks of the long session."""
    question, session_facts = _session_facts(session_tasks)
    return [
        RealScenario(
            '200 KB test log, "Which test failed and why?"',
            _test_log_tools,
            ['Which test failed and why?'],
            [
                ('the failing test', ('test_apply_coupon_twice',)),
                ('why (expected 90.00, got 80.00)', ('80.00',)),
            ],
            _default,
            offered_once_stored=True,
        ),
        RealScenario(
            f'{PAGES} catalog pages of {PAGE_CHARS // 1000} KB, fact on page {FACT_PAGE}',
            _pages_tools,
            [f'What does WIDGET-42 cost? The catalog API has pages 1 to {PAGES}.'],
            [('the price', ('129.50',))],
            _default,
        ),
        RealScenario(
            f'long session, first {session_tasks} tasks ({session_tasks * 4} returns of 2-8 KB)',
            _session_tools(session_tasks),
            [*_session_prompts(session_tasks), question],
            session_facts,
            lambda root: relative_bands(root, Aging()),
        ),
    ]


@dataclass
class RealOutcome:
    """One run of a scenario with the real model."""

    scenario: str
    """The scenario's name."""
    configuration: str
    """`'no capability'` or the capability's name."""
    seed: int
    """The sampling seed."""
    found: int = 0
    """Facts the last answer names."""
    facts: int = 0
    """Facts asked for."""
    requests: int = 0
    """Model requests."""
    input_tokens: int = 0
    """Input tokens over every request, as the server counted them."""
    seconds: float = 0.0
    """Wall time of the whole run (every user turn)."""
    calls: list[str] = field(default_factory=list[str])
    """The tool calls made, in order, with their arguments."""
    answer: str = ''
    """The last answer (shortened)."""
    failure: str = ''
    """Why the run stopped without an answer, if it did."""


@dataclass(init=False)
class _Counted(WrapperModel):
    """Counts requests, input tokens and tool calls as they happen, so a run that fails midway still reports them."""

    requests: int = 0
    input_tokens: int = 0
    calls: list[str] = field(default_factory=list[str])

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        self.requests += 1
        response = await super().request(messages, model_settings, model_request_parameters)
        self.input_tokens += response.usage.input_tokens
        self.calls += _tool_calls([response])
        return response


def chat_model(endpoint: Endpoint, context_window: int) -> TextToolCalls:
    """The endpoint's model through `OpenAIChatModel`, wrapped to turn tool calls written as text into calls."""
    provider = OpenAIProvider(base_url=endpoint.base_url, api_key=endpoint.api_key)
    profile = ModelProfile(context_window=context_window)
    return TextToolCalls(OpenAIChatModel(endpoint.model, provider=provider, profile=profile))


def _tool_calls(messages: Sequence[ModelMessage]) -> list[str]:
    calls: list[str] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    arguments = part.args if isinstance(part.args, str) else json.dumps(part.args)
                    calls.append(f'{part.tool_name}({arguments[:80]})')
    return calls


async def run_real(
    scenario: RealScenario,
    configuration: str,
    capability: OverflowingToolOutput[Any] | None,
    endpoint: Endpoint,
    *,
    seed: int,
    context_window: int,
    timeout: float,
) -> RealOutcome:
    """Every user turn of `scenario` with the endpoint's model under `capability` (none: `None`)."""
    model = _Counted(chat_model(endpoint, context_window))
    model.requests, model.input_tokens, model.calls = 0, 0, []
    settings = OpenAIChatModelSettings(temperature=0.3, seed=seed, max_tokens=400)
    agent = Agent(
        model, instructions=INSTRUCTIONS, model_settings=settings, capabilities=[capability] if capability else []
    )
    for tool in scenario.tools():
        agent.tool_plain(tool)
    outcome = RealOutcome(scenario.name, configuration, seed, facts=len(scenario.facts))
    history: list[ModelMessage] = []
    started = time.perf_counter()
    answer = ''
    try:
        async with asyncio.timeout(timeout):
            for prompt in scenario.prompts:
                result = await agent.run(prompt, message_history=history)
                history = result.all_messages()
                answer = result.output
    except TimeoutError:
        outcome.failure = f'stopped after {timeout:g} s'
    except Exception as exc:  # noqa: BLE001 - a model error is a result to report (a window exceeded, a bad call)
        outcome.failure = f'{type(exc).__name__}: {str(exc)[:160]}'
    outcome.seconds = time.perf_counter() - started
    outcome.requests, outcome.input_tokens, outcome.calls = model.requests, model.input_tokens, model.calls
    outcome.answer = ' '.join(answer.split())[:300]
    outcome.found = sum(any(names(answer, needle) for needle in needles) for _, needles in scenario.facts)
    return outcome


def names(answer: str, needle: str) -> bool:
    """Whether `answer` names `needle` as a whole (`7` in "retries 7 times", not in "17" or "7.5")."""
    return re.search(rf'(?<![\w.]){re.escape(needle)}(?![\w]|\.\d)', answer, re.IGNORECASE) is not None


def query_tool_calls(outcome: RealOutcome) -> int:
    """The calls of `read_tool_result` / `grep_tool_result` in a run."""
    return sum(call.split('(', 1)[0] in QUERY_TOOL_NAMES for call in outcome.calls)
