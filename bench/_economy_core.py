"""The economy benchmark's scenarios, the scripted models they run with, and one run of a scenario."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent

from examples import _payloads as payloads
from examples._scripted import (
    CarefulModel,
    ClaudeCodeModel,
    Question,
    ScriptedModel,
    in_hex_dump,
    on_line,
    preceding,
)
from pydantic_ai_harness.overflowing_tool_output import (
    OverflowingToolOutput,
)

PAGE_CHARS = 300_000
"""The size of each page of the ten-page scenario (issue 26's ten 300 KB pages)."""


@functools.cache
def catalog_page(page: int) -> str:
    """Page `page` of the ten-page scenario, made once per benchmark run (making one takes a while)."""
    return payloads.catalog_page(page, size=PAGE_CHARS)


CHART = Path(__file__).resolve().parent.parent / 'docs' / 'benchmarks-tokens.png'


@dataclass(frozen=True)
class Scenario:
    """A tool whose output hides one fact, and the question that asks for it."""

    name: str
    tool: str
    make: Callable[[int], Any]
    question: Question
    expected: str
    large: bool = True


def scenarios() -> list[Scenario]:
    return [
        Scenario(
            '20 MB test log, one failure in the middle',
            'run_tests',
            lambda _: payloads.test_log(320_000),
            Question('Which test failed?', [('run_tests', {})], 'FAILED', on_line('FAILED ', r'FAILED (\S+)')),
            payloads.FAILING_TEST,
        ),
        Scenario(
            '5 MB JSON API response, one stuck order',
            'list_orders',
            lambda _: payloads.orders_json(25_000),
            Question(
                'Which order is stuck?',
                [('list_orders', {})],
                '"stuck"',
                preceding('stuck', r'(ord_[0-9a-f]{8})'),
            ),
            payloads.STUCK_ORDER_ID,
        ),
        Scenario(
            'CSV export, 200k rows, one flagged',
            'export_users',
            lambda _: payloads.csv_export(200_000),
            Question(
                'Which user had a chargeback?',
                [('export_users', {})],
                'chargeback',
                on_line('chargeback', r'^\W*(?:\d+\|\s*)?(u\d{7}),'),
            ),
            'u0066666',
        ),
        Scenario(
            'long source file (800 KB)',
            'read_source',
            lambda _: payloads.source_file(),
            Question(
                'How many times is a failed payment retried?',
                [('read_source', {})],
                'MAX_PAYMENT_RETRIES',
                on_line('MAX_PAYMENT_RETRIES', r'MAX_PAYMENT_RETRIES = (\d+)'),
            ),
            str(payloads.RETRY_LIMIT),
            large=False,
        ),
        Scenario(
            '`find` listing, 120k paths',
            'list_files',
            lambda _: payloads.find_listing(),
            Question(
                'Where is the production credentials file?',
                [('list_files', {})],
                'credentials',
                on_line('credentials', r'(\./\S*credentials\.yaml)'),
            ),
            payloads.SECRET_PATH,
        ),
        Scenario(
            'binary blob (2 MB firmware image)',
            'download_firmware',
            lambda _: payloads.firmware_blob(),
            Question(
                'What firmware version is this image?',
                [('download_firmware', {})],
                'FW_VERSION',
                in_hex_dump(r'FW_VERSION="([^"]+)"'),
            ),
            payloads.FIRMWARE_VERSION,
        ),
        Scenario(
            'ANSI-coloured CI output (1.1 MB)',
            'run_ci',
            lambda _: payloads.ansi_ci_output(),
            Question('Which CI step failed?', [('run_ci', {})], 'failed', on_line('failed', r'step (\S+) failed')),
            payloads.FAILED_STEP,
        ),
        Scenario(
            '10 sequential pages of 300 KB, fact on page 7',
            'get_page',
            catalog_page,
            Question(
                'What does WIDGET-42 cost?',
                [('get_page', {'page': page}) for page in range(1, 11)],
                'WIDGET-42',
                on_line('WIDGET-42', r'WIDGET-42 costs ([\d.]+ EUR)'),
            ),
            '129.50 EUR',
            large=False,
        ),
    ]


MODELS: dict[str, type[ScriptedModel]] = {'careful': CarefulModel, 'Claude Code-style': ClaudeCodeModel}
"""The scripted models every scenario runs with, by the name the report gives them."""


@dataclass(frozen=True)
class Outcome:
    """What one scenario run cost and whether it found the fact."""

    scenario: str
    """The scenario's name in the report."""
    configuration: str
    """The configuration's name in the report."""
    model: str
    """The scripted model's name in the report."""
    tokens: int
    """Input tokens over every request (cl100k)."""
    tokens_heuristic: int
    """The same at 4 characters per token."""
    tool_definition_tokens: int
    """Of `tokens`, the tool definitions."""
    query_tool_definition_tokens: int
    """Of those, the query tools' definitions."""
    peak: int
    """The largest request's input tokens."""
    requests: int
    """Model requests."""
    retrievals: int
    """Calls to `read_tool_result` / `grep_tool_result`."""
    found: bool
    """Whether the answer is the planted fact exactly."""
    answer: str
    """The model's answer."""


def cached(count: Callable[[str], int]) -> Callable[[str], int]:
    """`count` remembering its answers by a digest of the text: the scenarios send the same big payloads many times."""
    seen: dict[bytes, int] = {}

    def counted(text: str) -> int:
        key = hashlib.blake2b(text.encode('utf-8', 'surrogatepass'), digest_size=16).digest()
        if key not in seen:
            seen[key] = count(text)
        return seen[key]

    return counted


async def run_scenario(
    scenario: Scenario,
    capability: OverflowingToolOutput[Any] | None,
    brain: ScriptedModel,
    *,
    run_id: str | None = None,
    context_window: int | None = None,
) -> Outcome:
    """One agent run of `scenario` with `brain`, under `capability` (none: `None`), and what it cost."""
    agent = Agent(brain.model(context_window=context_window), capabilities=[capability] if capability else [])

    def tool(page: int = 0) -> Any:
        return scenario.make(page)

    agent.tool_plain(name=scenario.tool)(tool)
    await agent.run(scenario.question.prompt, run_id=run_id)
    [answer] = brain.trace.answers
    trace = brain.trace
    return Outcome(
        scenario=scenario.name,
        configuration='',
        model='',
        tokens=trace.input_tokens,
        tokens_heuristic=trace.input_tokens_heuristic,
        tool_definition_tokens=trace.tool_definition_tokens,
        query_tool_definition_tokens=trace.query_tool_definition_tokens,
        peak=trace.peak_request_tokens,
        requests=trace.requests,
        retrievals=trace.retrieval_calls,
        found=answer == scenario.expected,
        answer=answer,
    )
