"""Every document of a list stored one by one is known to the query tools, not only the first (issue 35): a search
without a handle covers each, the unknown-handle answer lists each, and aging the list keeps each reachable."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, ToolReturn, ToolReturnPart

from pydantic_ai_harness.overflowing_tool_output import (
    Aging,
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    Spill,
    StepBudget,
    overflow_report,
)
from pydantic_ai_harness.overflowing_tool_output._events import FILE_HANDLES_READ
from pydantic_ai_harness.overflowing_tool_output._query_tools._handles import handles_to_carry, known_handles

from ..overflowing_tool_output.media._pdf_files import pdf_with_pages
from ..overflowing_tool_output.test_compaction import Summarizing
from .test_document_items import handle_of, report, returns
from .test_image_band import Scripted

pytestmark = pytest.mark.anyio


def gamma_report() -> bytes:
    """A 40-page PDF like the others, whose page 34 alone holds the word `zephyrine`."""
    pages = [
        [f'Gamma report, page {page}', *(f'row {page}.{row}: revenue {page * row}' for row in range(30))]
        for page in range(1, 41)
    ]
    pages[33].append('audit remark: zephyrine ledger mismatch')
    return pdf_with_pages(pages)


def three_reports() -> list[str | BinaryContent]:
    """A caption and three 40-page PDFs, each over the default band."""
    return [
        'three reports:',
        BinaryContent(report(40, 'Alpha report'), media_type='application/pdf'),
        BinaryContent(report(40, 'Beta report'), media_type='application/pdf'),
        BinaryContent(gamma_report(), media_type='application/pdf'),
    ]


def text_handles(part: ToolReturnPart) -> list[str]:
    """The handles each reduced document's text was saved under, in list order."""
    assert isinstance(part.content, list)
    return [
        found.group(1)
        for item in part.content
        if isinstance(item, str) and (found := re.search(r"Saved in full under handle '([^']+)'", item))
    ]


def answer_of(messages: list[ModelMessage], tool_name: str) -> str:
    (content,) = [part.content for part in returns(messages) if part.tool_name == tool_name][-1:]
    assert isinstance(content, str)
    return content


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ('grep_tool_result', {'pattern': 'zephyrine'}),
    ('read_tool_result', {'handle': 'no-such-handle'}),
]


async def test_each_document_of_a_list_is_known_to_the_query_tools_before_and_after_aging(tmp_path: Path) -> None:
    script = Scripted([('reports', {})], QUERIES, QUERIES, QUERIES)
    store = LocalFileStore(base_dir=tmp_path)
    aging = Aging(after_turns=2, batch_tokens=0)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store, aging=aging)])
    agent.tool_plain(name='reports')(three_reports)
    result = await agent.run('compare them', run_id='run-1')

    (part,) = returns(script.requests[1])
    alpha, beta, gamma = text_handles(part)
    metadata: dict[str, Any] = part.metadata or {}
    assert metadata['overflow_handle'] == alpha  # the first document, as before
    assert metadata['overflow_file_handles'] == [
        [alpha, 'run-1/c0_0/0/file1'],
        [beta, 'run-1/c0_0/0/file2'],
        [gamma, 'run-1/c0_0/0/file3'],
    ]
    # A search without a handle finds the word only the third document holds.
    assert answer_of(script.requests[2], 'grep_tool_result') == snapshot("""\
1 matching line for 'zephyrine' (literal, case-sensitive) in 1 stored result (3 stored results searched of the 3 this conversation holds, newest first; 84465 bytes). Showing all, under the handle of the result holding them:
-- 2fwazsqr4b (reports, 1281 lines): 1 matching line --
1089| audit remark: zephyrine ledger mismatch
(Read around a match with its handle and line: read_tool_result(handle='2fwazsqr4b', offset=1084, limit=12); one result with context: grep_tool_result(handle='2fwazsqr4b', pattern='zephyrine').)\
""")
    # A handle nobody made: the answer lists every document's handle.
    assert answer_of(script.requests[2], 'read_tool_result') == snapshot("""\
No stored result found under handle 'no-such-handle'. Stored results of this conversation, newest first:
2qc6t3715e  (reports)
9bmxd5b9ab  (reports)
2fwazsqr4b  (reports)
Pass one of these handles exactly. A result cleaned up since needs its tool called again.\
""")

    # The list aged (its preview is a view of the first document alone, so it was written anew): the stub names the
    # aged copy, which holds every document's header and handle, and each document is still found and listed.
    (aged,) = [p for p in returns(script.requests[3]) if p.tool_name == 'reports']
    assert aged.content == snapshot(
        "[Moved out of context: the output of `reports` (~569 tokens). Saved in full under handle 'a8ap8vthzk'; read_tool_result or grep_tool_result gets it back.]"
    )
    aged_handle = (aged.metadata or {})['overflow_aged_handle']
    assert aged_handle not in (alpha, beta, gamma)
    stored = (await store.read(aged_handle)).decode()
    assert stored.startswith('three reports:\n\n[`reports` returned a PDF')  # its texts, read line by line
    assert all(f"'{handle}'" in stored for handle in (alpha, beta, gamma))
    assert answer_of(script.requests[4], 'grep_tool_result') == snapshot("""\
1 matching line for 'zephyrine' (literal, case-sensitive) in 1 stored result (4 stored results searched of the 4 this conversation holds, newest first; 86698 bytes). Showing all, under the handle of the result holding them:
-- 2fwazsqr4b (reports, 1281 lines): 1 matching line --
1089| audit remark: zephyrine ledger mismatch
(Read around a match with its handle and line: read_tool_result(handle='2fwazsqr4b', offset=1084, limit=12); one result with context: grep_tool_result(handle='2fwazsqr4b', pattern='zephyrine').)\
""")
    assert answer_of(script.requests[4], 'read_tool_result') == snapshot("""\
No stored result found under handle 'no-such-handle'. Stored results of this conversation, newest first:
2qc6t3715e  (reports)
9bmxd5b9ab  (reports)
2fwazsqr4b  (reports)
a8ap8vthzk  (reports)
Pass one of these handles exactly. A result cleaned up since needs its tool called again.\
""")
    # A durable unit's context carries every one (`OverflowTemporalRunContext`).
    carried = [handle for handle, _tool, _key in handles_to_carry(result.all_messages())]
    assert {alpha, beta, gamma, aged_handle} <= set(carried)
    assert overflow_report(result.all_messages()).handles == snapshot(
        ('2qc6t3715e', '9bmxd5b9ab', '2fwazsqr4b', 'a8ap8vthzk')
    )


