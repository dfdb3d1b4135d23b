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
