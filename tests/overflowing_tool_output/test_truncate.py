from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from inline_snapshot import snapshot
from pydantic_ai import Agent

from pydantic_ai_harness.overflowing_tool_output import Band, OverflowingToolOutput, Truncate
from pydantic_ai_harness.overflowing_tool_output._actions._action import MIN_TRUNCATE_CHARS
from pydantic_ai_harness.overflowing_tool_output._actions._truncate import (
    TruncationStrategy,
    truncate_rendered,
    truncate_structured,
    truncate_text,
)
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value

from .conftest import Run, call_tools_once, run_tool

LOG = ''.join(f'line {i:04d} ' + 'x' * 30 + '\n' for i in range(1, 201))


def test_short_text_is_unchanged() -> None:
    assert truncate_text('short', 500, TruncationStrategy.head_tail) == 'short'


def test_head_tail_keeps_both_ends_on_line_boundaries() -> None:
    out = truncate_text(LOG, 600, TruncationStrategy.head_tail)
    assert len(out) <= 600
    assert out == snapshot("""\
[truncated: the middle 7790 of 8200 characters (lines 6-195) omitted and not kept; call the tool again with narrower arguments to see them]
line 0001 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0002 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0003 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0004 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0005 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
[lines 6-195 omitted here]
line 0196 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0197 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0198 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0199 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
line 0200 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
""")


def test_head_keeps_the_start() -> None:
    out = truncate_text(LOG, 400, TruncationStrategy.head)
    notice, kept = out.split('\n', 1)
    assert notice.startswith('[truncated: the last') and kept.startswith('line 0001')
    assert notice.endswith('to see them]') and out.endswith('[lines 6-200 omitted here]')
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
    assert out.startswith('[truncated: the middle') and out.split('\n')[1].startswith('aaa') and out.endswith('aaa')
    assert re.search(r'the middle 99\d{4} of 1000000 characters', out), out[400:700]  # the omitted count


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


# --- structured values stay valid JSON --------------------------------------------------------------------------

RECORDS = [{'id': i, 'name': f'user {i}', 'email': f'u{i}@example.com'} for i in range(500)]


def test_a_list_keeps_whole_records_and_counts_the_rest() -> None:
    out = truncate_structured(RECORDS, 600, TruncationStrategy.head)
    assert out is not None and len(out) <= 600
    kept = json.loads(out)
    assert kept[:-1] == RECORDS[: len(kept) - 1]  # whole records, in order, from the head
    assert kept[-1] == snapshot(
        '[truncated: items 10-500 (491 of 500) omitted here and not kept; call the tool again with narrower arguments to see them]'
    )


def test_tail_and_head_tail_keep_the_end_and_both_ends() -> None:
    tail = json.loads(truncate_structured(RECORDS, 600, TruncationStrategy.tail) or '')
    assert tail[0].startswith('[truncated: items 1-') and tail[1:] == RECORDS[-(len(tail) - 1) :]
    both = json.loads(truncate_structured(RECORDS, 600, TruncationStrategy.head_tail) or '')
    marker = next(i for i, item in enumerate(both) if isinstance(item, str))
    assert both[:marker] == RECORDS[:marker] and both[marker + 1 :] == RECORDS[-(len(both) - marker - 1) :]
    assert both[0] == RECORDS[0] and both[-1] == RECORDS[-1]


def test_a_dict_keeps_its_small_entries_and_cuts_the_big_one() -> None:
    page = {'total': 500, 'items': RECORDS, 'next': 'cursor-abc'}
    out = json.loads(truncate_structured(page, 800, TruncationStrategy.head_tail) or '')
    assert out['total'] == 500 and out['next'] == 'cursor-abc'
    assert out['items'][0] == RECORDS[0] and out['items'][-1] == RECORDS[-1]
    assert any(isinstance(item, str) and item.startswith('[truncated: items ') for item in out['items'])
    head = json.loads(truncate_structured(page, 800, TruncationStrategy.head) or '')
    assert list(head) == ['total', 'items', '[truncated]']
    assert head['[truncated]'] == snapshot(
        'entry 3 (1 of 3) omitted here and not kept; call the tool again with narrower arguments to see them'
    )


def test_one_huge_record_is_cut_inside_and_stays_valid() -> None:
    out = truncate_structured([{'blob': 'é"\\' * 50_000}], 400, TruncationStrategy.head)
    assert out is not None and len(out) <= 400
    [record] = json.loads(out)
    assert record['blob'].startswith('[truncated: the last') and record['blob'].split('\n')[1].startswith('é"\\')


def test_a_marker_key_never_overwrites_a_real_one() -> None:
    value = {'[truncated]': 'real data', **{f'k{i}': 'v' * 50 for i in range(100)}}
    out = json.loads(truncate_structured(value, 500, TruncationStrategy.head) or '')
    assert out['[truncated]'] == 'real data' and out['[truncated]*'].endswith('to see them')


def test_a_value_that_fits_is_its_compact_json() -> None:
    assert truncate_structured({'a': [1, 2]}, 200, TruncationStrategy.head) == '{"a":[1,2]}'


def test_truncate_rendered_picks_json_or_text() -> None:
    structured = render_value(RECORDS)
    assert json.loads(truncate_rendered(structured, 1_000, TruncationStrategy.head))[0] == RECORDS[0]
    assert truncate_rendered(render_value(LOG), 400, TruncationStrategy.head) == truncate_text(
        LOG, 400, TruncationStrategy.head
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=30) | st.dictionaries(st.text(max_size=20), children, max_size=30),
    max_leaves=60,
)


