"""A soak of documents and base64 blobs: thousands of agent runs in one process, each storing blobs or a PDF (its
pages read and one rendered through the view tool), under a low descriptor limit; descriptors, threads and memory
stay flat (a PDF document or bitmap left open per render would show within a few hundred runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import asyncio, base64, gc, io, json, os, random, resource, sys, threading
from pathlib import Path

resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
from PIL import Image
from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput
from tests.overflowing_tool_output.media._pdf_files import pdf_with_pages

root, runs, warmup = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
buffer = io.BytesIO()
Image.frombytes('RGB', (64, 64), random.Random(1).randbytes(64 * 64 * 3)).save(buffer, 'PNG')
url = 'data:image/png;base64,' + base64.b64encode(buffer.getvalue()).decode()
page = json.dumps({'rows': [{'id': i, 'note': 'x' * 40} for i in range(200)], 'shot': url})
pdf = pdf_with_pages([[f'page {p} line {i}' for i in range(30)] for p in range(1, 41)])  # 20 KB: over the band
counts = {'blobs': 0, 'pages': 0}


def respond(messages, info):
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart('fetch', {}, tool_call_id='call_0')])
    text = str(returns[0].content)
    if len(returns) == 1 and 'page=N' in text:
        handle = text.split("handle '")[1].split("'")[0]
        return ModelResponse(parts=[ToolCallPart('view_tool_result_image', {'handle': handle, 'page': 3})])
    if 'image/png data URL' in text:
        counts['blobs'] += 1
    if len(returns) == 2 and 'Region' in str(returns[1].content):
        counts['pages'] += 1
    return ModelResponse(parts=[TextPart('ok')])


def sample():
    gc.collect()
    with open('/proc/self/statm') as statm:
        rss = int(statm.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    return {'fds': len(os.listdir('/proc/self/fd')), 'threads': threading.active_count(), 'rss': rss}


async def main():
    capability = OverflowingToolOutput(store=LocalFileStore(base_dir=root))
    start = None
    for run in range(runs):
        value = BinaryContent(pdf, media_type='application/pdf') if run % 10 == 0 else page
        agent = Agent(FunctionModel(respond), capabilities=[capability])
        agent.tool_plain(name='fetch')(lambda: value)
        await agent.run('go')
        if run + 1 == warmup:
            start = sample()
    print(json.dumps({**counts, 'start': start, 'end': sample()}))


asyncio.run(main())
"""

RUNS = 2_000
WARMUP = 100


def test_two_thousand_runs_of_blobs_and_pdfs_leave_descriptors_threads_and_memory_flat(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, '-c', _CHILD, str(tmp_path / 'store'), str(RUNS), str(WARMUP)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3_000:]
    result = json.loads(completed.stdout.splitlines()[-1])
    print(f'\nmedia soak: {result}')
    assert result['blobs'] == RUNS - RUNS // 10  # every JSON page had its data URL moved out
    assert result['pages'] == RUNS // 10  # every PDF had a page rendered through the view tool
    start, end = result['start'], result['end']
    assert end['fds'] <= start['fds'] + 3
    assert end['threads'] <= start['threads'] + 1
    assert end['rss'] - start['rss'] < 64 << 20
