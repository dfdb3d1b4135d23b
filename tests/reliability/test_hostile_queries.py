"""Hostile query-tool arguments, sent by a model as raw JSON: every call answers within a second with a result,
guidance or a retry prompt, and the run goes on.

Handles are covered elsewhere: `tests/overflowing_tool_output/test_store_security.py` holds a corpus of 67
traversal and injection handles (`..`, absolute paths, NUL, URL-encoded, Unicode look-alikes, very long, symlinks
and a FIFO planted inside the root) and a hypothesis property over the same traps.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, RetryPromptPart, ToolReturnPart
from pydantic_ai.usage import UsageLimits

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, build_query_toolset

from ._support import Steps

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

LONG_LINE = 'a' * 1_000_000
TEXT = LONG_LINE + '\n' + ''.join(f'line {i} value={i * 7} \udcff\n' for i in range(2, 60_002))
"""A 1 MB line of `a` (the food of catastrophic regexes), then 60,000 lines holding lone surrogates."""
BINARY = bytes(range(256)) * 1_200 + b'\x00PNG\n\x00' * 1_000
"""Binary data with NULs and newlines, read as lines it is a hex dump."""

T, B = '<text>', '<binary>'
"""Stand-ins for the handles, substituted once the spills happened."""

R, G = 'read_tool_result', 'grep_tool_result'

HOSTILE: list[tuple[str, str]] = [
    # numbers out of range
    (R, '{"handle": "<text>", "offset": -1}'),
    (R, '{"handle": "<text>", "offset": -1000000000000000000000000000000}'),
    (R, '{"handle": "<text>", "limit": 0}'),
    (R, '{"handle": "<text>", "limit": -5}'),
    (R, '{"handle": "<text>", "offset": 1000000000000000000000000000000}'),
    (R, '{"handle": "<text>", "limit": 1000000000000000000000000000000}'),
    (R, '{"handle": "<text>", "offset": 1000000000000000000000000000000, "from_end": true}'),
    (R, '{"handle": "<text>", "limit": 1000000000000000000000000000000, "from_end": true}'),
    (R, '{"handle": "<text>", "offset": 1e308}'),
    (R, '{"handle": "<text>", "unit": "bytes", "offset": 999999, "limit": 1000000000000}'),
    (R, '{"handle": "<text>", "unit": "bytes", "offset": 0, "limit": 1000000000000, "from_end": true}'),
    (G, '{"handle": "<text>", "pattern": "line", "context_lines": -1}'),
    (G, '{"handle": "<text>", "pattern": "line", "context_lines": 1000000000000}'),
    (G, '{"handle": "<text>", "pattern": "line", "max_matches": 0}'),
    (G, '{"handle": "<text>", "pattern": "line", "max_matches": -3}'),
    (G, '{"handle": "<text>", "pattern": "line", "max_matches": 1000000000000000000000}'),
    (G, '{"handle": "<text>", "pattern": "line", "start": -1}'),
    (G, '{"handle": "<text>", "pattern": "line", "start": 1000000000000000000000000000000}'),
    (G, '{"handle": "<text>", "pattern": "line", "start": 5, "offset": 3}'),
    (G, '{"pattern": "line", "start": 5}'),
    (G, '{"handle": "<binary>", "pattern": "PNG", "start": 1000000000000000000000}'),
    # wrong types
    (R, '{"handle": "<text>", "offset": 1.5}'),
    (R, '{"handle": "<text>", "offset": "12"}'),
    (R, '{"handle": "<text>", "offset": "abc"}'),
    (R, '{"handle": "<text>", "offset": null}'),
    (R, '{"handle": "<text>", "offset": [1]}'),
    (R, '{"handle": "<text>", "offset": {"a": 1}}'),
    (R, '{"handle": "<text>", "from_end": "maybe"}'),
    (R, '{"handle": "<text>", "unit": "pages"}'),
    (R, '{"handle": 123}'),
    (R, '{"handle": null}'),
    (R, '{"handle": ["<text>"]}'),
    (R, '{"handle": {"handle": "<text>"}}'),
    (R, '{}'),
    (R, '{"handle": "<text>", "bogus": 1}'),
    (R, '{not json'),
    (R, '[1, 2]'),
    (R, '"<text>"'),
    (R, 'null'),
    (R, ''),
    (G, '{"handle": "<text>", "pattern": 123}'),
    (G, '{"handle": "<text>", "pattern": null}'),
    (G, '{"handle": "<text>", "pattern": "x", "is_regex": "yes"}'),
    (G, '{"handle": "<text>"}'),
    # handles that are not handles
    (R, '{"handle": ""}'),
    (R, '{"handle": "\\u0000"}'),
    (R, json.dumps({'handle': 'x' * 100_000})),
    (G, json.dumps({'handle': '../' * 10_000, 'pattern': 'root'})),
    # patterns: NUL, newlines, surrogates, oversize
    (R, '{"handle": "<text>", "pattern": "\\u0000"}'),
    (R, '{"handle": "<text>", "pattern": "a\\nb"}'),
    (R, '{"handle": "<text>", "pattern": "\\r"}'),
    (R, '{"handle": "<text>", "pattern": "\\udcff", "limit": 3}'),
    (R, '{"handle": "<text>", "pattern": "line", "unit": "bytes"}'),
    (R, json.dumps({'handle': T, 'pattern': 'x' * 5_000})),
    (G, '{"handle": "<text>", "pattern": "\\u0000"}'),
    (G, '{"handle": "<text>", "pattern": "a\\nb"}'),
    (G, '{"handle": "<text>", "pattern": "a\\nb", "is_regex": true}'),
    (G, '{"handle": "<text>", "pattern": "\\udcff"}'),
    (G, '{"handle": "<text>", "pattern": ""}'),
    (G, json.dumps({'handle': T, 'pattern': 'x' * 1_001})),
    # catastrophic and invalid regexes (RE2: linear time, or refused)
    (G, json.dumps({'handle': T, 'pattern': '(a+)+$', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '(a|aa)*b', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '(x+x+)+y', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '^(a?){50}a{50}$', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '(?i)(A|a)*+b', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': 'a{1000}{1000}', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '((a{100}){100}){100}', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '(?<=a)b', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '(a)\\1', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '[', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '\\C+', 'is_regex': True})),
    (G, json.dumps({'handle': T, 'pattern': '.*', 'is_regex': True, 'max_matches': 100, 'context_lines': 10})),
    (G, json.dumps({'handle': T, 'pattern': '^', 'is_regex': True, 'max_matches': 100})),
    (G, json.dumps({'handle': T, 'pattern': '$', 'is_regex': True, 'max_matches': 100, 'context_lines': 10})),
    (G, json.dumps({'handle': T, 'pattern': '\\x00', 'is_regex': True})),
    # a search started inside the 1 MB line, with a catastrophic pattern and one matching everywhere
    (G, json.dumps({'handle': T, 'pattern': '(a+)+$', 'is_regex': True, 'start': 500_001})),
    (G, json.dumps({'handle': T, 'pattern': 'a', 'start': 3, 'max_matches': 100})),
    (G, json.dumps({'handle': T, 'pattern': '', 'is_regex': True, 'start': 3})),
    # the binary payload read as lines, filtered, grepped, paged from the end
    (R, '{"handle": "<binary>"}'),
    (R, '{"handle": "<binary>", "limit": 1000000}'),
    (R, '{"handle": "<binary>", "pattern": "PNG"}'),
    (R, '{"handle": "<binary>", "unit": "bytes", "offset": 5, "limit": 100000000, "from_end": true}'),
    (R, '{"handle": "<binary>", "offset": 1000000000000000000000}'),
    (G, '{"handle": "<binary>", "pattern": "\\u0000PNG"}'),
    (G, '{"handle": "<binary>", "pattern": "\\\\x00", "is_regex": true, "max_matches": 1000}'),
    (G, '{"handle": "<binary>", "pattern": "(\\\\x00|.)+$", "is_regex": true}'),
]

CHECK = {
    R: ('{"handle": "<text>", "offset": 2, "limit": 1}', '2| line 2 value=14 \ufffd'),
    G: ('{"handle": "<text>", "pattern": "value=420000 "}', '>60000| line 60000 value=420000 '),
}
"""A sound call per tool, sent after every hostile one: its answer proves the run and the tool still work (and a
success resets the tool's retry count, so the hostile calls never exhaust it)."""


def _last_exchange(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages if len(messages) <= 3 else [messages[0], *messages[-2:]]


def _with_handles(args: str, handles: dict[str, str]) -> str:
    for stand_in, handle in handles.items():
        args = args.replace(stand_in, handle)
    return args


async def test_hostile_query_arguments_answer_within_a_second_and_the_run_goes_on(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    # The model only needs the last exchange; trimming keeps the per-step cost of the scripted model (which
    # estimates tokens over the whole history) out of the per-call timings.
    agent = Agent(
        capabilities=[OverflowingToolOutput(store=store), ProcessHistory[Any](_last_exchange)],
    )

    @agent.tool_plain
    def produce_text() -> str:
        return TEXT

    @agent.tool_plain
    def produce_binary() -> bytes:
        return BINARY

    handles: dict[str, str] = {}
    plan: list[tuple[str, str]] = []
    for tool, args in HOSTILE:
        plan += [(tool, args), (tool, CHECK[tool][0])]
    position = 0

    def script(answers: list[Any]) -> list[tuple[str, dict[str, Any] | str]] | None:
        nonlocal position
        if not handles and not answers:
            return [('produce_text', {}), ('produce_binary', {})]
        if not handles:
            handles[T], handles[B] = (part.metadata['overflow_handle'] for part in answers)
        if position == len(plan):
            return None
        tool, args = plan[position]
        position += 1
        return [(tool, _with_handles(args, handles))]

    steps = Steps(script)
    result = await agent.run('go', model=steps.model, usage_limits=UsageLimits(request_limit=1_000))
    assert result.output == 'done'

    assert await store.read(handles[T]) == TEXT.encode('utf-8', 'surrogatepass')
    assert await store.read(handles[B]) == BINARY
    answers = steps.answers[1:]  # the first step's answers are the two spills
    durations = steps.durations()[1:]
    assert len(answers) == len(plan) == len(durations)
    kinds: dict[str, int] = {'result or guidance': 0, 'retry prompt': 0}
    slowest = 0.0
    for (tool, args), [answer], seconds in zip(plan, answers, durations, strict=True):
        assert seconds < 1.0, f'{tool}({args[:200]}) took {seconds:.2f} s'
        slowest = max(slowest, seconds)
        if args == CHECK[tool][0]:
            assert isinstance(answer, ToolReturnPart) and CHECK[tool][1] in str(answer.content), answer
            continue
        # A ModelRetry or an argument validation error comes back as a retry prompt (outcome 'retried').
        assert isinstance(answer, ToolReturnPart | RetryPromptPart), answer
        text = answer.model_response() if isinstance(answer, RetryPromptPart) else str(answer.content)
        assert text and len(text) <= 21_000, (args, len(text))
        assert str(tmp_path) not in text
        outcome = 'retried' if isinstance(answer, RetryPromptPart) else answer.outcome
        assert outcome in ('retried', 'success'), answer
        retried = outcome == 'retried'
        kinds['retry prompt' if retried else 'result or guidance'] += 1
    print(f'\n{len(HOSTILE)} hostile query calls: {kinds}; slowest call {slowest * 1000:.0f} ms')
    assert kinds['retry prompt'] > 20 and kinds['result or guidance'] > 20


async def test_a_regex_with_a_large_program_over_a_long_line_answers_within_a_second(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'spill')
    handle = await store.write('r/c/0', LONG_LINE.encode() + b'\nend\n')
    grep: Any = build_query_toolset(store).tools['grep_tool_result'].function
    started = time.perf_counter()
    answer = await grep(handle=handle, pattern='(.*a){30}$', is_regex=True)
    elapsed = time.perf_counter() - started
    # How much of a line one regex search covers depends on the size of its compiled program (never on timing):
    # this one could cost over a microsecond per byte, so the 1 MB line is searched in overlapping windows, and
    # the match at its end is found.
    assert answer.startswith("1 match inside lines longer than 1000 bytes for '(.*a){30}$' (regex; 2 lines searched)")
    assert elapsed < 1.0, f'took {elapsed:.2f} s'

    # A pattern that matches nothing there: every call answers within a second, says first what it did not search,
    # and the call it names goes on there, until the line is covered.
    calls: list[str] = []
    arguments: dict[str, Any] = {'handle': handle, 'pattern': '(.*a){30}b', 'is_regex': True}
    while len(calls) < 40:
        started = time.perf_counter()
        calls.append(await grep(**arguments))
        assert time.perf_counter() - started < 1.0
        more = re.search(r'Continue there: grep_tool_result\(.*start=(\d+)\)', calls[-1])
        if more is None:
            break
        assert calls[-1].startswith('Incomplete: the time budget (0.5 s) ran out inside line 1 of 2')
        assert int(more.group(1)) > arguments.get('start', 0)  # every call gets further
        arguments['start'] = int(more.group(1))
    assert re.match(r"(Caveat: .*\n)?No (line matches|match for) '\(\.\*a\)\{30\}b'", calls[-1]), calls[-1]

    # Within a line that fits, the same pattern is answered exactly.
    short = await store.write('r/c/1', b'a' * 50_000 + b'\nend\n')
    assert '1 match' in await grep(handle=short, pattern='(.*a){30}$', is_regex=True)
