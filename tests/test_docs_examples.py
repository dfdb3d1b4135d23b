"""Every ```python block in the README and the docs runs as a standalone file, so the docs never drift from the code.

Each block is written to `example.py` in a fresh temporary directory and run there as `__main__` (as
`python example.py` would), with no event loop running: a block that needs one starts it itself
(`asyncio.run(main())`, `agent.run_sync(...)`), so pasting any block into a file just works. A block
directly preceded by `<!-- docs-test: skip -->` is not run (only for examples that need a real API key or
an external service), but it must still compile as a standalone file.
"""

from __future__ import annotations

import asyncio
import gc
import re
import runpy
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]
_FENCE = re.compile(r'^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```', re.DOTALL | re.MULTILINE)
_SKIP = '<!-- docs-test: skip -->'


@dataclass(frozen=True)
class Example:
    path: Path
    line: int
    source: str
    skipped: bool

    @property
    def id(self) -> str:
        return f'{self.path.relative_to(ROOT)}:{self.line}'


def _examples() -> list[Example]:
    found: list[Example] = []
    for path in DOC_FILES:
        text = path.read_text(encoding='utf-8')
        for match in _FENCE.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            skipped = bool(before) and before[-1].strip() == _SKIP
            indent = match.group('indent')
            body = '\n'.join(line.removeprefix(indent) for line in match.group('body').splitlines())
            found.append(Example(path, text.count('\n', 0, match.start()) + 1, body, skipped))
    return found


ALL_EXAMPLES = _examples()
EXAMPLES = [example for example in ALL_EXAMPLES if not example.skipped]


def test_examples_were_found() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize('example', ALL_EXAMPLES, ids=[e.id for e in ALL_EXAMPLES])
def test_every_block_compiles_as_a_standalone_file(example: Example) -> None:
    """No top-level `await`: that is a `SyntaxError` in a file (it only works in a notebook or REPL)."""
    compile('\n' * example.line + example.source, str(example.path), 'exec', dont_inherit=True)


def _run_as_main(path: Path) -> None:
    """Run `path` as `python path` would, in a thread of its own, and close any event loop it left set."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            with warnings.catch_warnings():
                # Examples may demonstrate fallbacks that warn on purpose.
                warnings.simplefilter('ignore')
                runpy.run_path(str(path), run_name='__main__')
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failure.append(exc)
        finally:
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()  # `run_sync` keeps one per thread
            except RuntimeError:
                pass
            else:
                loop.close()

    thread = threading.Thread(target=target, name='docs-example')
    thread.start()
    thread.join()
    gc.collect()  # A loop or socket the example leaked warns here, in this test, not at the end of the run.
    if failure:
        raise failure[0]


@pytest.mark.parametrize('example', EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_doc_example_runs_as_a_file(example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    file = tmp_path / 'example.py'
    # Blank lines first, so a traceback's line numbers are the markdown file's.
    file.write_text('\n' * example.line + example.source, encoding='utf-8')
    _run_as_main(file)
