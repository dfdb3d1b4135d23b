"""Detect the official `pydantic-ai-harness` installed beside this distribution, and say the one command that fixes it.

Both distributions install the import package `pydantic_ai_harness`, and three of its files are in both wheels:
`pydantic_ai_harness/__init__.py`, `pydantic_ai_harness/py.typed` and `pydantic_ai_harness/overflowing_tool_output/
__init__.py` (upstream ships the last as an alias of its `ToolOutputLimits`). pip does not notice: the one installed
last overwrites them and exits 0, and uninstalling either deletes them. Nothing at install time can refuse it (a
wheel runs no code), so every module of this distribution that upstream does not ship checks on import (`handoffs`,
`stores`, `temporal`, the CLI), and so do the shared `__init__.py` files while they are ours, the capability's
construction and the query tools: the first to run warns, once per process, with a `PackageClashWarning`.

What no code of this distribution can see: with upstream installed last, a program that imports only
`pydantic_ai_harness` and `pydantic_ai_harness.overflowing_tool_output` runs upstream's two files and nothing of
ours, so it gets upstream's engine without a word (docs/migration.md says so).

The installed distributions are found by their `*.dist-info` directories on `sys.path`, as `importlib.metadata`
finds them, without importing it (it costs the CLI's `--version` more than the rest of its start-up).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Any, cast

from ._caller import warn_at_caller

__all__ = (
    'DISTRIBUTION',
    'MIGRATION_GUIDE',
    'MIN_PYDANTIC_AI',
    'UPSTREAM_DISTRIBUTION',
    'Distribution',
    'PackageClashWarning',
    'check_clash',
    'claim_clash_report',
    'find_distribution',
    'fix_command',
    'installed_version',
    'pydantic_ai_problem',
    'require_pydantic_ai',
    'require_shared_files',
    'upstream_name_error',
    'warn_on_clash',
)

UPSTREAM_DISTRIBUTION = 'pydantic-ai-harness'
"""The official harness's distribution: its import package is `pydantic_ai_harness` too."""

DISTRIBUTION = 'pydantic-ai-harness-context'
"""This project's distribution."""

MIGRATION_GUIDE = (
    'https://github.com/pydantic-ai-harness-context/pydantic-ai-harness-context/blob/main/docs/migration.md'
)
"""The migration guide (docs/migration.md), where a reader of an error message can open it: the wheel has no docs."""

MIN_PYDANTIC_AI = (2, 78)
"""The oldest `pydantic-ai-slim` this distribution runs on (pyproject.toml's floor)."""

_UPSTREAM_PYDANTIC_AI = '2.62.0'
"""The `pydantic-ai-slim` that upstream `pydantic-ai-harness` 0.62 pins."""

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
"""The `pydantic_ai_harness` directory this module runs from (both distributions' files are in it)."""

SHARED_FILES = ('__init__.py', os.path.join('overflowing_tool_output', '__init__.py'))
"""The Python files both wheels install, relative to `pydantic_ai_harness/`."""


class PackageClashWarning(UserWarning):
    """`pydantic-ai-harness` and `pydantic-ai-harness-context` are (or were) installed in one environment."""


@dataclass(frozen=True)
class Distribution:
    """An installed distribution, found by its `*.dist-info` directory."""

    name: str
    """The distribution's name, as asked for."""

    version: str
    """Its version, from the directory's name."""

    dist_info: str
    """The `*.dist-info` directory."""


def _normal(name: str) -> str:
    return name.lower().replace('-', '_').replace('.', '_')


def find_distribution(name: str) -> Distribution | None:
    """The distribution `name` as the first `sys.path` entry holding its `*.dist-info` has it; `None` if none does."""
    wanted = _normal(name)
    for entry in sys.path:
        try:
            names = os.listdir(entry or '.')
        except OSError:
            continue
        for filename in names:
            if not filename.endswith('.dist-info'):
                continue
            project, sep, version = filename.removesuffix('.dist-info').rpartition('-')
            if sep and _normal(project) == wanted:
                return Distribution(name, version, os.path.join(entry or '.', filename))
    return None


def installed_version() -> str:
    """This distribution's version, from its own metadata: right even when upstream's `__init__.py` replaced ours."""
    ours = find_distribution(DISTRIBUTION)
    return ours.version if ours is not None else 'unknown (not installed)'


def _python() -> str:
    return shlex.quote(sys.executable or 'python')


