"""Every ```python block in the README and the docs is executed, so the docs never drift from the code.

A block runs in a fresh namespace inside a temporary working directory; top-level `await` is allowed.
A block directly preceded by `<!-- docs-test: skip -->` is not run (used only for examples that need a
real API key or an external service).
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

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

    @property
    def id(self) -> str:
        return f'{self.path.relative_to(ROOT)}:{self.line}'


def _examples() -> list[Example]:
    found: list[Example] = []
    for path in DOC_FILES:
        text = path.read_text(encoding='utf-8')
        for match in _FENCE.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            if before and before[-1].strip() == _SKIP:
                continue
            indent = match.group('indent')
            body = '\n'.join(line.removeprefix(indent) for line in match.group('body').splitlines())
            found.append(Example(path, text.count('\n', 0, match.start()) + 1, body))
    return found


EXAMPLES = _examples()


def test_examples_were_found() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize('example', EXAMPLES, ids=[e.id for e in EXAMPLES])
@pytest.mark.anyio
async def test_doc_example(example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code: CodeType = compile(
        '\n' * (example.line) + example.source,
        str(example.path),
        'exec',
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,  # not this module's `from __future__ import annotations`
    )
    namespace: dict[str, Any] = {'__name__': '__docs_example__'}
    with warnings.catch_warnings():
        # Examples may demonstrate fallbacks that warn on purpose.
        warnings.simplefilter('ignore')
        result = eval(code, namespace)
        if result is not None:
            await result
