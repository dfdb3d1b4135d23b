from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.usage import RequestUsage, RunUsage, UsageLimits

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    OverflowConfigurationError,
    OverflowingToolOutput,
    OverflowingToolOutputWarning,
    Summarize,
    Truncate,
)

from .conftest import FailingStore, MemoryStore, run_tool

pytestmark = pytest.mark.anyio

LOG = ''.join(f'step {i}: ok\n' for i in range(2_000)) + 'ERROR: disk quota exceeded on /data\n'


def _prompt_text(messages: list[ModelMessage]) -> str:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    return ''.join(p.content for p in first.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))


def summarizer_model(
    reply: str = 'The log ran 2,000 steps; it failed with ERROR: disk quota exceeded on /data.',
) -> FunctionModel:
    """Serves the agent (one tool call, then an answer) and summary requests (recognized by their prompt)."""
    prompts: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = _prompt_text(messages)
        if '<tool_output>' in text:
            prompts.append(text)
            return ModelResponse(
                parts=[TextPart(reply)], usage=RequestUsage(input_tokens=len(text) // 4, output_tokens=20)
            )
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart('big', {}, tool_call_id='call_0')],
                usage=RequestUsage(input_tokens=10, output_tokens=5),
            )
        return ModelResponse(parts=[TextPart('done')], usage=RequestUsage(input_tokens=10, output_tokens=5))

    model = FunctionModel(respond)
    model.prompts = prompts  # type: ignore[attr-defined]
    return model


async def _run(capability: OverflowingToolOutput[Any], value: Any, model: FunctionModel, **run_kwargs: Any) -> Any:
    agent = Agent(model, capabilities=[capability])
    agent.tool_plain(name='big')(lambda: value)
    return await agent.run('go', run_id='run-1', **run_kwargs)


async def test_summarize_with_the_runs_model_folds_usage(memory_store: MemoryStore) -> None:
    model = summarizer_model()
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=Summarize())], store=memory_store)
    result = await _run(capability, LOG, model)
    tool_return = result.all_messages()[2].parts[0]
    handle = tool_return.metadata['overflow_handle']
    assert handle == 'run-1/call_0/0'
    assert tool_return.content == snapshot(
        """\
[Summary, written by a model, of what `big` returned (26926 characters, 2001 lines; too many to keep). It may miss details. The full original is saved under handle 'run-1/call_0/0': grep_tool_result(handle, pattern) checks a detail; read_tool_result(handle, from_end=True) reads the end.]
The log ran 2,000 steps; it failed with ERROR: disk quota exceeded on /data.\
"""
    )
    assert memory_store.data[handle] == LOG.encode()
    assert result.usage.requests == 3  # two agent requests + one summary
    assert result.usage.input_tokens > 26_000 // 4
    [prompt] = model.prompts  # type: ignore[attr-defined]
    assert prompt.startswith('The tool `big` returned the output below')
    assert LOG in prompt


async def test_summarize_with_its_own_model() -> None:
    main = summarizer_model()
    helper = summarizer_model('helper summary')
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=Summarize(model=helper, keep_original=False))])
    result = await _run(capability, LOG, main)
    content = result.all_messages()[2].parts[0].content
    assert content.endswith('helper summary')
    assert 'The full original was not kept.' in content
    assert main.prompts == [] and len(helper.prompts) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize('is_async', [False, True])
async def test_summarize_function_bypasses_the_prompt(is_async: bool) -> None:
    seen: list[tuple[str, int]] = []

    def sync_summary(tool_name: str, text: str) -> str:
        seen.append((tool_name, len(text)))
        return f'{text.count(chr(10))} lines, last: {text.strip().splitlines()[-1]}'

    async def async_summary(tool_name: str, text: str) -> str:
        return sync_summary(tool_name, text)

    action = Summarize(summarize=async_summary if is_async else sync_summary, keep_original=False)
    result = await _run(OverflowingToolOutput(bands=[Band(over=1_000, action=action)]), LOG, summarizer_model())
    assert result.all_messages()[2].parts[0].content.endswith('2001 lines, last: ERROR: disk quota exceeded on /data')
    assert seen == [('big', len(LOG))]
    assert result.usage.requests == 2  # no model call for the summary


@pytest.mark.parametrize(
    ('summarize', 'reason'),
    [
        (lambda tool, text: '   ', 'returned empty text'),
        (lambda tool, text: 1 / 0, 'raised ZeroDivisionError'),
        (lambda tool, text: 42, 'returned int, not str'),
        (lambda tool, text: text + ' (summary)', 'the summary was not shorter than the output'),
    ],
    ids=['empty', 'raises', 'not-str', 'longer'],
)
async def test_failing_summarizer_follows_then(summarize: Any, reason: str) -> None:
    action = Summarize(summarize=summarize, then=Truncate(max_chars=300), keep_original=False)
    with pytest.warns(OverflowingToolOutputWarning, match=reason):
        result = await _run(OverflowingToolOutput(bands=[Band(over=1_000, action=action)]), LOG, summarizer_model())
    assert len(result.all_messages()[2].parts[0].content) <= 300


