"""The virtual environments the hot-path benchmark runs in: this project as a user installs it, and upstream.

Each is built under `bench/.out/` (git-ignored) by the benchmark itself, from the registry pip is configured with:

- `venv-plain`: `pip install <this checkout>`, no extras and no dev group, what `pip install
  pydantic-ai-harness-context` brings;
- `venv-pure`: the same, with the accelerators (`hyperscan`, `numpy`) uninstalled: what a platform without their
  wheels runs;
- `venv-upstream-0.62.0-slim-X`: upstream `pydantic-ai-harness==0.62.0` on our `pydantic-ai-slim` version.

The project is reinstalled into its venvs on every run (pip always reinstalls a local directory), so the figures
are those of the checkout's current code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / 'bench' / '.out'
UPSTREAM_VERSION = '0.62.0'
ACCELERATORS = ('hyperscan', 'numpy')
"""The default dependencies (where wheels exist) the spill hot path uses when they are installed."""


@dataclass(frozen=True)
class Venv:
    """An interpreter the benchmark runs one column in, or why that column is skipped."""

    name: str
    """The column: `'plain'`, `'pure'` or `'upstream'`."""

    python: Path | None
    """Its interpreter, or `None` when it could not be built."""

    note: str
    """How it was installed, or why it could not be."""


def clean_env() -> dict[str, str]:
    """The environment without `PYTHONPATH`, so a venv imports its installed `pydantic_ai_harness`, not this checkout."""
    return {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}


def _python(venv: Path) -> Path:
    return venv / ('Scripts' if os.name == 'nt' else 'bin') / 'python'


def _call(command: list[str], check: bool = True) -> int:
    """Run `command` away from this checkout (and its PYTHONPATH), or `pydantic_ai_harness` would be the checkout's."""
    completed = subprocess.run(command, check=check, capture_output=True, cwd=tempfile.gettempdir(), env=clean_env())
    return completed.returncode


def _failure(name: str, exc: Exception) -> Venv:
    stderr = getattr(exc, 'stderr', b'') or b''
    lines = [line for line in stderr.decode(errors='replace').splitlines() if not line.startswith('WARNING:')]
    reason = (lines[-1:] or [str(exc)])[0][:200]
    return Venv(name, None, f'could not be installed ({reason}); its column is skipped')


def _pip(python: Path) -> list[str]:
    return [str(python), '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']


def project_venv(name: str, *, without: tuple[str, ...] = ()) -> Venv:
    """`bench/.out/venv-NAME` with this checkout installed as a user installs it (`pip install .`), less `without`."""
    venv = OUT / f'venv-{name}'
    python = _python(venv)
    try:
        if not python.exists():
            _call([sys.executable, '-m', 'venv', str(venv)])
        _call([*_pip(python), str(REPO)])
        if without:
            _call([str(python), '-m', 'pip', 'uninstall', '--quiet', '--yes', *without])
    except (OSError, subprocess.CalledProcessError) as exc:
        return _failure(name, exc)
    shown = f'pip install . && pip uninstall {" ".join(without)}' if without else 'pip install .'
    return Venv(name, python, f'`{shown}` into {venv.relative_to(REPO)}')


def upstream_venv() -> Venv:
    """A venv holding upstream 0.62 on our pydantic-ai-slim, installed if needed."""
    slim = metadata.version('pydantic-ai-slim')
    venv = OUT / f'venv-upstream-{UPSTREAM_VERSION}-slim-{slim}'
    python = _python(venv)
    probe = [str(python), '-c', 'import pydantic_ai_harness.tool_output_limits']
    if python.exists() and _call(probe, check=False) == 0:
        return Venv('upstream', python, f'upstream {UPSTREAM_VERSION} from {venv.relative_to(REPO)}')
    pip = _pip(python)
    try:
        _call([sys.executable, '-m', 'venv', str(venv)])
        # Upstream pins an older pydantic-ai-slim: install its other requirements, then it with `--no-deps`.
        needs = [f'pydantic-ai-slim=={slim}', 'genai-prices>=0.0.71', 'httpx>=0.28.1', 'json-repair>=0.58.0']
        _call([*pip, *needs])
        _call([*pip, '--no-deps', f'pydantic-ai-harness=={UPSTREAM_VERSION}'])
        _call(probe)
    except (OSError, subprocess.CalledProcessError) as exc:
        return _failure('upstream', exc)
    return Venv('upstream', python, f'upstream {UPSTREAM_VERSION} installed into {venv.relative_to(REPO)}')
