"""`read_tool_result(handle, path=...)`: JSONPath over a stored JSON spill, streamed, bounded, and located by line."""

from __future__ import annotations

import json
import re
import sys
import time
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from jsonpath_rfc9535 import JSONPathEnvironment
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from pydantic_ai_harness.overflowing_tool_output._rendering._json_layout import lay_out_jsonable
from pydantic_ai_harness.overflowing_tool_output._rendering._render import render_value, stored_form
from pydantic_ai_harness.overflowing_tool_output._search._jsonpath import (
    JsonQueryError,
    JsonQueryLimits,
    NotQueryableError,
    query_json,
)

pytestmark = pytest.mark.anyio

REFERENCE = JSONPathEnvironment()


def orders(count: int, stuck: tuple[int, ...] = (7, 300, 555)) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    for i in range(count):
        data.append(
            {
                'id': f'ord_{i:05d}',
                'customer': {'id': f'cus_{i % 97}', 'name': 'Zoë "the" O\'Neil' if i == 3 else f'c{i}'},
                'items': [{'sku': f'SKU-{i}-{j}', 'qty': (i + j) % 5} for j in range(i % 3)],
                'events': [{'status': 'stuck'}] if i % 50 == 1 else [],
                'status': 'stuck' if i in stuck else ['paid', 'shipped'][i % 2],
            }
        )
    return {'object': 'list', 'total': count, 'data': data, 'meta': {}, 'tags': ['a', 'b']}


def stored(value: Any) -> bytes:
    """The form a structured spill is stored in (`_render.stored_form`): one compact element per line."""
    return stored_form(render_value(value))[1]


def indented(value: Any) -> bytes:
    """The indented form earlier versions stored (`json.dumps(indent=1)`): still navigated the same way."""
    return json.dumps(value, indent=1, ensure_ascii=False).encode('utf-8', 'surrogatepass')


FORMS = {'layout': stored, 'indented': indented}


def run(text: bytes, query: str, *, max_matches: int = 1000, **limits: Any) -> Any:
    return query_json(
        lambda start, end: text[max(0, start) : max(0, end)],
        len(text),
        query,
        max_matches=max_matches,
        limits=JsonQueryLimits(**limits),
    )


QUERIES = [
    "$.data[?@.status=='stuck'].id",
    '$.total',
    '$..id',
    '$.data[-1].customer',
    '$.data[2:9:3].items[*].sku',
    '$.data[::-250].id',
    '$..items[0].sku',
    '$.data[*].items[?@.qty>3]',
    "$.data[?search(@.id, '^ord_0001')]",
    "$.data[?@.events[0].status=='stuck' && @.status!='stuck'].id",
    '$.*',
    "$..[?@.name=='Zoë \"the\" O\\'Neil']",
    '$.meta.*',
    '$.missing',
    '$.data[5000]',
    '$.data[?length(@.items)==2].id',
    '$',
]


def numbers() -> dict[str, Any]:
    """Long arrays of numbers, booleans and nulls: packed several to a line in the layout."""
    return {
        'values': [i * 7 for i in range(3000)],
        'floats': [i / 8 for i in range(900)],
        'flags': [True, None, False] * 400,
    }


NUMBER_QUERIES = [
    '$.values[2345]',
    '$.values[-1]',
    '$.floats[100:103]',
    '$.flags[?@==true]',
    '$.values[?@>20980]',
    '$..[7]',
]


def _check_line(form: str, lines: list[str], line_number: int | None, location: Any, value: Any) -> None:
    """The line shown is the one the value is on in the stored text."""
    assert line_number is not None
    line = lines[line_number - 1].strip().rstrip(',')
    compact = json.dumps(value, ensure_ascii=False, separators=(',', ':'))
    key = location[-1] if location else None
    if form == 'indented':
        if isinstance(value, dict | list):
            assert line.endswith(('{', '[', '{}', '[]'))
        else:
            assert line.endswith(json.dumps(value, ensure_ascii=False))
        if isinstance(key, str):
            assert line.startswith(json.dumps(key, ensure_ascii=False) + ': ')
        return
    # One compact element per line: a value is on its own line (a spread-out container opens there) or inside
    # the compact element it belongs to.
    if isinstance(value, dict | list) and line.endswith(('{', '[')):
        return
    if isinstance(value, int | float | bool) or value is None:
        assert compact in line.split(',') or compact in line
    else:
        assert compact in line
    if isinstance(key, str):
        assert json.dumps(key, ensure_ascii=False) + ':' in line


