"""Redaction's bounds measured through real agent runs (issue 24, items 1, 2 and 5).

A scripted model calls a tool that returns the hostile payload; `OverflowingToolOutput(redact_secrets=...)` masks
it, and a concurrent ticker (`watch_loop`) measures how long the event loop was held meanwhile. The test's own
payloads are frozen out of the collector (`gc.freeze()`), so a collection walking them is not counted; CPU time
(`time.process_time()`, every thread of the process) is what the per-MB bound is checked against, since wall time
on a shared 2-core machine measures the other processes too. Margins are generous; the docs' figures are the
measured ones printed by these tests.
"""

from __future__ import annotations

import random
import re
import string
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from examples import _payloads as payloads
from examples._secret_corpus import encoded_shapes
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, SecretRedaction

from ._loop_lag import watch_loop
from ._support import tool_returns

models.ALLOW_MODEL_REQUESTS = False
pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

LOOP_BOUND = 0.1
"""The longest the event loop may be held while a return is masked, in seconds (documented: 100 ms)."""

PER_MB_BOUND = 2.5
"""CPU seconds per MB of hostile text through a whole run (documented: about 1 s per MB), with a margin for a
shared machine."""

GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'
_RNG = random.Random(2424)
_TOKEN = string.ascii_letters + string.digits + '_'


def _pick(length: int) -> str:
    return ''.join(_RNG.choice(_TOKEN) for _ in range(length))


