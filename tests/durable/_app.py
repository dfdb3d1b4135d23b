"""The agent every durable engine test runs, with side effects counted in files.

One scripted run, three model steps:

1. call `build_log`, whose ~6,000-character output falls in the Spill band (stored, previewed);
2. page back into the spilled log with `read_tool_result` and call `test_report`, whose ~16,000-character
   output falls in the Summarize band (summarized by the run's own model, the original kept in the store);
3. answer with what it saw: the spill handle, a line read back from the store, and the summary.

Every side effect (an agent model request, a summary request, a tool call, a store write) appends one line
to `<OVERFLOW_DURABLE_DIR>/<name>.log`, so a test can tell how often each really ran, across processes.
With `OVERFLOW_DURABLE_CRASH=1`, the process dies (`os._exit`) in its final model request, after the spill
and the summary are done.

Nothing here runs in workflow code except what the capability and pydantic-ai run there, so Temporal's
sandbox sees only the hooks: the model, the tools and the store run in activities.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    OverflowStore,
    Spill,
    Summarize,
)
from pydantic_ai_harness.overflowing_tool_output._actions._summarize import SummaryOutcome, SummaryRequest

COUNTER_DIR_ENV = 'OVERFLOW_DURABLE_DIR'
CRASH_ENV = 'OVERFLOW_DURABLE_CRASH'
AGENT_NAME = 'overflow_agent'
SUMMARY_TEXT = 'SUMMARY: 400 tests ran, 3 failed (test_17, test_42, test_99); the rest passed.'
LOG_LINE_42 = 'step 0042: compiling module_42.py ... ok'


def count(name: str) -> None:
    """Record one run of the side effect `name`."""
    directory = os.environ.get(COUNTER_DIR_ENV)
    if directory:
        with open(os.path.join(directory, f'{name}.log'), 'a', encoding='utf-8') as file:
            file.write('x\n')


def counts(directory: str | Path) -> dict[str, int]:
    """How many times each side effect ran."""
    return {
        path.stem: len(path.read_text(encoding='utf-8').splitlines()) for path in sorted(Path(directory).glob('*.log'))
    }


def build_log() -> str:
    """A build log of about 6,000 characters: in the Spill band."""
    count('tool_build_log')
    return '\n'.join(f'step {i:04d}: compiling module_{i}.py ... ok' for i in range(150))


def test_report() -> str:
    """A test report of about 16,000 characters: in the Summarize band."""
    count('tool_test_report')
    failed = {17, 42, 99}
    return '\n'.join(
        f'test_{i:03d} ........................................ {"FAILED" if i in failed else "passed"}'
        for i in range(400)
    )


@dataclass
class CountingStore(LocalFileStore):
    """A real `LocalFileStore` that also counts its writes."""

    async def write(self, key: str, data: bytes) -> str:
        count('store_write')
        return await super().write(key, data)


def _returns(messages: list[ModelMessage]) -> dict[str, str]:
    return {
        part.tool_name: str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model: the agent's three steps, and the summaries the capability asks it for."""
    first = messages[0]
    if isinstance(first, ModelRequest) and any(
        isinstance(part, UserPromptPart) and '<tool_output>' in str(part.content) for part in first.parts
    ):
        count('summarize')
        return ModelResponse(parts=[TextPart(SUMMARY_TEXT)])
    count('model')
    step = sum(isinstance(message, ModelResponse) for message in messages)
    returns = _returns(messages)
    if step == 0:
        return ModelResponse(parts=[ToolCallPart('build_log', {}, tool_call_id='call_log')])
    if step == 1:
        match = re.search(r"under handle '([^']+)'", returns['build_log'])
        if match is None:  # not spilled (the negative controls): nothing to page back into
            return ModelResponse(parts=[TextPart(returns['build_log'])])
        return ModelResponse(
            parts=[
                ToolCallPart(
                    'read_tool_result', {'handle': match.group(1), 'offset': 43, 'limit': 1}, tool_call_id='call_read'
                ),
                ToolCallPart('test_report', {}, tool_call_id='call_report'),
            ]
        )
    if os.environ.get(CRASH_ENV) == '1':
        os._exit(17)  # the worker dies mid-run: after the spill and the summary, before the answer
    return ModelResponse(
        parts=[
            TextPart(
                '\n---\n'.join(
                    [returns['build_log'], returns['read_tool_result'], returns['test_report']],
                )
            )
        ]
    )


class InlineOps(OverflowingToolOutput[Any]):
    """The negative control: the capability with its durable operations overridden by plain methods.

    An override without `@durable_operation` is not an operation, so under an engine these run in workflow
    code, as a hook that wrote to the store or called the summarizer directly would.
    """

    async def _spill_write(
        self, ctx: RunContext[Any], key: str, text: str | None, data_b64: str | None, timeout: float
    ) -> tuple[str | None, str]:
        return await super()._spill_write(ctx, key, text, data_b64, timeout)

    async def _summarize_durably(
        self, ctx: RunContext[Any], action_index: int, request: SummaryRequest
    ) -> tuple[SummaryOutcome, RunUsage]:
        return await super()._summarize_durably(ctx, action_index, request)


def build_agent(
    store_dir: str | Path,
    *durability: AbstractCapability[Any],
    inline_ops: bool = False,
    name: str = AGENT_NAME,
    store: OverflowStore | None = None,
    spill_timeout: float = 30.0,
) -> Agent[None, str]:
    """The agent under test: spill from 2,000 characters, summarize (with the run's model) from 10,000."""
    capability = (InlineOps if inline_ops else OverflowingToolOutput)(
        bands=[Band(over=2_000, action=Spill(timeout=spill_timeout)), Band(over=10_000, action=Summarize())],
        store=store if store is not None else CountingStore(base_dir=store_dir),
    )
    return Agent(
        FunctionModel(respond, model_name='scripted'),
        name=name,
        tools=[build_log, test_report],
        capabilities=[capability, *durability],
    )


def report(result: Any) -> dict[str, Any]:
    """What a workflow returns about a run: plain data any engine can serialize."""
    return {
        'output': result.output,
        'requests': result.usage.requests,
        'input_tokens': result.usage.input_tokens,
        'output_tokens': result.usage.output_tokens,
    }
