"""Every delegation is one OpenTelemetry span naming both agents, the mode, the filter and the delegating call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from inline_snapshot import snapshot
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from pydantic_ai_harness.handoffs import HandoffInputData, Handoffs, agent_tool, handoff, remove_all_tools

from ._helpers import Recorder

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


def _instrumented(exporter: InMemorySpanExporter) -> Instrumentation:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))


def _router_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask the researcher (a tool), then hand off to billing (an output tool)."""
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[ToolCallPart('transfer_to_billing', {}, 'call_handoff')])
    return ModelResponse(parts=[ToolCallPart('researcher', {'input': 'Is order 42 paid?'}, 'call_tool')])


def _router(instrumentation: Instrumentation | None, **handoff_kwargs: Any) -> Agent[None, str]:
    extra = [] if instrumentation is None else [instrumentation]
    researcher = Agent(Recorder('paid').model, name='researcher', capabilities=extra)
    billing = Agent(Recorder('Refund issued.').model, name='billing', capabilities=extra)
    return Agent(
        FunctionModel(_router_model),
        name='router',
        tools=[agent_tool(researcher, conversation=True, input_filter=remove_all_tools)],
        output_type=[handoff(billing, **handoff_kwargs)],
        capabilities=[Handoffs(), *extra],
    )


def _tree(spans: tuple[ReadableSpan, ...]) -> list[str]:
    """Each span as `name < parent < ...`, in the order they ended."""
    by_id = {span.context.span_id: span for span in spans if span.context is not None}
    lines: list[str] = []
    for span in spans:
        names: list[str] = []
        current: ReadableSpan | None = span
        while current is not None:
            names.append(current.name)
            current = by_id.get(current.parent.span_id) if current.parent is not None else None
        lines.append(' < '.join(names))
    return lines


def _delegation_attributes(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    return [
        {key.removeprefix('pydantic_ai_harness.handoff.'): value for key, value in (span.attributes or {}).items()}
        for span in spans
        if span.name.startswith(('handoff ', 'agent tool '))
    ]


async def test_a_tool_delegation_nests_and_a_handoff_relays(exporter: InMemorySpanExporter) -> None:
    result = await _router(_instrumented(exporter), nest_handoff_history=True).run('I want a refund')
    assert result.output == 'Refund issued.'
    spans = exporter.get_finished_spans()
    assert [line for line in _tree(spans) if not line.startswith('chat ')] == snapshot(
        [
            'invoke_agent researcher < agent tool router -> researcher < execute_tool researcher < invoke_agent router',
            'agent tool router -> researcher < execute_tool researcher < invoke_agent router',
            'execute_tool researcher < invoke_agent router',
            'invoke_agent billing < handoff router -> billing < execute_tool transfer_to_billing < invoke_agent router',
            'handoff router -> billing < execute_tool transfer_to_billing < invoke_agent router',
            'execute_tool transfer_to_billing < invoke_agent router',
            'invoke_agent router',
        ]
    )
    assert _delegation_attributes(spans) == snapshot(
        [
            {
                'from_agent': 'router',
                'to_agent': 'researcher',
                'mode': 'tool',
                'input_filter': 'remove_all_tools',
                'tool_name': 'researcher',
                'tool_call_id': 'call_tool',
            },
            {
                'from_agent': 'router',
                'to_agent': 'billing',
                'mode': 'handoff',
                'input_filter': 'nest_handoff_history',
                'tool_name': 'transfer_to_billing',
                'tool_call_id': 'call_handoff',
            },
        ]
    )


async def test_a_custom_filter_is_named_and_a_failed_delegation_is_an_error_span(
    exporter: InMemorySpanExporter,
) -> None:
    def broken_filter(data: HandoffInputData) -> HandoffInputData:
        return data.clone(new_items=data.new_items[:1])  # drops the handoff's tool return

    with pytest.raises(UserError, match='^Invalid handoff history'):
        await _router(_instrumented(exporter), input_filter=broken_filter).run('I want a refund')
    [failed] = [span for span in exporter.get_finished_spans() if span.name == 'handoff router -> billing']
    assert failed.status.status_code == StatusCode.ERROR
    assert (failed.attributes or {})['pydantic_ai_harness.handoff.input_filter'] == snapshot(
        'test_a_custom_filter_is_named_and_a_failed_delegation_is_an_error_span.<locals>.broken_filter'
    )
    assert [event.name for event in failed.events] == ['exception']


async def test_without_instrumentation_there_is_no_span(exporter: InMemorySpanExporter) -> None:
    result = await _router(None).run('I want a refund')
    assert result.output == 'Refund issued.'
    assert exporter.get_finished_spans() == ()
