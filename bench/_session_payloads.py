"""The tool returns of a long coding session: file reads, command outputs and API JSON of 2-8 KB, some holding a fact.

Every return is made from a seeded generator, so a session repeats exactly. The facts sit in the first returns
of the session; the questions at its end ask for them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from examples._scripted import Question, on_line, preceding

_MODULES = ['billing', 'invoices', 'refunds', 'auth', 'search', 'catalog', 'shipping', 'webhooks']
_WORDS = ['order', 'invoice', 'customer', 'payment', 'refund', 'ledger', 'account', 'session', 'token', 'report']
_AUTHORS = ['Ana Ruiz', 'Bo Chen', 'Chidi Okafor', 'Dana Levi', 'Emil Novak', 'Farah Haddad']


def python_file(path: str, size: int, rng: random.Random, planted: str = '') -> str:
    """A Python module of about `size` characters: imports, constants, functions with docstrings."""
    name = path.rsplit('/', 1)[-1].removesuffix('.py')
    rows = [f'"""{name.capitalize()}: the {rng.choice(_WORDS)} {rng.choice(_WORDS)} logic."""', '']
    rows += ['from __future__ import annotations', '', 'import logging', 'from decimal import Decimal', '']
    rows += ['logger = logging.getLogger(__name__)', '']
    rows += [
        f'{rng.choice(_WORDS).upper()}_{rng.choice(_WORDS).upper()}_LIMIT = {rng.randint(2, 500)}' for _ in range(4)
    ]
    if planted:
        rows.append(planted)
    rows.append('')
    while sum(len(row) + 1 for row in rows) < size:
        noun, verb = rng.choice(_WORDS), rng.choice(['load', 'save', 'check', 'apply', 'merge', 'render'])
        rows += [
            '',
            f'def {verb}_{noun}({noun}_id: str, *, strict: bool = False) -> dict[str, object]:',
            f'    """{verb.capitalize()} the {noun} `{noun}_id`; raise when `strict` and it is missing."""',
            f'    record = _store.get({noun}_id)',
            '    if record is None and strict:',
            f"        raise KeyError(f'no {noun} {{{noun}_id}}')",
            f"    logger.debug('{verb} %s', {noun}_id)",
            f"    return {{'id': {noun}_id, 'total': Decimal('{rng.randint(1, 9999)}.{rng.randint(0, 99):02d}')}}",
        ]
    return '\n'.join(rows) + '\n'


def pytest_output(size: int, rng: random.Random, failed: str = '') -> str:
    """A `pytest -q` run: progress lines, one failure when `failed` names a test, and the summary line."""
    rows = ['============================= test session starts ==============================']
    rows.append('platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0')
    count = 0
    while sum(len(row) + 1 for row in rows) < size - 400:
        module = rng.choice(_MODULES)
        rows.append(f'tests/test_{module}.py::test_{rng.choice(_WORDS)}_{rng.randint(1, 99):02d} PASSED')
        count += 1
    if failed:
        rows += [
            '=================================== FAILURES ===================================',
            f'FAILED {failed} - AssertionError: assert Decimal("10.00") == Decimal("9.99")',
        ]
    summary = f'1 failed, {count} passed' if failed else f'{count} passed'
    rows.append(
        f'======================== {summary} in {rng.randint(5, 90)}.{rng.randint(0, 99):02d}s ========================'
    )
    return '\n'.join(rows) + '\n'


def git_log(size: int, rng: random.Random, planted: tuple[str, str] | None = None) -> str:
    """`git log --oneline --format='%h %an %s'` lines; `planted` is a (hash, subject) put in the middle."""
    rows: list[str] = []
    while sum(len(row) + 1 for row in rows) < size:
        subject = f'{rng.choice(["Fix", "Add", "Refactor", "Test", "Document"])} {rng.choice(_WORDS)} {rng.choice(_WORDS)} handling'
        rows.append(f'{rng.getrandbits(28):07x} {rng.choice(_AUTHORS)} {subject}')
    if planted is not None:
        rows.insert(len(rows) // 2, f'{planted[0]} {rng.choice(_AUTHORS)} {planted[1]}')
    return '\n'.join(rows) + '\n'


def directory_listing(size: int, rng: random.Random) -> str:
    """`ls -la` of a source tree."""
    rows = ['total 412']
    while sum(len(row) + 1 for row in rows) < size:
        name = f'{rng.choice(_WORDS)}_{rng.choice(_MODULES)}.py'
        rows.append(
            f'-rw-r--r--  1 dev staff {rng.randint(200, 90_000):>6} Nov {rng.randint(1, 30):>2} '
            f'{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {name}'
        )
    return '\n'.join(rows) + '\n'


def api_list(kind: str, size: int, rng: random.Random, planted: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON API page of `kind` records (deployments, issues, customers) of about `size` characters."""
    records: list[dict[str, Any]] = []
    while len(json.dumps(records)) < size - 200:
        if kind == 'deployments':
            records.append(
                {
                    'id': f'dep_{rng.getrandbits(24):06x}',
                    'service': rng.choice(_MODULES),
                    'status': rng.choice(['succeeded', 'succeeded', 'succeeded', 'in_progress']),
                    'commit': f'{rng.getrandbits(28):07x}',
                    'started_at': f'2026-11-{rng.randint(1, 30):02d}T{rng.randint(0, 23):02d}:00:00Z',
                }
            )
        elif kind == 'issues':
            records.append(
                {
                    'number': rng.randint(1_000, 9_999),
                    'title': f'{rng.choice(_WORDS).capitalize()} {rng.choice(_WORDS)} is slow',
                    'labels': [rng.choice(['bug', 'perf', 'docs', 'good first issue'])],
                    'state': rng.choice(['open', 'closed']),
                }
            )
        else:
            records.append(
                {
                    'id': f'cus_{rng.getrandbits(24):06x}',
                    'country': rng.choice(['FR', 'DE', 'US', 'JP', 'BR']),
                    'plan': rng.choice(['free', 'team', 'business']),
                    'seats': rng.randint(1, 400),
                }
            )
    if planted is not None:
        records.insert(len(records) // 2, planted)
    return {'object': 'list', 'url': f'/api/v2/{kind}', 'has_more': True, 'data': records}


@dataclass(frozen=True)
class Call:
    """One tool call of the session and the return it gets."""

    tool: str
    """`read_file`, `run_command` or `http_get`."""

    argument: str
    """The path, command or URL."""

    make: Callable[[], Any]
    """Builds the return (seeded, so the same every time)."""


FACTS: list[tuple[Question, str]] = [
    (
        Question(
            'How many times does the billing config retry an invoice?',
            [],
            'MAX_INVOICE_RETRIES',
            on_line('MAX_INVOICE_RETRIES', r'MAX_INVOICE_RETRIES = (\d+)'),
        ),
        '7',
    ),
    (
        Question(
            'Which commit fixed the VAT rounding on credit notes?',
            [],
            'VAT rounding',
            on_line('VAT rounding', r'^\W*(?:\d+\|\s*)?([0-9a-f]{7}) '),
        ),
        '3e9a1c4',
    ),
    (
        Question(
            'Which deployment was rolled back?',
            [],
            'rolled_back',
            preceding('rolled_back', r'(dep_[0-9a-f]{6})'),
        ),
        'dep_5b7e21',
    ),
    (
        Question(
            'Which test failed in the first test run?',
            [],
            'FAILED',
            on_line('FAILED ', r'FAILED (\S+)'),
        ),
        'tests/test_refunds.py::test_partial_refund_currency',
    ),
    (
        Question(
            'Which Python base image does the Dockerfile use?',
            [],
            'FROM python',
            on_line('FROM python', r'FROM (python:\S+)'),
        ),
        'python:3.11.9-slim-bookworm',
    ),
    (
        Question(
            'Which issue is labelled sev1?',
            [],
            'sev1',
            preceding('sev1', r'"number": ?(\d+)'),
        ),
        '8812',
    ),
]
"""The questions asked at the end of the session, each with the answer planted in one of its first returns."""


def _dockerfile(size: int, rng: random.Random) -> str:
    rows = ['# syntax=docker/dockerfile:1.7', 'FROM python:3.11.9-slim-bookworm AS base', 'WORKDIR /app']
    while sum(len(row) + 1 for row in rows) < size:
        rows.append(
            rng.choice(
                [
                    f'RUN pip install --no-cache-dir {rng.choice(_WORDS)}-client=={rng.randint(1, 9)}.{rng.randint(0, 20)}',
                    f'COPY src/{rng.choice(_MODULES)} /app/src/{rng.choice(_MODULES)}',
                    f'ENV {rng.choice(_WORDS).upper()}_TIMEOUT={rng.randint(1, 120)}',
                    f'# {rng.choice(_WORDS)} layer for the {rng.choice(_MODULES)} service',
                ]
            )
        )
    return '\n'.join(rows) + '\n'


def session_calls(seed: int = 41) -> list[Call]:
    """The 40 tool calls of the session, 2-8 KB each; the facts are in the first 12."""
    rng = random.Random(seed)

    def size() -> int:
        return rng.randint(2_000, 7_600)

    def seeded() -> random.Random:
        return random.Random(rng.getrandbits(32))

    planted: dict[int, Call] = {}
    s, r = size(), seeded()
    planted[0] = Call(
        'read_file', 'src/billing/config.py', lambda: python_file('config.py', s, r, 'MAX_INVOICE_RETRIES = 7')
    )
    s2, r2 = size(), seeded()
    planted[2] = Call(
        'run_command',
        'git log -n 120 --format="%h %an %s"',
        lambda: git_log(s2, r2, ('3e9a1c4', 'Fix VAT rounding on credit notes')),
    )
    s3, r3 = size(), seeded()
    rolled = {
        'id': 'dep_5b7e21',
        'service': 'billing',
        'status': 'rolled_back',
        'commit': '3e9a1c4',
        'started_at': '2026-11-28T09:00:00Z',
    }
    planted[5] = Call('http_get', '/api/v2/deployments', lambda: api_list('deployments', s3, r3, rolled))
    s4, r4 = size(), seeded()
    planted[7] = Call(
        'run_command', 'pytest -q', lambda: pytest_output(s4, r4, 'tests/test_refunds.py::test_partial_refund_currency')
    )
    s5, r5 = size(), seeded()
    planted[9] = Call('read_file', 'Dockerfile', lambda: _dockerfile(s5, r5))
    s6, r6 = size(), seeded()
    sev1 = {'number': 8812, 'title': 'Refund webhooks dropped', 'labels': ['bug', 'sev1'], 'state': 'open'}
    planted[11] = Call('http_get', '/api/v2/issues?state=all', lambda: api_list('issues', s6, r6, sev1))

    calls: list[Call] = []
    for index in range(40):
        if index in planted:
            calls.append(planted[index])
            continue
        n, g = size(), seeded()
        kind = index % 5
        if kind == 0:
            module = _MODULES[index % len(_MODULES)]
            calls.append(
                Call('read_file', f'src/{module}/service.py', lambda n=n, g=g, m=module: python_file(f'{m}.py', n, g))
            )
        elif kind == 1:
            calls.append(Call('run_command', 'pytest -q', lambda n=n, g=g: pytest_output(n, g)))
        elif kind == 2:
            calls.append(Call('run_command', 'ls -la src', lambda n=n, g=g: directory_listing(n, g)))
        elif kind == 3:
            calls.append(Call('http_get', '/api/v2/customers', lambda n=n, g=g: api_list('customers', n, g)))
        else:
            calls.append(Call('run_command', 'git log -n 80', lambda n=n, g=g: git_log(n, g)))
    return calls
