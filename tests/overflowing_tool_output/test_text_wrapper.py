"""A return that only wraps a text (`{'content': '<text>'}`, an MCP server's `structuredContent`) is reduced as it.

Through real agent runs with function tools returning what `MCPToolset` hands over for such servers: stored as the
text's own lines (byte for byte), previewed as lines, the key named; measured as the JSON the model would see, so a
text of escapes is not let through at six times its band; anything else (two members, a non-text value, a key too
long to be a field name, a text JSON cannot hold) is the structured value it was. Also: the header of a spilled
failure, and the shape sketch of a NaN (stored as `null`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, ModelRetry, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs._spills import _HANDLE_MENTION as HANDLE_MENTION
from pydantic_ai_harness.overflowing_tool_output import (
    Aging,
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Spill,
    StepBudget,
    Summarize,
    Truncate,
)

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio

LOG = ''.join(
    f'2026-12-06 ERROR job {i} failed: disk full\n' if i % 500 == 250 else f'2026-12-06 INFO job {i} done\n'
    for i in range(20_000)
)


def calls_then(*follow: tuple[str, dict[str, Any]]) -> FunctionModel:
    """Call `tool`, then make `follow` calls with the spilled handle in place of `HANDLE`, then answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('tool', {}, tool_call_id='call_0')])
        if len(messages) == 3 and follow:
            (part,) = messages[2].parts
            handle = (part.metadata or {}).get('overflow_handle') if isinstance(part, ToolReturnPart) else None
            if isinstance(handle, str):
                return ModelResponse(
                    parts=[
                        ToolCallPart(name, {k: handle if v == 'HANDLE' else v for k, v in args.items()})
                        for name, args in follow
                    ]
                )
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


async def run_returning(
    value: Any, tmp_path: Path, *follow: tuple[str, dict[str, Any]], **settings: Any
) -> list[ToolReturnPart]:
    """Every tool return of a run whose one tool returns `value`."""
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'store'), **settings)
    agent = Agent(calls_then(*follow), capabilities=[capability])

    @agent.tool_plain
    def tool() -> Any:
        return value

    result = await agent.run('go')
    return [
        p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]


def with_handle(part: ToolReturnPart) -> tuple[str, str]:
    """The preview with its handle as `HANDLE`, and the handle."""
    assert part.metadata is not None, part.content
    handle = part.metadata['overflow_handle']
    return str(part.content).replace(handle, 'HANDLE'), handle


async def test_a_wrapped_log_is_stored_as_its_lines_and_grepped_line_by_line(tmp_path: Path) -> None:
    spilled, grep = await run_returning(
        {'content': LOG}, tmp_path, ('grep_tool_result', {'handle': 'HANDLE', 'pattern': 'ERROR', 'context_lines': 0})
    )
    preview, handle = with_handle(spilled)
    assert await LocalFileStore(base_dir=tmp_path / 'store').read(handle) == LOG.encode()
    # Where other code looks for a preview's handle (a handoff notes spills the receiver cannot read), it is found.
    assert [m.group(1) for m in HANDLE_MENTION.finditer(str(spilled.content))] == [handle]
    assert preview == snapshot("""\
[`tool` returned too much to show (~157366 tokens): {"content": <text>}. Saved in full under handle 'HANDLE' (<text> only): 20000 lines, 609450 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Lines that look important (errors, failures, exit status):
251| 2026-12-06 ERROR job 250 failed: disk full
751| 2026-12-06 ERROR job 750 failed: disk full
1251| 2026-12-06 ERROR job 1250 failed: disk full
1751| 2026-12-06 ERROR job 1750 failed: disk full
2251| 2026-12-06 ERROR job 2250 failed: disk full
19751| 2026-12-06 ERROR job 19750 failed: disk full
First lines (1-3 of 20000):
1| 2026-12-06 INFO job 0 done
2| 2026-12-06 INFO job 1 done
3| 2026-12-06 INFO job 2 done
Last lines (19999-20000):
19999| 2026-12-06 INFO job 19998 done
20000| 2026-12-06 INFO job 19999 done\
""")
    assert str(grep.content).startswith('40 matching lines for')  # one per ERROR line, not "1 matching line"


