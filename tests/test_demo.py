"""`make demo` runs end to end on the scripted model and prints what a new user should see."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import pytest

from examples import demo
from examples.demo_handoffs import run_delegation_demo


def test_demo_runs_and_shows_the_savings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    assert demo.main([]) == 0
    assert list(tmp_path.iterdir()) == []  # its store was removed: nothing is left behind
    out = capsys.readouterr().out
    assert 'model calls grep_tool_result' in out
    assert 'Tokens sent to the model' in out
    assert out.count('2/2') == 2  # both configurations find both facts
    assert 'delegation with pydantic_ai_harness.handoffs' in out


def test_demo_with_a_real_model_and_no_key_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv('ANTHROPIC_API_KEY', raising=False)
    assert demo.main(['--model', 'anthropic:claude-sonnet-4-5']) == 2
    assert 'needs ANTHROPIC_API_KEY' in capsys.readouterr().out


def test_the_delegation_headers_count_what_they_show(capsys: pytest.CaptureFixture[str]) -> None:
    """Each section's header gives its messages and its parts, and a row is shown per part."""
    asyncio.run(run_delegation_demo())
    sections = re.split(r'\n(?=\S)', capsys.readouterr().out.strip())
    assert len(sections) == 3
    for section in sections:
        header, *rows = section.splitlines()
        counts = re.search(r'\((\d+) messages, (\d+) parts, one per row\):$', header)
        assert counts is not None, header
        parts = [row for row in rows if row.startswith(('  request ', '  response '))]
        assert int(counts.group(2)) == len(parts), section
        assert 'one summary' not in header
    nested = sections[2]
    assert nested.count('here is the conversation so far') == 2  # so the header says summaries, plural
    assert 'folded into summaries' in nested.splitlines()[0]
