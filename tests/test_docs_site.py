"""The docs site renders its diagrams offline: mermaid is served with it, never fetched from a CDN."""

from __future__ import annotations

import re
from pathlib import Path

import material

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = (ROOT / 'mkdocs.yml').read_text()


def _extra_javascript() -> list[str]:
    block = re.search(r'^extra_javascript:\n((?:  - .*\n)+)', MKDOCS, re.MULTILINE)
    assert block is not None, 'mkdocs.yml has no extra_javascript list'
    return [line.removeprefix('  - ').strip() for line in block.group(1).splitlines()]


def test_the_site_serves_its_own_mermaid() -> None:
    [script] = [s for s in _extra_javascript() if 'mermaid' in s]
    assert not script.startswith(('http:', 'https:', '//'))
    vendored = ROOT / 'docs' / script
    code = vendored.read_text(encoding='utf-8')
    assert code.rstrip().endswith('globalThis["mermaid"] = globalThis.__esbuild_esm_mermaid_nm["mermaid"].default;')
    assert 'MIT License' in vendored.with_name(vendored.name.replace('.min.js', '.LICENSE.txt')).read_text()


def test_material_uses_a_defined_mermaid_of_the_major_version_it_expects() -> None:
    """Material fetches mermaid from a CDN only when no `mermaid` global exists: ours is defined first."""
    [bundle] = (Path(material.__file__).parent / 'templates' / 'assets' / 'javascripts').glob('bundle.*.min.js')
    source = bundle.read_text(encoding='utf-8')
    fallback = re.search(r'typeof mermaid=="undefined"\|\|mermaid instanceof Element\?\w+\("([^"]+)"\)', source)
    assert fallback is not None, 'the Material bundle no longer checks for a mermaid global before fetching'
    wanted = re.search(r'mermaid@(\d+)/', fallback.group(1))
    assert wanted is not None
    [script] = [s for s in _extra_javascript() if 'mermaid' in s]
    ours = re.search(r'mermaid-(\d+)\.\d+\.\d+\.min\.js$', script)
    assert ours is not None and ours.group(1) == wanted.group(1)
