"""Upstream `pydantic-ai-harness` and this project installed in one environment: the package says so.

Each test builds a real, isolated virtualenv (no system site packages) and installs the two real wheels into it
with pip, in one order or the other: upstream 0.62.0 from the package registry, this project's built offline.
Both are installed with `--no-deps`; their dependencies (pydantic-ai and the rest) come from the test's own
environment through a `.pth` file naming a directory of links to its site-packages, minus every
`pydantic_ai_harness` file and distribution, so the only copies the venv sees are the ones pip installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pydantic_ai_harness._clash import MIGRATION_GUIDE

from ._dist import link_dependencies
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


def download(requirement: str, into: Path) -> Path:
    """The wheel of `requirement` (no dependencies), downloaded from the package registry into `into`."""
    fetched = subprocess.run(
        [sys.executable, '-m', 'pip', 'download', '--quiet', '--no-deps', '--only-binary=:all:', requirement],
        check=False,
        capture_output=True,
        text=True,
        cwd=into,
    )
    assert fetched.returncode == 0, f'downloading {requirement} needs the package registry:\n{fetched.stderr}'
    [wheel] = into.glob('*.whl')
    return wheel


def fetch_wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """This project's wheel, built; upstream's, downloaded; and the dependencies' directory of links."""
    ours = build_wheel(tmp_path_factory.mktemp('ours'))
    upstream = download(UPSTREAM, tmp_path_factory.mktemp('upstream'))
    return Wheels(ours, upstream, link_dependencies(tmp_path_factory.mktemp('dependencies')))


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
        return self.command([str(self.python), '-c', code])

    def shell(self, line: str) -> subprocess.CompletedProcess[str]:
        """A shell command line (such as the fix a message gives), run as `run` runs Python."""
        return self.command(['/bin/sh', '-c', line])

    def command(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key not in ('PYTHONPATH', 'PYTHONWARNINGS')}
        return subprocess.run(
            argv,
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


FIX = re.compile(r'to keep pydantic-ai-harness-context, run `([^`]+)`')


def _assert_names_both_and_the_fix(text: str, venv: Venv) -> str:
    """The clash message names both packages and one command line that fixes it; that command line, returned."""
    assert 'pydantic-ai-harness 0.62.0 (the official harness) and pydantic-ai-harness-context 0.1.0' in text
    assert 'both install the import package `pydantic_ai_harness`' in text
    [fix] = FIX.findall(text)
    assert fix == (
        f'{venv.python} -m pip uninstall -y pydantic-ai-harness pydantic-ai-harness-context && '
        f'{venv.python} -m pip install {venv.wheels.ours}'
    )
    assert f'{MIGRATION_GUIDE}' in text
    return fix


def _clash_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if 'PackageClashWarning: ' in line or 'pyai-overflow: warning' in line]


def test_installed_over_upstream_the_import_warns_and_says_what_to_do(venv: Venv) -> None:
    venv.install(venv.wheels.upstream)
    venv.install(venv.wheels.ours)

    imported = venv.run('from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput')
    assert imported.returncode == 0, imported.stderr
    [warning] = _clash_warnings(imported.stderr)
    assert warning.startswith('<string>:1: PackageClashWarning: ')  # the line that imported, not the package's
    assert "pydantic-ai-harness-context was installed last: upstream's top-level names" in warning
    _assert_names_both_and_the_fix(warning, venv)

    # What the warning is about: upstream's top-level names are gone from the shared `__init__.py`.
    upstream_import = venv.run('from pydantic_ai_harness import ToolOutputLimits')
    assert upstream_import.returncode != 0
    assert (
        "ImportError: `ToolOutputLimits` is the official pydantic-ai-harness package's name" in upstream_import.stderr
    )
    _assert_names_both_and_the_fix(upstream_import.stderr.splitlines()[-1], venv)


UPSTREAM_LAST = 'pydantic-ai-harness was installed last: `pydantic_ai_harness.overflowing_tool_output.OverflowingToolOutput` is now its `ToolOutputLimits`'


def test_upstream_installed_over_this_project_is_reported_by_every_module_upstream_does_not_ship(venv: Venv) -> None:
    """Upstream's `__init__.py` files won; `handoffs`, `stores`, `temporal` and the CLI are still ours, and say so."""
    venv.install(venv.wheels.ours)
    venv.install(venv.wheels.upstream)

    shadowed = venv.run('from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput as O; print(O)')
    assert 'tool_output_limits' in shadowed.stdout  # upstream's deprecated alias of ToolOutputLimits
    assert _clash_warnings(shadowed.stderr) == []  # no code of ours ran: docs/migration.md says so

    for module in (
        'pydantic_ai_harness.handoffs',
        'pydantic_ai_harness.overflowing_tool_output.stores',
        'pydantic_ai_harness.overflowing_tool_output.temporal',
    ):
        imported = venv.run(f'import {module}')
        assert imported.returncode == 0, imported.stderr
        [warning] = _clash_warnings(imported.stderr)
        assert warning.startswith('<string>:1: PackageClashWarning: '), warning
        assert UPSTREAM_LAST in warning
        _assert_names_both_and_the_fix(warning, venv)

    cli = venv.run(
        'import sys, tempfile\n'
        'from pydantic_ai_harness.overflowing_tool_output._cli import main\n'
        "sys.exit(main(['--root', tempfile.mkdtemp(), 'ls']))"
    )
    assert cli.returncode == 0, cli.stderr  # it used to crash importing `__version__` from upstream's __init__
    [said] = _clash_warnings(cli.stderr)  # once, though both the import and the CLI look
    assert UPSTREAM_LAST in said


