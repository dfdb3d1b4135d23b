"""Base64 blobs in text and JSON (issue 35, item 3): data URLs and long base64 runs are stored as the bytes they
encode and replaced by a one-line marker; the JSON stays valid and the original text reads back byte-identical.
Real agent runs over real images made by the tests."""

from __future__ import annotations

import base64
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from PIL import Image
from pydantic_ai import Agent

from examples._scripted import cl100k_counter
from pydantic_ai_harness.overflowing_tool_output import (
    Band,
    LocalFileStore,
    OverflowingToolOutput,
    SecretRedaction,
    Spill,
)
from pydantic_ai_harness.overflowing_tool_output._actions._bands import default_bands

from .._scripted_queries import RUN_ID, Call
from ._script import RunScript as Script

pytestmark = pytest.mark.anyio


def _noise_png(width: int, height: int, seed: int = 7) -> bytes:
    """A PNG of random pixels (incompressible, so its size is about width * height * 3 bytes)."""
    rng = random.Random(seed)
    image = Image.frombytes('RGB', (width, height), rng.randbytes(width * height * 3))
    out = io.BytesIO()
    image.save(out, format='PNG')
    return out.getvalue()


def _handles(preview: str) -> list[str]:
    return re.findall(r"handle '([^']+)'", preview)


async def test_a_json_page_holding_a_3_mb_data_url(tmp_path: Path) -> None:
    png = _noise_png(1030, 730)
    data_url = 'data:image/png;base64,' + base64.b64encode(png).decode()
    page = json.dumps({'url': 'https://example.com/', 'title': 'Example', 'screenshot': data_url, 'status': 200})
    assert len(data_url) > 3_000_000
    store = LocalFileStore(base_dir=tmp_path)

    script = Script([('browse', {})], lambda handles: [])
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='browse')(lambda: page)
    await agent.run('Open the page', run_id=RUN_ID)
    (shown,) = script.shown
    assert shown == snapshot("""\
[`browse` returned 3.0 MB holding a base64 blob (2.3 MB decoded), saved apart and marked below; the whole output, unchanged, is handle '7217zk37ff'.]
{"url": "https://example.com/", "title": "Example", "screenshot": "[image/png data URL, 2.3 MB, saved as handle 'rn01cc9y9a'; image 1 below; view_tool_result_image zooms]", "status": 200}\
""")
    header, body = shown.split('\n', 1)
    assert json.loads(body)['status'] == 200  # the JSON stays valid
    original, blob = _handles(header)[0], _handles(body)[0]
    assert await store.read(original) == page.encode()
    assert await store.read(blob) == png
    count = cl100k_counter()
    assert (count(page), count(shown), count(header)) == snapshot((2160780, 104, 43))


GITHUB = 'ghp_' + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4'


async def _run(
    value: object, tmp_path: Path, *, bands: list[Band] | None = None, redact_secrets: SecretRedaction | None = None
) -> tuple[str, LocalFileStore]:
    """One real run whose tool returns `value`; what the model was shown, and the store."""
    store = LocalFileStore(base_dir=tmp_path)
    script = Script([('fetch', {})], lambda handles: [])
    capability = OverflowingToolOutput[Any](
        store=store, bands=bands if bands is not None else default_bands(), redact_secrets=redact_secrets
    )
    agent = Agent(script.model(), capabilities=[capability])
    agent.tool_plain(name='fetch')(lambda: value)
    await agent.run('Fetch it', run_id=RUN_ID)
    (shown,) = script.shown
    return shown, store


async def test_a_dict_holding_a_data_url_and_a_bare_base64_file(tmp_path: Path) -> None:
    """A structured return: both blobs move out, the rest of the value is shown as the JSON it was."""
    png = _noise_png(64, 64)
    gzip_file = b'\x1f\x8b\x08\x00' + random.Random(3).randbytes(4_000)
    value = {
        'avatar': 'data:image/png;base64,' + base64.b64encode(png).decode(),
        'attachment': base64.urlsafe_b64encode(gzip_file).decode().rstrip('='),
        'rows': [{'id': i, 'name': f'user {i}'} for i in range(3)],
    }
    shown, store = await _run(value, tmp_path, bands=[Band(over=2_000, action=Spill())])
    assert shown == snapshot("""\
[`fetch` returned 22.0 KB holding 2 base64 blobs (16.4 KB decoded), saved apart and marked below; the whole output, unchanged, is handle '7217zk37ff'.]
{"avatar":"[image/png data URL, 12.4 KB, saved as handle 'rn01cc9y9a'; image 1 below; view_tool_result_image zooms]","attachment":"[application/gzip base64, 4.0 KB, saved as handle 'hsjhhpngnc']","rows":[{"id":0,"name":"user 0"},{"id":1,"name":"user 1"},{"id":2,"name":"user 2"}]}\
""")
    header, body = shown.split('\n', 1)
    assert json.loads(body)['rows'][2] == {'id': 2, 'name': 'user 2'}
    avatar, attachment = _handles(body)
    assert await store.read(avatar) == png
    assert await store.read(attachment) == gzip_file
    assert json.loads(await store.read(_handles(header)[0])) == value