@pytest.mark.parametrize(
    'value',
    [
        pytest.param({'content': LOG, 'isError': False}, id='two members'),
        pytest.param({'content': LOG.splitlines()}, id='not a text'),
        pytest.param({'k' * 65: LOG}, id='a key too long to be a field name'),
        pytest.param({1: LOG}, id='a key that is not a text'),
    ],
)
async def test_anything_else_stays_the_structured_value_it_is(value: Any, tmp_path: Path) -> None:
    (spilled,) = await run_returning(value, tmp_path)
    preview, _ = with_handle(spilled)
    assert 'as JSON, one element per line' in preview and '<text>' not in preview


async def test_a_hostile_key_is_named_escaped_on_the_header_line(tmp_path: Path) -> None:
    # The key is the tool's (attacker) text: it must not break the header's line or bracket, nor inject a command.
    (spilled,) = await run_returning({'x]\n[\x1b[2J': LOG}, tmp_path)
    preview, _ = with_handle(spilled)
    assert preview.splitlines()[0].startswith(
        '[`tool` returned too much to show (~157368 tokens): {"x]\\n[\\u001b[2J": <text>}. Saved in full under handle'
    )


async def test_a_text_json_cannot_hold_stays_structured(tmp_path: Path) -> None:
    (spilled,) = await run_returning({'content': LOG + '\ud800'}, tmp_path)  # a lone surrogate
    preview, _ = with_handle(spilled)
    assert '<text>' not in preview


async def test_a_small_wrapped_text_reaches_the_model_as_returned(tmp_path: Path) -> None:
    (part,) = await run_returning({'content': 'line one\nline two'}, tmp_path)
    assert part.content == {'content': 'line one\nline two'} and part.metadata is None


@pytest.mark.parametrize('action', [Spill(preview_chars=1_000), Truncate(max_chars=550)], ids=['spill', 'truncate'])
async def test_a_text_that_fits_once_unwrapped_is_shown_whole(action: Spill | Truncate, tmp_path: Path) -> None:
    # 500 characters of text, 614 of JSON: over the band as returned, whole as the text; nothing is stored or cut.
    text = 'line\n' * 100
    (part,) = await run_returning({'content': text}, tmp_path, bands=[Band(over=200, action=action)])
    assert part.content == text
    assert part.metadata == {'overflow_action': 'unwrap', 'overflow_size_before': 614, 'overflow_size_after': 500}


async def test_it_is_measured_as_the_json_the_model_would_see(tmp_path: Path) -> None:
    # 3,000 control characters: a 3,000-character text, but 18,000 characters of JSON (each one `\u0000`).
    # Measured as the text, it would pass a 10,000-character band and reach the model at six times that size.
    hostile = {'content': '\x00' * 3_000}
    (part,) = await run_returning(hostile, tmp_path)
    assert part.metadata is not None
    assert part.metadata['overflow_action'] == 'spill' and part.metadata['overflow_size_before'] == 18_014
    assert len(str(part.content)) < 1_200


async def test_a_wrapped_json_text_is_stored_as_json_one_element_per_line(tmp_path: Path) -> None:
    tree = '[\n' + ',\n'.join(f'  {{"name": "file{i}.txt", "type": "file"}}' for i in range(2_000)) + '\n]'
    spilled, grep = await run_returning(
        {'content': tree}, tmp_path, ('grep_tool_result', {'handle': 'HANDLE', 'pattern': 'file1234.txt'})
    )
    preview, _ = with_handle(spilled)
    assert preview.splitlines()[0] == snapshot(
        '[`tool` returned too much to show (~26227 tokens): {"content": <text>}. Saved in full under handle \'HANDLE\' (<text> only) as JSON, one element per line: 2002 lines, 78893 bytes; a preview follows.'
    )
    assert 'Shape: array[2000] of {name: str, type: str}' in preview
    assert '>1236|  {"name":"file1234.txt","type":"file"},' in str(grep.content)


async def test_a_truncated_wrapped_text_is_cut_as_text(tmp_path: Path) -> None:
    (part,) = await run_returning({'content': LOG}, tmp_path, bands=[Band(over=10_000, action=Truncate(max_chars=400))])
    text = str(part.content)
    assert part.metadata is not None and part.metadata['overflow_action'] == 'truncate'
    assert '\\n' not in text and '2026-12-06 INFO job 0 done\n' in text
    assert text == snapshot("""\
[truncated: the middle 609249 of 609450 characters (lines 5-19997) omitted and not kept]
2026-12-06 INFO job 0 done
2026-12-06 INFO job 1 done
2026-12-06 INFO job 2 done
2026-12-06 INFO job 3 done
[lines 5-19997 omitted here]
2026-12-06 INFO job 19997 done
2026-12-06 INFO job 19998 done
2026-12-06 INFO job 19999 done
""")


