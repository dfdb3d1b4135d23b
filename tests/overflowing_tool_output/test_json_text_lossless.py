"""A spill reads back what the tool returned: a JSON text token for token, bytes as bytes, a structured value as
the JSON pydantic-ai would send the model (issue 31, section 2)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from inline_snapshot import snapshot
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._rendering._json_layout import lay_out
from pydantic_ai_harness.overflowing_tool_output._rendering._json_text import json_text_layout, relayout
from pydantic_ai_harness.overflowing_tool_output._search._jsonpath import query_json

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio

RUN_ID = '019ad7c2-5b3e-7f41-9c2d-8e6a4b1f0d37'
CALL_ID = 'call_Xq3fZ8kLmN2pR7sT9vW1yB4d'
KEY = f'{RUN_ID}/{CALL_ID}/0'
HANDLE = '6rm6wxww11'
"""The short handle the store gives `KEY` (deterministic)."""

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s"\[\]{},:]+|[\[\]{},:]', re.DOTALL)


def tokens(text: str | bytes) -> list[str]:
    """The JSON tokens of `text` as written (strings with their escapes, numbers as spelled), whitespace aside."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'surrogatepass')
    return _TOKEN.findall(text)


def report(jobs: int) -> str:
    """A JSON text as an HTTP tool returns it: records, then members a re-serialization would change."""
    rows = ','.join(f'{{"id":{n},"status":"ok"}}' for n in range(jobs))
    return (
        f'{{"jobs":[{rows}],"summary":{{"status":"FAILED","status":"ok"}},"big":1e400,'
        '"precise":0.30000000000000000000001,"price":1.10,"letter":"\\u0041"}'
    )


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def run_calls(
    tmp_path: Path, value: Any, *follow_ups: tuple[str, dict[str, Any]], strip_ansi: bool = False
) -> tuple[list[str], bytes]:
    """Run an agent whose tool returns `value` (spilled), then makes `follow_ups`; the answers and the stored bytes."""
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    steps = [('fetch', {}), *follow_ups]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = (len(messages) - 1) // 2
        if step < len(steps):
            name, args = steps[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=CALL_ID if step == 0 else f'c{step}')])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=store, strip_ansi=strip_ansi)])

    @agent.tool_plain
    def fetch() -> Any:
        return value

    result = await agent.run('go', run_id=RUN_ID)
    answers = [str(part.content) for part in _returns(result.all_messages())]
    return answers, await store.read(KEY)


async def test_a_json_text_is_stored_token_for_token(tmp_path: Path) -> None:
    """Duplicate members, numbers out of a float's range or precision, trailing zeros and escapes are kept."""
    text = report(1_000)
    (preview,), stored = await run_calls(tmp_path, text)
    assert 'as JSON, one element per line: 1009 lines' in preview
    assert tokens(stored) == tokens(text)
    assert stored.decode().splitlines()[-8:] == snapshot(
        [
            '  {"id":999,"status":"ok"}',
            ' ],',
            ' "summary":{"status":"FAILED","status":"ok"},',
            ' "big":1e400,',
            ' "precise":0.30000000000000000000001,',
            ' "price":1.10,',
            ' "letter":"\\u0041"',
            '}',
        ]
    )


async def test_grep_and_read_show_what_the_tool_wrote(tmp_path: Path) -> None:
    answers, _ = await run_calls(
        tmp_path,
        report(1_000),
        ('grep_tool_result', {'handle': HANDLE, 'pattern': 'FAILED', 'context_lines': 0}),
        ('grep_tool_result', {'handle': HANDLE, 'pattern': '\\u0041', 'context_lines': 0}),
        ('read_tool_result', {'handle': HANDLE, 'offset': 1004, 'limit': 4}),
    )
    _, failed, escaped, read = answers
    assert '>1004|  "summary":{"status":"FAILED","status":"ok"},' in failed
    assert '>1008|  "letter":"\\u0041"' in escaped
    assert read.splitlines()[1:5] == [
        '1004|  "summary":{"status":"FAILED","status":"ok"},',
        '1005|  "big":1e400,',
        '1006|  "precise":0.30000000000000000000001,',
        '1007|  "price":1.10,',
    ]


async def test_a_path_query_shows_values_as_the_tool_wrote_them(tmp_path: Path) -> None:
    """It selects as JSON parsers do (of two members with the same name the last counts), and shows each match as
    the stored text spells it."""
    answers, _ = await run_calls(
        tmp_path,
        report(1_000),
        ('read_tool_result', {'handle': HANDLE, 'path': '$.summary'}),
        ('read_tool_result', {'handle': HANDLE, 'path': '$.summary.status'}),
        ('read_tool_result', {'handle': HANDLE, 'path': "$['big','precise','price','letter']"}),
    )
    assert [answer.splitlines()[1:-1] for answer in answers[1:]] == snapshot(
        [
            ['line 1004: $[\'summary\'] = {"status":"FAILED","status":"ok"}'],
            ["line 1004: $['summary']['status'] = \"ok\""],
            [
                "line 1005: $['big'] = 1e400",
                "line 1006: $['precise'] = 0.30000000000000000000001",
                "line 1007: $['price'] = 1.10",
                'line 1008: $[\'letter\'] = "\\u0041"',
            ],
        ]
    )


