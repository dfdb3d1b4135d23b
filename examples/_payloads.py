"""Deterministic, seeded payloads that look like what real tools return (used by the demo and the benchmarks)."""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any

FAILING_TEST = 'tests/api/test_checkout.py::test_apply_coupon_twice'
FAILING_ERROR = 'AssertionError: expected total 90.00, got 80.00'
STUCK_ORDER_ID = 'ord_7f3a9c21'
FAILING_LOCATION = 'tests/api/test_checkout.py:142'


def test_log(lines: int = 50_000, seed: int = 7) -> str:
    """A pytest-style run with one failure (and its traceback) in the middle, and a red summary at the end."""
    rng = random.Random(seed)
    rows: list[str] = ['============================= test session starts ==============================']
    middle = lines // 2
    for i in range(lines):
        if i == middle:
            rows += [
                '_________________________ test_apply_coupon_twice __________________________',
                'Traceback (most recent call last):',
                '  File "tests/api/test_checkout.py", line 142, in test_apply_coupon_twice',
                '    assert cart.total == Decimal("90.00")',
                FAILING_ERROR,
                f'FAILED {FAILING_TEST} - {FAILING_ERROR}',
            ]
            continue
        module = rng.choice(['auth', 'cart', 'search', 'billing', 'profile', 'catalog'])
        ms = rng.randint(1, 900)
        rows.append(f'tests/{module}/test_{module}_{i:05d}.py::test_case_{rng.randint(0, 99):02d} PASSED [{ms:>4}ms]')
    rows.append(f'=================== 1 failed, {lines - 1} passed in 812.44s ===================')
    return '\n'.join(rows) + '\n'


def orders_json(count: int = 20_000, seed: int = 11) -> dict[str, Any]:
    """A paginated API response: nested order records, exactly one of them stuck."""
    rng = random.Random(seed)
    stuck_at = count * 3 // 5
    orders: list[dict[str, Any]] = []
    for i in range(count):
        status = 'stuck' if i == stuck_at else rng.choice(['paid', 'shipped', 'delivered', 'refunded'])
        order_id = STUCK_ORDER_ID if i == stuck_at else f'ord_{rng.getrandbits(32):08x}'
        orders.append(
            {
                'id': order_id,
                'status': status,
                'customer': {'id': f'cus_{rng.getrandbits(24):06x}', 'country': rng.choice(['FR', 'DE', 'US', 'JP'])},
                'items': [
                    {
                        'sku': f'SKU-{rng.randint(1000, 9999)}',
                        'qty': rng.randint(1, 4),
                        'price': rng.randint(100, 9999) / 100,
                    }
                    for _ in range(rng.randint(1, 3))
                ],
            }
        )
    return {'object': 'list', 'has_more': False, 'total': count, 'data': orders}


def csv_export(rows: int = 200_000, seed: int = 3) -> str:
    """A CSV export with one flagged row."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator='\n')
    writer.writerow(['user_id', 'email', 'plan', 'mrr', 'flag'])
    flagged = rows // 3
    for i in range(rows):
        flag = 'chargeback' if i == flagged else ''
        writer.writerow(
            [f'u{i:07d}', f'user{i}@example.com', rng.choice(['free', 'pro', 'team']), rng.randint(0, 500), flag]
        )
    return out.getvalue()


def orders_json_text(count: int = 20_000) -> str:
    """The orders as a JSON string, as an HTTP tool would return them."""
    return json.dumps(orders_json(count))


RETRY_LIMIT = 17
SECRET_PATH = './services/billing/config/prod/credentials.yaml'
FIRMWARE_VERSION = '4.2.17-rc3'
FAILED_STEP = 'deploy-staging'
PAGE_FACT_PAGE = 7
PAGE_FACT = 'WIDGET-42 costs 129.50 EUR'


def source_file(functions: int = 4_000, seed: int = 5) -> str:
    """A long Python module; one constant that matters is defined deep inside it."""
    rng = random.Random(seed)
    rows = ['"""Generated service module."""', 'from __future__ import annotations', '']
    for i in range(functions):
        if i == functions * 2 // 3:
            rows += ['', f'MAX_PAYMENT_RETRIES = {RETRY_LIMIT}  # how often a failed payment is retried', '']
        rows += [
            f'def handler_{i:05d}(request: dict[str, object]) -> dict[str, object]:',
            f'    """Handle request kind {rng.randint(0, 999)}."""',
            f'    value = request.get("field_{rng.randint(0, 99)}")',
            f'    return {{"status": "ok", "value": value, "code": {rng.randint(100, 599)}}}',
            '',
        ]
    return '\n'.join(rows) + '\n'


def find_listing(paths: int = 120_000, seed: int = 9) -> str:
    """`find . -type f` over a monorepo; one file of interest."""
    rng = random.Random(seed)
    dirs = ['services', 'libs', 'tools', 'docs', 'infra']
    names = ['main.py', 'utils.py', 'README.md', 'config.yaml', 'test_core.py', 'schema.json', 'Dockerfile']
    rows: list[str] = []
    for i in range(paths):
        if i == paths * 4 // 5:
            rows.append(SECRET_PATH)
            continue
        depth = rng.randint(1, 4)
        parts = [rng.choice(dirs)] + [f'pkg{rng.randint(0, 300)}' for _ in range(depth)]
        rows.append('./' + '/'.join(parts) + '/' + rng.choice(names))
    return '\n'.join(rows) + '\n'


def firmware_blob(size: int = 2_000_000, seed: int = 13) -> bytes:
    """An opaque binary image with its version string embedded in the middle."""
    rng = random.Random(seed)
    blob = bytearray(rng.getrandbits(8) for _ in range(size))
    marker = f'\x00FW_VERSION="{FIRMWARE_VERSION}"\x00'.encode()
    middle = size // 2
    blob[middle : middle + len(marker)] = marker
    return b'\x7fELF' + bytes(blob[4:])


def ansi_ci_output(steps: int = 400, lines_per_step: int = 60, seed: int = 17) -> str:
    """Coloured CI output (ANSI escapes): many green steps, one red one in the middle."""
    rng = random.Random(seed)
    rows: list[str] = []
    for step in range(steps):
        name = FAILED_STEP if step == steps // 2 else f'job-{step:03d}'
        rows.append(f'\x1b[1;34m==> step {name}\x1b[0m')
        for line in range(lines_per_step):
            rows.append(
                f'\x1b[2m[{step:03d}:{line:02d}]\x1b[0m \x1b[32mok\x1b[0m {rng.choice(["fetch", "build", "lint", "pack"])} {rng.getrandbits(40):010x}'
            )
        if name == FAILED_STEP:
            rows.append(f'\x1b[1;31m✗ step {FAILED_STEP} failed (exit 3)\x1b[0m')
        else:
            rows.append(f'\x1b[32m✓ step {name} passed\x1b[0m')
    return '\n'.join(rows) + '\n'


def catalog_page(page: int, size: int = 30_000, seed: int = 19) -> str:
    """One page of a paginated catalog API (about 30,000 characters); one page holds the fact."""
    rng = random.Random(seed * 1_000 + page)
    rows: list[str] = []
    while sum(len(r) + 1 for r in rows) < size:
        rows.append(
            f'SKU-{rng.randint(10_000, 99_999)}: {rng.choice(["bolt", "nut", "gear", "spring"])} costs {rng.randint(1, 999)}.{rng.randint(0, 99):02d} EUR'
        )
    if page == PAGE_FACT_PAGE:
        rows.insert(len(rows) // 2, PAGE_FACT)
    return '\n'.join(rows) + '\n'
