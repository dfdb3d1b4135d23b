"""An agent whose tool returns a Retina screenshot under Temporal: the copy is fitted in the `overflow_fit_image`
activity, then the model looks at a region of the stored original. At module level, as Temporal workers need it."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import timedelta
from typing import Any

from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, SecretRedaction
from pydantic_ai_harness.overflowing_tool_output.temporal import OverflowTemporalRunContext

from ..media._images import screenshot
from ._temporal_agent import STORE_DIR


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def _size(item: BinaryContent) -> list[int]:
    with Image.open(io.BytesIO(item.data)) as image:
        return list(image.size)


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = _returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart('take_screenshot', {}, 'call_shot')])
    if len(returns) == 1:
        handle = returns[0].metadata['overflow_images'][0]['handle']
        region = {'handle': handle, 'x': 4000, 'y': 2000, 'width': 400, 'height': 300}
        return ModelResponse(parts=[ToolCallPart('view_tool_result_image', region, 'call_view')])
    shot, view = (part.content for part in returns)
    assert isinstance(shot, list) and isinstance(view, list)
    copy, crop = shot[1], view[1]
    assert isinstance(copy, BinaryContent) and isinstance(crop, BinaryContent)
    digest = hashlib.sha256(copy.data).hexdigest()[:16]
    return ModelResponse(parts=[TextPart(json.dumps({'copy': _size(copy), 'crop': _size(crop), 'digest': digest}))])


async def take_screenshot() -> BinaryContent:
    return BinaryImage(screenshot(), media_type='image/png')


durability = TemporalDurability[Any](
    activity_config=ActivityConfig(
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
    ),
    run_context_type=OverflowTemporalRunContext,
)
agent = Agent(
    FunctionModel(respond, model_name='scripted'),
    name='image_agent',
    tools=[take_screenshot],
    capabilities=[OverflowingToolOutput[Any](store=LocalFileStore(base_dir=STORE_DIR), workspace=None), durability],
)


PDF_PAGES = 60


def respond_pdf(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = _returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart('report', {}, 'call_report')])
    text = str(returns[0].content)
    if len(returns) == 1:  # a made-up handle first: answered in the activity, which carries no messages
        return ModelResponse(parts=[ToolCallPart('view_tool_result_image', {'handle': 'report_99'}, 'call_bad')])
    if len(returns) == 2:
        handle = text.split("handle '", 1)[1].split("'", 1)[0]
        return ModelResponse(parts=[ToolCallPart('view_tool_result_image', {'handle': handle, 'page': 2}, 'call_page')])
    page = returns[2].content
    assert isinstance(page, list)
    image = page[1]
    assert isinstance(image, BinaryContent)
    answer = {'header': text.split('\n', 1)[0], 'unknown': str(returns[1].content), 'page': _size(image)}
    return ModelResponse(parts=[TextPart(json.dumps(answer))])


async def report() -> BinaryContent:
    from ..overflowing_tool_output.media._pdf_files import pdf_with_pages

    pages = [[f'Report page {n}', *(f'row {n}.{i}: revenue {n * i}' for i in range(30))] for n in range(PDF_PAGES)]
    return BinaryContent(pdf_with_pages(pages), media_type='application/pdf')


pdf_agent = Agent(
    FunctionModel(respond_pdf, model_name='scripted'),
    name='pdf_agent',
    tools=[report],
    capabilities=[OverflowingToolOutput[Any](store=LocalFileStore(base_dir=STORE_DIR), workspace=None), durability],
)


SECRET = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'
_LONG = ActivityConfig(start_to_close_timeout=timedelta(seconds=30), retry_policy=RetryPolicy(maximum_attempts=1))


async def secret_report() -> BinaryContent:
    from ..overflowing_tool_output.media._pdf_files import pdf_with_pages

    pages = [[f'page {n}', *('lorem ipsum dolor sit amet ' * 8 for _ in range(3))] for n in range(400)]
    pages[0].append(f'deploy token {SECRET}')
    return BinaryContent(pdf_with_pages(pages), media_type='application/pdf')


def respond_report(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = _returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart('secret_report', {}, 'call_report')])
    content = returns[0].content
    shown = content if isinstance(content, str) else f'{type(content).__name__} sent as it is'
    return ModelResponse(parts=[TextPart(shown)])


failing_read_agent = Agent(
    FunctionModel(respond_report, model_name='scripted'),
    name='failing_read_agent',
    tools=[secret_report],
    capabilities=[
        OverflowingToolOutput[Any](
            store=LocalFileStore(base_dir=STORE_DIR), workspace=None, redact_secrets=SecretRedaction()
        ),
        TemporalDurability[Any](
            # The capability's operations get 300 ms, less than reading 400 pages takes: the read times out.
            activity_config=ActivityConfig(
                start_to_close_timeout=timedelta(milliseconds=300), retry_policy=RetryPolicy(maximum_attempts=1)
            ),
            model_activity_config=_LONG,
            toolset_activity_config={'<agent>': _LONG},
            run_context_type=OverflowTemporalRunContext,
        ),
    ],
)
