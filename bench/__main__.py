"""Run every benchmark section, print the report and write it to `docs/benchmarks.md`.

Usage: `make bench` (or `python -m bench [SECTION ...]` to run some sections only and update just those sections of
the page).
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
from pathlib import Path

from bench._report import markdown_table

SECTIONS: dict[str, str] = {
    'economy': 'bench.bench_economy',
    'overhead': 'bench.bench_overhead',
    'store': 'bench.bench_store',
    'hotpath': 'bench.bench_hotpath',
    'fleet': 'bench.bench_fleet_stores',
    'handoffs': 'bench.bench_handoffs',
    'json_query': 'bench.bench_json_query',
    'secrets': 'bench.bench_secrets',
    'handles': 'bench.bench_handles',
    'cli': 'bench.bench_cli',
    'media': 'bench.bench_media',
    'documents': 'bench.bench_documents',
    'realmodel': 'bench.bench_realmodel',
}
"""Section name -> module exposing `TITLE`, `METHOD` and `run()`, which returns its entries, or its entries and a
markdown block of details to publish under them."""

ON_REQUEST = {'realmodel'}
"""Sections run only when named (`python -m bench realmodel`): they fetch and build a runtime and take most of an
hour."""

DOCS_PAGE = Path(__file__).resolve().parent.parent / 'docs' / 'benchmarks.md'


def main(argv: list[str]) -> int:
    wanted = argv or [name for name in SECTIONS if name not in ON_REQUEST]
    parts: list[str] = []
    all_ok = True
    for name in wanted:
        module_name = SECTIONS.get(name)
        if module_name is None:
            print(f'unknown section {name!r}; known: {", ".join(SECTIONS)}', file=sys.stderr)
            return 2
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        print(f'== {name} ==', flush=True)
        started = time.perf_counter()
        result = module.run()
        entries, extra = result if isinstance(result, tuple) else (result, '')
        table = markdown_table(entries)
        print(table, f'\n{extra}\n({time.perf_counter() - started:.1f} s)\n', flush=True)
        all_ok &= all(e.ok for e in entries)
        parts.append(f'## {module.TITLE}\n\n{module.METHOD.strip()}\n\n{table}\n\n{extra}\n'.replace('\n\n\n', '\n\n'))
    header = (
        '# Benchmarks\n\n'
        'Produced by `make bench` (`python -m bench`). Every figure is a ratio against a baseline measured in '
        'the same run, or an absolute bound where the target is one; nothing here is a timed unit-test '
        f'assertion.\n\nLast run: Python {platform.python_version()} on {platform.machine()}, '
        f'{platform.system()}.\n\n'
    )
    if not argv:
        old_page = DOCS_PAGE.read_text(encoding='utf-8') if DOCS_PAGE.exists() else ''
        kept = [kept_section(old_page, importlib.import_module(SECTIONS[name]).TITLE) for name in sorted(ON_REQUEST)]
        DOCS_PAGE.write_text(header + '\n'.join([*parts, *filter(None, kept)]), encoding='utf-8')
        print(f'wrote {DOCS_PAGE}')
    elif DOCS_PAGE.exists():
        page = DOCS_PAGE.read_text(encoding='utf-8')
        for part in parts:
            page = replace_section(page, part)
        DOCS_PAGE.write_text(page, encoding='utf-8')
        print(f'updated {", ".join(wanted)} in {DOCS_PAGE}')
    return 0 if all_ok else 1


def kept_section(page: str, title: str) -> str:
    """The `## title` section of `page` as it stands (an on-request section a full run does not measure), or ''."""
    start = page.find(f'## {title}\n')
    if start == -1:
        return ''
    end = page.find('\n## ', start + 3)
    return page[start : end + 1 if end != -1 else len(page)]


def replace_section(page: str, part: str) -> str:
    """`page` with the `## ` section titled like `part` replaced by `part`, or `part` appended if it has none."""
    title = part.split('\n', 1)[0]
    start = page.find(title + '\n')
    if start == -1:
        return page.rstrip('\n') + '\n\n' + part
    end = page.find('\n## ', start + len(title))
    return page[:start] + part + ('\n' + page[end + 1 :] if end != -1 else '')


if __name__ == '__main__':
    raise SystemExit(main(sys.argv[1:]))