def _install_argument(ours: Distribution | None) -> str:
    """What to pass `pip install` to install this distribution again the way it was installed (PEP 610)."""
    if ours is None:
        return DISTRIBUTION
    try:
        with open(os.path.join(ours.dist_info, 'direct_url.json'), encoding='utf-8') as file:
            origin: dict[str, Any] = json.load(file)
    except FileNotFoundError:
        return f'{DISTRIBUTION}=={ours.version}'  # from a package index
    except (OSError, ValueError):
        origin = {}
    url = origin.get('url') if isinstance(origin, dict) else None  # pyright: ignore[reportUnnecessaryIsInstance]
    if not isinstance(url, str):
        return shlex.quote(f'<the wheel or checkout {DISTRIBUTION} was installed from>')
    dir_info, vcs = origin.get('dir_info'), origin.get('vcs_info')
    if url.startswith('file://'):
        from urllib.parse import unquote, urlsplit

        path = unquote(urlsplit(url).path)
        if not os.path.exists(path):
            return shlex.quote(f'<the wheel or checkout {DISTRIBUTION} was installed from; {path} is gone>')
        editable = isinstance(dir_info, dict) and cast(dict[str, Any], dir_info).get('editable') is True
        return f'-e {shlex.quote(path)}' if editable else shlex.quote(path)
    if isinstance(vcs, dict):
        vcs_info = cast(dict[str, Any], vcs)
        commit = vcs_info.get('commit_id')
        at = f'@{commit}' if isinstance(commit, str) else ''
        return shlex.quote(f'{DISTRIBUTION} @ {vcs_info.get("vcs")}+{url}{at}')
    return shlex.quote(url)


def fix_command(ours: Distribution | None = None) -> str:
    """The one command line that leaves this distribution installed alone, as it was installed, with its dependencies.

    Both distributions are uninstalled (the shared files go with whichever is uninstalled), then this one is
    installed again, which also brings `pydantic-ai-slim` back up to the version it needs.
    """
    ours = ours if ours is not None else find_distribution(DISTRIBUTION)
    python = _python()
    if ours is None:  # this project runs from a checkout on the path: only upstream's files are installed
        return f'{python} -m pip uninstall -y {UPSTREAM_DISTRIBUTION}'
    return (
        f'{python} -m pip uninstall -y {UPSTREAM_DISTRIBUTION} {DISTRIBUTION} && '
        f'{python} -m pip install {_install_argument(ours)}'
    )


def _upstream_is_live() -> bool:
    """Whether `pydantic_ai_harness.overflowing_tool_output/__init__.py` on disk is upstream's alias module."""
    try:
        with open(os.path.join(_PACKAGE, SHARED_FILES[1]), encoding='utf-8') as file:
            return 'OverflowingToolOutput = ToolOutputLimits' in file.read(8192)
    except OSError:
        return False


@functools.cache
def check_clash() -> str | None:
    """What went wrong and the one command that fixes it, when upstream `pydantic-ai-harness` is installed beside
    this distribution, or was and its uninstall took the shared files with it; else `None`.

    Found from the installed distributions' metadata and the shared files on disk, once per process.
    """
    upstream = find_distribution(UPSTREAM_DISTRIBUTION)
    ours = find_distribution(DISTRIBUTION)
    if upstream is None:
        return _missing_shared_files(ours)
    ours_text = f'{DISTRIBUTION} {ours.version}' if ours else f'{DISTRIBUTION} (from a source checkout)'
    if _upstream_is_live():
        what = (
            f'{UPSTREAM_DISTRIBUTION} was installed last: `pydantic_ai_harness.overflowing_tool_output.'
            f'OverflowingToolOutput` is now its `ToolOutputLimits`, so code written for {DISTRIBUTION} runs with '
            "upstream's behaviour (`read_tool_result(offset=N)` skips N lines, no `grep_tool_result`, a str "
            '`base_dir` makes every spill a truncation)'
        )
    else:
        what = (
            f"{DISTRIBUTION} was installed last: upstream's top-level names (`from pydantic_ai_harness import "
            'ToolOutputLimits`, ...) are gone'
        )
    return (
        f'{UPSTREAM_DISTRIBUTION} {upstream.version} (the official harness) and {ours_text} are both installed, '
        'and both install the import package `pydantic_ai_harness`: the one installed last overwrote the '
        f"other's `__init__.py` files, and uninstalling either one deletes them. {what}. Keep one of them; to keep "
        f'{DISTRIBUTION}, run `{fix_command(ours)}` (to keep the official harness instead: `{_python()} -m pip '
        f'uninstall -y {UPSTREAM_DISTRIBUTION} {DISTRIBUTION} && {_python()} -m pip install '
        f'{UPSTREAM_DISTRIBUTION}`). Moving from `ToolOutputLimits` to `OverflowingToolOutput`: {MIGRATION_GUIDE}'
    )


def _missing_shared_files(ours: Distribution | None) -> str | None:
    """The problem when this distribution is installed but the files it shares with upstream are gone."""
    if ours is None:
        return None
    missing = [name for name in SHARED_FILES if not os.path.exists(os.path.join(_PACKAGE, name))]
    if not missing:
        return None
    shown = ' and '.join(f'`pydantic_ai_harness/{name}`' for name in missing)
    verb = 'are' if len(missing) > 1 else 'is'
    return (
        f'{DISTRIBUTION} {ours.version} is installed, but {shown} {verb} missing: uninstalling {UPSTREAM_DISTRIBUTION}, '
        'which installs the same files, deleted them, so `from pydantic_ai_harness.overflowing_tool_output import '
        '...` fails with "cannot import name ... (unknown location)". Fix it with one command: '
        f'`{_python()} -m pip install --force-reinstall --no-deps {_install_argument(ours)}`'
    )