@pytest.mark.parametrize('form', FORMS)
@pytest.mark.parametrize('batch_bytes', [300, 4096, 1 << 20])
@pytest.mark.parametrize('query', QUERIES)
def test_matches_equal_the_reference_implementation_in_memory(query: str, batch_bytes: int, form: str) -> None:
    document = orders(600)
    text = FORMS[form](document)
    lines = text.decode().split('\n')
    result = run(text, query, batch_bytes=batch_bytes, max_value_chars=10**9, max_matches=5000)
    expected = REFERENCE.compile(query).find(document)
    assert result.complete
    assert result.total == len(expected)
    assert [m.path for m in result.matches] == expected.paths()
    for match, node in zip(result.matches, expected, strict=True):
        if not match.value.startswith('<a value of'):
            assert json.loads(match.value) == node.value
        _check_line(form, lines, match.line, node.location, node.value)


@pytest.mark.parametrize('batch_bytes', [200, 1 << 20])
@pytest.mark.parametrize('query', NUMBER_QUERIES)
def test_packed_numbers_are_queried_element_by_element(query: str, batch_bytes: int) -> None:
    document = numbers()
    text = stored(document)
    lines = text.decode().split('\n')
    assert len(lines) < 100  # several numbers to a line
    result = run(text, query, batch_bytes=batch_bytes, max_value_chars=10**9, max_matches=5000)
    expected = REFERENCE.compile(query).find(document)
    assert result.complete
    assert [m.path for m in result.matches] == expected.paths()
    for match, node in zip(result.matches, expected, strict=True):
        assert json.loads(match.value) == node.value
        _check_line('layout', lines, match.line, node.location, node.value)


def test_a_large_document_is_never_loaded_whole() -> None:
    document = orders(40_000)
    text = stored(document)
    assert len(text) > 5_000_000
    tracemalloc.start()
    result = run(text, "$.data[?@.status=='stuck'].id", batch_bytes=64 << 10)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [m.value for m in result.matches] == ['"ord_00007"', '"ord_00300"', '"ord_00555"']
    tracemalloc.start()
    json.loads(text)
    _, whole = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < whole / 5


def test_a_big_value_is_described_not_loaded() -> None:
    text = stored(orders(2_000))
    result = run(text, '$.data', batch_bytes=4096)
    [match] = result.matches
    assert match.line == 4
    assert re.fullmatch(r'<a value of \d+ bytes starting at line 4: select its parts to see them>', match.value)


@pytest.mark.parametrize(
    ('query', 'message'),
    [
        ('', "path must be a JSONPath query starting with '$'"),
        ('data[0]', 'is not valid JSONPath (RFC 9535)'),
        ('$[?@.a ==]', 'is not valid JSONPath'),
        ('$..a..b..c', "path has 3 '..' segments; at most 2 are allowed"),
        ('$[?@..a && @..b && @..c]', "path has 3 '..' segments"),
        ('$.' + 'a' * 600, 'path is 602 characters long; the limit is 500.'),
        ('$' + '[0]' * 400, 'path is 1201 characters long'),
        ('$[?length(@) == length(@, @)]', 'is not valid JSONPath'),
    ],
)
def test_invalid_and_expanding_queries_are_refused(query: str, message: str) -> None:
    with pytest.raises(JsonQueryError) as caught:
        run(stored(orders(10)), query)
    assert message in str(caught.value)


def test_a_catastrophic_regex_runs_in_linear_time_on_re2() -> None:
    # `(a+)+$` backtracks exponentially on a backtracking engine; RE2 answers in linear time.
    document = {'rows': [{'s': 'a' * 5_000 + '!'} for _ in range(200)]}
    result = run(stored(document), "$.rows[?match(@.s, '(a+)+')]", batch_bytes=2048)
    assert result.total == 0
    result = run(stored(document), "$.rows[?search(@.s, '(a+)+!')]", batch_bytes=2048)
    assert result.total == 200


def test_an_invalid_iregexp_matches_nothing() -> None:
    result = run(stored(orders(10)), "$.data[?match(@.id, '(?=x)')]")
    assert result.total == 0


def test_the_time_budget_stops_a_query_and_says_how_far_it_got() -> None:
    text = stored(orders(3_000))
    result = run(text, '$..sku', batch_bytes=2048, time_budget=0.0)
    assert not result.complete
    assert result.reached_line is not None and result.reached_line >= 1


def test_the_matches_kept_are_bounded_but_the_count_is_exact() -> None:
    result = run(stored(orders(3_000)), '$..id', max_matches=5, batch_bytes=4096)
    assert result.total == 6_000
    assert len(result.matches) == 5


