"""Upstream `pydantic-ai-harness` and this project installed in one environment: the package says so.

Each test builds a real, isolated virtualenv (no system site packages) and installs the two real wheels into it
with pip, in one order or the other: upstream 0.62.0 from the package registry, this project's built offline.
Both are installed with `--no-deps`; their dependencies (pydantic-ai and the rest) come from the test's own
environment through a `.pth` file naming a directory of links to its site-packages, minus every
`pydantic_ai_harness` file and distribution, so the only copies the venv sees are the ones pip installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from .test_packaging import build_wheel

UPSTREAM = 'pydantic-ai-harness==0.62.0'

CLASH_CHECK = """
import warnings
warnings.simplefilter('always')
from pydantic_ai_harness._clash import check_clash
print(check_clash())
"""


@dataclass(frozen=True)
class Wheels:
    ours: Path
    upstream: Path
    dependencies: Path
    """A directory of links to this environment's site-packages, without any `pydantic_ai_harness` copy."""


def fetch_wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """This project's wheel, built; upstream's, downloaded; and the dependencies' directory of links."""
    ours = build_wheel(tmp_path_factory.mktemp('ours'))
    download = tmp_path_factory.mktemp('upstream')
    fetched = subprocess.run(
        [sys.executable, '-m', 'pip', 'download', '--quiet', '--no-deps', UPSTREAM, '-d', str(download)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert fetched.returncode == 0, f'downloading {UPSTREAM} needs the package registry:\n{fetched.stderr}'
    [upstream] = download.glob('pydantic_ai_harness-*.whl')
    dependencies = tmp_path_factory.mktemp('dependencies')
    site = Path(sysconfig.get_paths()['purelib'])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(('pydantic_ai_harness', '_editable_impl_pydantic_ai_harness')) or name.endswith('.pth'):
            continue
        (dependencies / entry.name).symlink_to(entry)
    return Wheels(ours, upstream, dependencies)


@pytest.fixture(scope='module')
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    return fetch_wheels(tmp_path_factory)


@dataclass
class Venv:
    root: Path
    wheels: Wheels

    @property
    def python(self) -> Path:
        return self.root / 'bin' / 'python'

    def pip(self, *args: str) -> None:
        command = [sys.executable, '-m', 'pip', '--python', str(self.python), '--disable-pip-version-check', *args]
        subprocess.run(command, check=True, capture_output=True)

    def install(self, wheel: Path) -> None:
        self.pip('install', '--quiet', '--no-deps', '--no-compile', str(wheel))

    def run(self, code: str) -> subprocess.CompletedProcess[str]:
        """`python -c code` in the venv, from a directory holding no package, with no PYTHONPATH."""
        env = {key: value for key, value in os.environ.items() if key not in ('PYTHONPATH', 'PYTHONWARNINGS')}
        return subprocess.run(
            [str(self.python), '-c', code],
            check=False,
            capture_output=True,
            text=True,
            cwd=self.root,
            env=env,
            timeout=120,
        )


def make_venv(root: Path, wheels: Wheels) -> Venv:
    """An isolated venv at `root` with nothing installed, seeing the dependencies through a `.pth` file."""
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(root)], check=True)
    [site] = (root / 'lib').glob('python3*/site-packages')
    (site / 'dependencies.pth').write_text(f'{wheels.dependencies}\n')
    return Venv(root, wheels)


@pytest.fixture
def venv(tmp_path: Path, wheels: Wheels) -> Venv:
    return make_venv(tmp_path / 'venv', wheels)


def _assert_says_what_to_do(text: str) -> None:
    assert 'pydantic-ai-harness 0.62.0 (the official harness) and pydantic-ai-harness-context 0.1.0' in text
    assert 'both install the import package `pydantic_ai_harness`' in text
    assert 'pip uninstall -y pydantic-ai-harness pydantic-ai-harness-context' in text
    assert 'then `pip install pydantic-ai-harness-context`' in text
    assert 'docs/migration.md' in text


def test_installed_over_upstream_the_import_warns_and_says_what_to_do(venv: Venv) -> None:
    venv.install(venv.wheels.upstream)
    venv.install(venv.wheels.ours)

    imported = venv.run('from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput')
    assert imported.returncode == 0, imported.stderr
    assert 'PackageClashWarning' in imported.stderr
    _assert_says_what_to_do(imported.stderr)
    assert imported.stderr.count('PackageClashWarning') == 1

    # What the warning is about: upstream's top-level names are gone from the shared `__init__.py`.
    upstream_import = venv.run('from pydantic_ai_harness import ToolOutputLimits')
    assert upstream_import.returncode != 0
    assert (
        "ImportError: `ToolOutputLimits` is the official pydantic-ai-harness package's name" in upstream_import.stderr
    )
    _assert_says_what_to_do(upstream_import.stderr.splitlines()[-1])


def test_upstream_installed_over_this_project_is_reported_to_the_cli(venv: Venv) -> None:
    """Upstream's `__init__.py` won, so this project's does not run; the check the CLI prints still works."""
    venv.install(venv.wheels.ours)
    venv.install(venv.wheels.upstream)

    checked = venv.run(CLASH_CHECK)
    assert checked.returncode == 0, checked.stderr
    _assert_says_what_to_do(checked.stdout)

    shadowed = venv.run('from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput as O; print(O)')
    assert 'tool_output_limits' in shadowed.stdout  # upstream's deprecated alias of ToolOutputLimits

    cli = venv.run(
        'import sys, tempfile\n'
        'from pydantic_ai_harness.overflowing_tool_output._cli import main\n'
        "sys.exit(main(['--root', tempfile.mkdtemp(), 'ls']))"
    )
    assert cli.returncode == 0, cli.stderr  # it used to crash importing `__version__` from upstream's __init__
    [said] = [line for line in cli.stderr.splitlines() if line.startswith('pyai-overflow: warning: ')]
    _assert_says_what_to_do(said)


def test_following_the_advice_leaves_a_working_install_and_no_warning(venv: Venv) -> None:
    venv.install(venv.wheels.upstream)
    venv.install(venv.wheels.ours)
    venv.pip('uninstall', '--yes', '--quiet', 'pydantic-ai-harness', 'pydantic-ai-harness-context')
    venv.install(venv.wheels.ours)

    imported = venv.run(
        'import warnings; warnings.simplefilter("error")\n'
        'from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput\n'
        'from pydantic_ai_harness.handoffs import HandoffHistory\n'
        'from pydantic_ai_harness._clash import check_clash\n'
        'print(OverflowingToolOutput.__module__, check_clash())'
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == ['pydantic_ai_harness.overflowing_tool_output._capability', 'None']


def test_uninstalling_one_of_the_two_breaks_the_other(venv: Venv) -> None:
    """Why the advice is to uninstall both: the shared `__init__.py` goes with whichever is uninstalled."""
    venv.install(venv.wheels.upstream)
    venv.install(venv.wheels.ours)
    venv.pip('uninstall', '--yes', '--quiet', 'pydantic-ai-harness-context')

    upstream_import = venv.run('from pydantic_ai_harness import ToolOutputLimits')
    assert upstream_import.returncode != 0
    assert "cannot import name 'ToolOutputLimits'" in upstream_import.stderr
