from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from inline_snapshot import snapshot

from pydantic_ai_harness.overflowing_tool_output._bands import MIN_TRUNCATE_CHARS, TruncationStrategy
from pydantic_ai_harness.overflowing_tool_output._truncate import truncate_text

LOG = ''.join(f'line {i:04d} ' + 'x' * 30 + '\n' for i in range(1, 201))


def test_short_text_is_unchanged() -> None:
    assert truncate_text('short', 500, TruncationStrategy.head_tail) == 'short'


def test_head_tail_keeps_both_ends_on_line_boundaries() -> None:
    out = truncate_text(LOG, 600, TruncationStrategy.head_tail)
    assert len(out) <= 600
    assert out == snapshot("""\
line 0001 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0002 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0003 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0004 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0005 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
[truncated: the middle 7,790 of 8,200 characters (lines 6-195) omitted here and not kept; call the tool again with narrower arguments to see them]
line 0196 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0197 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0198 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0199 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0200 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
""")


def test_head_keeps_the_start() -> None:
    out = truncate_text(LOG, 400, TruncationStrategy.head)
    assert out.startswith('line 0001')
    assert out.endswith(('to see them]\n', 'to see them]'))
    assert 'the last' in out
    assert len(out) <= 400


def test_tail_keeps_the_end() -> None:
    out = truncate_text(LOG, 400, TruncationStrategy.tail)
    assert out.startswith('[truncated: the first')
    assert out.endswith('line 0200 ' + 'x' * 30 + '\n')
    assert len(out) <= 400


def test_single_huge_line_is_cut_mid_line() -> None:
    text = 'a' * 1_000_000
    out = truncate_text(text, 1_000, TruncationStrategy.head_tail)
    assert len(out) <= 1_000
    assert out.startswith('aaa') and out.endswith('aaa')
    assert '999,' in out  # the omitted count is reported


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(min_size=0, max_size=3_000),
    max_chars=st.integers(min_value=MIN_TRUNCATE_CHARS, max_value=2_000),
    strategy=st.sampled_from(list(TruncationStrategy)),
)
def test_truncation_properties(text: str, max_chars: int, strategy: TruncationStrategy) -> None:
    out = truncate_text(text, max_chars, strategy)
    assert len(out) <= max_chars
    if len(text) <= max_chars:
        assert out == text
        return
    # idempotent: a second pass changes nothing
    assert truncate_text(out, max_chars, strategy) == out
    # valid Unicode: round-trips through UTF-8 exactly when the input does
    try:
        text.encode()
    except UnicodeEncodeError:
        pass
    else:
        out.encode()
    marker_at = out.index('[truncated:')
    if strategy is not TruncationStrategy.tail:
        head = out[:marker_at]
        assert text.startswith(head) or (head.endswith('\n') and text.startswith(head[:-1]))
    if strategy is not TruncationStrategy.head:
        tail = out[out.index(']', marker_at) + 1 :].removeprefix('\n')
        assert text.endswith(tail)


@pytest.mark.parametrize('total', [10**6, 10**9, 10**12])
def test_marker_fits_the_minimum_budget_even_for_huge_totals(total: int) -> None:
    text = ('y' * 99 + '\n') * (total // 100) if total <= 10**6 else 'z' * 10**6
    out = truncate_text(text, MIN_TRUNCATE_CHARS, TruncationStrategy.head_tail)
    assert len(out) <= MIN_TRUNCATE_CHARS


@pytest.mark.parametrize('strategy', list(TruncationStrategy))
@pytest.mark.parametrize('max_chars', [MIN_TRUNCATE_CHARS, 300, 1_000, 5_000])
def test_regular_lines_always_keep_most_of_the_budget(strategy: TruncationStrategy, max_chars: int) -> None:
    """Regression: line snapping once made the shrink loop oscillate and return only the marker."""
    for line_length in range(2, 300):
        text = ('x' * (line_length - 1) + '\n') * 400
        if len(text) <= max_chars:
            continue
        out = truncate_text(text, max_chars, strategy)
        assert max_chars // 2 <= len(out) <= max_chars, line_length
        assert out.count('x') > 0, line_length
