"""Spills across delegation and bounded summaries (issue 18, items 4 and 5), with real agents and a real store."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import HandoffConfig, HandoffInputData, delegate, nest_handoff_history
from pydantic_ai_harness.overflowing_tool_output import Band, LocalFileStore, OverflowingToolOutput, Spill

from ._helpers import assistant, summary_texts, user

pytestmark = pytest.mark.anyio

HANDLE = re.compile(r"handle '([^'\\]+)'")


def big_report() -> str:
    """A long report."""
    return '\n'.join(f'line {i}: data {i * 7}' for i in range(500))


class Reader:
    """A delegate model that pages the first handle it finds in its summary, then answers with what it read."""

    def __init__(self, offset: int = 201) -> None:
        self.offset = offset
        self.read_back: list[str] = []
        self.tools: list[list[str]] = []
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools.append([tool.name for tool in info.function_tools])
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart) and p.tool_name == 'read_tool_result']
        if returns:
            self.read_back.append(returns[0].model_response_str())
            return ModelResponse(parts=[TextPart('read it')])
        match = HANDLE.search('\n'.join(summary_texts(messages)))
        if match is None:
            return ModelResponse(parts=[TextPart('no handle')])
        args = {'handle': match.group(1), 'offset': self.offset, 'limit': 1}
        return ModelResponse(parts=[ToolCallPart('read_tool_result', args, 'c_read')])


def handing_off_model(first_tool: str | None, transfer: str) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if first_tool is not None and not returned:
            return ModelResponse(parts=[ToolCallPart(first_tool, {}, f'c_{first_tool}')])
        if transfer in returned:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart(transfer, {}, f'c_{transfer}')])

    return FunctionModel(respond)


def delegating_agent(
    name: str, target: Agent[None, str], first_tool: str | None = None, **agent_kwargs: Any
) -> Agent[None, str]:
    agent = Agent(handing_off_model(first_tool, 'transfer'), name=name, deps_type=type(None), **agent_kwargs)

    @agent.tool
    async def transfer(ctx: RunContext[None]) -> str:
        """Hand off."""
        return (await delegate(target, ctx, f'{name} hands over', nest_handoff_history=True)).output

    return agent


async def test_a_spill_in_the_parent_is_read_by_the_delegate_two_hops_away(tmp_path: Path) -> None:
    overflow = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 's'))
    reader = Reader()
    final = Agent(FunctionModel(reader), name='final')  # no OverflowingToolOutput of its own
    middle = delegating_agent('middle', final)  # none either
    triage = delegating_agent('triage', middle, first_tool='big_report', capabilities=[overflow])
    triage.tool_plain(big_report)

    assert (await triage.run('Analyse the report')).output == 'done'
    assert 'read_tool_result' in reader.tools[0] and 'grep_tool_result' in reader.tools[0]  # inherited
    [page] = reader.read_back
    assert '201| line 200: data 1400' in page
    assert 'cannot be read' not in '\n'.join(summary_texts(reader.seen[0]))


async def test_a_delegate_reducing_into_another_store_is_told_plainly(tmp_path: Path) -> None:
    parent = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'a'))
    own = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'b'))
    reader = Reader()
    specialist = Agent(FunctionModel(reader), name='specialist', capabilities=[own])
    triage = delegating_agent('triage', specialist, first_tool='big_report', capabilities=[parent])
    triage.tool_plain(big_report)
    await triage.run('Analyse the report')
    [summary] = summary_texts(reader.seen[0])
    assert 'cannot be read by this agent' in summary and 'Work from the preview above' in summary


async def test_a_delegate_with_the_same_store_reads_the_parents_spill(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'shared')
    reader = Reader()
    own = OverflowingToolOutput(bands=[Band(over=5_000, action=Spill())], store=store)
    specialist = Agent(FunctionModel(reader), name='specialist', capabilities=[own])
    parent = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=store)
    triage = delegating_agent('triage', specialist, first_tool='big_report', capabilities=[parent])
    triage.tool_plain(big_report)
    await triage.run('Analyse the report')
    assert '201| line 200: data 1400' in reader.read_back[0]


FIVE_MB_LINES = 150_000


def five_mb_log() -> str:
    """A 5 MB log nobody reduced."""
    return '\n'.join(f'event {i:07d}: ok, latency nominal' for i in range(FIVE_MB_LINES))


async def test_a_5_mb_record_is_capped_in_the_summary_and_still_readable(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'store')
    reader = Reader(offset=FIVE_MB_LINES)
    own = OverflowingToolOutput(bands=[Band(over=10_000_000, action=Spill())], store=store)
    specialist = Agent(FunctionModel(reader), name='specialist', capabilities=[own])
    triage = delegating_agent('triage', specialist, first_tool='five_mb_log')  # no reduction in the parent
    triage.tool_plain(five_mb_log)
    assert len(five_mb_log()) > 5_000_000

    await triage.run('Check the last event')
    [summary] = summary_texts(reader.seen[0])
    assert len(summary) < 25_000
    assert summary.count('[... record cut: the first ') == 1 and 'of 5' in summary
    assert f'event {FIVE_MB_LINES - 1:07d}: ok' in reader.read_back[0]  # the very end, paged from the store


async def test_a_capped_record_is_neither_cut_nor_saved_again_at_the_next_hop(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path / 'store')
    reader = Reader(offset=0)
    own = OverflowingToolOutput(bands=[Band(over=10_000_000, action=Spill())], store=store)
    final = Agent(FunctionModel(reader), name='final', capabilities=[own])
    middle = delegating_agent('middle', final, capabilities=[own])
    triage = delegating_agent('triage', middle, first_tool='five_mb_log')
    triage.tool_plain(five_mb_log)
    await triage.run('Check')
    [summary] = summary_texts(reader.seen[0])
    assert summary.count('[... record cut: the first ') == 1
    saved = [p for p in (tmp_path / 'store').rglob('*') if p.is_file() and 'handoff' in str(p) and p.suffix != '.idx']
    assert len(saved) == 1, saved
    numbers = [int(line.partition('.')[0]) for line in summary.splitlines()[2:-1]]
    assert numbers == list(range(1, len(numbers) + 1))


def test_without_a_store_a_cut_says_the_rest_was_not_kept() -> None:
    data = HandoffInputData(input_history=(user('x' * 5_000), assistant('short')), pre_handoff_items=(), new_items=())
    [summary] = nest_handoff_history(data, max_record_chars=1_000).to_message_history()
    [text] = summary_texts([summary])
    first = text.splitlines()[2]
    assert len(first) < 1_100 and first.endswith(
        'characters are shown; the rest was not kept (no store to save it in).]'
    )
    # Nesting again keeps the cut record as it is.
    again = HandoffInputData(input_history=(summary, user('next')), pre_handoff_items=(), new_items=())
    [summary_2] = nest_handoff_history(again, max_record_chars=1_000).to_message_history()
    assert summary_texts([summary_2])[0].splitlines()[2] == first


def test_each_summary_segment_numbers_from_one_as_the_sdk() -> None:
    data = HandoffInputData(
        input_history=(user('q1'), assistant('a1')),
        pre_handoff_items=(
            ModelResponse(parts=[ToolCallPart('t', {}, 'c1')]),
            ModelRequest(parts=[ToolReturnPart('t', 'r', 'c1')]),
        ),
        new_items=(
            ModelResponse(parts=[TextPart('Handing over.'), ToolCallPart('transfer', {}, 'h')]),
            ModelRequest(parts=[ToolReturnPart('transfer', '{"assistant": "b"}', 'h')]),
        ),
    )
    history = nest_handoff_history(data).to_message_history()
    numbers = [int(line.partition('.')[0]) for text in summary_texts(history) for line in text.splitlines()[2:-1]]
    assert len(summary_texts(history)) == 2 and numbers == [1, 2, 3, 4, 1, 2]


@pytest.mark.parametrize('value', [10, 0, -1, 2.5, True, '20000'])
def test_max_record_chars_is_checked_at_construction(value: Any) -> None:
    with pytest.raises(UserError, match='max_record_chars must be None or an int of at least 500'):
        HandoffConfig(max_record_chars=value)
    with pytest.raises(UserError, match='max_record_chars'):
        nest_handoff_history(HandoffInputData('hi', (), ()), max_record_chars=value)


async def test_an_overflow_given_only_to_the_parents_run_is_not_seen_by_delegate(tmp_path: Path) -> None:
    """The documented limit: `delegate` finds the parent's `OverflowingToolOutput` on the agent, not on `run()`."""
    overflow = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 's'))
    reader = Reader()
    specialist = Agent(FunctionModel(reader), name='specialist')
    triage = delegating_agent('triage', specialist, first_tool='big_report')
    triage.tool_plain(big_report)
    await triage.run('Analyse the report', capabilities=[overflow])
    assert 'read_tool_result' not in reader.tools[0]
    assert 'cannot be read by this agent' in '\n'.join(summary_texts(reader.seen[0]))


