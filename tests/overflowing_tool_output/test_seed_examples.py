"""The seed document's examples, verbatim: each must run unchanged."""

from __future__ import annotations

# ruff: noqa: I001


def test_usage_example() -> None:
    from pydantic_ai import Agent
    from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput

    agent = Agent('openai:gpt-4o', capabilities=[OverflowingToolOutput()])
    assert agent is not None


def test_bands_example() -> None:
    from pydantic_ai import Agent
    from pydantic_ai_harness.overflowing_tool_output import (
        Band,
        OverflowingToolOutput,
        Spill,
        Summarize,
        Truncate,
    )

    agent = Agent(
        'openai:gpt-4o',
        capabilities=[
            OverflowingToolOutput(
                bands=[
                    Band(over=100_000, action=Spill()),  # huge: keep losslessly, read back on demand
                    Band(over=20_000, action=Summarize()),  # large: compress with the run's model
                    Band(over=5_000, action=Truncate()),  # medium: cheap clamp
                ],
                # below 5,000: passthrough
            )
        ],
    )
    assert agent is not None


def test_per_tool_example() -> None:
    from pydantic_ai import Agent
    from pydantic_ai_harness.overflowing_tool_output import (
        Band,
        OverflowingToolOutput,
        Truncate,
        TruncationStrategy,
    )

    agent = Agent(
        'openai:gpt-4o',
        capabilities=[
            OverflowingToolOutput(
                per_tool={
                    'read_file': [Band(over=8_000, action=Truncate(strategy=TruncationStrategy.head))],
                    'run_shell': [Band(over=8_000, action=Truncate(strategy=TruncationStrategy.tail))],
                },
                tool_filter=['read_file', 'run_shell', 'search'],
            )
        ],
    )
    assert agent is not None


def test_protocol_example() -> None:
    from typing import Protocol

    class OverflowStore(Protocol):
        async def write(self, key: str, data: bytes) -> str: ...  # returns a handle
        async def read(self, handle: str) -> bytes: ...

    import pydantic_ai_harness.overflowing_tool_output as pkg

    # The package's protocol has exactly the seed's two methods, and the default store meets it.
    assert {name for name in vars(pkg.OverflowStore) if not name.startswith('_')} == {'write', 'read'}
    assert {name for name in vars(OverflowStore) if not name.startswith('_')} == {'write', 'read'}
    assert isinstance(pkg.LocalFileStore(), pkg.OverflowStore)


def test_cleanup_example() -> None:
    from datetime import timedelta

    from pydantic_ai import Agent
    from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

    store = LocalFileStore(cleanup_after=timedelta(hours=6))  # default: None = keep forever
    agent = Agent('openai:gpt-4o', capabilities=[OverflowingToolOutput(store=store)])
    assert agent is not None


def test_external_cleanup_example() -> None:
    import time
    from pathlib import Path

    root = Path('/tmp/pyai_harness_overflow')  # or your configured base_dir
    cutoff = time.time() - 6 * 3600
    for path in root.rglob('*'):
        if path.is_file() and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
