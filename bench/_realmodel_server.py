"""Start `llama-server` on loopback for one benchmark run, and always stop it; or use an endpoint the user runs."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible chat endpoint and the model to ask there."""

    base_url: str
    """Up to and including `/v1`."""
    model: str
    """The model name sent with each request."""
    api_key: str
    """Sent as the bearer token (local servers ignore it)."""
    started_here: bool
    """Whether this run started the server (and stops it)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'llama-server exited with code {process.returncode} before it was ready')
        try:
            with urllib.request.urlopen(f'{url}/health', timeout=5) as answer:
                if json.loads(answer.read() or b'{}').get('status') == 'ok':
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(1)
    raise RuntimeError(f'llama-server was not ready within {timeout:g} s')


@contextlib.contextmanager
def llama_server(server: Path, model: Path, *, context_window: int, log: Path) -> Iterator[Endpoint]:
    """`llama-server` serving `model` on 127.0.0.1 with the chat template's tool calls (`--jinja`), while in the block."""
    port = _free_port()
    # On a machine other jobs keep busy, fewer threads than cores decode faster: ggml's threads wait for each other.
    threads = os.environ.get('REALMODEL_THREADS') or str(os.cpu_count() or 1)
    command = [str(server), '-m', str(model), '--host', '127.0.0.1', '--port', str(port), '--jinja']
    command += ['-c', str(context_window), '-t', threads, '--parallel', '1', '--no-webui']
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open('ab') as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        url = f'http://127.0.0.1:{port}'
        _wait_healthy(url, process, timeout=300)
        yield Endpoint(base_url=f'{url}/v1', model=model.stem, api_key='unused', started_here=True)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
