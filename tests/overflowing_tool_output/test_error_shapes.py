"""Every answer of the query tools comes in one shape: plain text that says what happened and what to do next.

An unknown handle, a read past the end, a negative offset or a bad regex are all answered as text (no
`{"error": ...}` retry that counts against the tool's retries), each naming the argument and what to pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

pytestmark = pytest.mark.anyio

LOG = '\n'.join(f'line {i}: ok' for i in range(3_000))

BAD_CALLS: list[tuple[str, dict[str, object]]] = [
    ('read_tool_result', {'offset': -1}),
    ('read_tool_result', {'limit': 0}),
    ('read_tool_result', {'unit': 'bytes', 'pattern': 'ok'}),
    ('read_tool_result', {'offset': 9_999}),
    ('grep_tool_result', {'pattern': ''}),
    ('grep_tool_result', {'pattern': 'a(b', 'is_regex': True}),
    ('grep_tool_result', {'pattern': 'ok', 'context_lines': -1}),
    ('grep_tool_result', {'pattern': 'ok', 'max_matches': 0}),
    ('grep_tool_result', {'pattern': 'ok', 'offset': 5, 'start': 10}),
    ('grep_tool_result', {'pattern': 'one\ntwo'}),
]


async def test_argument_mistakes_and_missing_results_are_answered_in_one_shape(tmp_path: Path) -> None:
    answers: list[ToolReturnPart] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart('dump', {})])
        if len(returns) == 1:
            handle = returns[0].metadata['overflow_handle']
            calls = [ToolCallPart(name, {'handle': handle, **args}) for name, args in BAD_CALLS]
            calls += [
                ToolCallPart('read_tool_result', {'handle': 'nosuchhandle'}),
                ToolCallPart('grep_tool_result', {'pattern': 'ok', 'start': 3}),
            ]
            return ModelResponse(parts=calls)
        answers.extend(returns[1:])
        return ModelResponse(parts=[TextPart('done')])

    agent = Agent(
        FunctionModel(respond), capabilities=[OverflowingToolOutput(store=LocalFileStore(tmp_path), workspace=None)]
    )
    agent.tool_plain(name='dump')(lambda: LOG)
    await agent.run('go')
    assert [p.outcome for p in answers] == ['success'] * len(answers)
    handle = str(answers[3].model_response_str()).split("'")[1]  # a handle is random: shown as <handle>
    texts = [p.model_response_str().replace(handle, '<handle>') for p in answers]
    assert not any(text.startswith('{') for text in texts)
    assert texts == snapshot(
        [
            'offset must be 0 or more (the line to start at, 1-based), got -1. Pass from_end=True and a positive offset to count from the end.',
            'limit must be 1 or more, got 0. Leave it out for 200 lines.',
            "pattern filters lines, so it cannot be combined with unit='bytes'. Drop pattern to read bytes, or unit to filter lines.",
            "offset=9999 is past the end: the stored result '<handle>' has 3000 lines. Use from_end=True to read the last lines.",
            'pattern must not be empty: pass the text (or regex, with is_regex=True) to search for.',
            "pattern 'a(b' is not a valid regular expression: missing ): a(b. The syntax is RE2 (Python re without lookaround or backreferences); or pass is_regex=False to search for the text literally.",
            'context_lines must be 0 or more, got -1. Pass 0 for the matching lines alone.',
            'max_matches must be 1 or more, got 0. Leave it out for 20.',
            'Pass offset (the line to start at) or start (the byte to start at), not both: got offset=5, start=10. To read lines, call read_tool_result(handle, offset=5, limit=12).',
            'pattern must not contain a newline: lines are matched one at a time. Search for one line of the text.',
            """\
No stored result found under handle 'nosuchhandle'. Stored results of this conversation, newest first:
<handle>  (dump)
Pass one of these handles exactly. A result cleaned up since needs its tool called again.\
""",
            'start (a byte to start at) needs a handle: pass the handle the search was stopped in.',
        ]
    )
