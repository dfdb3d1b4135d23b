"""Child servers that die with the test process that started them, even when it is killed (a timeout, `kill -9`).

`subprocess.Popen(tied([binary, *args]))`: on Linux the command runs through a short Python launcher that asks the
kernel for SIGTERM when its parent exits (`prctl(PR_SET_PDEATHSIG)`) and then becomes the server (`execv` keeps the
request and the pid). Done in the child's own interpreter, not in a `preexec_fn`, which is unsafe in a process
with threads (the suite runs servers and workers in threads). Elsewhere the command is returned as it is and the
fixtures' own teardown is all there is.
"""

from __future__ import annotations

import os
import sys

__all__ = ('tied',)

_LAUNCHER = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the parent died before the request was made: do not start at all
os.execv(sys.argv[2], sys.argv[2:])
"""


def tied(command: list[str]) -> list[str]:
    """`command`, run so that it gets SIGTERM when this process exits (on Linux; elsewhere `command` unchanged)."""
    if sys.platform != 'linux':
        return command
    return [sys.executable, '-c', _LAUNCHER, str(os.getpid()), *command]
