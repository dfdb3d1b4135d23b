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
