"""A failing tool's own text (`ModelRetry`, `ToolFailed`) reaches the model under the same rules as a return."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent, ModelRetry, ToolFailed, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import HandoffInputData, nest_handoff_history
from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    SecretRedaction,
    Spill,
    StepBudget,
    Truncate,
    overflow_report,
)

models.ALLOW_MODEL_REQUESTS = False
pytestmark = pytest.mark.anyio

GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'


def scripted(*steps: list[ToolCallPart]) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A model that makes the given calls, one step per request, and records what it was sent."""
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = len(seen) - 1
        return ModelResponse(parts=steps[step] if step < len(steps) else [TextPart('done')])

    return FunctionModel(respond), seen


def tool_texts(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def leaked(secret: str, text: str) -> bool:
    """Whether any 8 characters of `secret` in a row are still readable in `text`."""
    return any(secret[i : i + 8] in text for i in range(len(secret) - 7))


@pytest.mark.parametrize('failure', ['retry', 'failed'])
async def test_a_megabyte_of_failure_text_with_a_token_is_masked_and_reduced(tmp_path: Path, failure: str) -> None:
    body = 'deploy failed\n' + f'GITHUB_TOKEN={GITHUB}\n' + 'trace line\n' * 100_000  # 1.1 MB
    model, seen = scripted([ToolCallPart('deploy', {}, tool_call_id='call_1')])
    capability = OverflowingToolOutput(
        store=LocalFileStore(base_dir=tmp_path), redact_secrets=SecretRedaction(), step_budget=StepBudget(20_000)
    )
    agent = Agent(model, capabilities=[capability])

    @agent.tool_plain(retries=3)
    def deploy() -> str:
        raise ModelRetry(body) if failure == 'retry' else ToolFailed(body)

    result = await agent.run('go')
    [part] = tool_texts(seen[1])
    assert part.outcome == ('retried' if failure == 'retry' else 'failed')
    assert len(part.model_response_str()) < 5_000  # spilled by the default band, not sent whole
    assert not leaked(GITHUB, part.model_response_str())
    assert isinstance(part.metadata, dict)
    assert part.metadata['secrets_withheld'] == {'GitHub Token': 1}
    assert part.metadata['overflow_action'] == 'spill'
    # The history keeps what the model was sent, so a handoff summary built from it carries no token either.
    [stored] = tool_texts(result.all_messages())
    assert stored.content == part.content
    nested = nest_handoff_history(HandoffInputData(tuple(result.all_messages()), (), ()))
    assert not leaked(GITHUB, str(nested.input_history))
    assert overflow_report(result.all_messages()).reduced == 1
    # Lossless: the stored text is the masked failure text, in full.
    stored_bytes = await capability._resolved_store.read(part.metadata['overflow_handle'])
    assert stored_bytes.count(b'trace line\n') == 100_000
    assert GITHUB.encode() not in stored_bytes


async def test_a_small_failure_text_is_masked_and_otherwise_left_as_it_is() -> None:
    model, seen = scripted([ToolCallPart('deploy', {})])
    agent = Agent(model, capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction())])

    @agent.tool_plain(retries=3)
    def deploy() -> str:
        raise ModelRetry(f'bad token {GITHUB}, try again')

    await agent.run('go')
    [part] = tool_texts(seen[1])
    assert part.content == 'bad token [secret withheld: GitHub Token], try again'
    assert isinstance(part.metadata, dict) and 'overflow_action' not in part.metadata


async def test_a_failure_text_without_secrets_or_size_is_not_touched() -> None:
    model, seen = scripted([ToolCallPart('deploy', {})])
    agent = Agent(model, capabilities=[OverflowingToolOutput(redact_secrets=SecretRedaction())])

    @agent.tool_plain(retries=3)
    def deploy() -> str:
        raise ModelRetry('the service is busy, try again')

    await agent.run('go')
    [part] = tool_texts(seen[1])
    assert part.content == 'the service is busy, try again'
    assert part.metadata is None


async def test_the_step_budget_counts_and_reduces_failure_texts(tmp_path: Path) -> None:
    calls = [ToolCallPart(name, {}, tool_call_id=f'call_{name}') for name in ('ok', 'bad')]
    model, seen = scripted(calls)
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=tmp_path), step_budget=StepBudget(12_000))
    agent = Agent(model, capabilities=[capability])
    agent.tool_plain(name='ok')(lambda: 'fine\n' * 1_500)  # 7,500 characters: under every band

    @agent.tool_plain(retries=3)
    def bad() -> str:
        raise ToolFailed('error line\n' * 800)  # 8,800 characters: under every band, but the step is 16,300

    await agent.run('go')
    parts = {p.tool_name: p for p in tool_texts(seen[1])}
    assert parts['ok'].content == 'fine\n' * 1_500
    assert parts['bad'].outcome == 'failed'
    texts = {name: str(part.content) for name, part in parts.items()}
    assert texts['bad'].startswith('[Step budget: the 2 tool results of this step came to 16300 characters')
    assert sum(map(len, texts.values())) <= 12_000


def test_keeping_originals_in_the_query_tools_store_is_refused(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path)
    for kept_in in (store, LocalFileStore(base_dir=tmp_path)):
        with pytest.raises(ValueError, match='keep_original_in is the store the query tools read from'):
            OverflowingToolOutput(store=store, redact_secrets=SecretRedaction(keep_original_in=kept_in))
    with pytest.raises(ValueError, match='keep_original_in'):  # the default store, both ways
        OverflowingToolOutput(redact_secrets=SecretRedaction(keep_original_in=LocalFileStore()))
    OverflowingToolOutput(store=store, redact_secrets=SecretRedaction(keep_original_in=LocalFileStore(tmp_path / 'o')))


async def test_a_tool_filter_by_metadata_reaches_failure_texts_and_the_step_budget(tmp_path: Path) -> None:
    """`tool_filter={'reduce': True}` selects by the tool's metadata: the request-time rules (failure texts, the step
    budget) match it against the tool's real definition, as a return's reduction does, not a bare name."""
    body = 'deploy failed\n' + 'trace line\n' * 100_000  # 1.1 MB
    model, seen = scripted(
        [ToolCallPart('deploy', {}, tool_call_id='call_1')],
        [ToolCallPart('page', {'n': n}, tool_call_id=f'page_{n}') for n in range(3)],
    )
    capability = OverflowingToolOutput(
        bands=[Band(over=500_000, action=Spill())],
        store=LocalFileStore(base_dir=tmp_path),
        tool_filter={'reduce': True},
        step_budget=StepBudget(20_000, action=Truncate(max_chars=2_000)),
    )
    agent = Agent(model, capabilities=[capability])

    @agent.tool_plain(retries=3, metadata={'reduce': True})
    def deploy() -> str:
        raise ModelRetry(body)

    @agent.tool_plain(metadata={'reduce': True})
    def page(n: int) -> str:
        return f'page {n}\n' + 'row\n' * 4_000  # 16 KB each: 48 KB for the step, over its 20,000 budget

    await agent.run('go')
    [failure] = tool_texts(seen[1])
    assert len(failure.model_response_str()) < 5_000  # the failure text was spilled
    pages = [part for part in tool_texts(seen[2]) if part.tool_name == 'page']
    assert len(pages) == 3
    assert sum(len(part.model_response_str()) for part in pages) <= 20_000  # the step was held to its budget
