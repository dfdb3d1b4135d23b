"""Shared pieces of the workspace tests: a big tool result with one fact in it, a shell tool, a listing."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

FACT_ID = 31337
FACT_CUSTOMER = 'needle-7f3a'


def orders() -> dict[str, Any]:
    """40,000 orders; one of them is the fact the model must find."""
    return {
        'orders': [
            {'id': i, 'customer': FACT_CUSTOMER if i == FACT_ID else f'customer-{i % 977}', 'total': i % 1000}
            for i in range(40_000)
        ]
    }


def log_text() -> str:
    lines = [f'2024-05-01 INFO request {i} served in {i % 97} ms' for i in range(30_000)]
    lines[21_001] = f'2024-05-01 ERROR payment failed for {FACT_CUSTOMER}'
    return '\n'.join(lines) + '\n'


async def shell(ctx: RunContext[Any], command: str) -> str:
    """Run a shell command in the workspace."""
    result = await ctx.workspace.run(command, shell=True, timeout=30)
    return f'exit {result.exit_code}\n{result.stdout}{result.stderr}'


def jq_command(path: str) -> str:
    """`jq` picking the fact's customer; where `jq` is not installed, the same query as a short Python script."""
    if shutil.which('jq') is not None:
        return f"jq -r '.orders[] | select(.id == {FACT_ID}) | .customer' {path}"
    script = f'import json,sys; print(next(o["customer"] for o in json.load(open(sys.argv[1]))["orders"] if o["id"] == {FACT_ID}))'
    return f"python3 -c '{script}' {path}"


def tool_returns(messages: list[ModelMessage], tool_name: str | None = None) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and (tool_name is None or part.tool_name == tool_name)
    ]


def last_return(messages: list[ModelMessage]) -> str:
    return str(tool_returns(messages)[-1].content)


HANDLE = re.compile(r"under handle '([^']+)'")


def handle_in(preview: str) -> str:
    match = HANDLE.search(preview)
    assert match is not None, preview[:500]
    return match.group(1)


def listing(root: Path) -> list[str]:
    """Every path under `root`, relative, sorted (symlinks listed, not followed)."""
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(found)
