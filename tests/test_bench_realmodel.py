"""The real-model benchmark's pieces that run without the model: the text-to-tool-call wrapper, the page keeping."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench.__main__ import kept_section, replace_section
from bench._realmodel_wrapper import TextToolCalls, text_tool_calls

pytestmark = pytest.mark.anyio


def test_calls_written_as_json_in_text_are_read() -> None:
    offered = {'run_tests', 'grep_tool_result'}
    assert text_tool_calls('{"name": "run_tests", "arguments": {}}', offered) == [('run_tests', {})]
    fenced = 'I will search.\n```json\n{"name": "grep_tool_result", "arguments": {"pattern": "FAILED"}}\n```'
    assert text_tool_calls(fenced, offered) == [('grep_tool_result', {'pattern': 'FAILED'})]
    tagged = '<tool_call>\n{"name": "run_tests", "arguments": "{}"}\n</tool_call>'
    assert text_tool_calls(tagged, offered) == [('run_tests', {})]
    assert text_tool_calls('{"name": "rm_rf", "arguments": {}}', offered) is None  # not offered
    assert text_tool_calls('The test {broken} failed because {"a": 1}.', offered) is None
    assert text_tool_calls('{"name": "run_tests", "arguments": "not json"}', offered) is None


async def test_a_reply_writing_a_call_runs_the_tool_and_prose_stays_the_answer() -> None:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[TextPart('```json\n{"name": "run_tests", "arguments": {}}\n```')])
        return ModelResponse(parts=[TextPart(f'The log says: {returned[0].content}')])

    model = TextToolCalls(FunctionModel(reply))
    agent = Agent(model)

    @agent.tool_plain
    def run_tests() -> str:
        """Run the tests."""
        return 'FAILED tests/test_a.py::test_b'

    result = await agent.run('Which test failed?')
    assert result.output == 'The log says: FAILED tests/test_a.py::test_b'
    assert model.converted == 1


async def test_arguments_a_tool_does_not_take_are_dropped_from_any_call() -> None:
    calls: list[str] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if calls:
            return ModelResponse(parts=[TextPart('done')])
        # A provider's own tool call, with an argument the tool does not take, as the small model makes it.
        return ModelResponse(parts=[ToolCallPart('run_tests', {'output': 'made up', 'verbose': True})])

    agent = Agent(TextToolCalls(FunctionModel(reply)))

    @agent.tool_plain
    def run_tests(verbose: bool = False) -> str:
        """Run the tests."""
        calls.append(f'verbose={verbose}')
        return 'ok'

    assert (await agent.run('Run the tests.')).output == 'done'
    assert calls == ['verbose=True']


def test_a_full_page_run_keeps_the_on_request_sections() -> None:
    page = '# Benchmarks\n\n## Economy\n\nold\n\n## A real model\n\nslow figures\n'
    assert kept_section(page, 'A real model') == '## A real model\n\nslow figures\n'
    assert kept_section(page, 'Economy') == '## Economy\n\nold\n\n'
    assert kept_section(page, 'Missing') == ''
    assert (
        replace_section(page, '## Economy\n\nnew\n')
        == '# Benchmarks\n\n## Economy\n\nnew\n\n## A real model\n\nslow figures\n'
    )