def require_shared_files() -> None:
    """Raise `ImportError` naming the cause and the fix when the files this distribution shares with upstream are
    gone (for a module that needs them: Python's own error would say "(unknown location)" and nothing more).
    """
    problem = _missing_shared_files(find_distribution(DISTRIBUTION))
    if problem is not None:
        _reported.append(True)  # said here: no warning repeats it
        raise ImportError(problem, name='pydantic_ai_harness')


_reported: list[bool] = []
"""Holds `True` once the problem `check_clash()` finds has been reported in this process."""


def warn_on_clash() -> None:
    """Warn once per process, with a `PackageClashWarning` filed under the caller's code, when `check_clash()`
    finds a problem.
    """
    message = claim_clash_report()
    if message is not None:
        warn_at_caller(message, PackageClashWarning)


def claim_clash_report() -> str | None:
    """`check_clash()`'s message for the one caller that reports it in this process (the CLI prints it), else `None`."""
    if _reported:
        return None
    message = check_clash()
    if message is not None:
        _reported.append(True)
    return message


def _release(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version: `2.62.0` -> (2, 62, 0), `2.78.0rc1` -> (2, 78, 0)."""
    parts: list[int] = []
    for piece in version.split('.'):
        number = re.match(r'\d+', piece)
        if number is None:
            break
        parts.append(int(number.group()))
        if number.end() != len(piece):
            break
    return tuple(parts)


@functools.cache
def pydantic_ai_problem() -> str | None:
    """Why the installed `pydantic-ai-slim` is too old for this distribution, with the cause and the fix; `None` if
    it is recent enough (or not installed as a distribution: a source checkout on the path).
    """
    slim = find_distribution('pydantic-ai-slim')
    if slim is None or _release(slim.version) >= MIN_PYDANTIC_AI:
        return None
    floor = '.'.join(map(str, MIN_PYDANTIC_AI))
    upstream = find_distribution(UPSTREAM_DISTRIBUTION)
    problem = (
        f'pydantic-ai-slim {slim.version} is installed, and {DISTRIBUTION} needs pydantic-ai-slim {floor} or later'
    )
    if upstream is not None:
        return (
            f'{problem}: {UPSTREAM_DISTRIBUTION} {upstream.version}, installed in this environment too, pins '
            f'pydantic-ai-slim=={_UPSTREAM_PYDANTIC_AI}, so installing it downgraded pydantic-ai (and it shares '
            f'files with {DISTRIBUTION}). Fix both with one command: `{_fix_downgrade()}`'
        )
    return f'{problem}. Fix it with one command: `{_python()} -m pip install "pydantic-ai-slim>={floor},<3"`'


def _fix_downgrade() -> str:
    if find_distribution(DISTRIBUTION) is not None:
        return fix_command()  # reinstalling this project brings pydantic-ai-slim back up too
    floor = '.'.join(map(str, MIN_PYDANTIC_AI))
    return f'{fix_command()} && {_python()} -m pip install "pydantic-ai-slim>={floor},<3"'


def require_pydantic_ai() -> None:
    """Raise `ImportError` saying what to do when `pydantic_ai_problem()` finds the installed pydantic-ai too old."""
    problem = pydantic_ai_problem()
    if problem is not None:
        raise ImportError(problem, name='pydantic_ai')


_UPSTREAM_NAMES = {
    'ToolOutputLimits': 'from pydantic_ai_harness.overflowing_tool_output import OverflowingToolOutput',
    'tool_output_limits': 'import pydantic_ai_harness.overflowing_tool_output',
}
"""Upstream's top-level names for the capability this project calls `OverflowingToolOutput`, and what to write."""


def upstream_name_error(name: str) -> ImportError | None:
    """The error for `from pydantic_ai_harness import <name>` when `name` is upstream's, naming the replacement.

    An `ImportError`, not an `AttributeError`: `from ... import` replaces an `AttributeError` with its own
    message ("cannot import name"), which would drop the replacement.
    """
    replacement = _UPSTREAM_NAMES.get(name)
    if replacement is None:
        return None
    clash = check_clash()  # with upstream installed too, the shared files are the problem: say so
    return ImportError(
        f"`{name}` is the official {UPSTREAM_DISTRIBUTION} package's name; this is {DISTRIBUTION}, where the "
        f'same capability is `OverflowingToolOutput`: `{replacement}`. The migration guide lists what else '
        f'differs: {MIGRATION_GUIDE}.' + (f' {clash}' if clash else ''),
        name=name,
    )
