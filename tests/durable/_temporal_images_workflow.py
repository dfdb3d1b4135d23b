"""The workflow that runs the image agent. Temporal re-imports this module in its sandbox, so it does nothing else."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow

    from ._temporal_images import agent, failing_read_agent, pdf_agent


@workflow.defn
class ImageWorkflow(PydanticAIWorkflow):
    """One screenshot fitted, then a region of its original viewed."""

    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> str:
        return (await agent.run(prompt, run_id=run_id)).output


@workflow.defn
class PdfWorkflow(PydanticAIWorkflow):
    """A PDF read page by page in an activity, then a page viewed as an image."""

    __pydantic_ai_agents__ = (pdf_agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> str:
        return (await pdf_agent.run(prompt, run_id=run_id)).output


@workflow.defn
class FailingReadWorkflow(PydanticAIWorkflow):
    """A PDF holding a secret whose durable read times out, under secret redaction."""

    __pydantic_ai_agents__ = (failing_read_agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> str:
        return (await failing_read_agent.run(prompt, run_id=run_id)).output
