"""Bounded work of secret redaction on hostile input (issue 24, item 1).

At 34bbde9 every match was widened byte by byte over the whole token run it sat in, and its checks re-read that
run: `('ghp_' + 36 token characters) * N` took 6.9 s at 40 KB, `('AKIA' + 16) * N` 10.2 s, and 10 MB ran past a
minute. The bounds asserted are the documented ones (docs/reliability.md), with margins for a shared machine:
40 KB of near-miss tokens well under a second, hostile text at about a second per MB. Collection is frozen out
of the timing (`gc.freeze()`) and CPU time is measured (`time.process_time()`), so what is timed is the
redactor's work, not the other processes of a shared machine.
"""

from __future__ import annotations

import random
import time

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ToolReturnPart

from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, SecretRedaction
from pydantic_ai_harness.overflowing_tool_output._redaction._secrets import Redactor

from ._support import Steps, tool_returns

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

SMALL_BOUND = 1.0
"""Seconds for 40 KB of near-miss tokens ("well under 1 s": measured 15-50 ms)."""

PER_MB_BOUND = 2.5
"""Seconds per MB of hostile text, on this shared 2-core machine (documented: about 1 s per MB; measured
0.1-1.0)."""

_RNG = random.Random(24)
_TOKEN = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_'
_UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'


def _pick(alphabet: str, length: int) -> str:
    return ''.join(_RNG.choice(alphabet) for _ in range(length))


GHP_RUN = ''.join('ghp_' + _pick(_TOKEN, 36) for _ in range(1_000))
"""40 KB: one run of token characters in which every 40 bytes a GitHub token could start."""

AKIA_RUN = ''.join('AKIA' + _pick(_UPPER, 16) for _ in range(2_000))
"""40 KB of AWS access key ids glued into one token."""

CREDENTIAL_LINES = ''.join(f'api_key={_pick(_TOKEN, 32)}\n' for _ in range(1_000))
ESCAPED_LINES = ''.join(f'{{\\"password\\": \\"{_pick(_TOKEN, 20)}\\"}}, ' for _ in range(1_000))
"""JSON in a JSON string: decoded before the rules run."""
NEAR_MISSES = 'AKIA password= sk- eyJ ://a: -----BEGIN ghp_ xoxb- AIza Bearer \\"token\\": \\"postgres:\\/\\/u:'


def _repeat(text: str, size: int) -> str:
    return (text * (size // len(text) + 1))[:size]


@pytest.fixture(scope='module')
def redactor() -> Redactor:
    return Redactor.from_setting(SecretRedaction())


def _timed(redactor: Redactor, text: str) -> tuple[float, dict[str, int]]:
    started = time.process_time()
    _, counts = redactor.mask(text)
    return time.process_time() - started, counts


@pytest.mark.usefixtures('frozen_heap')
async def test_near_miss_token_runs_are_masked_in_well_under_a_second() -> None:
    """Through a real run: a tool returns the 40 KB run; the model sees it masked, soon."""
    steps = Steps(lambda answers: None if answers else [('ghp', {}), ('akia', {})])
    agent = Agent(steps.model, capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction(), bands=[])])
    agent.tool_plain(name='ghp')(lambda: GHP_RUN)
    agent.tool_plain(name='akia')(lambda: AKIA_RUN)
    result = await agent.run('go')
    ghp, akia = (str(part.content) for part in tool_returns(result.all_messages()))
    assert ghp == '[secret withheld: GitHub Token]'
    assert akia == '[secret withheld: AWS Access Key]'
    took = steps.durations()[0]
    print(f'\n40 KB of ghp_ and 40 KB of AKIA near-miss runs, masked in one step: {took * 1000:.0f} ms')
    assert took < SMALL_BOUND * 2


@pytest.mark.usefixtures('frozen_heap')
def test_each_near_miss_run_alone_is_masked_in_well_under_a_second(redactor: Redactor) -> None:
    for text in (GHP_RUN, AKIA_RUN):
        took, counts = _timed(redactor, text)
        assert sum(counts.values()) == 1
        assert took < SMALL_BOUND, f'{took:.2f} s'


@pytest.mark.usefixtures('frozen_heap')
@pytest.mark.parametrize(
    'name',
    [
        'ghp_ run',
        'AKIA run',
        'credential lines',
        'unterminated key',
        'near misses of every rule',
        'escaped JSON credentials',
        'backslashes',
        'all of them',
    ],
)
def test_two_mb_of_hostile_text_costs_about_a_second_per_mb(redactor: Redactor, name: str) -> None:
    size = 2_000_000
    unterminated = '-----BEGIN RSA PRIVATE KEY-----\n' + _repeat('MIIEowIBAAKCAQEA7h3X9v' * 3 + '\n', size)
    texts = {
        'ghp_ run': _repeat(GHP_RUN, size),
        'AKIA run': _repeat(AKIA_RUN, size),
        'credential lines': _repeat(CREDENTIAL_LINES, size),
        'unterminated key': unterminated,
        'near misses of every rule': _repeat(NEAR_MISSES, size),
        'escaped JSON credentials': _repeat(ESCAPED_LINES, size),
        'backslashes': '\\' * size,
        'all of them': ''.join(
            _repeat(part, size // 5) for part in (GHP_RUN, AKIA_RUN, CREDENTIAL_LINES, NEAR_MISSES, unterminated)
        ),
    }
    took, counts = _timed(redactor, texts[name])
    print(f'\n{name}, 2 MB: {took * 1000:.0f} ms, {sum(counts.values())} secrets withheld')
    assert counts or name in ('near misses of every rule', 'backslashes')
    assert took < PER_MB_BOUND * 2, f'{took:.2f} s'


async def test_a_truncated_run_of_near_misses_shows_no_token_part() -> None:
    """The bound does not change what is withheld: the whole run is one secret, cut or not."""
    steps = Steps(lambda answers: None if answers else [('ghp', {})])
    agent = Agent(steps.model, capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction(), bands=[])])
    agent.tool_plain(name='ghp')(lambda: 'before ' + GHP_RUN * 3 + ' after')
    result = await agent.run('go')
    [part] = tool_returns(result.all_messages())
    assert isinstance(part, ToolReturnPart)
    assert part.content == 'before [secret withheld: GitHub Token] after'