def test_file_handles_in_metadata_are_read_with_their_shapes_checked_and_bounded() -> None:
    """Metadata is the application's and a tool's to set: only `[handle, key]` pairs of strings a store could make
    are read, and at most `FILE_HANDLES_READ` of one part."""
    entries: list[object] = [
        ['good1', 'run/c/0/file1'],
        'not a pair',
        ['only-handle'],
        [12, 'key'],
        ['x' * 5_000, 'key'],
        ['good2', 7],  # a key that is not a string: the handle is still known, without a key
        ['good1', 'run/c/0/file1'],  # named twice: listed once
    ]
    part = ToolReturnPart('reports', 'preview', tool_call_id='c1', metadata={'overflow_file_handles': entries})
    flood = ToolReturnPart(
        'flood',
        'x',
        tool_call_id='c2',
        metadata={'overflow_content_file_handles': [[f'h{n}', None] for n in range(5_000)]},
    )
    odd = ToolReturnPart('odd', 'x', tool_call_id='c3', metadata={'overflow_file_handles': {'h': 'k'}})
    known = known_handles([ModelRequest(parts=[part]), ModelRequest(parts=[flood, odd])])
    assert [(k.handle, k.tool_name, k.key) for k in known if k.tool_name == 'reports'] == [
        ('good1', 'reports', 'run/c/0/file1'),
        ('good2', 'reports', None),
    ]
    assert len([k for k in known if k.tool_name == 'flood']) == FILE_HANDLES_READ
    assert not [k for k in known if k.tool_name == 'odd']


def annual_report() -> bytes:
    """A 300-page PDF whose page 250 alone holds the word `zephyrine`."""
    pages = [
        [f'Annual report, page {page}', *(f'row {page}.{row}: revenue {page * row}' for row in range(30))]
        for page in range(1, 301)
    ]
    pages[249].append('audit remark: zephyrine ledger mismatch')
    return pdf_with_pages(pages)


async def test_the_step_budget_reduces_a_list_holding_a_document_document_by_document(tmp_path: Path) -> None:
    """A 300-page PDF in a list, within its band when returned, pushes the step over its budget: at request time the
    list keeps its place and its text, the PDF in it becomes its header and its text spilled, as at tool execution."""
    pdf = annual_report()
    script = Scripted([('annual', {}), ('notes', {})], [('grep_tool_result', {'pattern': 'zephyrine'})])
    store = LocalFileStore(base_dir=tmp_path)
    capability = OverflowingToolOutput[Any](
        store=store, bands=[Band(over=1_000_000, action=Spill())], step_budget=StepBudget(max_size=40_000)
    )
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='annual')(lambda: ['the annual report:', BinaryContent(pdf, media_type='application/pdf')])
    agent.tool_plain(name='notes')(lambda: 'two short notes')
    await agent.run('audit it', run_id='run-1')

    annual, notes = returns(script.requests[1])
    assert notes.content == 'two short notes'
    assert isinstance(annual.content, list)
    note, caption, document = annual.content
    assert note == snapshot(
        '[Step budget: the 2 tool results of this step came to 151547 characters, over the budget of 40000; this one (151532 characters, one of the largest) was stored in full, with a preview here.]'
    )
    assert caption == 'the annual report:'
    assert isinstance(document, str)
    assert document[:700] == snapshot("""\
[`annual` returned a PDF (151.5 KB), saved unchanged as handle 'cy4pwv0xrm': 300 pages. Its text follows, each page starting with the line `=== page N/300 ===`; view_tool_result_image(handle='cy4pwv0xrm', page=N) shows page N as an image.]
[`annual` returned too much to show (~56943 tokens). Saved in full under handle '2qc6t3715e': 9601 lines, 227771 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-5 of 9601):
1| === page 1/300 ===
2| Annual report, page 1
3| row 1.0: revenue 0
4| row 1.1: revenue 1
5| row 1.2: revenue 2
Last lines (9600-9601):
9600| row 300.28\
""")
    assert await store.read(handle_of(document)) == pdf  # the file itself, byte for byte
    metadata: dict[str, Any] = annual.metadata or {}
    (text_handle,) = text_handles(annual)
    assert metadata['overflow_file_handles'] == [[text_handle, 'run-1/c0_0/0/file1']]
    assert metadata['overflow_step_budget'] == 40_000
    # The document's text is found by a search without a handle.
    assert answer_of(script.requests[2], 'grep_tool_result') == snapshot("""\
1 matching line for 'zephyrine' (literal, case-sensitive) in 1 stored result (1 stored result searched of the 1 this conversation holds, newest first; 227771 bytes). Showing all, under the handle of the result holding them:
-- 2qc6t3715e (annual, 9601 lines): 1 matching line --
8001| audit remark: zephyrine ledger mismatch
(Read around a match with its handle and line: read_tool_result(handle='2qc6t3715e', offset=7996, limit=12); one result with context: grep_tool_result(handle='2qc6t3715e', pattern='zephyrine').)\
""")