async def test_a_hostile_tool_call_id_still_gives_a_readable_cut_record(tmp_path: Path) -> None:
    """The model writes the tool call id; the key the full record is saved under never uses it raw."""
    store = LocalFileStore(tmp_path / 'store')
    reader = Reader(offset=FIVE_MB_LINES)
    own = OverflowingToolOutput(bands=[Band(over=10_000_000, action=Spill())], store=store)
    specialist = Agent(FunctionModel(reader), name='specialist', capabilities=[own])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p.tool_name for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart('five_mb_log', {}, '../../../etc/passwd\x00' + 'é' * 300)])
        if 'transfer' in returned:
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('transfer', {}, 'h')])

    triage = Agent(FunctionModel(respond), name='triage', deps_type=type(None))
    triage.tool_plain(five_mb_log)

    @triage.tool
    async def transfer(ctx: RunContext[None]) -> str:
        """Hand off."""
        return (await delegate(specialist, ctx, 'check', nest_handoff_history=True)).output

    await triage.run('Check the last event')
    assert f'event {FIVE_MB_LINES - 1:07d}: ok' in reader.read_back[0]
    assert not any('..' in name for p in tmp_path.rglob('*') for name in p.relative_to(tmp_path).parts)


async def test_a_spill_summarized_at_hop_one_is_marked_unreadable_at_hop_two(tmp_path: Path) -> None:
    """Hop 1 inherits the parent's store and can read; hop 2 reduces into its own store: its summary says so."""
    parent = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'a'))
    own = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'b'))
    reader = Reader()
    final = Agent(FunctionModel(reader), name='final', capabilities=[own])
    middle = delegating_agent('middle', final)
    triage = delegating_agent('triage', middle, first_tool='big_report', capabilities=[parent])
    triage.tool_plain(big_report)
    await triage.run('Analyse the report')
    [summary] = summary_texts(reader.seen[0])
    assert summary.count('cannot be read by this agent') == 1
    assert 'Saved in full under handle' in summary  # the preview is kept, with the note after it