def test_values_shown_are_cut() -> None:
    result = run(stored({'blob': 'x' * 5_000}), '$.blob', max_value_chars=50)
    [match] = result.matches
    assert match.value == '"' + 'x' * 49 + '... (4952 more characters)'


def test_compact_json_text_is_queried_whole_without_lines() -> None:
    text = json.dumps(orders(50)).encode()
    result = run(text, "$.data[?@.status=='stuck'].id")
    assert [(m.value, m.line) for m in result.matches] == [('"ord_00007"', None)]


def test_compact_json_too_large_to_load_is_refused() -> None:
    text = json.dumps(orders(2_000)).encode()
    with pytest.raises(NotQueryableError, match='stored on one line needs the whole document loaded'):
        run(text, '$.total', max_load_bytes=10_000)


def test_a_root_filter_on_a_large_document_is_refused() -> None:
    text = stored(orders(2_000))
    with pytest.raises(NotQueryableError, match=r'refers to the root \(\$\)'):
        run(text, '$.data[?@.customer.id == $.data[0].customer.id]', max_load_bytes=10_000)
    small = run(stored(orders(200)), '$.data[?@.customer.id == $.data[0].customer.id].id')
    assert [m.value for m in small.matches] == ['"ord_00000"', '"ord_00097"', '"ord_00194"']


@pytest.mark.parametrize('text', [b'not json at all', b'{\n "a": 1,\n oops\n}', b'', b'\xff\xfe{}'])
def test_text_that_is_not_json_is_reported(text: bytes) -> None:
    with pytest.raises(NotQueryableError):
        run(text, '$.*', batch_bytes=4)


def test_odd_keys_surrogates_and_deep_nesting() -> None:
    deep: Any = 'bottom'
    for _ in range(150):
        deep = {'k': deep}
    document = {'\ud800lone': 1, 'quote"key': [[], {}, [[1]]], 'deep': deep, '': None, 'pad': ['x' * 100] * 20}
    text = lay_out_jsonable(document).data()  # (a tool's value this deep is cut at 100 levels before it is stored)
    for batch in (8, 1 << 20):
        assert [m.value for m in run(text, "$['quote\"key'][2][0][0]", batch_bytes=batch).matches] == ['1']
        assert run(text, "$['']", batch_bytes=batch).matches[0].value == 'null'
        [bottom] = run(text, '$.deep' + '.k' * 150, batch_bytes=batch).matches
        assert bottom.value == '"bottom"'
        assert bottom.line is not None
        assert '{"k":"bottom"}' in text.decode('utf-8', 'surrogatepass').split('\n')[bottom.line - 1]
        assert run(text, "$['quote\"key'][*]", batch_bytes=batch).total == 3


# --- the tool, in agent runs ------------------------------------------------------------------------


def _last_text(messages: list[ModelMessage]) -> str:
    part = messages[-1].parts[-1]
    assert isinstance(part, ToolReturnPart | RetryPromptPart)
    return str(part.content) if isinstance(part, ToolReturnPart) else part.model_response()


async def test_an_agent_asks_a_structural_question_of_a_spilled_response(tmp_path: Path) -> None:
    seen: list[str] = []
    handle_pattern = re.compile(r"handle '([^']+)'")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('list_orders', {})])
        text = _last_text(messages)
        seen.append(text)
        if len(seen) == 1:
            handle = handle_pattern.search(text)
            assert handle is not None
            path = "$.data[?@.status=='stuck'].id"
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle.group(1), 'path': path})])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])

    @agent.tool_plain
    def list_orders() -> dict[str, Any]:
        return orders(3_000)

    await agent.run('How many orders are stuck, and which?', run_id='r1')
    answer = seen[-1]
    lines = answer.split('\n')
    assert lines[0].startswith('3 matches for "$.data[?@.status==\'stuck\'].id" in ')
    assert lines[0].endswith('; all 3:')
    assert [re.sub(r'^line \d+: ', '', line) for line in lines[1:4]] == [
        "$['data'][7]['id'] = \"ord_00007\"",
        "$['data'][300]['id'] = \"ord_00300\"",
        "$['data'][555]['id'] = \"ord_00555\"",
    ]
    assert lines[4].startswith('(In context: read_tool_result(handle=')