_NEAR_MISSES = {
    'hex digest': 'f' * 64 + '0123456789abcdef' * 200,
    'a long word': 'A' * 3_000,
    'a repeated token': 'eyJhbGciOi' * 3_000 + 'MARK' + 'Zm9vYmFy' * 2_000,
    'base64 of text': base64.b64encode(('the quick brown fox ' * 200).encode()).decode(),
    'a wrong length': base64.b64encode(random.Random(1).randbytes(3_000)).decode()[:-3],
    'two alphabets': base64.b64encode(random.Random(2).randbytes(3_000)).decode() + '-_' * 2,
    'a JWT with a long payload': 'eyJhbGciOiJIUzI1NiJ9.'
    + base64.urlsafe_b64encode(json.dumps({'claims': list(range(600))}).encode()).decode().rstrip('=')
    + '.'
    + base64.urlsafe_b64encode(random.Random(4).randbytes(32)).decode().rstrip('='),
    'not a base64 data URL': 'data:text/plain,' + 'hello%20world' * 200,
    'a short data URL': 'data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7',
    'a data URL with a bad payload': 'data:image/png;base64,' + 'QUJD' * 300 + 'Q',
}


@pytest.mark.parametrize('name', list(_NEAR_MISSES))
async def test_a_near_miss_is_left_exactly_as_it_was(name: str, tmp_path: Path) -> None:
    """Base64-looking text that is no blob reaches the spill unchanged: no marker, and a read gives it back."""
    text = f'before {_NEAR_MISSES[name]} after\n' * 3 + 'padding line\n' * 200
    shown, store = await _run(text, tmp_path, bands=[Band(over=2_000, action=Spill())])
    assert 'base64 blob' not in shown and 'data URL,' not in shown
    handle = re.search(r"under handle '([^']+)'", shown)
    assert handle is not None, shown[:300]
    assert await store.read(handle.group(1)) == text.encode()


async def test_a_secret_encoded_in_a_data_url_is_withheld_with_redaction_on(tmp_path: Path) -> None:
    """Decoded, the data URL's text would show a token redaction never saw; encoded, the model could decode it:
    neither form is stored where the model reads, and the marker says why."""
    env = f'GITHUB_TOKEN={GITHUB}\n' + 'X=1\n' * 100
    encoded = base64.b64encode(env.encode()).decode()
    text = json.dumps({'env': 'data:text/plain;base64,' + encoded, 'pad': 'y' * 3_000})
    shown, _ = await _run(text, tmp_path, bands=[Band(over=2_000, action=Spill())], redact_secrets=SecretRedaction())
    assert shown.split('\n', 1)[0] == snapshot(
        '[`fetch` returned 3.7 KB holding a base64 blob (454 bytes decoded), marked below; it may hold a secret, so the whole output is not kept.]'
    )
    for payload in tmp_path.rglob('*'):
        if payload.is_file():
            assert GITHUB[:12].encode() not in payload.read_bytes()
            assert encoded[:40].encode() not in payload.read_bytes()


async def test_a_secret_beside_a_blob_is_masked_and_the_blob_moves_out(tmp_path: Path) -> None:
    png = _noise_png(40, 40)
    text = json.dumps({'token': GITHUB, 'image': 'data:image/png;base64,' + base64.b64encode(png).decode()})
    shown, store = await _run(
        text, tmp_path, bands=[Band(over=2_000, action=Spill())], redact_secrets=SecretRedaction()
    )
    assert shown == snapshot("""\
[`fetch` returned 6.6 KB holding a base64 blob (4.9 KB decoded), saved apart and marked below; the whole output, unchanged, is handle '7217zk37ff'.]
{"token": "[secret withheld: GitHub Token]", "image": "[image/png data URL, 4.9 KB, saved as handle 'rn01cc9y9a'; image 1 below; view_tool_result_image zooms]"}\
""")
    original = await store.read(_handles(shown.split('\n', 1)[0])[0])
    assert GITHUB[:12].encode() not in original and b'[secret withheld: GitHub Token]' in original
    assert await store.read(_handles(shown.split('\n', 1)[1])[0]) == png


