"""Run `sdk_oracle_cases.py` under the OpenAI Agents SDK, in a virtual environment the tests build once.

`openai-agents==0.24.0` cannot join the dev group: it needs `websockets<17`, and the dev lock pins
`websockets==17.4`. So the oracle gets a venv of its own, built from `sdk-oracle-requirements.txt` (exact pins) under
the user's cache directory, keyed by that file's hash, and reused by later runs. Installing reaches the package
registry pip is configured with, once; running the cases reaches nothing (the models are scripted, tracing is off).

Where the venv cannot be built (no registry), the oracle tests are skipped, saying why; under CI (`CI` set) they
fail instead, so a green CI always means the comparison ran.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / 'sdk-oracle-requirements.txt'
CASES = HERE / 'sdk_oracle_cases.py'


def _venv_dir() -> Path:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache')
    return cache / 'pydantic-ai-harness-context' / f'openai-agents-oracle-{digest}'


def _python(venv: Path) -> Path:
    return venv / ('Scripts' if os.name == 'nt' else 'bin') / 'python'


def _clean_env() -> dict[str, str]:
    """The environment without `PYTHONPATH` (this checkout stays out of the SDK's venv) and without API keys."""
    return {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'OPENAI_API_KEY')}


def _build(venv: Path) -> Path:
    python = _python(venv)
    ready = venv / '.installed'
    if ready.exists():
        return python
    subprocess.run([sys.executable, '-m', 'venv', '--clear', str(venv)], check=True, capture_output=True)
    command = [str(python), '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', str(REQUIREMENTS)]
    subprocess.run(command, check=True, capture_output=True, env=_clean_env(), timeout=600)
    ready.touch()
    return python


def _unavailable(reason: str) -> None:
    message = f'the OpenAI Agents SDK oracle could not run: {reason}'
    if os.environ.get('CI'):
        pytest.fail(message)
    pytest.skip(message)


@functools.cache
def _results() -> dict[str, Any] | str:
    try:
        python = _build(_venv_dir())
    except (OSError, subprocess.SubprocessError) as exc:
        stderr = getattr(exc, 'stderr', b'') or b''
        return f'building its venv failed ({stderr.decode(errors="replace").strip()[-300:] or exc!r})'
    completed = subprocess.run(
        [str(python), str(CASES)],
        check=False,
        capture_output=True,
        env=_clean_env(),
        cwd=tempfile.gettempdir(),
        timeout=300,
    )
    if completed.returncode != 0:
        return f'the SDK cases failed: {completed.stderr.decode(errors="replace")[-2000:]}'
    return json.loads(completed.stdout)


def sdk_results() -> dict[str, Any]:
    """What the SDK's agents were sent and who answered, by case (built and run once per test session)."""
    results = _results()
    if isinstance(results, str):
        _unavailable(results)
    assert not isinstance(results, str)
    return results
