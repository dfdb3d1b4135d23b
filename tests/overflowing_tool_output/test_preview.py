from __future__ import annotations

import pytest
from inline_snapshot import snapshot

from pydantic_ai_harness.overflowing_tool_output._rendering._important_lines import important_lines
from pydantic_ai_harness.overflowing_tool_output._rendering._markers import SpillSummary
from pydantic_ai_harness.overflowing_tool_output._rendering._preview import (
    count_lines,
    detect_binary_type,
    line_shape,
    text_preview,
)
from pydantic_ai_harness.overflowing_tool_output._rendering._shape_sketch import shape_sketch


def test_verdicts_outrank_exceptions_and_context() -> None:
    text = (
        'starting\n'
        'Traceback (most recent call last):\n'
        '  File "x.py", line 1\n'
        'ValueError: bad input\n'
        'FAILED tests/test_x.py::test_y - ValueError: bad input\n'
        'process exited: exit status 2\n'
        'done'
    )
    found, noisy = important_lines(text)
    assert not noisy
    assert [(line.number, line.rank) for line in found] == [(5, 0), (6, 0), (4, 1), (2, 2)]


def test_matches_deep_in_a_long_line_are_shown_as_excerpts() -> None:
    """A log inside one JSON string is one long line: each match in it gets an excerpt around it."""
    log = '\\n'.join(f'test_{i} PASSED' for i in range(3_000))
    log = log.replace('test_1234 PASSED', 'test_1234 FAILED: AssertionError: expected 3 got 4')
    log = log.replace('test_2900 PASSED', 'test_2900 FAILED: timeout')
    text = f'{{\n "returncode": 1,\n "stdout": "{log}"\n}}'
    found, _ = important_lines(text)
    # `AssertionError` falls inside the first excerpt, so it is not shown twice.
    assert [(line.number, line.rank) for line in found] == [(3, 0), (3, 0)]
    first, second = sorted(line for line in found if line.rank == 0)
    assert first.column < second.column
    assert 'test_1234 FAILED: AssertionError: expected 3 got 4' in first.text
    assert 'test_2900 FAILED: timeout' in second.text
    assert all(line.text.startswith('[...]') and line.text.endswith('[...]') for line in found)
    assert all(len(line.text) <= 160 for line in found)


def test_a_noisy_log_is_flagged_and_spread_first_and_last() -> None:
    text = '\n'.join(f'ERROR retrying connection {i}' for i in range(30_000))
    found, noisy = important_lines(text)
    assert noisy
    assert len(found) == 6
    assert found[0].number == 1


