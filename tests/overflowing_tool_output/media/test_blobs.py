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

import pytest
from inline_snapshot import snapshot
from PIL import Image
from pydantic_ai import Agent

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from .._scripted_queries import RUN_ID, Script

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
[`browse` returned 3.0 MB holding a base64 blob (2.3 MB decoded), saved apart and marked below; the text as returned is handle '7217zk37ff'.]
{"url": "https://example.com/", "title": "Example", "screenshot": "[image/png data URL, 2.3 MB, saved as handle 'rn01cc9y9a']", "status": 200}\
""")
    header, body = shown.split('\n', 1)
    assert json.loads(body)['status'] == 200  # the JSON stays valid
    original, blob = _handles(header)[0], _handles(body)[0]
    assert await store.read(original) == page.encode()
    assert await store.read(blob) == png
