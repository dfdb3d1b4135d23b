"""Warnings that point at the code that called into the package, not at the package or the libraries under it.

`warnings.warn(stacklevel=N)` counts frames, and the frames between an application and a warning raised in a
capability hook (pydantic-ai's graph, asyncio's event loop, anyio's worker threads, importlib for an import) vary
with the run. `warn_at_caller` walks the stack past them and files the warning under the first frame of other code:
the user's `agent.run_sync(...)` line, or their `import` statement.
"""

from __future__ import annotations

import sys
import warnings
from types import FrameType

__all__ = ('INTERNAL_MODULES', 'caller_frame', 'warn_at_caller')

INTERNAL_MODULES = (
    'pydantic_ai_harness',
    'pydantic_ai',
    'pydantic_graph',
    'pydantic_evals',
    'anyio',
    'asyncio',
    'concurrent',
    'threading',
    'contextlib',
    'importlib',
    'functools',
    'opentelemetry',
    'logfire',
    'sniffio',
    'warnings',
    'runpy',
)
"""The modules (and their submodules) whose frames a warning never points at."""


def _internal(frame: FrameType) -> bool:
    name = frame.f_globals.get('__name__')
    if not isinstance(name, str):
        return True
    if name == '__main__':
        return False
    if frame.f_code.co_filename.startswith('<frozen importlib'):
        return True
    return any(name == module or name.startswith(f'{module}.') for module in INTERNAL_MODULES)


def caller_frame() -> FrameType | None:
    """The innermost frame of code outside `INTERNAL_MODULES`; `None` when there is none (a worker thread)."""
    frame: FrameType | None = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
    while frame is not None and _internal(frame):
        frame = frame.f_back
    return frame


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """`warnings.warn(message, category)` filed under the caller's frame (see `caller_frame`).

    With no such frame (the stack is the package's and its libraries' only), it is filed where it is raised.
    Filters, the once-per-location registry and `warnings.catch_warnings` behave as for `warnings.warn`.
    """
    frame = caller_frame()
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    module_globals = frame.f_globals
    registry: dict[str | tuple[str, type[Warning], int], int] = module_globals.setdefault('__warningregistry__', {})
    warnings.warn_explicit(
        message,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get('__name__'),
        registry=registry,
    )  # no `module_globals`: for `python -c` its loader raises on `get_source`; linecache reads real files anyway
