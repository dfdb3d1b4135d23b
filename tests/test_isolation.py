"""The suite runs in a private temp directory: it never writes into the user's default spill root."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore
from tests.conftest import SESSION_TEMP_DIR, USER_TEMP_DIR

USER_DEFAULT_ROOT = Path(USER_TEMP_DIR) / f'pyai_harness_overflow-{os.getuid()}'


def test_the_default_root_in_this_process_is_private() -> None:
    root = LocalFileStore().root
    assert root.parent == Path(SESSION_TEMP_DIR) == Path(tempfile.gettempdir())
    assert root != USER_DEFAULT_ROOT


def test_the_default_root_in_a_child_process_is_private() -> None:
    done = subprocess.run(
        [
            sys.executable,
            '-c',
            'from pydantic_ai_harness.overflowing_tool_output import LocalFileStore as S; print(S().root)',
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()).parent == Path(SESSION_TEMP_DIR)


def test_tmp_path_is_inside_the_private_directory(tmp_path: Path) -> None:
    assert tmp_path.is_relative_to(SESSION_TEMP_DIR)
