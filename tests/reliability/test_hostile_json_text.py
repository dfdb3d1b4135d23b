"""Hostile JSON text from a tool: what is stored is the text's own tokens or the text itself, at a bounded cost.

A `str` return that opens an object or an array is laid out one element per line with its own tokens
(`_json_text`). Python's JSON decoder (strict, `NaN` and infinities refused) is the referee of what is JSON: a
text it accepts gets a layout holding exactly its tokens, a text it refuses gets none (it is stored as it is). The
large cases are the ones that cost the most per byte: every element laid out one at a time, a run of millions of
scalars, a text that looks like JSON until its last byte.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, build_query_toolset
from pydantic_ai_harness.overflowing_tool_output._rendering._json_text import MAX_STEPS, json_text_layout

from ._loop_lag import watch_loop
from ._support import run_one_tool, tool_returns

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s"\[\]{},:]+|[\[\]{},:]', re.DOTALL)

LOOP_BOUND = 0.1
"""The longest the spill of one of these may hold up the event loop, in seconds."""


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _refuse(name: str) -> Any:
    raise ValueError(name)


def is_json(text: str) -> bool:
    """The referee: Python's decoder, strict, refusing `NaN`, `Infinity` and `-Infinity` (not JSON by RFC 8259)."""
    try:
        json.loads(text, parse_constant=_refuse, parse_int=str)  # no digit limit: that is Python's, not JSON's
    except (ValueError, RecursionError):
        return False
    return True


SMALL = {
    'nested 100,000 deep': '[' * 100_000 + ']' * 100_000,
    'nested 500 deep': '[' * 500 + '1' + ']' * 500,
    'trailing comma': '[1,2,]',
    'trailing comma in an object': '{"a":1,}',
    'trailing comma after a record': '[{"a":1},]',
    'trailing comma after a chunk of a packed array': '[' + '1' * 70_000 + ',]',
    'leading comma': '[,1]',
    'two numbers without a comma': '[1 2]',
    'a literal broken by a space': '[tr ue]',
    'two strings without a comma': '["a" "b"]',
    'a raw newline in a string': '["a\nb"]',
    'a raw tab in a string': '["a\tb"]',
    'NUL in a string': '["a\x00b"]',
    'NaN': '[NaN]',
    'Infinity': '{"a":Infinity}',
    '-Infinity': '[1,-Infinity]',
    'a byte order mark': '\ufeff[1]',
    'a form feed between tokens': '[1,\x0c2]',
    'a leading zero': '[01]',
    'a plus sign': '[+1]',
    'a bare fraction': '[.5]',
    'a bare point': '[1.]',
    'text after the value': '[1] x',
    'two values': '[1][2]',
    'an unquoted name': '{a:1}',
    'a name without a colon': '{"a" 1}',
    'a number as a name': '{1:2}',
    'an unclosed array': '[1,2',
    'an unclosed string': '["abc',
    'lone surrogates': '["\ud800", "\udfff", "\udc00\ud800"]',
    'lone surrogate escapes': '["\\ud800", "\\uDFFF"]',
    'a 5,000-digit int': '[' + '9' * 5_000 + ']',
    'a 100,000-digit int in a spread object': '{"n":' + '9' * 100_000 + ',"m":"' + 'x' * 2_000 + '"}',
    'an exponent out of range': '[1e999999999, -1E-999999999]',
    'duplicate names': '{"a":1,"a":2,"a":{"a":3,"a":4}}',
    'escapes of every kind': '["\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\ud83d\\ude00"]',
    'whitespace everywhere': ' \r\n\t[ \r\n\t1 \r\n\t, \r\n\t{ "a" \t: \n"b" } ] \n',
}


@pytest.mark.parametrize('name', sorted(SMALL))
def test_a_hostile_text_is_laid_out_with_its_own_tokens_exactly_when_it_is_json(name: str) -> None:
    text = SMALL[name]
    layout = json_text_layout(text)
    assert (layout is not None) == is_json(text)
    if layout is not None:
        assert tokens(layout.data().decode('utf-8', 'surrogatepass')) == tokens(text)