async def test_failing_summarizer_falls_back_to_truncate_by_default() -> None:
    action = Summarize(summarize=lambda tool, text: '', keep_original=False)
    with pytest.warns(OverflowingToolOutputWarning, match='returned empty text; falling back to Truncate'):
        result = await _run(OverflowingToolOutput(bands=[Band(over=1_000, action=action)]), LOG, summarizer_model())
    assert len(result.all_messages()[2].parts[0].content) <= 5_000 < len(LOG)


async def test_failing_summarizer_with_then_none_passes_the_original_through() -> None:
    action = Summarize(summarize=lambda tool, text: '', keep_original=False, then=None)
    with pytest.warns(OverflowingToolOutputWarning, match='leaving it as is'):
        result = await _run(OverflowingToolOutput(bands=[Band(over=1_000, action=action)]), LOG, summarizer_model())
    assert result.all_messages()[2].parts[0].content == LOG


async def test_summarizer_model_returning_empty_text_follows_then() -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=1_000, action=Summarize(then=Truncate(max_chars=300), keep_original=False))]
    )
    with pytest.warns(OverflowingToolOutputWarning, match='returned no usable text'):
        result = await _run(capability, LOG, summarizer_model(reply=''))
    assert len(result.all_messages()[2].parts[0].content) <= 300


async def test_summary_is_skipped_when_the_budget_cannot_afford_it() -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=1_000, action=Summarize(then=Truncate(max_chars=300), keep_original=False))]
    )
    with pytest.warns(OverflowingToolOutputWarning, match='cannot afford 1 summarizer request'):
        result = await _run(capability, LOG, summarizer_model(), usage_limits=UsageLimits(request_limit=2))
    assert len(result.all_messages()[2].parts[0].content) <= 300
    assert result.usage.requests == 2  # the parent's second request stayed affordable