_HOSTILE = {
    'data: every 5 characters': 'data:' * 800_000,
    'headers without payloads': 'data:image/png;base64,!' * 180_000,
    'runs one short of a blob': ('Ab1' * 341 + '!') * 4_000,
    'padding storms': ('QUJD' * 300 + '=' * 7 + ' ') * 3_000,
    'one 4 MB run of one letter': 'A' * 4_000_000,
}


@pytest.mark.parametrize('name', list(_HOSTILE))
async def test_hostile_text_is_scanned_once_and_kept_as_it_was(name: str, tmp_path: Path) -> None:
    """Texts built to make a scanner backtrack or loop: one pass each (no regex backtracking over them), and they
    are spilled unchanged."""
    text = _HOSTILE[name]
    shown, store = await _run(text, tmp_path)
    assert 'base64 blob' not in shown
    handle = re.search(r"under handle '([^']+)'", shown)
    assert handle is not None
    assert await store.read(handle.group(1)) == text.encode()


async def test_64_blobs_at_most_move_out_of_one_return(tmp_path: Path) -> None:
    blob = base64.b64encode(_noise_png(20, 20)).decode()
    items = [f'data:image/png;base64,{blob}' for _ in range(80)]
    shown, store = await _run(items, tmp_path, bands=[Band(over=50_000, action=Spill())])
    header, body = shown.split('\n', 1)
    assert '64 base64 blobs' in header
    assert body.count('image/png data URL') == 64 and body.count('data:image/png;base64,') == 16
    assert json.loads(await store.read(_handles(header)[0])) == items


async def test_a_large_structured_value_keeps_its_json_valid(tmp_path: Path) -> None:
    """Over 256 KB, a structured value is scanned in its stored layout (one element per line), still valid JSON."""
    png = _noise_png(90, 90)
    rows = [{'id': i, 'note': 'ordinary row text ' * 4} for i in range(5_000)]
    rows[2_500]['thumbnail'] = 'data:image/png;base64,' + base64.b64encode(png).decode()
    shown, store = await _run(rows, tmp_path)
    header = shown.split('\n', 1)[0]
    assert header == snapshot(
        "[`fetch` returned 511.6 KB holding a base64 blob (24.5 KB decoded), saved apart and marked below; the whole output, unchanged, is handle '7217zk37ff'.]"
    )
    original = await store.read(_handles(header)[0])
    assert json.loads(original) == rows
    text_handle = re.search(r"Saved in full under handle '([^']+)'", shown)
    assert text_handle is not None
    stored = json.loads(await store.read(text_handle.group(1)))
    assert stored[2_500]['thumbnail'] == snapshot(
        "[image/png data URL, 24.5 KB, saved as handle 'rn01cc9y9a'; image 1 below; view_tool_result_image zooms]"
    )
    assert await store.read(_handles(stored[2_500]['thumbnail'])[0]) == png


async def test_an_image_blob_is_viewed_through_the_view_tool(tmp_path: Path) -> None:
    """The screenshot a JSON page carried as a data URL, looked at: the view tool fits it to the serving model."""
    png = _noise_png(2400, 1200, seed=11)
    page = json.dumps({'title': 'Dashboard', 'screenshot': 'data:image/png;base64,' + base64.b64encode(png).decode()})
    store = LocalFileStore(base_dir=tmp_path)

    def queries(handles: dict[str, str]) -> list[Call]:
        blob = _handles(script.shown[0].split('\n', 1)[1])[0]
        return [('view_tool_result_image', {'handle': blob}), ('view_tool_result_image', {'handle': blob, 'page': 2})]

    script = Script([('browse', {})], queries)
    agent = Agent(script.model(), capabilities=[OverflowingToolOutput(store=store)])
    agent.tool_plain(name='browse')(lambda: page)
    await agent.run('What does the dashboard show?', run_id=RUN_ID)
    shown, viewed, paged = script.shown
    assert shown.split('\n', 1)[1] == snapshot(
        '{"title": "Dashboard", "screenshot": "[image/png data URL, 8.7 MB, saved as handle \'rn01cc9y9a\'; image 1 below; view_tool_result_image zooms]"}'
    )
    (image,) = script.files[1]
    assert (viewed, Image.open(io.BytesIO(image.data)).size) == snapshot(
        ("Region x=0..2400, y=0..1200 of the 2400x1200 image 'rn01cc9y9a' (scaled to 1516x758):", (1516, 758))
    )
    assert paged == snapshot("'rn01cc9y9a' is not a PDF, so it has no pages: leave page out.")
