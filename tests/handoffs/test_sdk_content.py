"""A custom mapper reading a summary the OpenAI Agents SDK wrote gets parts back, not the SDK's JSON (issue 18)."""

from __future__ import annotations

import base64
import json

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UploadedFile,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.handoffs import HandoffInputData, Handoffs, delegate, nest_handoff_history

from ._helpers import Recorder

pytestmark = pytest.mark.anyio

PNG = b'\x89PNG\r\n\x1a\n fake'
SDK_RECORDS = [
    {
        'role': 'user',
        'content': [
            {'type': 'input_text', 'text': 'What is on this picture?'},
            {'type': 'input_image', 'image_url': 'https://example.com/cat.png', 'detail': 'auto'},
        ],
    },
    {
        'id': 'msg_1',
        'content': [{'annotations': [], 'text': 'Assist reply', 'type': 'output_text', 'logprobs': []}],
        'role': 'assistant',
        'status': 'completed',
        'type': 'message',
    },
    {
        'role': 'user',
        'content': [
            {
                'type': 'input_image',
                'image_url': 'data:image/png;base64,' + base64.b64encode(PNG).decode(),
                'detail': 'low',
            },
            {'type': 'input_file', 'file_url': 'https://example.com/report.pdf'},
            {'type': 'input_file', 'file_id': 'file-123'},
            {'type': 'input_audio', 'input_audio': {'data': base64.b64encode(b'RIFF').decode(), 'format': 'wav'}},
        ],
    },
    {'role': 'developer', 'content': [{'type': 'input_text', 'text': 'Be brief.'}]},
    {
        'role': 'assistant',
        'content': [{'type': 'output_text', 'text': 'Part one, '}, {'type': 'output_text', 'text': 'part two.'}],
    },
    {'role': 'assistant', 'content': [{'type': 'refusal', 'refusal': 'I cannot help with that.'}]},
]


def sdk_summary() -> str:
    body = '\n'.join(f'{n}. {json.dumps(record)}' for n, record in enumerate(SDK_RECORDS, 1))
    return (
        'For context, here is the conversation so far between the user and the previous agent:\n'
        f'<CONVERSATION HISTORY>\n{body}\n</CONVERSATION HISTORY>'
    )


def test_sdk_written_content_reaches_a_mapper_as_parts() -> None:
    received: list[list[ModelMessage]] = []

    def keep(transcript: list[ModelMessage]) -> list[ModelMessage]:
        received.append(transcript)
        return transcript

    data = HandoffInputData(
        input_history=(ModelResponse(parts=[TextPart(sdk_summary())]),), pre_handoff_items=(), new_items=()
    )
    nest_handoff_history(data, history_mapper=keep)
    parts = [part for message in received[0] for part in message.parts]
    assert isinstance(parts[0], UserPromptPart)
    assert parts[0].content == ['What is on this picture?', ImageUrl(url='https://example.com/cat.png')]
    assert parts[1] == TextPart('Assist reply')
    assert isinstance(parts[2], UserPromptPart) and not isinstance(parts[2].content, str)
    image, document, uploaded, audio = parts[2].content
    assert isinstance(image, BinaryContent) and image.data == PNG and image.media_type == 'image/png'
    assert document == DocumentUrl(url='https://example.com/report.pdf')
    assert isinstance(uploaded, UploadedFile) and uploaded.file_id == 'file-123'
    assert isinstance(audio, BinaryContent) and audio.data == b'RIFF' and audio.media_type == 'audio/wav'
    assert isinstance(parts[3], SystemPromptPart) and parts[3].content == 'Be brief.'
    assert parts[4] == TextPart('Part one, part two.')
    assert parts[5] == TextPart('I cannot help with that.')


def test_unknown_content_entries_stay_json_text() -> None:
    odd = {'role': 'assistant', 'content': [{'type': 'output_text', 'text': 'a'}, {'type': 'mystery', 'x': 1}]}
    text = (
        'For context, here is the conversation so far between the user and the previous agent:\n'
        f'<CONVERSATION HISTORY>\n1. {json.dumps(odd)}\n</CONVERSATION HISTORY>'
    )
    received: list[list[ModelMessage]] = []
    data = HandoffInputData(input_history=(ModelResponse(parts=[TextPart(text)]),), pre_handoff_items=(), new_items=())
    nest_handoff_history(data, history_mapper=lambda t: received.append(t) or t)
    [[part]] = [m.parts for m in received[0]]
    assert isinstance(part, TextPart) and json.loads(part.content) == odd['content']  # nothing lost


async def test_a_delegate_with_a_mapper_runs_on_sdk_written_parts() -> None:
    recorder = Recorder('ok')
    specialist = Agent(recorder.model, name='specialist')

    def handing_off(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {}, 'h')])

    async def hand_off(ctx: RunContext[None]) -> str:
        """Hand off."""
        return (
            await delegate(specialist, ctx, 'continue', nest_handoff_history=True, history_mapper=lambda t: t)
        ).output

    triage = Agent(FunctionModel(handing_off), output_type=[hand_off], capabilities=[Handoffs()])
    await triage.run('next question', message_history=[ModelResponse(parts=[TextPart(sdk_summary())])])
    texts = [p.content for m in recorder.last for p in m.parts if isinstance(p, TextPart)]
    assert 'Assist reply' in texts and not any('output_text' in t for t in texts)
