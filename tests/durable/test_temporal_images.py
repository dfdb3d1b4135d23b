"""Images under Temporal, on the time-skipping test server: the copy is fitted in an activity (workflow code never
decodes an image), the view tool reads the stored original, and the history replays."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip(
    'temporalio', reason='temporalio is not installed: pip install "pydantic-ai-harness-context[durable]"'
)

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from ._temporal_images import PDF_PAGES, SECRET
from ._temporal_images_workflow import FailingReadWorkflow, ImageWorkflow, PdfWorkflow
from .test_temporal import TEST_SERVER

pytestmark = [pytest.mark.durable, pytest.mark.anyio]


@dataclass
class _Run:
    """A workflow run on the time-skipping server: its output, the activities it scheduled, whether it replays."""

    output: str
    activities: list[str]
    replays: bool


async def _run(workflow: Any, prompt: str) -> _Run:
    """`workflow` run once with `prompt` on a fresh time-skipping server, then its history replayed."""
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), plugins=[PydanticAIPlugin()]
    )
    async with environment:
        task_queue = f'media-{uuid.uuid4()}'
        async with Worker(environment.client, task_queue=task_queue, workflows=[workflow]):
            handle = await environment.client.start_workflow(
                workflow.run,
                args=[prompt, f'run-{uuid.uuid4()}'],
                id=f'media-{uuid.uuid4()}',
                task_queue=task_queue,
                execution_timeout=timedelta(seconds=60),
            )
            output = await handle.result()
        history = await handle.fetch_history()
        activities = [
            event.activity_task_scheduled_event_attributes.activity_type.name
            for event in history.events
            if event.HasField('activity_task_scheduled_event_attributes')
        ]
        replay = await Replayer(workflows=[workflow], plugins=[PydanticAIPlugin()]).replay_workflow(history)
    return _Run(output, activities, replay.replay_failure is None)


async def test_an_image_is_fitted_in_an_activity_and_the_history_replays() -> None:
    run = await _run(ImageWorkflow, 'look')
    output = json.loads(run.output)
    assert output['copy'] == [1480, 776] and output['crop'] == [400, 300]
    assert any(name.endswith('overflow_fit_image') for name in run.activities), run.activities
    assert run.replays


async def test_a_pdf_is_read_in_an_activity_its_page_viewed_and_the_history_replays() -> None:
    pytest.importorskip('pypdf', reason='the media extra is not installed')
    run = await _run(PdfWorkflow, 'read')
    output = json.loads(run.output)
    assert 'returned a PDF' in output['header'] and f': {PDF_PAGES} pages. Its text follows' in output['header']
    assert "view_tool_result_image(handle='" in output['header']  # pages can be shown: pypdfium2 where it runs
    assert output['unknown'] == (
        "No stored image under 'report_99'. Use a handle exactly as an image's or a PDF's line names it."
    )
    width, height = output['page']
    assert abs(width / height - 612 / 792) < 0.01 and height > 1000  # the Letter page, rendered
    assert sum(name.endswith('overflow_read_pdf') for name in run.activities) == 1, run.activities
    assert run.replays


async def test_a_pdf_whose_durable_read_fails_is_withheld_under_redaction() -> None:
    """The read activity times out: the file was checked for nothing, so with redaction on it is withheld (it had
    gone to the model as it was, secret and all)."""
    output = (await _run(FailingReadWorkflow, 'read')).output
    assert SECRET not in output
    assert output.startswith('[`secret_report` returned a PDF (')
    assert 'not all of its text could be checked for secrets (the durable read failed (ActivityError))' in output
