"""The workflow that runs the agent. Temporal re-imports this module in its sandbox, so it does nothing else."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow

    from ._app import report
    from ._temporal_agent import agent, inline_agent


@workflow.defn
class OverflowWorkflow(PydanticAIWorkflow):
    """Run the agent once and report its output and usage."""

    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> dict[str, Any]:
        return report(await agent.run(prompt, run_id=run_id))


@workflow.defn
class InlineOverflowWorkflow(PydanticAIWorkflow):
    """The negative control: the agent whose store writes and summaries would run in workflow code."""

    __pydantic_ai_agents__ = (inline_agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> dict[str, Any]:
        return report(await inline_agent.run(prompt, run_id=run_id))