async def test_the_line_shown_reads_back_the_match(tmp_path: Path) -> None:
    from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset

    store = LocalFileStore(base_dir=tmp_path)
    handle = await store.write('r/c/0', stored(orders(3_000)))
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle, 'path': '$.data[300].id'})])
        text = _last_text(messages)
        answers.append(text)
        if len(answers) == 1:
            line = int(re.search(r'line (\d+):', text).group(1))  # pyright: ignore[reportOptionalMemberAccess]
            return ModelResponse(
                parts=[ToolCallPart('read_tool_result', {'handle': handle, 'offset': line, 'limit': 1})]
            )
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), toolsets=[build_query_toolset(store)])
    await agent.run('go')
    assert '{"id":"ord_00300",' in answers[1]  # the whole record, on the line shown


@pytest.mark.parametrize(
    ('args', 'expected'),
    [
        ({'path': '$..a..b..c'}, "path has 3 '..' segments"),
        ({'path': 'data'}, 'is not valid JSONPath'),
        ({'path': '$.total', 'limit': 0}, 'limit must be 1 or more, got 0.'),
        ({'path': '$.total', 'handle': 'nope'}, "No stored result found under handle 'nope'"),
        ({'path': '$.total', 'limit': 10**6}, "1 match for '$.total'"),  # capped at 100: quietly, all are listed
        ({'path': '$.total', 'offset': -1}, 'offset must be 0 or more, got -1; with path, leave it out.'),
        ({'path': '$.total', 'offset': 40, 'from_end': True}, 'so offset, from_end cannot be combined with it'),
        ({'path': '$.total', 'unit': 'bytes', 'pattern': 'x'}, 'so pattern, unit cannot be combined with it'),
        ({'path': '   ', 'limit': 3}, '1| {'),  # a blank path is a plain read
    ],
)
async def test_hostile_arguments_get_guidance_not_a_crash(tmp_path: Path, args: dict[str, Any], expected: str) -> None:
    from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset

    store = LocalFileStore(base_dir=tmp_path)
    handle = await store.write('r/c/0', stored(orders(50)))
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle, **args})])
        answers.append(_last_text(messages))
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), toolsets=[build_query_toolset(store)])
    await agent.run('go')
    assert expected in answers[0]


async def test_binary_and_text_payloads_are_explained(tmp_path: Path) -> None:
    from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset

    store = LocalFileStore(base_dir=tmp_path)
    binary = await store.write('r/b/0', bytes(range(256)) * 100)
    text = await store.write('r/t/0', b'plain log line\n' * 100)
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart('read_tool_result', {'handle': binary, 'path': '$'}, tool_call_id='a'),
                    ToolCallPart('read_tool_result', {'handle': text, 'path': '$'}, tool_call_id='b'),
                ]
            )
        answers.extend(str(part.content) for part in messages[-1].parts if isinstance(part, ToolReturnPart))
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), toolsets=[build_query_toolset(store)])
    await agent.run('go')
    assert answers == [
        f'The stored result {binary!r} is binary, not JSON: read it without path, or use grep_tool_result.',
        f'Stored result {text!r}: It is not valid JSON, so it cannot be queried by path; use grep_tool_result.',
    ]


class _FailingRangeStore(LocalFileStore):
    """Writes and opens, then fails on every range read: a disk that went away under a spill."""

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        raise OSError(5, 'I/O error at /secret/mount')


async def test_a_store_failing_under_a_path_query_is_guidance_not_a_crash(tmp_path: Path) -> None:
    store = _FailingRangeStore(base_dir=tmp_path)
    answers: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('list_orders', {})])
        if len(messages) == 3:
            handle = re.search(r"handle '([^']+)'", _last_text(messages))
            assert handle is not None
            return ModelResponse(parts=[ToolCallPart('read_tool_result', {'handle': handle[1], 'path': '$.data[0]'})])
        answers.append(_last_text(messages))
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='list_orders')(lambda: orders(300))
    assert (await agent.run('go')).output == 'done'
    [answer] = answers
    assert 'could not be read right now (storage error: OSError)' in answer
    assert '/secret' not in answer


@pytest.mark.parametrize(('limit', 'listed', 'footer'), [(200, 20, 'Pass limit=100 (the most)'), (100, 43, None)])
async def test_the_footer_names_a_limit_that_lists_more(
    tmp_path: Path, limit: int, listed: int, footer: str | None
) -> None:
    """`limit=200` is the line default, so it lists 20; the footer then says exactly what lists more."""
    from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset

    store = LocalFileStore(base_dir=tmp_path)
    handle = await store.write('r/c/0', stored(orders(500, stuck=tuple(range(0, 430, 10)))))
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    answer = await read(handle=handle, path="$.data[?@.status=='stuck'].id", limit=limit)
    assert answer.startswith(f'43 matches for "$.data[?@.status==\'stuck\'].id" in {handle!r}; ')
    assert len(re.findall(r'^line \d+: ', answer, re.MULTILINE)) == listed
    assert (footer in answer) if footer else ('to see more' not in answer)


