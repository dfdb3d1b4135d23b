"""The workflows that run the aging agents. Temporal re-imports this module in its sandbox, so it does nothing else."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow

    from ._temporal_aging import agent, plain_context_agent


@workflow.defn
class AgingWorkflow(PydanticAIWorkflow):
    """Ten pages, the old ones aged, then one search over every stored result."""

    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> str:
        return (await agent.run(prompt, run_id=run_id)).output


@workflow.defn
class PlainContextAgingWorkflow(PydanticAIWorkflow):
    """The same with Temporal's own run context, which carries no messages into activities."""

    __pydantic_ai_agents__ = (plain_context_agent,)

    @workflow.run
    async def run(self, prompt: str, run_id: str) -> str:
        return (await plain_context_agent.run(prompt, run_id=run_id)).output