async def test_parallel_summaries_leave_the_run_its_next_request() -> None:
    """Two returns summarized at once: the second sees the first's request, and falls back instead of overrunning."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if '<tool_output>' in _prompt_text(messages):
            return ModelResponse(parts=[TextPart('short summary')])
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart('big', {}, tool_call_id=f'call_{n}') for n in range(2)])
        return ModelResponse(parts=[TextPart('done')])

    action = Summarize(then=Truncate(max_chars=300), keep_original=False)
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=action)])
    with pytest.warns(OverflowingToolOutputWarning, match='cannot afford 1 summarizer request'):
        result = await _run(capability, LOG, FunctionModel(respond), usage_limits=UsageLimits(request_limit=3))
    assert result.output == 'done'
    assert result.usage.requests == 3  # the parent's two requests and one summary
    contents = sorted(str(part.content)[:10] for part in result.all_messages()[2].parts)
    assert contents == ['[Summary, ', '[truncated']  # one summary, one truncation
    assert len(capability._loop.summaries.locks) == 0  # the lock of the finished run is gone


async def test_map_reduce_summarizes_in_bounded_chunks() -> None:
    model = summarizer_model('partial')
    action = Summarize(max_input_chars=10_000, max_chunks=2, keep_original=False)
    result = await _run(OverflowingToolOutput(bands=[Band(over=1_000, action=action)]), LOG, model)
    content = result.all_messages()[2].parts[0].content
    assert 'written by a model in 2 parts' in content
    assert 'The last 69' in content  # what did not fit in the chunks is named
    assert 'too many to summarize and were left out.' in content  # not "in the original": it was not kept
    prompts = model.prompts  # type: ignore[attr-defined]
    assert len(prompts) == 3  # two chunks and the combination
    assert 'big (part 1 of 2)' in prompts[0] and 'combined part summaries' in prompts[2]
    assert result.usage.requests == 5


async def test_binary_cannot_be_summarized() -> None:
    action = Summarize(then=None)
    with pytest.warns(OverflowingToolOutputWarning, match='binary data cannot be summarized'):
        result = await _run(
            OverflowingToolOutput(bands=[Band(over=10, action=action)]), b'\x00' * 100, summarizer_model()
        )
    assert result.all_messages()[2].parts[0].content == b'\x00' * 100


async def test_a_failing_store_does_not_lose_the_summary() -> None:
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=Summarize())], store=FailingStore())
    with pytest.warns(OverflowingToolOutputWarning, match='could not be kept'):
        result = await _run(capability, LOG, summarizer_model())
    content = result.all_messages()[2].parts[0].content
    assert 'The full original was not kept.' in content and content.endswith('/data.')


async def test_a_run_model_that_cannot_summarize_is_a_configuration_error() -> None:
    capability = OverflowingToolOutput(bands=[Band(over=10, action=Summarize(keep_original=False))])
    ctx = RunContext[None](deps=None, model=object(), usage=RunUsage(), run_id='r', tool_call_id='c')  # type: ignore[arg-type]
    with pytest.raises(OverflowConfigurationError, match='cannot serve a summary request'):
        await capability.after_tool_execute(
            ctx,
            call=ToolCallPart('big', {}, tool_call_id='c'),
            tool_def=ToolDefinition(name='big'),
            args={},
            result=LOG,
        )


async def test_spill_then_summarize_degrades_in_order(memory_store: MemoryStore) -> None:
    run = await run_tool(
        OverflowingToolOutput(
            bands=[Band(over=100, action=Summarize(summarize=lambda t, x: 'short'))], store=memory_store
        ),
        'x' * 500,
    )
    assert run.returned().endswith('short')


# --- a failed summary stores nothing (issue 16) -------------------------------------------------------------------


@dataclass
class DeletingMemoryStore(MemoryStore):
    """A custom store whose handles are much longer than its keys, and that can delete."""

    deleted: list[str] = field(default_factory=list[str])

    async def write(self, key: str, data: bytes) -> str:
        handle = f'{key}/' + 'h' * 400
        self.data[handle] = data
        return handle

    async def delete(self, handle: str) -> bool:
        self.deleted.append(handle)
        return self.data.pop(handle, None) is not None


@pytest.mark.parametrize(
    ('summarize', 'reason'),
    [
        (lambda tool, text: 1 / 0, 'raised ZeroDivisionError'),
        (lambda tool, text: '', 'returned empty text'),
        (lambda tool, text: text, 'the summary was not shorter than the output'),
    ],
    ids=['raises', 'empty', 'not-shorter'],
)
async def test_a_failed_summary_keeps_no_original(summarize: Any, reason: str, memory_store: MemoryStore) -> None:
    action = Summarize(summarize=summarize, then=Truncate(max_chars=300))  # keep_original=True by default
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=action)], store=memory_store)
    with pytest.warns(OverflowingToolOutputWarning, match=reason):
        result = await _run(capability, LOG, summarizer_model())
    assert memory_store.data == {}  # nothing stored that nothing points to
    assert 'overflow_handle' not in result.all_messages()[2].parts[0].metadata


async def test_a_failed_model_summary_keeps_no_original(memory_store: MemoryStore) -> None:
    capability = OverflowingToolOutput(
        bands=[Band(over=1_000, action=Summarize(then=Truncate(max_chars=300)))], store=memory_store
    )
    with pytest.warns(OverflowingToolOutputWarning, match='no usable text'):
        await _run(capability, LOG, summarizer_model(reply=''))
    assert memory_store.data == {} and memory_store.writes == 0


async def test_a_summary_made_too_long_by_its_handle_withdraws_the_original() -> None:
    store = DeletingMemoryStore()
    text = 'x' * 1_200  # a ~700-character summary fits without a handle, not with a 400-character one named 3 times
    action = Summarize(summarize=lambda tool, output: 's' * 700, then=Truncate(max_chars=300))
    capability = OverflowingToolOutput(bands=[Band(over=1_000, action=action)], store=store)
    with pytest.warns(OverflowingToolOutputWarning, match='the summary was not shorter than the output'):
        result = await _run(capability, text, summarizer_model())
    assert store.data == {} and len(store.deleted) == 1
    assert len(result.all_messages()[2].parts[0].content) <= 300


async def test_a_successful_summary_names_the_original_it_stored(memory_store: MemoryStore) -> None:
    action = Summarize(summarize=lambda tool, text: 'short summary')
    result = await _run(
        OverflowingToolOutput(bands=[Band(over=1_000, action=action)], store=memory_store), LOG, summarizer_model()
    )
    part = result.all_messages()[2].parts[0]
    assert memory_store.data == {part.metadata['overflow_handle']: LOG.encode()}
    assert f"saved under handle '{part.metadata['overflow_handle']}'" in part.content


@pytest.mark.parametrize(
    ('model', 'error', 'message'),
    [
        ('nosuchprovider:foo', ValueError, "Summarize.model='nosuchprovider:foo' is not a model pydantic-ai knows"),
        ('gpt-4o', ValueError, 'Unknown model: gpt-4o'),
    ],
)
def test_a_model_name_no_provider_serves_is_refused_at_construction(
    model: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Summarize(model=model)


def test_a_model_name_is_only_looked_up_not_connected() -> None:
    Summarize(model='openai:gpt-4o-mini')  # no request and no client: credentials are the first request's to check
    Summarize(model='test')
