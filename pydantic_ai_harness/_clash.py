"""Detect the official `pydantic-ai-harness` installed beside this distribution, and say what to do.

Both distributions install the import package `pydantic_ai_harness`. pip does not notice: whichever is
installed last overwrites the other's `__init__.py` files, so imports then mix the two, and uninstalling either
deletes files the other needs. Nothing at install time can refuse it (a wheel runs no code), so the package says
so when it is imported (`warn_on_clash`, from the top-level `__init__`) and the CLI prints `check_clash()`.
"""

from __future__ import annotations

import functools
import warnings
from importlib import metadata

__all__ = (
    'DISTRIBUTION',
    'UPSTREAM_DISTRIBUTION',
    'PackageClashWarning',
    'check_clash',
    'installed_version',
    'upstream_name_error',
    'warn_on_clash',
)

UPSTREAM_DISTRIBUTION = 'pydantic-ai-harness'
"""The official harness's distribution: its import package is `pydantic_ai_harness` too."""

DISTRIBUTION = 'pydantic-ai-harness-context'
"""This project's distribution."""


class PackageClashWarning(UserWarning):
    """Both `pydantic-ai-harness` and `pydantic-ai-harness-context` are installed in one environment."""


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def installed_version() -> str:
    """This distribution's version, from its own metadata: right even when upstream's `__init__.py` replaced ours."""
    return _version(DISTRIBUTION) or 'unknown (not installed)'


@functools.cache
def check_clash() -> str | None:
    """What happened and what to do when upstream `pydantic-ai-harness` is installed too, else `None`.

    Found from the installed distributions' metadata (checked once per process): the files on disk cannot
    tell, since the two packages overwrite each other's.
    """
    upstream = _version(UPSTREAM_DISTRIBUTION)
    if upstream is None:
        return None
    ours = _version(DISTRIBUTION)
    ours_text = f'{DISTRIBUTION} {ours}' if ours else f'{DISTRIBUTION} (from a source checkout)'
    return (
        f'{UPSTREAM_DISTRIBUTION} {upstream} (the official harness) and {ours_text} are both installed, '
        'and both install the import package `pydantic_ai_harness`. The one installed last overwrote the '
        "other's `__init__.py` files, so imports now mix the two (upstream's `ToolOutputLimits` or this "
        "project's `OverflowingToolOutput` and `handoffs` may be missing or the other's class), and "
        'uninstalling either one deletes files the other needs. Keep one of them: '
        f'`pip uninstall -y {UPSTREAM_DISTRIBUTION} {DISTRIBUTION}`, then `pip install {DISTRIBUTION}` '
        f'(or `pip install {UPSTREAM_DISTRIBUTION}`). Moving from upstream `ToolOutputLimits` to '
        '`OverflowingToolOutput`: see the migration guide (docs/migration.md).'
    )


@functools.cache
def warn_on_clash() -> None:
    """Warn once per process, with a `PackageClashWarning`, when `check_clash()` finds upstream installed too."""
    message = check_clash()
    if message is not None:
        warnings.warn(message, PackageClashWarning, stacklevel=2)


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
        f'same capability is `OverflowingToolOutput`: `{replacement}`. The migration guide (docs/migration.md) '
        'lists what else differs.' + (f' {clash}' if clash else ''),
        name=name,
    )