async def test_a_text_is_stored_as_its_bytes(tmp_path: Path) -> None:
    text = ''.join(f'line {n} \ud800 é\n' for n in range(2_000))  # a lone surrogate is kept as it is
    _, stored = await run_calls(tmp_path, text)
    assert stored == text.encode('utf-8', 'surrogatepass')


async def test_a_text_is_stored_as_the_model_would_see_it_after_ansi_stripping(tmp_path: Path) -> None:
    text = ''.join(f'\x1b[31mline {n}\x1b[0m\n' for n in range(2_000))
    _, stored = await run_calls(tmp_path, text, strip_ansi=True)
    assert stored == text.replace('\x1b[31m', '').replace('\x1b[0m', '').encode()


class Order(pydantic.BaseModel):
    """A structured return: pydantic-ai sends it as its JSON."""

    id: int
    total: float
    note: str


async def test_bytes_are_stored_as_the_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 200
    _, stored = await run_calls(tmp_path, data)
    assert stored == data


@pytest.mark.parametrize(
    'value',
    [
        pytest.param({'orders': [{'id': n, 'total': n / 3, 'note': 'é\u0041'} for n in range(500)]}, id='dict'),
        pytest.param([Order(id=n, total=1.10, note='x' * 20) for n in range(500)], id='models'),
        pytest.param({'nan': math.nan, 'inf': math.inf, 'pad': ['y' * 40] * 400}, id='non-finite floats'),
    ],
)
async def test_a_structured_value_is_stored_as_the_json_the_model_would_be_sent(tmp_path: Path, value: Any) -> None:
    """The stored text is that JSON with newlines and indentation added between its tokens, nothing else."""
    sent = ToolReturnPart('fetch', value).model_response_str()
    _, stored = await run_calls(tmp_path, value)
    assert b''.join(line.lstrip(b' ') for line in stored.split(b'\n')) == sent.encode()


async def test_the_shape_sketch_names_the_type_stored_for_nan_and_infinities(tmp_path: Path) -> None:
    (preview,), stored = await run_calls(tmp_path, {'nan': math.nan, 'inf': -math.inf, 'pad': ['y' * 40] * 400})
    assert b'"nan":null,' in stored and b'"inf":null,' in stored
    assert 'Shape: {nan: null, inf: null, pad: array[400] of str}' in preview


def test_the_reference_tokenizer_reads_json() -> None:
    assert tokens('{"a\\"b": [1e400, -0.0, true, null], "c" : "\\u0041"}') == [
        '{', '"a\\"b"', ':', '[', '1e400', ',', '-0.0', ',', 'true', ',', 'null', ']', ',', '"c"', ':', '"\\u0041"', '}',
    ]  # fmt: skip
    assert json.loads(report(2))['summary'] == {'status': 'ok'}  # what a parser keeps: the last of the two


# --- any JSON text, spelled any way ------------------------------------------------------------------------------

_GAP = st.text(alphabet=' \t\n\r', max_size=3)
"""Whitespace between two tokens, as a tool may write it."""

_NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.builds(
        lambda whole, fraction, zeros, exponent: f'{whole}.{fraction}{"0" * zeros}{exponent}',
        st.integers(-999, 999),
        st.integers(0, 10**6),
        st.integers(0, 3),
        st.sampled_from(['', 'e5', 'E-7', 'e+400', 'E400']),
    ),
    st.sampled_from(['1e400', '-1E-400', '0.30000000000000000000001', '1.10', '-0', '-0.0', '1E5', '9' * 5_000]),
)
"""Numbers as a tool may spell them: a float's parse and re-serialization would change most of these."""

_STRING_PIECES = st.one_of(
    st.characters(blacklist_categories=('Cs', 'Cc'), blacklist_characters='"\\'),
    st.sampled_from(['\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t']),
    st.integers(0, 0xFFFF).flatmap(lambda code: st.sampled_from([f'\\u{code:04x}', f'\\u{code:04X}'])),
)
_STRINGS = st.one_of(
    st.lists(_STRING_PIECES, max_size=12).map(lambda pieces: '"' + ''.join(pieces) + '"'),
    st.integers(0, 1_200).map(lambda size: '"' + 'x' * size + '"'),  # long enough to spread out its container
)
_SCALARS = st.one_of(st.sampled_from(['true', 'false', 'null']), _NUMBERS, _STRINGS)