async def test_an_unreadable_note_is_not_repeated_when_handed_on_unfiltered(tmp_path: Path) -> None:
    parent = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'a'))
    seen: list[list[ModelMessage]] = []
    final = Agent(FunctionModel(lambda m, i: seen.append(list(m)) or ModelResponse(parts=[TextPart('ok')])), name='f')
    middle = Agent(handing_off_model(None, 'pass_on'), name='middle', deps_type=type(None))

    @middle.tool
    async def pass_on(ctx: RunContext[None]) -> str:
        """Hand off, unfiltered."""
        return (await delegate(final, ctx, 'hop 2')).output

    triage = Agent(
        handing_off_model('big_report', 'transfer'), name='triage', deps_type=type(None), capabilities=[parent]
    )
    triage.tool_plain(big_report)

    @triage.tool(name='transfer')
    async def first_hop(ctx: RunContext[None]) -> str:
        """Hand off to a delegate that has no store access at all."""
        own = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'b'))
        return (await delegate(middle, ctx, 'hop 1', capabilities=[own])).output

    await triage.run('Analyse the report')
    assert repr(seen[0]).count('cannot be read by this agent') == 1


async def _what_a_delegate_without_the_store_sees(output: str, tmp_path: Path) -> str:
    """An earlier summary holds a tool output `output`; a delegate with a store of its own reads it in its history."""
    earlier = HandoffInputData(
        input_history=(
            user('Analyse the report'),
            ModelResponse(parts=[ToolCallPart('report', {}, 'c1')]),
            ModelRequest(parts=[ToolReturnPart('report', output, 'c1')]),
        ),
        pre_handoff_items=(),
        new_items=(),
    )
    history = nest_handoff_history(earlier).to_message_history()
    seen: list[ModelMessage] = []
    final = Agent(FunctionModel(lambda m, i: seen.extend(m) or ModelResponse(parts=[TextPart('ok')])), name='f')
    parent = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'a'))
    triage = Agent(handing_off_model(None, 'transfer'), name='triage', deps_type=type(None), capabilities=[parent])

    @triage.tool(name='transfer')
    async def hand_off(ctx: RunContext[None]) -> str:
        """Hand off to a delegate with a store of its own."""
        own = OverflowingToolOutput(bands=[Band(over=1_000, action=Spill())], store=LocalFileStore(tmp_path / 'b'))
        return (await delegate(final, ctx, 'go on', capabilities=[own])).output

    await triage.run('Go on', message_history=history)
    return '\n'.join(summary_texts(seen))


