from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .._children import tied

SERVER = Path(__file__).with_name('mcp_server.py')


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'the MCP server exited with status {process.returncode} before listening')
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f'the MCP server did not listen on port {port} within {timeout:g} s')


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _start(started: list[subprocess.Popen[bytes]]) -> str:
    port = free_port()
    process = subprocess.Popen(
        tied([sys.executable, str(SERVER), '--http', str(port)]),  # a killed test run must not leave it running
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started.append(process)
    _wait_until_listening(process, port)
    return f'http://127.0.0.1:{port}/mcp'


@pytest.fixture
def start_http_server() -> Iterator[Callable[[], str]]:
    """Start a test server of its own over streamable HTTP on a free loopback port; it is stopped after the test."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield lambda: _start(started)
    finally:
        for process in started:
            _stop(process)


@pytest.fixture(scope='module')
def http_url() -> Iterator[str]:
    """One test server over streamable HTTP, shared by the module's tests that leave it running."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield _start(started)
    finally:
        for process in started:
            _stop(process)