def _joined(items: list[str], gaps: st.DataObject, opening: str, closing: str) -> str:
    separator = ','
    inner = separator.join(gaps.draw(_GAP) + item + gaps.draw(_GAP) for item in items)
    return opening + inner + (gaps.draw(_GAP) if not items else '') + closing


def _containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arrays = st.builds(lambda items, gaps: _joined(items, gaps, '[', ']'), st.lists(children, max_size=30), st.data())
    packed = st.builds(lambda items, gaps: _joined(items, gaps, '[', ']'), st.lists(_NUMBERS, max_size=400), st.data())
    members = st.lists(st.tuples(st.sampled_from(['"a"', '"b"', '"\\u0061"', '"status"']), children), max_size=12)
    objects = st.builds(
        lambda pairs, gaps: _joined(
            [f'{name}{gaps.draw(_GAP)}:{gaps.draw(_GAP)}{value}' for name, value in pairs], gaps, '{', '}'
        ),
        members,
        st.data(),
    )
    return st.one_of(arrays, packed, objects)


JSON_TEXTS = st.builds(
    lambda document, before, after: before + document + after,
    _containers(st.recursive(_SCALARS, _containers, max_leaves=40)),
    _GAP,
    _GAP,
)
"""JSON objects and arrays with duplicate names, numbers and strings spelled every way, whitespace anywhere."""


def _as_written(data: bytes) -> Any:
    """The value, duplicate names kept in order (pairs), numbers as spelled."""
    return json.loads(data.decode('utf-8', 'surrogatepass'), object_pairs_hook=list, parse_float=str, parse_int=str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(JSON_TEXTS)
def test_any_json_text_is_laid_out_with_its_own_tokens(text: str) -> None:
    layout = json_text_layout(text)
    assert layout is not None
    data = layout.data()
    assert tokens(data) == tokens(text)
    assert _as_written(data) == _as_written(text.encode('utf-8', 'surrogatepass'))
    compact = layout.compact().decode('utf-8', 'surrogatepass')
    assert ''.join(tokens(compact)) == compact  # one compact element per line: no other whitespace
    relaid = relayout(text)
    assert relaid is not None and (relaid == layout or relaid.data() == data)  # both ways give the same lines


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda children: (
            st.lists(children, max_size=40)
            | st.dictionaries(st.text(max_size=8), children, max_size=12)
            | st.lists(st.integers() | st.floats(allow_nan=False, allow_infinity=False), min_size=300, max_size=600)
            | st.text(min_size=900, max_size=1_100)
        ),
        max_leaves=80,
    ).filter(lambda value: isinstance(value, (list, dict)))
)
def test_text_pydantic_writes_is_laid_out_as_its_value_is(value: Any) -> None:
    """Laid out from its characters or from its parsed value, a text pydantic-core writes gets the same lines."""
    expected = lay_out(value)
    text = pydantic_core.to_json(value).decode()
    relaid = relayout(text)
    assert relaid is not None
    assert (relaid.data(), relaid.lines, relaid.padding) == (expected.data(), expected.lines, expected.padding)
    laid_out = json_text_layout(text)
    assert laid_out is not None and laid_out.data() == expected.data()


@st.composite
def arrays_and_elements(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A JSON array text spelled any way, and the text of each of its elements."""
    elements = draw(st.lists(st.recursive(_SCALARS, _containers, max_leaves=20), min_size=1, max_size=40))
    return _joined(elements, draw(st.data()), '[', ']'), elements


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(arrays_and_elements())
def test_a_path_query_shows_each_element_as_written(document: tuple[str, list[str]]) -> None:
    text, elements = document
    layout = json_text_layout(text)
    assert layout is not None
    data = layout.data()
    found = query_json(lambda start, end: data[start:end], len(data), '$[*]', max_matches=len(elements))
    shown = [match.value for match in found.matches]
    expected = [''.join(tokens(element)) for element in elements]
    assert shown == [
        value if len(value) <= 300 else f'{value[:300]}... ({len(value) - 300} more characters)' for value in expected
    ]


@pytest.mark.parametrize('padding', [2_000, 1_200_000], ids=['loaded whole', 'navigated by its lines'])
def test_a_path_query_selects_the_last_of_two_members_with_the_same_name(padding: int) -> None:
    """Whether the object is loaded whole (up to 1 MB) or its members are found by their lines, as json.loads."""
    text = f'{{"status":"FAILED","pad":"{"x" * padding}","status":"ok"}}'
    layout = json_text_layout(text)
    assert layout is not None
    data = layout.data()
    found = query_json(lambda start, end: data[start:end], len(data), '$.status', max_matches=5)
    assert [(match.value, match.line) for match in found.matches] == [('"ok"', 4)]
    assert data.split(b'\n')[3] == b' "status":"ok"'
