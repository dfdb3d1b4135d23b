"""`make demo` runs end to end on the scripted model and prints what a new user should see."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from examples import demo


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