MB = 1_000_000

LARGE = {
    'records, every element laid out alone': lambda: json.dumps(
        [{'id': n, 'name': f'ü{n}', 'tags': ['a', 'b']} for n in range(250_000)]
    ),
    'millions of ints in a run, one escape': lambda: '["\\u0041",' + '1,' * (7 * MB) + '1]',
    'a packed array of spelled floats': lambda: '[' + ','.join(['1.10'] * (3 * MB)) + ']',
    'an array that never closes': lambda: '[' + '{"a":1},' * (MB * 15 // 8),
    'millions of tiny containers, one escape': lambda: '["\\u0041",' + '[],' * (5 * MB) + '[]]',
}


@pytest.mark.parametrize('name', sorted(LARGE))
def test_15_mb_of_hostile_json_text_costs_a_few_seconds_at_most(name: str) -> None:
    text = LARGE[name]()
    started = time.process_time()
    layout = json_text_layout(text)
    spent = time.process_time() - started
    print(f'\n{name}: {len(text) / MB:.1f} MB in {spent:.2f} s of CPU')
    assert spent < 6.0, f'{spent:.2f} s'
    if name == 'an array that never closes':
        assert layout is None
    elif name == 'millions of tiny containers, one escape':
        assert layout is None  # more than MAX_STEPS elements one at a time: stored as the text it is
        assert 5 * MB > MAX_STEPS
    else:
        assert layout is not None
        data = layout.data()
        assert data.translate(None, b' \t\n\r') == text.encode().translate(None, b' \t\n\r')
        assert all(piece.endswith(b'\n') for piece in layout.pieces)  # a stream's pieces end at line ends
        assert (layout.size, layout.lines) == (len(data), data.count(b'\n'))


async def test_spilling_15_mb_of_json_text_laid_out_element_by_element_does_not_hold_the_loop(
    tmp_path: Path,
) -> None:
    """Through a real run: the text is laid out in a worker thread that hands the GIL back as it goes."""
    text = '["\\u0041",' + ','.join(f'{{"id":{n},"v":"\\u00e9"}}' for n in range(400_000)) + ']'
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    async with watch_loop() as lag:
        messages = await run_one_tool(OverflowingToolOutput(store=store), text)
    [part] = tool_returns(messages)
    stored = await store.read(part.metadata['overflow_handle'])
    print(f'\n{len(text) / MB:.1f} MB of JSON text spilled element by element: loop lag {lag.worst * 1000:.0f} ms')
    assert stored.split(b'\n')[1:3] == [b' "\\u0041",', b' {"id":0,"v":"\\u00e9"},']
    assert lag.worst < LOOP_BOUND, f'the event loop was held {lag.worst * 1000:.0f} ms'


async def test_a_path_query_over_a_million_digit_int_answers_at_once(tmp_path: Path) -> None:
    """`int()` of a long digit string costs time quadratic in its length: such an int is read as a float."""
    digits = '9' * MB
    text = f'{{"items":[{{"id":1,"n":{digits}}},{{"id":2,"n":5}}],"rows":[' + ','.join(['{"x":0}'] * 2_000) + ']}'
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    messages = await run_one_tool(OverflowingToolOutput(store=store), text)
    [part] = tool_returns(messages)
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    started = time.process_time()
    async with watch_loop() as lag:
        value = await read(handle=part.metadata['overflow_handle'], path='$.items[0].n')
        compared = await read(handle=part.metadata['overflow_handle'], path='$.items[?@.n > 1e300].id')
    spent = time.process_time() - started
    print(f'\ntwo path queries over a 1,000,000-digit int: {spent:.2f} s of CPU, loop lag {lag.worst * 1000:.0f} ms')
    assert f"$['items'][0]['n'] = {'9' * 300}... ({MB - 300} more characters)" in value
    assert compared.splitlines()[:2] == [
        "1 match for '$.items[?@.n > 1e300].id' in " + repr(part.metadata['overflow_handle']) + '; all 1:',
        "line 4: $['items'][0]['id'] = 1",
    ]
    assert spent < 2.0
    assert lag.worst < LOOP_BOUND
