"""The README's claims that no executed example holds: install, the model it names, where spills go."""

from __future__ import annotations

import re
import tempfile
from datetime import timedelta
from pathlib import Path

from packaging.requirements import Requirement

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput, WorkspaceSpill
from pydantic_ai_harness.overflowing_tool_output._cli import _COMMANDS
from pydantic_ai_harness.overflowing_tool_output.stores._local import DEFAULT_RETENTION

from .test_packaging import _pyproject

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / 'README.md').read_text(encoding='utf-8')


def test_the_install_lines_name_a_checkout_or_a_built_wheel_and_the_published_name_for_later() -> None:
    assert 'is not on PyPI yet' in README
    assert 'pip install /path/to/pydantic-ai-harness-context' in README
    version = (ROOT / 'pydantic_ai_harness' / '__init__.py').read_text().split("__version__ = '")[1].split("'")[0]
    assert f'pip install dist/pydantic_ai_harness_context-{version}-py3-none-any.whl' in README
    assert '\ndist: $(STAMP) ## ' in (ROOT / 'Makefile').read_text()
    extras = set(_pyproject()['project']['optional-dependencies'])
    assert set(re.findall(r'^\| `([a-z-]+)` \|', README, re.MULTILINE)) == extras - {
        'hyperscan',
        'numpy',
        's3',
    }  # s3: an alias, named in its row


def test_a_plain_install_brings_no_model_provider_sdk() -> None:
    """The Usage example's `'openai:gpt-4o'` needs `pydantic-ai-slim[openai]`, which a plain install lacks."""
    [slim] = [Requirement(r) for r in _pyproject()['project']['dependencies'] if r.startswith('pydantic-ai-slim')]
    assert slim.extras == set()
    assert "'openai:gpt-4o',  # needs the `openai` package: pip install 'pydantic-ai-slim[openai]'" in README


def test_where_spills_go_and_for_how_long() -> None:
    store = OverflowingToolOutput()._resolved_store
    assert isinstance(store, LocalFileStore)
    assert store.root == Path(tempfile.gettempdir()) / f'pyai_harness_overflow-{__import__("os").getuid()}'
    assert store.cleanup_after == DEFAULT_RETENTION == timedelta(days=7)
    assert WorkspaceSpill().directory == '.overflow' and WorkspaceSpill().cleanup_after is None
    assert 'which deletes a payload 7 days after it was written' in README
    for command in ('ls', 'stats', 'show', 'prune'):
        assert command in _COMMANDS and f'`pyai-overflow {command}' in README