def test_the_least_important_lines_go_first_when_the_budget_is_short() -> None:
    lines = ['ok'] * 500
    lines[100] = 'Traceback (most recent call last):'
    lines[103] = 'KeyError: ' + 'k' * 120
    lines[104] = 'FAILED tests/test_cache.py::test_evict - KeyError'
    text = '\n'.join(lines)
    summary = SpillSummary('run', 'h/1/0', len(text), len(text) // 4, 500, len(text))
    preview = text_preview(summary, text, 700)
    assert 'FAILED tests/test_cache.py::test_evict' in preview
    assert 'Traceback' not in preview
    assert len(preview) <= 700


def _head_and_tail(text: str, budget: int = 2_000) -> tuple[list[int], list[int]]:
    """The line numbers a preview shows under `First lines` and under `Last lines`."""
    summary = SpillSummary('run', 'h/1/0', len(text), len(text) // 4, count_lines(text), len(text.encode()))
    preview = text_preview(summary, text, budget)
    head, _, tail = preview.partition('Last line')
    numbers = [[int(line.split('|')[0]) for line in part.splitlines() if '|' in line] for part in (head, tail)]
    return numbers[0], numbers[1]


def test_rows_of_one_shape_are_shown_three_at_the_head_and_two_at_the_tail() -> None:
    rows = [
        f'SKU-{i * 7919 % 100_000:05}: {("bolt", "nut", "spring")[i % 3]} costs {i % 900}.{i % 100:02} EUR'
        for i in range(900)
    ]
    head, tail = _head_and_tail('\n'.join(rows))
    assert (head, tail) == ([1, 2, 3], [899, 900])
    assert line_shape(rows[0].encode()) == line_shape(rows[1].encode()) == b'w-w: w w w.w w'


def test_lines_of_other_shapes_are_still_shown() -> None:
    """A header, a banner or a summary line is not a repeat of the rows around it."""
    rows = [f'u{i:07},user{i}@example.com,{i % 90}.00' for i in range(2_000)]
    text = '\n'.join(['# export of 2000 users', 'id,email,balance', *rows, '', 'total: 2000 rows'])
    assert _head_and_tail(text) == ([1, 2, 3, 4, 5], [2001, 2002, 2003, 2004])


def test_blank_lines_never_stop_a_preview() -> None:
    """Blank lines (or CRLF ones) are no rows: however many there are, the lines after them are still shown."""
    prose = [f'Paragraph {i}: ' + ' '.join(f'word{w}' for w in range(i % 9 + 3)) for i in range(400)]
    for newline in ('\n', '\r\n'):
        text = newline.join(['', '', '', '', *prose, '', '', '', ''])
        head, tail = _head_and_tail(text, 1_000)
        assert 5 in head and 404 in tail
    assert line_shape(b'') is line_shape(b'   \r') is None


def test_json_members_are_not_rows_and_a_last_element_is_one_of_them() -> None:
    members = b' "database_url":"postgres://db",'
    assert line_shape(members, json=True) is None
    assert line_shape(members) is not None
    assert line_shape(b'  {"id":1,"ok":true},', json=True) == line_shape(b'  {"id":2,"ok":false}', json=True)


def test_non_ascii_words_are_words() -> None:
    assert line_shape('Größe: 12 Äpfel'.encode()) == line_shape(b'Size: 12 apples') == b'w: w w'


def test_lines_that_all_differ_fill_the_budget_as_before() -> None:
    """Prose has no repeated shape: the head and the tail take the whole budget."""
    words = ['alpha', 'beta gamma', 'delta, epsilon', 'zeta (eta)', 'theta: iota kappa', 'lambda mu nu xi']
    text = '\n'.join(f'{words[i % 6]} {"-" * (i % 7)} {i}' for i in range(3_000))
    head, tail = _head_and_tail(text, 1_500)
    assert len(head) + len(tail) > 15
    assert head == list(range(1, len(head) + 1))


def test_a_hostile_line_costs_its_shown_part_only() -> None:
    """The shape is taken from the shown part of a line: a 5 MB line is not scanned whole."""
    text = 'x' * 5_000_000 + '\nend'
    head, tail = _head_and_tail(text)
    assert head == [1]
    assert tail == [2]
    assert line_shape(b'a' * 5_000_000) == b'w'


def test_a_single_line_is_labelled_as_one() -> None:
    text = 'x' * 5_000_000 + '\nend'
    summary = SpillSummary('run', 'h/1/0', len(text), len(text) // 4, 2, len(text))
    preview = text_preview(summary, text, 2_000)
    assert 'First line (1 of 2):\n1| xxx' in preview
    assert preview.endswith('Last line (2):\n2| end')


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        (
            {'a': 1, 'b': [1, 'x'], 'c': {'d': {'e': None}}},
            '{a: int, b: array[2] of int | str, c: {d: object(1 keys)}}',
        ),
        ([], 'array[0]'),
        ([{'id': 1}] * 3, 'array[3] of {id: int}'),
        # A sample spread over the whole array, merged: not the first element alone.
        (
            [{'id': 0, 'tags': []}]
            + [{'id': i, 'tags': ['a', 'b'], 'note': None if i % 2 else 'x'} for i in range(1, 500)],
            snapshot('array[500] of {id: int, tags: array[0-2] of str, note?: str | null}'),
        ),
        ([1, 'a', None, 2.5, True], snapshot('array[5] of mixed')),
        ([[1, 2], [3]], snapshot('array[2] of array[1-2] of int')),
        (
            {f'k{i}': i for i in range(15)},
            snapshot(
                '{k0: int, k1: int, k2: int, k3: int, k4: int, k5: int, k6: int, k7: int, k8: int, k9: int, k10: int, k11: int, ... 3 more keys}'
            ),
        ),
        (1.5, 'float'),
        (True, 'bool'),
    ],
)
def test_shape_sketch(value: object, expected: str) -> None:
    assert shape_sketch(value) == expected


@pytest.mark.parametrize(
    ('data', 'declared', 'expected'),
    [
        (b'\x89PNG\r\n\x1a\n....', None, 'PNG image, image/png'),
        (b'%PDF-1.7', None, 'PDF document, application/pdf'),
        (b'RIFF\x00\x00\x00\x00WEBPVP8 ', None, 'WebP image, image/webp'),
        (b'\x00\x01\x02', 'application/x-custom', 'declared as application/x-custom'),
        (b'\x00\x01\x02', None, 'unknown binary data'),
    ],
)
def test_binary_type_detection(data: bytes, declared: str | None, expected: str) -> None:
    assert detect_binary_type(data, declared) == expected


@pytest.mark.parametrize(('text', 'lines'), [('', 0), ('a', 1), ('a\n', 1), ('a\nb', 2), ('\n\n', 2)])
def test_count_lines(text: str, lines: int) -> None:
    assert count_lines(text) == lines


@pytest.mark.parametrize(('length', 'label'), [(100, 'The one line:\n'), (50_000, 'Start of the one line:\n')])
def test_a_one_line_payload_says_whether_its_line_is_shown_whole(length: int, label: str) -> None:
    text = 'k' * length
    summary = SpillSummary('run', 'h/1/0', len(text), len(text) // 4, 1, len(text))
    preview = text_preview(summary, text, 2_000)
    assert label in preview
    assert ('line cut' in preview) == (label.startswith('Start'))
