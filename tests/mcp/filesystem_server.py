"""The official MCP filesystem server (npm `@modelcontextprotocol/server-filesystem`), installed for the tests.

Its version is pinned in `tests/mcp/filesystem/package.json` and `package-lock.json`; `npm ci` installs it, once a
session, into the session's temp dir (npm's download cache too, so nothing is written outside it). Each test then
starts it over stdio on a directory of its own, through pydantic-ai's `MCPToolset`, and it stops with the run
(`keep_alive=False`). Without `node` and `npm` the tests that need it are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai.mcp import MCPToolset

from .._children import tied

PACKAGE = '@modelcontextprotocol/server-filesystem'
PINNED = Path(__file__).with_name('filesystem')
"""The directory holding the package.json and package-lock.json that pin the server."""

VERSION: str = json.loads((PINNED / 'package.json').read_text())['dependencies'][PACKAGE]

_INSTALL_TIMEOUT = 600


def install(into: Path) -> Path:
    """`npm ci` the pinned server into `into`; the path of its entry script. Skips the test where npm is missing."""
    npm, node = shutil.which('npm'), shutil.which('node')
    if npm is None or node is None:
        pytest.skip(f'the MCP filesystem server needs Node.js: `{"npm" if npm is None else "node"}` is not on PATH')
    for name in ('package.json', 'package-lock.json'):
        shutil.copyfile(PINNED / name, into / name)
    env = {**os.environ, 'npm_config_update_notifier': 'false', 'npm_config_fund': 'false'}
    command = [npm, 'ci', '--no-audit', '--ignore-scripts', '--cache', str(into / '.npm-cache')]
    done = subprocess.run(
        command, check=False, cwd=into, env=env, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT
    )
    if done.returncode != 0:
        raise RuntimeError(f'`npm ci` of {PACKAGE}@{VERSION} failed ({done.returncode}):\n{done.stderr[-4000:]}')
    script = into / 'node_modules' / PACKAGE / 'dist' / 'index.js'
    installed = json.loads((into / 'node_modules' / PACKAGE / 'package.json').read_text())['version']
    assert installed == VERSION, f'npm ci installed {installed}, the lock pins {VERSION}'
    return script


def filesystem_toolset(script: Path, root: Path, log: Path) -> MCPToolset[Any]:
    """An `MCPToolset` that starts the server over stdio, allowed into `root`; its stderr goes to `log`."""
    node = shutil.which('node')
    assert node is not None  # `install` skipped otherwise
    command, *args = tied([node, str(script), str(root)])  # a killed test run must not leave it running
    transport = StdioTransport(command, args, keep_alive=False, log_file=log)
    return MCPToolset(transport, read_timeout=120, init_timeout=60)