def test_the_one_command_the_message_gives_fixes_it_in_either_order(venv: Venv, tmp_path: Path) -> None:
    for first, last in ((venv.wheels.upstream, venv.wheels.ours), (venv.wheels.ours, venv.wheels.upstream)):
        venv.install(first)
        venv.install(last)
        fix = _assert_names_both_and_the_fix(venv.run(CLASH_CHECK).stdout, venv)
        fixed = venv.shell(fix)
        assert fixed.returncode == 0, fixed.stderr

        imported = venv.run(
            'import warnings; warnings.simplefilter("error")\n'
            'from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput\n'
            'from pydantic_ai_harness.handoffs import HandoffHistory\n'
            'from pydantic_ai_harness._clash import check_clash\n'
            'print(OverflowingToolOutput.__module__, check_clash())'
        )
        assert imported.returncode == 0, imported.stderr
        assert imported.stdout.split() == ['pydantic_ai_harness.overflowing_tool_output._capability', 'None']


def test_uninstalling_upstream_beside_this_project_names_the_cause_and_the_fix(venv: Venv) -> None:
    """Why the advice is to uninstall both: the shared `__init__.py` files go with whichever is uninstalled."""
    venv.install(venv.wheels.ours)
    venv.install(venv.wheels.upstream)
    venv.pip('uninstall', '--yes', '--quiet', 'pydantic-ai-harness')

    broken = venv.run('from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput')
    assert "cannot import name 'OverflowingToolOutput'" in broken.stderr and '(unknown location)' in broken.stderr

    # `stores` is still ours and works: importing it warns, naming the cause and the fix.
    imported = venv.run('import pydantic_ai_harness.overflowing_tool_output.stores')
    assert imported.returncode == 0, imported.stderr
    [warning] = _clash_warnings(imported.stderr)
    # `handoffs` is ours too, and needs the deleted files: its ImportError says the same, where Python's would not.
    handoffs = venv.run('import pydantic_ai_harness.handoffs')
    assert handoffs.returncode != 0 and _clash_warnings(handoffs.stderr) == []
    assert handoffs.stderr.splitlines()[-1] == f'ImportError: {warning.split("PackageClashWarning: ", 1)[1]}'
    assert (
        'pydantic-ai-harness-context 0.1.0 is installed, but `pydantic_ai_harness/__init__.py` and '
        '`pydantic_ai_harness/overflowing_tool_output/__init__.py` are missing: uninstalling pydantic-ai-harness'
    ) in warning
    assert '"cannot import name ... (unknown location)"' in warning
    [fix] = re.findall(r'Fix it with one command: `([^`]+)`', warning)
    assert fix == f'{venv.python} -m pip install --force-reinstall --no-deps {venv.wheels.ours}'
    assert venv.shell(fix).returncode == 0
    assert venv.run('from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput').returncode == 0


def test_uninstalling_this_project_beside_upstream_breaks_upstream(venv: Venv) -> None:
    venv.install(venv.wheels.upstream)
    venv.install(venv.wheels.ours)
    venv.pip('uninstall', '--yes', '--quiet', 'pydantic-ai-harness-context')

    upstream_import = venv.run('from pydantic_ai_harness import ToolOutputLimits')
    assert upstream_import.returncode != 0
    assert "cannot import name 'ToolOutputLimits'" in upstream_import.stderr


def test_upstream_s_pydantic_ai_downgrade_is_named_by_handoffs(tmp_path: Path, wheels: Wheels) -> None:
    """`pip install pydantic-ai-harness` after this project installs its pin, pydantic-ai-slim 2.62.0, which lacks
    names `handoffs` imports (`CapabilityLoadDeltaPart`): the import fails naming the cause and the fix."""
    downloads = tmp_path / 'downloads'
    downloads.mkdir()
    old: list[Path] = []
    for name in ('pydantic-ai-slim', 'pydantic-graph'):
        (downloads / name).mkdir()
        old.append(download(f'{name}==2.62.0', downloads / name))
    dependencies = link_dependencies(tmp_path / 'dependencies', leave_out=('pydantic_ai', 'pydantic_graph'))
    venv = make_venv(tmp_path / 'venv', Wheels(wheels.ours, wheels.upstream, dependencies))
    venv.install(wheels.ours)
    venv.install(wheels.upstream)
    for wheel in old:
        venv.install(wheel)

    imported = venv.run('import pydantic_ai_harness.handoffs')
    assert imported.returncode != 0
    error = imported.stderr.splitlines()[-1]
    assert error.startswith(
        'ImportError: pydantic-ai-slim 2.62.0 is installed, and pydantic-ai-harness-context needs pydantic-ai-slim '
        '2.78 or later: pydantic-ai-harness 0.62.0, installed in this environment too, pins pydantic-ai-slim==2.62.0, '
        'so installing it downgraded pydantic-ai'
    ), error
    [fix] = re.findall(r'Fix both with one command: `([^`]+)`', error)
    assert fix == (
        f'{venv.python} -m pip uninstall -y pydantic-ai-harness pydantic-ai-harness-context && '
        f'{venv.python} -m pip install {wheels.ours}'
    )
    without_our_check = venv.run('import pydantic_ai.messages as m; m.CapabilityLoadDeltaPart')
    assert 'CapabilityLoadDeltaPart' in without_our_check.stderr.splitlines()[-1]