async def test_each_document_of_a_list_outlives_another_capabilitys_compaction(tmp_path: Path) -> None:
    """A user's compaction drops the list and its metadata; the ledger it gets keeps every document's handle."""
    script = Scripted([('reports', {})], [('compact_now', {})], [QUERIES[0]])
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))
    agent = Agent(script.model(), capabilities=[Summarizing(), capability])
    agent.tool_plain(name='reports')(three_reports)

    @agent.tool
    def compact_now(ctx: RunContext[Any]) -> str:
        ctx.request_compaction(reason='manual')
        return 'compaction requested'

    result = await agent.run('compare them', run_id='run-1')
    assert [record.handler for record in result.compactions] == ['summarizing']
    assert not [p for p in returns(script.requests[3]) if p.tool_name == 'reports']  # the list is gone
    found = answer_of(script.requests[3], 'grep_tool_result')
    assert '1 matching line' in found and 'audit remark: zephyrine ledger mismatch' in found


async def test_each_document_of_tool_return_content_is_known(tmp_path: Path) -> None:
    """The same for `ToolReturn.content` (`overflow_content_file_handles`)."""
    script = Scripted([('reports', {})], [QUERIES[0]])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path))])
    agent.tool_plain(name='reports')(lambda: ToolReturn('two reports', content=three_reports()[2:]))
    await agent.run('compare them', run_id='run-1')
    (part,) = returns(script.requests[1])
    metadata: dict[str, Any] = part.metadata or {}
    assert [key for _handle, key in metadata['overflow_content_file_handles']] == [
        'run-1/c0_0/0/content/file0',
        'run-1/c0_0/0/content/file1',
    ]
    found = answer_of(script.requests[2], 'grep_tool_result')
    assert '1 matching line' in found and 'audit remark: zephyrine ledger mismatch' in found


async def test_documents_stay_known_when_the_rest_of_the_list_is_reduced_as_text(tmp_path: Path) -> None:
    """A list whose text (the documents' headers and previews in it) is over its band too is spilled as text under a
    handle of its own; every document's handle is still named beside it."""
    script = Scripted([('reports', {})], [QUERIES[1]])
    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=tmp_path), bands=[Band(over=2_000, action=Spill())]
    )
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='reports')(three_reports)
    await agent.run('compare them', run_id='run-1')
    (part,) = returns(script.requests[1])
    assert isinstance(part.content, str) and part.content.startswith('[`reports` returned too much to show')
    metadata: dict[str, Any] = part.metadata or {}
    documents = [handle for handle, _key in metadata['overflow_file_handles']]
    assert len(documents) == 3 and metadata['overflow_handle'] not in documents
    listed = answer_of(script.requests[2], 'read_tool_result')
    assert all(f'{handle}  (reports)' in listed for handle in [metadata['overflow_handle'], *documents])


def test_file_handles_are_read_for_at_most_a_bound_across_the_whole_history() -> None:
    """300 returns a tool forged with 1,000 entries each: at most `DOCUMENT_HANDLES_READ` are read, newest first, so
    a forged history costs every request a bounded walk; the newest returns' documents are the ones known."""
    from pydantic_ai_harness.overflowing_tool_output._query_tools._handles import DOCUMENT_HANDLES_READ

    history = [
        ModelRequest(
            parts=[
                ToolReturnPart(
                    f'tool{n}',
                    'x',
                    tool_call_id=f'c{n}',
                    metadata={'overflow_file_handles': [[f'h{n}-{i}', None] for i in range(1_000)]},
                )
            ]
        )
        for n in range(300)
    ]
    known = known_handles(history)
    assert len(known) == DOCUMENT_HANDLES_READ
    assert known[0].handle == 'h299-0' and {k.tool_name for k in known} == {f'tool{n}' for n in range(290, 300)}
