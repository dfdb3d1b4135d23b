"""A test run killed midway (a timeout, `kill -9`) leaves no server running: each dies with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import free_port, valkey_binary

REPO = Path(__file__).resolve().parents[2]

STARTER = """
import subprocess, sys, time
from tests._children import tied

server = subprocess.Popen(
    tied([sys.argv[1], '--port', sys.argv[2], '--bind', '127.0.0.1', '--save', '', '--dir', sys.argv[3]]),
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
for _ in range(200):  # wait (10 s at most) for the launcher to become the server
    if open(f'/proc/{server.pid}/cmdline').read().startswith(sys.argv[1]):
        break
    time.sleep(0.05)
print(server.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running, not only waiting to be reaped (a zombie has exited)."""
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != 'Z'


@pytest.mark.skipif(sys.platform != 'linux', reason='PR_SET_PDEATHSIG is Linux-only')
def test_a_server_dies_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    starter = subprocess.Popen(
        [sys.executable, '-c', STARTER, valkey_binary(), str(free_port()), str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    server = int(starter.stdout.readline())
    try:
        assert _alive(server)
        starter.send_signal(signal.SIGKILL)  # no teardown runs: as when a timeout kills the test run
        starter.wait(timeout=10)
        deadline = time.monotonic() + 10  # generous: the kernel signals at once, valkey exits in milliseconds
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server)
    finally:
        if _alive(server):
            os.kill(server, signal.SIGKILL)
        starter.stdout.close()
