"""Spills upstream `pydantic-ai-harness` 0.62 wrote into a workspace, read through the run's workspace.

Upstream's default store writes a payload to `<working dir>/.pydantic-ai-harness/tool-output/<run id>/<tool call
id>.<retry>` in the run's workspace, and its handle is that absolute path. A history saved under upstream names such
paths; the query tools route them here, where the file is read below the run's working directory as it is now (a
sandbox restored elsewhere still answers), confined to that directory with symlinks resolved, and never written.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from pydantic_ai.workspaces import Workspace

from ._protocol import HandleNotFoundError
from ._upstream_local import upstream_names

__all__ = ('UPSTREAM_SPILL_DIRECTORY', 'UpstreamWorkspaceSpills', 'upstream_workspace_names')

UPSTREAM_SPILL_DIRECTORY = '.pydantic-ai-harness/tool-output'
"""Where upstream's `WorkspaceStore` spills, relative to the working directory."""

_NOT_FOUND = 'no stored payload under this handle'


def upstream_workspace_names(handle: str) -> list[str] | None:
    """The path below upstream's spill directory that an upstream workspace handle names; `None` for other handles."""
    _, marker, rest = handle.rpartition(f'/{UPSTREAM_SPILL_DIRECTORY}/')
    if not marker and handle.startswith(f'{UPSTREAM_SPILL_DIRECTORY}/'):
        rest = handle[len(UPSTREAM_SPILL_DIRECTORY) + 1 :]
    elif not marker:
        return None
    return upstream_names(rest)


@dataclass
class UpstreamWorkspaceSpills:
    """A read-only store over the spills upstream's `WorkspaceStore` left in `workspace`."""

    workspace: Workspace
    """The run's workspace."""

    async def write(self, key: str, data: bytes) -> str:
        """Never: this store only reads what upstream wrote."""
        raise PermissionError('the spills of upstream pydantic-ai-harness are read, never written')

    async def read(self, handle: str) -> bytes:
        """The bytes of the upstream spill `handle` names; `HandleNotFoundError` when there is none (or it escapes)."""
        names = upstream_workspace_names(handle)
        workspace = self.workspace
        if names is None or not workspace.attached:
            raise HandleNotFoundError(_NOT_FOUND)
        try:
            root = await workspace.working_dir()
            directory = posixpath.join(root, UPSTREAM_SPILL_DIRECTORY)
            real_directory = posixpath.join(await workspace.realpath(root), UPSTREAM_SPILL_DIRECTORY)
            real = await workspace.realpath(posixpath.join(directory, *names))
            if await workspace.realpath(directory) != real_directory or not real.startswith(f'{real_directory}/'):
                raise HandleNotFoundError(_NOT_FOUND)  # a symlink leads out of upstream's spill directory
            return await workspace.read_bytes(real)
        except OSError as exc:  # missing, a directory, not readable: all look the same
            raise HandleNotFoundError(_NOT_FOUND) from exc