async def test_the_step_budget_reduces_a_wrapped_text_as_text(tmp_path: Path) -> None:
    # The band would let it through; the step budget spills it, as the text it wraps.
    (part,) = await run_returning(
        {'content': LOG},
        tmp_path,
        bands=[Band(over=10_000_000, action=Truncate())],
        step_budget=StepBudget(20_000, action=Spill()),
    )
    preview = str(part.content)
    assert part.metadata is not None and part.metadata['overflow_step_budget'] == 20_000
    assert ': {"content": <text>}. Saved in full under handle' in preview and '\\n' not in preview


async def test_a_spilled_failure_is_headed_as_the_tools_failure(tmp_path: Path) -> None:
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path / 'store'))
    agent = Agent(calls_then(), capabilities=[capability])

    @agent.tool_plain(retries=1)
    def tool() -> str:
        raise ModelRetry('deploy failed:\n' + LOG)

    result = await agent.run('go')
    failed = next(
        p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.outcome == 'retried'
    )
    preview, _ = with_handle(failed)
    assert preview.splitlines()[0] == snapshot(
        "[`tool` failed with an error message too long to show (~152367 tokens). Saved in full under handle 'HANDLE': 20001 lines, 609465 bytes; a preview follows."
    )


async def test_the_shape_sketch_of_a_nan_says_what_is_stored(tmp_path: Path) -> None:
    value = {'nan': math.nan, 'inf': [math.inf, 1.5], 'rows': [{'id': i, 'score': math.nan} for i in range(2_000)]}
    (spilled,) = await run_returning(value, tmp_path)
    preview, handle = with_handle(spilled)
    stored = await LocalFileStore(base_dir=tmp_path / 'store').read(handle)
    assert b'"nan":null' in stored and b'"score":null' in stored and b'NaN' not in stored
    (shape,) = [line for line in preview.splitlines() if line.startswith('Shape: ')]
    assert shape == snapshot(
        'Shape: {nan: null, inf: array[2] of null | float, rows: array[2000] of {id: int, score: null}}'
    )


async def test_an_aged_wrapped_text_is_stored_as_the_text(tmp_path: Path) -> None:
    pages = [''.join(f'page {n} line {i}\n' for i in range(300)) for n in range(6)]  # each below the band

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(pages):
            return ModelResponse(parts=[ToolCallPart('fetch', {'n': step}, tool_call_id=f'call_{step}')])
        return ModelResponse(parts=[TextPart('done')])

    store = LocalFileStore(base_dir=tmp_path / 'store')
    capability = OverflowingToolOutput(
        store=store, workspace=None, aging=Aging(after_turns=2, min_tokens=100, batch_tokens=0)
    )
    agent = Agent(FunctionModel(respond), capabilities=[capability])

    @agent.tool_plain
    def fetch(n: int) -> dict[str, str]:
        return {'content': pages[n]}

    result = await agent.run('go')
    aged = [
        p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and isinstance(p.metadata, dict) and 'overflow_aged_handle' in p.metadata
    ]
    assert len(aged) >= 3
    for part in aged:
        stored = await store.read(part.metadata['overflow_aged_handle'])
        assert stored.decode() == pages[int(part.tool_call_id.removeprefix('call_'))]  # lines, not an escaped line


async def test_a_summarized_failure_is_labelled_as_the_tools_failure(tmp_path: Path) -> None:
    summarize = Summarize(summarize=lambda tool, text: 'Disk full on 40 jobs.', keep_original=False)
    capability = OverflowingToolOutput(bands=[Band(over=10_000, action=summarize)])
    agent = Agent(calls_then(), capabilities=[capability])

    @agent.tool_plain(retries=1)
    def tool() -> str:
        raise ModelRetry('deploy failed:\n' + LOG)

    result = await agent.run('go')
    (failed,) = [
        p
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.outcome == 'retried'
    ]
    assert str(failed.content) == snapshot("""\
[Summary of the error message `tool` failed with (609465 characters, 20001 lines; too many to keep). It may miss details. The full original was not kept.]
Disk full on 40 jobs.\
""")
