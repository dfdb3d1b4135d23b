"""A worker in a child process, for the crash test: `python -m tests.durable._temporal_worker TARGET QUEUE`.

With `OVERFLOW_DURABLE_CRASH=1` it dies (`os._exit(17)`) in the agent's last model request. It caches no
workflow: the worker that takes over must get the workflow task from the server, not a sticky queue.
"""

from __future__ import annotations

import sys

import anyio
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client
from temporalio.worker import Worker

from ._temporal_workflow import OverflowWorkflow


async def _main(target: str, task_queue: str) -> None:
    client = await Client.connect(target, plugins=[PydanticAIPlugin()])
    worker = Worker(client, task_queue=task_queue, workflows=[OverflowWorkflow], max_cached_workflows=0)
    await worker.run()


if __name__ == '__main__':
    anyio.run(_main, sys.argv[1], sys.argv[2])
