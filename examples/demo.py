"""`make demo`: a coding assistant meets a huge test log and a big JSON API response, then delegates.

Runs on a scripted model by default (no API key, no server). `make demo MODEL=openai:gpt-4o` (any
pydantic-ai model name) runs the same session against a real model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from examples import _payloads as payloads
from examples._scripted import CarefulModel, Question, cl100k_counter, preceding
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

console = Console(highlight=False, width=max(100, Console().width))

TRACEBACK_LINE = re.compile(r'File "(tests/\S+)", line (\d+)')

QUESTIONS = [
    Question(
        prompt='The CI run is red. Which line of which test file does the failing test break on?',
        calls=[('run_tests', {})],
        search='FAILED',
        extract=lambda text: (m := TRACEBACK_LINE.search(text)) and f'{m[1]}:{m[2]}',
    ),
    Question(
        prompt='One order is stuck in the orders API. What is its id?',
        calls=[('list_orders', {})],
        search='"stuck"',
        extract=preceding('stuck', r'(ord_[0-9a-f]{8})'),
    ),
]
SYSTEM = 'You are a coding assistant. Use the tools; when an output was stored, page back into it with the tools.'


def _token_counter() -> Callable[[str], int]:
    # tiktoken copies even a bundled encoding file into a cache under the temp dir; the file is local, so
    # the demo turns that cache off and leaves nothing behind (unless the user configured one).
    os.environ.setdefault('TIKTOKEN_CACHE_DIR', '')
    try:
        return cl100k_counter()
    except Exception:  # noqa: BLE001 - the demo still runs without the optional tokenizer
        return lambda text: len(text) // 4


def build_agent(model: Any, capability: OverflowingToolOutput[Any] | None, sizes: dict[str, int]) -> Agent[None, str]:
    agent = Agent(model, instructions=SYSTEM, capabilities=[capability] if capability else [])

    @agent.tool_plain
    def run_tests() -> str:
        """Run the project's test suite and return its full output."""
        log = payloads.test_log()
        sizes['run_tests'] = len(log)
        return log

    @agent.tool_plain
    def list_orders() -> dict[str, Any]:
        """List all orders from the orders API (one JSON page)."""
        data = payloads.orders_json()
        sizes['list_orders'] = len(payloads.orders_json_text())
        return data

    return agent


def _show(text: str, lines: int = 18) -> str:
    rows = text.splitlines()
    if len(rows) <= lines:
        return text
    return '\n'.join(rows[:lines]) + f'\n[dim]... {len(rows) - lines} more lines[/dim]'


def narrate(messages: list[ModelMessage], sizes: dict[str, int]) -> None:
    """Print, step by step, what each tool returned, what the model saw, and the calls it made."""
    step = 0
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    step += 1
                    args = ', '.join(f'{k}={v!r}' for k, v in part.args_as_dict().items())
                    console.print(
                        f'[bold cyan]step {step}[/bold cyan]  model calls [bold]{part.tool_name}[/bold]({args})'
                    )
        elif isinstance(message, ModelRequest):
            for part in message.parts:
                if not isinstance(part, ToolReturnPart):
                    continue
                seen = part.model_response_str()
                if part.tool_name in sizes:
                    console.print(
                        f'        the tool returned [bold red]{sizes[part.tool_name]:,}[/bold red] characters; '
                        f'the model saw [bold green]{len(seen):,}[/bold green]:'
                    )
                console.print(
                    Panel(_show(seen), border_style='green' if part.tool_name in sizes else 'blue', expand=False)
                )


async def scripted_session(
    capability: OverflowingToolOutput[Any] | None,
) -> tuple[CarefulModel, list[ModelMessage], dict[str, int]]:
    brain = CarefulModel(QUESTIONS, count_tokens=_token_counter())
    sizes: dict[str, int] = {}
    agent = build_agent(brain.model(), capability, sizes)
    # pydantic-ai's default run id (a uuid7), so the handles shown are the ones a real run gets.
    result = await agent.run('\n'.join(q.prompt for q in QUESTIONS))
    return brain, result.all_messages(), sizes