def _repeat(text: str, size: int) -> str:
    return (text * (size // len(text) + 1))[:size]


def leaked(secret: str, text: str | bytes) -> bool:
    """Whether any 8 characters of `secret` in a row are still readable in `text`."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    return any(secret[i : i + 8] in text for i in range(len(secret) - 7))


class Measured:
    """One real run whose tool returns a prepared payload: what the model was sent, the CPU time and loop lag."""

    def __init__(self, tmp_path: Path) -> None:
        self.capability = OverflowingToolOutput[Any](
            store=LocalFileStore(base_dir=tmp_path / 'spill'), redact_secrets=SecretRedaction()
        )
        self.cpu = 0.0
        self.lag = 0.0
        self.sent: str = ''
        self.metadata: dict[str, Any] = {}

    async def run(self, payload: object) -> Measured:
        steps: list[float] = []

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            steps.append(time.process_time())
            return ModelResponse(parts=[ToolCallPart('out', {})] if len(steps) == 1 else [TextPart('done')])

        agent = Agent(FunctionModel(respond), capabilities=[self.capability])
        agent.tool_plain(name='out')(lambda: payload)
        async with watch_loop() as lag:
            result = await agent.run('go')
        [part] = tool_returns(result.all_messages())
        self.cpu = steps[1] - steps[0]
        self.lag = lag.worst
        self.sent = part.model_response_str()
        self.metadata = part.metadata if isinstance(part.metadata, dict) else {}
        return self

    async def stored(self) -> bytes:
        return await self.capability._resolved_store.read(self.metadata['overflow_handle'])


def _hostile_10_mb() -> tuple[str, int]:
    """10 MB of near-miss token runs, 50,000 `api_key=` credential lines and an unterminated PEM block."""
    ghp_run = ''.join('ghp_' + _pick(36) for _ in range(1_000))
    lines = ''.join(f'api_key={_pick(32)}\n' for _ in range(50_000))
    pem = '-----BEGIN RSA PRIVATE KEY-----\n' + _repeat('MIIEowIBAAKCAQEA7h3X9v' * 3 + '\n', 3_000_000)
    count = (10_000_000 - len(lines) - len(pem)) // (len(ghp_run) + 1)
    return '\n'.join([ghp_run] * count) + '\n' + lines + pem, count


@pytest.mark.usefixtures('frozen_heap')
async def test_ten_mb_of_hostile_text_is_masked_at_a_second_per_mb_without_holding_the_loop(tmp_path: Path) -> None:
    text, runs = _hostile_10_mb()
    size = len(text)
    assert size > 9_900_000
    measured = await Measured(tmp_path).run(text)
    del text
    counts = measured.metadata['secrets_withheld']
    print(
        f'\n{size / 1e6:.1f} MB of hostile text through a run: {measured.cpu:.2f} s of CPU '
        f'({measured.cpu / size * 1e6:.2f} s/MB), loop lag {measured.lag * 1000:.0f} ms, withheld {counts}'
    )
    assert sum(counts.values()) >= 50_000 + runs
    assert counts['Private Key'] == 1
    assert re.search(r'api_key=\w{8}', (await measured.stored()).decode()) is None
    assert counts['GitHub Token'] == runs
    assert measured.metadata['overflow_action'] == 'spill'
    assert len(measured.sent) < 20_000
    assert measured.cpu < PER_MB_BOUND * size / 1e6, f'{measured.cpu:.1f} s'
    assert measured.lag < LOOP_BOUND, f'the event loop was held {measured.lag * 1000:.0f} ms'


@pytest.mark.usefixtures('frozen_heap')
async def test_a_20_mb_log_with_one_token_does_not_hold_the_loop(tmp_path: Path) -> None:
    log = payloads.test_log(320_000)
    middle = len(log) // 2
    log = log[:middle] + f'\nexport GITHUB_TOKEN={GITHUB}\n' + log[middle:]
    assert len(log) > 19_000_000
    measured = await Measured(tmp_path).run(log)
    print(
        f'\n{len(log) / 1e6:.0f} MB log, one token: {measured.cpu:.2f} s of CPU, loop lag {measured.lag * 1000:.0f} ms'
    )
    assert measured.metadata['secrets_withheld'] == {'GitHub Token': 1}
    assert not leaked(GITHUB, measured.sent)
    assert not leaked(GITHUB, await measured.stored())
    assert measured.cpu < PER_MB_BOUND * len(log) / 1e6
    assert measured.lag < LOOP_BOUND, f'the event loop was held {measured.lag * 1000:.0f} ms'


@pytest.mark.usefixtures('frozen_heap')
async def test_30000_credential_lines_do_not_hold_the_loop(tmp_path: Path) -> None:
    text = ''.join(f'api_key={_pick(32)}\n' for _ in range(30_000))
    measured = await Measured(tmp_path).run(text)
    stored = (await measured.stored()).decode()
    print(f'\n30,000 api_key= lines: {measured.cpu:.2f} s of CPU, loop lag {measured.lag * 1000:.0f} ms')
    assert sum(measured.metadata['secrets_withheld'].values()) == 30_000
    assert re.search(r'api_key=\w{8}', stored) is None
    assert re.search(r'api_key=\w{8}', measured.sent) is None
    assert measured.lag < LOOP_BOUND, f'the event loop was held {measured.lag * 1000:.0f} ms'


@pytest.mark.usefixtures('frozen_heap')
async def test_40_kb_of_near_miss_runs_do_not_hold_the_loop(tmp_path: Path) -> None:
    text = ''.join('ghp_' + _pick(36) for _ in range(1_000))
    measured = await Measured(tmp_path).run(text)
    print(f'\n40 KB ghp_ run: {measured.cpu * 1000:.0f} ms of CPU, loop lag {measured.lag * 1000:.0f} ms')
    assert measured.sent == '[secret withheld: GitHub Token]'
    assert measured.cpu < 1.0
    assert measured.lag < LOOP_BOUND, f'the event loop was held {measured.lag * 1000:.0f} ms'


async def test_every_escaped_or_encoded_shape_is_withheld_in_a_run(tmp_path: Path) -> None:
    """The corpus's escaped and encoded shapes (issue 24, item 5), each returned by a tool in a real run."""
    shapes = encoded_shapes()
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) > 1:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('shape', {'i': i}, tool_call_id=f'c{i}') for i in range(len(shapes))])

    capability = OverflowingToolOutput[Any](store=LocalFileStore(base_dir=tmp_path), redact_secrets=SecretRedaction())
    agent = Agent(FunctionModel(respond), capabilities=[capability])

    @agent.tool_plain
    def shape(i: int) -> str:
        return shapes[i].text

    await agent.run('go')
    parts = sorted(tool_returns(seen[1]), key=lambda part: int(part.tool_call_id[1:]))
    assert len(parts) == len(shapes)
    missed = [s.category for s, part in zip(shapes, parts) if leaked(s.secret, part.model_response_str())]
    assert missed == []
