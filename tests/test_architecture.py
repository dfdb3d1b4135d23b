"""The layout docs/architecture.md describes: no module over 650 lines, no class over 400, no import circle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / 'pydantic_ai_harness'
MAX_MODULE_LINES = 650
MAX_CLASS_LINES = 400


def _modules() -> dict[str, ast.Module]:
    return {
        '.'.join(path.relative_to(PACKAGE.parent).with_suffix('').parts): ast.parse(path.read_text(encoding='utf-8'))
        for path in sorted(PACKAGE.rglob('*.py'))
    }


def _imports(name: str, tree: ast.Module) -> set[str]:
    """The package's own modules `name` imports, TYPE_CHECKING imports and imports inside functions included."""
    package = name if name.endswith('__init__') else name.rsplit('.', 1)[0]
    package = package.removesuffix('.__init__')
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split('.')
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = '.'.join([*base, node.module] if node.module else base)
            else:
                module = node.module or ''
            found.add(module)
            found.update(f'{module}.{alias.name}' for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_module_is_over_650_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob('*.py')
        if (lines := len(path.read_text(encoding='utf-8').splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_class_is_over_400_lines() -> None:
    long = {
        f'{name}.{node.name}': node.end_lineno - node.lineno + 1
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
        if node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    }
    assert long == {}


def test_no_import_circle() -> None:
    modules = _modules()
    names = {name.removesuffix('.__init__'): name for name in modules}
    graph = {
        name: {names[target] for target in _imports(name, tree) if target in names and names[target] != name}
        for name, tree in modules.items()
        if not name.endswith('__init__')  # a package's face imports its rooms; the rooms never import it back
    }
    graph = {name: {t for t in targets if not t.endswith('__init__')} for name, targets in graph.items()}
    circles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


DOC = PACKAGE.parent / 'docs' / 'architecture.md'


def _doc_module_names(text: str) -> set[str]:
    """Every identifier-like token inside a code span of the page (`_grep`, `stores/_local`, `_a`, `_b` ...)."""
    import re

    names: set[str] = set()
    prose = re.sub(r'^```.*?^```', '', text, flags=re.MULTILINE | re.DOTALL)  # the diagrams only repeat the prose
    for span in re.findall(r'`([^`]+)`', prose):
        names.update(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', span))
    return names


def test_every_module_is_named_on_the_architecture_page() -> None:
    named = _doc_module_names(DOC.read_text(encoding='utf-8'))
    missing = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob('*.py')
        if path.stem != '__init__' and path.stem not in named
    )
    assert missing == []


def _awaiting_modules() -> set[str]:
    """The package's modules with an `await`, `async for` or `async with`, as the page names them."""
    found: set[str] = set()
    for name, tree in _modules().items():
        if name.endswith('__init__'):
            continue
        if any(isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)) for node in ast.walk(tree)):
            parts = name.split('.')[1:]  # without `pydantic_ai_harness`
            if parts[0] == 'overflowing_tool_output':
                parts = parts[1:]
            found.add('/'.join(parts))
    return found


def test_the_modules_that_await_are_the_ones_the_page_lists() -> None:
    import re

    text = DOC.read_text(encoding='utf-8')
    listed_block = text.split('<!-- awaits -->', 1)[1].split('<!-- /awaits -->', 1)[0]
    listed = set(re.findall(r'`([^`]+)`', listed_block))
    assert listed == _awaiting_modules()