@pytest.mark.parametrize('quoted', ["'run-1/c1/0'", '"run-1/c1/0"'])
async def test_a_handle_named_either_way_is_marked_unreadable(quoted: str, tmp_path: Path) -> None:
    """Histories from earlier releases name handles in double quotes; they are recognised as today's are."""
    output = f'[`report` returned too much to show (~3000 tokens). Saved in full under handle {quoted}: 1 line.]'
    seen = await _what_a_delegate_without_the_store_sees(output, tmp_path)
    assert "the full output saved under 'run-1/c1/0' cannot be read by this agent" in seen


@pytest.mark.parametrize(
    'output',
    [
        "No stored result found under handle 'zzzzzzzzzz'. Stored results of this conversation, newest first: (none)",
        "artifact stored under handle 'build-42'",
        "It's under handle 'a' somewhere,\nsays the apostrophe's owner",
    ],
)
async def test_text_that_only_mentions_a_handle_is_not_marked(output: str, tmp_path: Path) -> None:
    """Only the capability's own spill, summary and cut texts name a stored output; other text may say 'handle'."""
    seen = await _what_a_delegate_without_the_store_sees(output, tmp_path)
    assert 'cannot be read by this agent' not in seen
    assert 'handle' in seen  # the output itself is there, unmarked


def test_every_document_of_a_list_stored_one_by_one_is_marked_unreadable() -> None:
    """A list return whose PDFs were stored one by one names each in `overflow_file_handles`: a delegate that cannot
    read the store is told about every one of them, not the first alone (entries of other shapes are ignored)."""
    from pydantic_ai_harness.handoffs._spills import mark_unreadable_spills

    metadata = {
        'overflow_action': 'spill',
        'overflow_handle': 'h1',
        'overflow_file_handles': [['h1', 'run/c/0/file0'], ['h2', 'run/c/0/file1'], [7, None], 'junk'],
        'overflow_content_file_handles': [['h3', None]],
    }
    part = ToolReturnPart('docs', ['[PDF h1]', '[PDF h2]'], tool_call_id='c', metadata=metadata)
    (marked,) = mark_unreadable_spills([ModelRequest(parts=[part])])
    assert isinstance(marked, ModelRequest)
    (returned,) = marked.parts
    assert isinstance(returned, ToolReturnPart)
    text = returned.model_response_str()
    assert "the full output saved under 'h1', 'h2', 'h3' cannot be read by this agent" in text