async def test_a_path_query_longer_than_the_store_timeout_still_answers(tmp_path: Path) -> None:
    """The store timeout bounds waiting on the store; a path query also has its own time budget on top of it."""
    from pydantic_ai_harness.overflowing_tool_output import QueryLimits
    from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset

    store = LocalFileStore(base_dir=tmp_path)
    handle = await store.write('r/c/0', stored(orders(80_000)))
    # Opening the payload takes a few ms (up to ~0.1 s in a fresh process), the query over its 11 MB seconds, even on
    # a quiet machine: past a 0.2 s store timeout either way (over 2.7 MB a quiet machine answered within it).
    read: Any = build_query_toolset(store, limits=QueryLimits(store_timeout=0.2)).tools['read_tool_result'].function
    started = time.monotonic()
    answer = await read(handle=handle, path="$.data[?@.status=='stuck'].id")
    assert answer.startswith('3 matches for "$.data[?@.status==\'stuck\'].id"'), answer
    if time.monotonic() - started < 0.2:
        pytest.skip('the query was faster than the store timeout here: nothing to show')


class _CountingStore(LocalFileStore):
    """Counts range reads that were cancelled under the query's worker."""

    cancelled_reads: int = 0

    async def read_range(self, handle: str, start: int, end: int) -> bytes:
        import anyio

        try:
            return await super().read_range(handle, start, end)
        except anyio.get_cancelled_exc_class():
            self.cancelled_reads += 1
            raise


async def test_a_path_query_cancelled_midway_finishes_its_reads(tmp_path: Path) -> None:
    """Cancelling the call (a run cancelled, an outer timeout) while the query's worker reads through the event loop
    cancelled the read in flight, and the worker then ran on to its 30 s budget: a 1 s query held the tool call for
    40 s. The query is shielded now: every read completes, and the call returns as soon as it is done. (100,000
    orders: a query of some seconds, so the 0.3 s deadline always falls inside it; 20,000 took 0.3-0.45 s.)"""
    import anyio

    from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset

    store = _CountingStore(base_dir=tmp_path)
    handle = await store.write('r/c/0', stored(orders(100_000)))
    read: Any = build_query_toolset(store).tools['read_tool_result'].function
    with anyio.move_on_after(0.3) as scope:
        await read(handle=handle, path="$.data[?@.status=='stuck'].id")
    assert scope.cancel_called
    assert store.cancelled_reads == 0


def _query_workers() -> int:
    """How many threads are running a path query now."""

    def running(frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_code is query_json.__code__:
                return True
            frame = frame.f_back
        return False

    return sum(running(frame) for frame in sys._current_frames().values())


async def test_a_cancelled_path_query_stops_its_work(tmp_path: Path) -> None:
    """A run cancelled while its path query works: the query's worker stops within a step, so the cancelled run
    and no worker thread is left running (it ran on to the end of the query before, up to its 30 s budget)."""
    import anyio

    issued = anyio.Event()
    answers: list[str] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('list_orders', {})])
        answers.append(_last_text(messages))
        handle = re.search(r"handle '([^']+)'", answers[0])
        if len(answers) == 1 and handle is not None:
            issued.set()
            # A slow query: every node of a 5 MB document filtered, several seconds of work.
            query = {'handle': handle[1], 'path': "$..[?@.status=='stuck']"}
            return ModelResponse(parts=[ToolCallPart('read_tool_result', query)])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(FunctionModel(model), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='list_orders')(lambda: orders(40_000))
    async with anyio.create_task_group() as group:
        group.start_soon(agent.run, 'Which orders are stuck?')
        with anyio.fail_after(60):
            await issued.wait()
        with anyio.fail_after(10):
            while not _query_workers():
                await anyio.sleep(0.01)
        await anyio.sleep(0.3)  # the query is under way
        group.cancel_scope.cancel()
    # The run returns at once either way; the query's worker thread, left behind, is what must stop too.
    cancelled = time.monotonic()
    with anyio.move_on_after(3.0):
        while _query_workers():
            await anyio.sleep(0.01)
    assert _query_workers() == 0
    print(f'\nthe cancelled query worker stopped {(time.monotonic() - cancelled) * 1000:.0f} ms after the cancel')
    assert len(answers) == 1  # the query never answered: it was cancelled midway