@settings(max_examples=80, deadline=None)
@given(
    value=st.lists(JSON_VALUES, max_size=40) | st.dictionaries(st.text(max_size=20), JSON_VALUES, max_size=40),
    max_chars=st.integers(min_value=MIN_TRUNCATE_CHARS, max_value=3_000),
    strategy=st.sampled_from(list(TruncationStrategy)),
)
def test_structured_truncation_is_always_valid_json_within_the_budget(
    value: list[Any] | dict[str, Any], max_chars: int, strategy: TruncationStrategy
) -> None:
    out = truncate_structured(value, max_chars, strategy)
    assert out is not None
    assert len(out) <= max_chars
    parsed = json.loads(out)
    assert type(parsed) is type(value)
    compact = json.dumps(value, ensure_ascii=False, separators=(',', ':'))
    if len(compact) <= max_chars:
        assert out == compact
    elif isinstance(value, list) and value:
        # Whole items only, apart from a cut-down single one: every kept item is an item of the value.
        items = [item for item in parsed if not (isinstance(item, str) and item.startswith('[truncated: item'))]
        if len(items) > 1:
            assert all(item in value for item in items)


@pytest.mark.anyio
async def test_an_agent_run_truncates_a_json_return_to_valid_json() -> None:
    capability = OverflowingToolOutput(bands=[Band(over=5_000, action=Truncate(max_chars=2_000))])
    run = await run_tool(capability, RECORDS)
    content = run.returned()
    assert isinstance(content, str) and len(content) <= 2_000
    parsed = json.loads(content)
    assert parsed[0] == RECORDS[0] and parsed[-1] == RECORDS[-1]
    [marker] = [item for item in parsed if isinstance(item, str)]
    assert marker.startswith('[truncated: items ') and 'of 500) omitted here and not kept' in marker
    assert run.returns()[0].metadata['overflow_action'] == 'truncate'


def test_the_marker_counts_lines_exactly_when_the_text_ends_with_a_newline() -> None:
    text = ''.join(f'row {i:04d} ' + 'x' * 40 + '\n' for i in range(1, 1_001))  # 1,000 lines, a final newline
    for strategy in TruncationStrategy:
        cut = truncate_text(text, 5_000, strategy)
        lines = re.search(r'\(lines? ([\d,]+)(?:-([\d,]+))?\)', cut)
        assert lines is not None, cut
        last = int((lines.group(2) or lines.group(1)).replace(',', ''))
        assert last <= 1_000, (strategy, lines.group(0))
    head = truncate_text(text, 5_000, TruncationStrategy.head)
    assert re.search(r'\(lines \d+-1000\)', head), head[-300:]


@pytest.mark.anyio
async def test_the_marker_advises_narrower_arguments_only_to_a_tool_that_takes_some() -> None:
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=Truncate())])
    without = await run_tool(capability, 'line\n' * 5_000)
    assert 'omitted and not kept]' in without.returned() and 'narrower arguments' not in without.returned()

    agent = Agent(call_tools_once(('search', {'query': 'all'})), capabilities=[capability])

    @agent.tool_plain
    def search(query: str) -> str:
        return f'{query}\n' * 5_000

    result = Run((await agent.run('go')).all_messages())
    assert 'call the tool again with narrower arguments to see them]' in result.returned()


VERDICT = 'FAILED: 3 of 120 tests\r\nexit code 1\n'
BUILD_LOG = ''.join(f'step {i} ' + 'x' * 40 + '\n' for i in range(1, 201)) + VERDICT


@pytest.mark.anyio
@pytest.mark.parametrize('strategy', [TruncationStrategy.head, TruncationStrategy.head_tail])
async def test_keep_tail_lines_keeps_the_last_lines_whole_in_an_agent_run(strategy: TruncationStrategy) -> None:
    action = Truncate(max_chars=600, strategy=strategy, keep_tail_lines=2)
    content = (await run_tool(OverflowingToolOutput(bands=[Band(over=1_000, action=action)]), BUILD_LOG)).returned()
    notice, kept = content.split('\n', 1)
    assert len(content) <= 600 and notice.startswith('[truncated: the middle') and kept.startswith('step 1 ')
    # The strategy spends what is left before the two kept lines; the marker sits where the cut is.
    assert content.endswith(VERDICT)
    assert re.search(r'omitted here\]\n(step \d+ x+\n)*' + re.escape(VERDICT) + '$', content), content
    if strategy is TruncationStrategy.head:
        assert content.count('step 200') == 0 and '\n[lines 9-200 omitted here]\n' in content


def test_keep_tail_lines_counts_lines_as_upstream_does() -> None:
    text = 'a' * 500 + '\nlast\n'
    assert truncate_text(text, 300, TruncationStrategy.head, keep_tail_lines=1).endswith(']\nlast\n')
    # A blank final line counts as a line; a final newline starts none.
    assert truncate_text('a' * 500 + '\nlast\n\n', 300, TruncationStrategy.head, keep_tail_lines=1).endswith(']\n\n')
    # Lines that do not fit with the marker: cut as with the tail strategy, still within the budget.
    long_tail = 'a\n' + 'b' * 500
    cut = truncate_text(long_tail, 300, TruncationStrategy.head, keep_tail_lines=1)
    assert cut == truncate_text(long_tail, 300, TruncationStrategy.tail) and len(cut) <= 300
    # More lines than the text has: the whole text, cut as with the tail strategy.
    assert truncate_text(text, 300, TruncationStrategy.head, keep_tail_lines=9) == truncate_text(
        text, 300, TruncationStrategy.tail
    )


@pytest.mark.parametrize(('value', 'error'), [(-1, ValueError), ('2', TypeError), (True, TypeError)])
def test_keep_tail_lines_is_checked_at_construction(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match='Truncate.keep_tail_lines'):
        Truncate(keep_tail_lines=value)
