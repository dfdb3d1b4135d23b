"""`redact_secrets`: recall on planted credentials, false positives on the economy payloads, cost when there is none."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench._report import Entry
from examples import _payloads as payloads
from examples._secret_corpus import corpus, encoded_shapes
from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, SecretRedaction
from pydantic_ai_harness.overflowing_tool_output._redaction._secrets import Redactor
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value, stored_form

TITLE = 'Secrets withheld from the model'
METHOD = """
**Recall**: 140 credentials generated in their issuers' formats (`examples/_secret_corpus.py`, seeded; AWS
access and secret keys, STS JSON, Google API keys, GCP service-account keys, Azure storage keys, OpenAI,
Anthropic, Stripe, SendGrid, Twilio and npm keys, GitHub classic and fine-grained tokens, GitLab tokens, Slack
bot, user and webhook tokens, JWTs, RSA/OpenSSH/EC private key blocks, passwords in postgres, mongodb and https
URLs, `KEY=value` assignments in env files, YAML, JSON and Python), each planted in the kind of text a tool
returns; plus 20 secrets as tools return them escaped or encoded (`encoded_shapes()`: a kubectl
`last-applied-configuration` annotation, JSON in a JSON string once and twice, escaped slashes in a connection
string, a base64 PEM in a Kubernetes secret's `tls.key`). A secret counts as withheld when no 8 of its
characters in a row are left in the masked text.
**False positives**: every payload of the context-economy benchmark, as the model sees it and as it is
stored; any marker there is a false positive. **Cost**: an agent on a scripted `FunctionModel` makes 1,000
tool calls returning a 2,000-character text without a secret, below every band, with
`OverflowingToolOutput()` against `OverflowingToolOutput(redact_secrets=SecretRedaction())`; the two take
turns over 15 rounds, and the ratio is the median of the per-round ratios; the scan of one such return is
timed on its own (best of 3 x 10,000). The scan is also timed on the 20 MB test log (best of 3).
"""

_CALLS = 1_000
_TEXT = ''.join(f'line {i}: status ok, 12 items processed in 3.{i % 10} ms\n' for i in range(45))[:2_000]


def _leaked(secret: str, text: str) -> bool:
    return any(secret[i : i + 8] in text for i in range(max(1, len(secret) - 7)))


def _agent(capability: OverflowingToolOutput[Any]) -> Agent[None, str]:
    state = {'calls': 0}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if state['calls'] >= _CALLS:
            state['calls'] = 0
            return ModelResponse(parts=[TextPart('done')])
        state['calls'] += 100
        return ModelResponse(parts=[ToolCallPart('status', {}, tool_call_id=f'c{i}') for i in range(100)])

    agent = Agent(FunctionModel(respond), capabilities=[capability])

    async def status() -> str:
        return _TEXT

    agent.tool_plain(name='status')(status)
    return agent


def _timed(agent: Agent[None, str]) -> float:
    gc.collect()
    started = time.perf_counter()
    asyncio.run(agent.run('go'))
    return time.perf_counter() - started


def _cost() -> tuple[float, float, float]:
    plain = _agent(OverflowingToolOutput())
    masked = _agent(OverflowingToolOutput(redact_secrets=SecretRedaction()))
    for agent in (plain, masked):  # warm-up
        _timed(agent)
    ratios: list[float] = []
    plain_times: list[float] = []
    masked_times: list[float] = []
    for round_number in range(15):
        order: list[tuple[list[float], Agent[None, str]]] = [(plain_times, plain), (masked_times, masked)]
        if round_number % 2:
            order.reverse()
        for times, agent in order:
            times.append(_timed(agent))
        ratios.append(masked_times[-1] / plain_times[-1])
    return statistics.median(ratios), statistics.median(plain_times), statistics.median(masked_times)


def _best(function: Callable[[], Any], runs: int = 3) -> float:
    best = float('inf')
    for _ in range(runs):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def run() -> list[Entry]:
    redactor = Redactor.from_setting(SecretRedaction())
    plain_corpus, shapes = corpus(), encoded_shapes()
    planted = [*plain_corpus, *shapes]
    missed = [p.category for p in planted if _leaked(p.secret, redactor.mask(p.text)[0])]
    recall = 1 - len(missed) / len(planted)
    missed_shapes = [p.category for p in shapes if _leaked(p.secret, redactor.mask(p.text)[0])]
    economy = {
        'test log': payloads.test_log(320_000),
        'orders': payloads.orders_json(25_000),
        'csv': payloads.csv_export(200_000),
        'source': payloads.source_file(),
        'find': payloads.find_listing(),
        'ci': payloads.ansi_ci_output(),
        **{f'page {page}': payloads.catalog_page(page) for page in range(1, 11)},
    }
    false_positives = 0
    scanned = 0
    for value in economy.values():
        rendered = render_value(value)
        for text in (rendered.text, stored_form(rendered)[0]):
            false_positives += sum(redactor.mask(text)[1].values())
            scanned += len(text)
    log = render_value(economy['test log']).text
    scan_seconds = _best(lambda: redactor.mask(log))
    ratio, plain, masked = _cost()
    per_call_us = _best(lambda: [redactor.mask(_TEXT) for _ in range(10_000)]) / 10_000 * 1e6
    return [
        Entry(
            'secrets',
            f'recall on {len(planted)} planted credentials ({len(plain_corpus)} plain, {len(shapes)} escaped or encoded)',
            recall * 100,
            '%',
            '>= 95%',
            recall >= 0.95,
            detail=f'missed: {", ".join(missed) or "none"}; escaped or encoded shapes withheld: '
            f'{len(shapes) - len(missed_shapes)} of {len(shapes)}',
        ),
        Entry(
            'secrets',
            'false positives on the economy payloads (shown and stored forms)',
            false_positives,
            'markers',
            '0',
            false_positives == 0,
            detail=f'{scanned / 1e6:.0f} MB scanned',
        ),
        Entry(
            'secrets',
            'unreduced path: 1,000 calls without a secret, with redaction vs without',
            ratio,
            'x',
            '<= 1.10x',
            ratio <= 1.10,
            detail=f'median run {plain * 1000:.0f} ms vs {masked * 1000:.0f} ms; the scan itself: {per_call_us:.1f} us '
            'per 2,000-character return',
        ),
        Entry(
            'secrets',
            'scan speed, 20 MB test log without a secret',
            len(log) / scan_seconds / 1e6,
            'MB/s',
            'information',
            True,
            detail=f'{scan_seconds * 1000:.0f} ms',
        ),
    ]


if __name__ == '__main__':
    for entry in run():
        print(entry)
