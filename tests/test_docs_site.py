"""The docs site works offline and from disk: diagrams, links and search need no server and no CDN."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import material
import pytest

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


class _Links(HTMLParser):
    """The `href`/`src` values and the element ids of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.scripts: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ('href', 'src'):
                self.links.append(value)
            if name == 'src' and tag == 'script':
                self.scripts.append(value)
            if name in ('id', 'name'):
                self.ids.add(value)


@dataclass(frozen=True)
class Site:
    root: Path
    pages: dict[Path, _Links]


@pytest.fixture(scope='module')
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The docs site as `make docs` builds it."""
    out = tmp_path_factory.mktemp('site')
    subprocess.run(
        [sys.executable, '-m', 'mkdocs', 'build', '--strict', '--quiet', '-d', str(out)],
        cwd=ROOT,
        env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'},
        check=True,
        capture_output=True,
    )
    pages: dict[Path, _Links] = {}
    for page in sorted(out.rglob('*.html')):
        parser = _Links()
        parser.feed(page.read_text(encoding='utf-8'))
        pages[page] = parser
    return Site(out, pages)


def test_the_site_is_built_for_file_urls_with_offline_search() -> None:
    assert re.search(r'^use_directory_urls: false$', MKDOCS, re.MULTILINE)
    assert re.search(r'^plugins:\n  - search\n  - offline\n', MKDOCS, re.MULTILINE)


def test_every_internal_link_opens_a_file_of_the_site(site: Site) -> None:
    """Opened from disk, a link to a directory shows a listing: every link names a file, every anchor exists."""
    assert len(site.pages) >= 15
    broken: list[str] = []
    for page, parsed in site.pages.items():
        for link in parsed.links:
            if urlsplit(link).scheme or link.startswith('//'):
                continue  # external: http(s), mailto, data
            path, _, fragment = link.partition('#')
            target = (page.parent / unquote(path.split('?')[0])).resolve() if path else page
            where = f'{page.relative_to(site.root)}: {link}'
            if not target.is_file():
                broken.append(f'{where} (no such file)')
            elif fragment and target.suffix == '.html' and unquote(fragment) not in site.pages[target].ids:
                broken.append(f'{where} (no such anchor)')
    assert broken == []


def test_search_and_scripts_work_without_a_server_or_network(site: Site) -> None:
    """From file:// the search index is a script (`__index`) and the search worker runs in iframe-worker's shim."""
    assert (site.root / 'search' / 'search_index.js').read_text(encoding='utf-8').startswith('var __index = ')
    for page, parsed in site.pages.items():
        remote = [src for src in parsed.scripts if urlsplit(src).scheme or src.startswith('//')]
        assert remote == [], page
        assert any(src.endswith('assets/javascripts/iframe-worker-1.0.4.shim.js') for src in parsed.scripts), page
    shim = ROOT / 'docs' / 'assets' / 'javascripts' / 'iframe-worker-1.0.4.shim.js'
    assert 'location.protocol==="file:"&&(window.Worker=o)' in shim.read_text(encoding='utf-8')
    assert 'Martin Donath' in shim.with_name('iframe-worker-1.0.4.LICENSE.txt').read_text(encoding='utf-8')


def _text(page: Path) -> str:
    return re.sub(r'<[^>]+>', '', page.read_text(encoding='utf-8'))


def test_no_page_loads_anything_from_the_network(site: Site) -> None:
    """No web fonts (`theme.font: false`: Material would load Roboto from fonts.googleapis.com), no remote stylesheet."""
    assert re.search(r'^  font: false$', MKDOCS, re.MULTILINE)
    for page in site.pages:
        html = page.read_text(encoding='utf-8')
        assert 'fonts.googleapis.com' not in html and 'fonts.gstatic.com' not in html, page
        for link in re.findall(r'<link[^>]*href="([^"]+)"', html):
            assert not (urlsplit(link).scheme or link.startswith('//')), (page, link)


def test_no_404_page_with_root_absolute_links_is_published(site: Site) -> None:
    """Opened from disk, `/assets/...` leads nowhere and no 404 page is ever shown: docs_hooks.py drops it."""
    assert not (site.root / '404.html').exists()
    for page in site.pages:
        assert not re.search(r'(?:href|src)="/(?!/)', page.read_text(encoding='utf-8')), page


def test_code_blocks_wrap_instead_of_being_cut(site: Site) -> None:
    """At 1280 px beside both sidebars the content column holds about 85 columns of code; the examples run to 120."""
    css = (ROOT / 'docs' / 'assets' / 'stylesheets' / 'extra.css').read_text(encoding='utf-8')
    assert re.search(r'\.md-typeset pre > code \{\s*white-space: pre-wrap;', css)
    assert all(any(link.endswith('assets/stylesheets/extra.css') for link in p.links) for p in site.pages.values())


def test_the_api_page_title_breaks_at_the_dot_and_type_aliases_are_code(site: Site) -> None:
    page = site.root / 'api' / 'overflowing_tool_output.html'
    html = page.read_text(encoding='utf-8')
    assert re.search(r'<h1[^>]*>pydantic_ai_harness\.<wbr ?/?>overflowing_tool_output', html)
    text = _text(page)
    assert 'SummarizeFunc: TypeAlias = Callable[\n    [str, str], str | Awaitable[str]\n]' in text
    assert "'Passthrough" not in text and "'Callable[[str, str]" not in text


def test_the_landing_diagram_shows_the_capabilities_in_the_order_of_the_text() -> None:
    """Mermaid stacks the subgraphs of a left-to-right flowchart last-declared first (checked by eye in a browser): the
    page's text names OverflowingToolOutput first, so its subgraph is declared last."""
    index = (ROOT / 'docs' / 'index.md').read_text(encoding='utf-8')
    diagram = index.split('```mermaid', 1)[1].split('```', 1)[0]
    assert diagram.index('subgraph handoffs') < diagram.index('subgraph OverflowingToolOutput')
    text = index.split('```mermaid', 1)[1].split('```', 2)[1]
    assert text.index('Overflowing tool output') < text.index('Handoffs and delegation')