async def main_scripted() -> None:
    console.rule('[bold]pydantic-ai-harness-context demo[/bold]')
    console.print(
        'A coding assistant (a scripted model that only reads what it is shown) answers two questions whose\n'
        'answers sit in the middle of huge tool outputs: a 50,000-line test log and a 20,000-order JSON page.\n'
    )
    # The spilled payloads go to a temporary store that is removed when the session is over.
    with tempfile.TemporaryDirectory(prefix='overflow-demo-') as directory:
        store = LocalFileStore(base_dir=os.path.join(directory, 'store'))
        with console.status('running the session with OverflowingToolOutput()...'):
            brain, messages, sizes = await scripted_session(OverflowingToolOutput(store=store))
    console.rule('[bold]with OverflowingToolOutput()[/bold]')
    narrate(messages, sizes)
    console.print(f'\n[bold]answers:[/bold] {brain.trace.answers}\n')

    with console.status('running the same session without the capability (for comparison)...'):
        bare_brain, _, _ = await scripted_session(None)
    with_total, with_peak = brain.trace.input_tokens, brain.trace.peak_request_tokens
    bare_total, bare_peak = bare_brain.trace.input_tokens, bare_brain.trace.peak_request_tokens
    table = Table(title='Tokens sent to the model over the whole session (cl100k_base)')
    for column in ('configuration', 'requests', 'input tokens', 'largest request', 'retrieval calls', 'correct'):
        table.add_column(column, justify='left' if column == 'configuration' else 'right')
    expected = [payloads.FAILING_LOCATION, payloads.STUCK_ORDER_ID]
    for name, run_brain, total, peak in (
        ('no capability', bare_brain, bare_total, bare_peak),
        ('OverflowingToolOutput()', brain, with_total, with_peak),
    ):
        correct = sum(a == e for a, e in zip(run_brain.trace.answers, expected))
        table.add_row(
            name,
            str(run_brain.trace.requests),
            f'{total:,}',
            f'{peak:,}',
            str(run_brain.trace.retrieval_calls),
            f'{correct}/{len(expected)}',
        )
    console.print(table)
    console.print(f'[bold green]{with_total / bare_total:.1%}[/bold green] of the tokens, the same answers.\n')

    try:
        from examples.demo_handoffs import run_delegation_demo
    except ImportError:  # pragma: no cover - the delegation part ships with the handoffs package
        return
    console.rule('[bold]delegation with pydantic_ai_harness.handoffs[/bold]')
    await run_delegation_demo(console.print)


async def main_real(model_name: str) -> int:
    provider = model_name.split(':', 1)[0]
    key_names = {
        'openai': 'OPENAI_API_KEY',
        'anthropic': 'ANTHROPIC_API_KEY',
        'google-gla': 'GEMINI_API_KEY',
        'groq': 'GROQ_API_KEY',
        'mistral': 'MISTRAL_API_KEY',
    }
    key = key_names.get(provider)
    if key and not os.environ.get(key):
        console.print(
            f'[bold red]No API key:[/bold red] {model_name!r} needs {key} in the environment. Without one, run plain `make demo`.'
        )
        return 2
    sizes: dict[str, int] = {}
    try:
        agent = build_agent(model_name, OverflowingToolOutput(), sizes)
    except Exception as exc:  # noqa: BLE001 - a missing provider package or key is reported, not raised
        console.print(f'[bold red]Cannot use {model_name!r}:[/bold red] {exc}')
        return 2
    console.rule(f'[bold]real model: {model_name}[/bold]')
    result = await agent.run('\n'.join(q.prompt for q in QUESTIONS))
    narrate(result.all_messages(), sizes)
    console.print(Panel(result.output, title='answer'))
    console.print(f'usage: {result.usage}')
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--model', help='a pydantic-ai model name, e.g. openai:gpt-4o (default: the scripted model)')
    options = parser.parse_args(argv)
    if options.model:
        return asyncio.run(main_real(options.model))
    asyncio.run(main_scripted())
    return 0


if __name__ == '__main__':
    sys.exit(main())
