"""The official MCP filesystem server, the first one most users add, through real agent runs.

It returns every file, tree, search and listing twice: as a text block and as `structuredContent {content: <text>}`,
which pydantic-ai's `MCPToolset` hands over as `{'content': '<text>'}`. Reduced as the text it wraps, a big file is
stored as its lines, the preview shows lines (not one escaped JSON line), and what is planted in it is found by
`grep_tool_result` and `read_tool_result`: ERROR lines among 120,000, a fact 5 MB into a single 6 MB line, a file
deep in a tree, a path among a thousand search results. The server is the pinned npm package (`filesystem_server`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_harness.overflowing_tool_output import LocalFileStore, OverflowingToolOutput

from .filesystem_server import PACKAGE, PINNED, VERSION, filesystem_toolset, install

pytestmark = pytest.mark.anyio

LOG_LINES = 120_000
ERROR_EVERY = 400
"""One line in this many is an ERROR line: 300 of them."""
LOG_FACT = 'FACT-LOG: the nightly backup key lives in vault-7f3a'
LINE_FACT = 'FACT-LINE: release train 42 leaves at dawn'
LINE_FACT_AT = 5 * 1024 * 1024 + 17
"""Where the fact sits in the one-line file: past 4 MiB (a long line is searched in 4 MiB pieces)."""
TREE_NEEDLE = 'needle-7f3a.cfg'


@pytest.fixture(scope='module')
def server_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp('npm'))


@pytest.fixture(scope='module')
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the server may read: a big log, a one-line bundle, a tree of 1,000 files."""
    root = tmp_path_factory.mktemp('files')
    lines = [
        f'2026-12-06T10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker {i % 7} handled request {i}'
        for i in range(LOG_LINES)
    ]
    for i in range(7, LOG_LINES, ERROR_EVERY):
        lines[i] = f'2026-12-06T10:00:00 ERROR worker {i % 7} request {i} failed: upstream timeout'
    lines[87_654] = LOG_FACT
    (root / 'service.log').write_text('\n'.join(lines) + '\n')
    bundle = 'var a=1;' * (LINE_FACT_AT // 8 + 1)
    bundle = bundle[:LINE_FACT_AT] + LINE_FACT + bundle[LINE_FACT_AT:] + 'var z=26;' * 100_000
    (root / 'bundle.min.js').write_text(bundle)
    for d in range(40):
        for f in range(25):
            (root / 'src' / f'pkg{d:02d}').mkdir(parents=True, exist_ok=True)
            (root / 'src' / f'pkg{d:02d}' / f'module{f:02d}.txt').write_text('x')
    (root / 'src' / 'pkg31' / 'deep' / 'deeper').mkdir(parents=True)
    (root / 'src' / 'pkg31' / 'deep' / 'deeper' / TREE_NEEDLE).write_text('x')
    return root


@dataclass
class Session:
    """A scripted model: the first calls, then `follow(handle)`'s calls for each spilled return; it records all."""

    first: list[ToolCallPart]
    """The calls of the first step."""

    follow: Callable[[str], list[ToolCallPart]] = lambda handle: []
    """The calls made for the handle of each spilled return of the first step."""

    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    """The whole run, once it ended."""

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=self.first)
        if len(messages) == 3:
            handles = [h for p in messages[2].parts if isinstance(h := _handle(p), str)]
            calls = [call for handle in handles for call in self.follow(handle)]
            if calls:
                return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart('done')])

    def returns(self, tool: str) -> list[ToolReturnPart]:
        return [
            part
            for message in self.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_name == tool
        ]


def _handle(part: Any) -> object:
    return (part.metadata or {}).get('overflow_handle') if isinstance(part, ToolReturnPart) else None


@pytest.fixture
def run(server_script: Path, files: Path, tmp_path: Path) -> Iterator[Callable[[Session], Any]]:
    async def run_session(session: Session) -> LocalFileStore:
        store = LocalFileStore(base_dir=tmp_path / 'store')
        toolset = filesystem_toolset(server_script, files, tmp_path / 'server.log')
        agent = Agent(
            FunctionModel(session.respond), toolsets=[toolset], capabilities=[OverflowingToolOutput(store=store)]
        )
        result = await agent.run('go')
        session.messages = result.all_messages()
        return store

    yield run_session


def _plain(text: str, files: Path, handle: str) -> str:
    """`text` with the run's own handle and temp dir replaced, so a snapshot holds across runs."""
    return text.replace(handle, 'HANDLE').replace(str(files), '<files>')


def _spilled(part: ToolReturnPart) -> str:
    assert part.metadata is not None and part.metadata['overflow_action'] == 'spill', part.content
    return part.metadata['overflow_handle']


async def test_a_big_log_is_stored_and_previewed_as_its_lines(run: Callable[[Session], Any], files: Path) -> None:
    session = Session(
        [ToolCallPart('read_text_file', {'path': str(files / 'service.log')})],
        lambda handle: [
            ToolCallPart(
                'grep_tool_result', {'handle': handle, 'pattern': 'ERROR', 'max_matches': 2, 'context_lines': 0}
            ),
            ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'vault-7f3a'}),
            ToolCallPart('read_tool_result', {'handle': handle, 'offset': 87_654, 'limit': 3}),
            ToolCallPart('read_tool_result', {'handle': handle, 'offset': LOG_LINES - 1, 'limit': 1}),
        ],
    )
    store = await run(session)
    (spilled,) = session.returns('read_text_file')
    handle = _spilled(spilled)
    # Lossless: the stored payload is the file, byte for byte (not a JSON object holding it).
    assert await store.read(handle) == (files / 'service.log').read_bytes()
    preview = _plain(str(spilled.content), files, handle)
    assert '\\n' not in preview and 'Shape:' not in preview
    assert preview == snapshot("""\
[`read_text_file` returned too much to show (~1713576 tokens): {"content": <text>}. Saved in full under handle 'HANDLE' (<text> only): 120000 lines, 6734287 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Lines that look important (errors, failures, exit status):
808| 2026-12-06T10:00:00 ERROR worker 2 request 807 failed: upstream timeout
1208| 2026-12-06T10:00:00 ERROR worker 3 request 1207 failed: upstream timeout
1608| 2026-12-06T10:00:00 ERROR worker 4 request 1607 failed: upstream timeout
119608| 2026-12-06T10:00:00 ERROR worker 5 request 119607 failed: upstream timeout
First lines (1-2 of 120000):
1| 2026-12-06T10:00:00 INFO worker 0 handled request 0
2| 2026-12-06T10:00:01 INFO worker 1 handled request 1
Last line (120000):
120000| 2026-12-06T10:19:59 INFO worker 5 handled request 119999\
""")
    first_grep, fact_grep = session.returns('grep_tool_result')
    assert f'{LOG_LINES // ERROR_EVERY} matching lines' in str(first_grep.content)  # one per ERROR line
    assert _plain(str(first_grep.content), files, handle) == snapshot("""\
300 matching lines for 'ERROR' (literal, case-sensitive; 120000 lines searched). Showing the first 2, marked ">", with 0 lines of context:
-- match at line 8 (read around it: read_tool_result(handle='HANDLE', offset=3, limit=12)) --
>  8| 2026-12-06T10:00:00 ERROR worker 0 request 7 failed: upstream timeout
-- match at line 408 (read around it: offset=403, limit=12) --
>408| 2026-12-06T10:00:00 ERROR worker 1 request 407 failed: upstream timeout
(298 more not shown: raise max_matches (up to 100), or continue after the last one shown: grep_tool_result(handle='HANDLE', pattern='ERROR', context_lines=0, max_matches=2, offset=409).)\
""")
    assert _plain(str(fact_grep.content), files, handle) == snapshot("""\
1 matching line for 'vault-7f3a' (literal, case-sensitive; 120000 lines searched). Showing all 1, marked ">", with 2 lines of context:
-- match at line 87655 (read around it: read_tool_result(handle='HANDLE', offset=87650, limit=12)) --
 87653| 2026-12-06T10:20:52 INFO worker 5 handled request 87652
 87654| 2026-12-06T10:20:53 INFO worker 6 handled request 87653
>87655| FACT-LOG: the nightly backup key lives in vault-7f3a
 87656| 2026-12-06T10:20:55 INFO worker 1 handled request 87655
 87657| 2026-12-06T10:20:56 INFO worker 2 handled request 87656\
""")
    read, next_to_last = session.returns('read_tool_result')
    assert _plain(str(read.content), files, handle) == snapshot("""\
Stored result 'HANDLE': lines 87654-87656 of 120000 (6734287 bytes):
87654| 2026-12-06T10:20:53 INFO worker 6 handled request 87653
87655| FACT-LOG: the nightly backup key lives in vault-7f3a
87656| 2026-12-06T10:20:55 INFO worker 1 handled request 87655
(32344 more lines. Next page: read_tool_result(handle='HANDLE', offset=87657, limit=3).)\
""")
    # One line left: said in the singular, the parenthesis closed.
    assert _plain(str(next_to_last.content), files, handle) == snapshot("""\
Stored result 'HANDLE': lines 119999-119999 of 120000 (6734287 bytes):
119999| 2026-12-06T10:19:58 INFO worker 4 handled request 119998
(1 more line. Next page: read_tool_result(handle='HANDLE', offset=120000, limit=1).)\
""")


async def test_a_fact_past_4_mib_into_one_line_is_found(run: Callable[[Session], Any], files: Path) -> None:
    session = Session(
        [ToolCallPart('read_text_file', {'path': str(files / 'bundle.min.js')})],
        lambda handle: [
            ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': 'release train 42'}),
            ToolCallPart(
                'read_tool_result', {'handle': handle, 'unit': 'bytes', 'offset': LINE_FACT_AT, 'limit': len(LINE_FACT)}
            ),
        ],
    )
    store = await run(session)
    (spilled,) = session.returns('read_text_file')
    handle = _spilled(spilled)
    assert await store.read(handle) == (files / 'bundle.min.js').read_bytes()
    preview = _plain(str(spilled.content), files, handle)
    assert preview == snapshot("""\
[`read_text_file` returned too much to show (~1535740 tokens): {"content": <text>}. Saved in full under handle 'HANDLE' (<text> only): 1 line, 6142946 bytes; a preview follows.
grep_tool_result(handle, pattern) finds each match and its byte offset; read_tool_result(handle, unit='bytes', offset=N, limit=16000) reads 16000 bytes from byte N.]
Start of the one line:
var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;[... line cut: read on with unit='bytes', offset=160]\
""")
    (grep,) = session.returns('grep_tool_result')
    assert LINE_FACT in str(grep.content)
    assert _plain(str(grep.content), files, handle) == snapshot("""\
1 match inside lines longer than 1000 bytes for 'release train 42' (literal, case-sensitive; 1 line searched). Showing all 1, marked ">", with 2 lines of context:
-- match at line 1 --
>1| ...r a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;var a=1;vFACT-LINE: release train 42 leaves at dawnar a=1;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var z=26;var... [bytes 5242658-5243173 of the result, in line 1 (bytes 0-6142945); the match starts at byte 5242908]\
""")
    (read,) = session.returns('read_tool_result')
    assert _plain(str(read.content), files, handle) == snapshot("""\
Stored result 'HANDLE': bytes 5242897-5242938 of 6142946, starting in line 1 (edges moved to whole UTF-8 characters):
FACT-LINE: release train 42 leaves at dawn
(900007 more bytes: read_tool_result(handle='HANDLE', unit='bytes', offset=5242939, limit=42).)\
""")


async def test_a_directory_tree_is_stored_as_json_one_entry_per_line(
    run: Callable[[Session], Any], files: Path
) -> None:
    session = Session(
        [ToolCallPart('directory_tree', {'path': str(files / 'src')})],
        lambda handle: [
            ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': TREE_NEEDLE, 'context_lines': 3})
        ],
    )
    await run(session)
    (spilled,) = session.returns('directory_tree')
    handle = _spilled(spilled)
    preview = _plain(str(spilled.content), files, handle)
    assert preview == snapshot("""\
[`directory_tree` returned too much to show (~22039 tokens): {"content": <text>}. Saved in full under handle 'HANDLE' (<text> only) as JSON, one element per line: 73 lines, 40300 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
Shape: array[40] of {name: str, type: str, children: array[25-26] of {name: str, type: str}}
First line (2 of 73):
2|  {"name":"pkg00","type":"directory","children":[{"name":"module00.txt","type":"file"},{"name":"module01.txt","type":"file"},{"name":"module02.txt","type":"file"[... line cut: read on with unit='bytes', offset=162]
Last line (72):
72|  {"name":"pkg39","type":"directory","children":[{"name":"module00.txt","type":"file"},{"name":"module01.txt","type":"file"},{"name":"module02.txt","type":"file"[... line cut: read on with unit='bytes', offset=39458]\
""")
    (grep,) = session.returns('grep_tool_result')
    assert _plain(str(grep.content), files, handle) == snapshot("""\
1 matching line for 'needle-7f3a.cfg' (literal, case-sensitive; 73 lines searched). Showing all 1, marked ">", with 3 lines of context:
-- match at line 37 (read around it: read_tool_result(handle='HANDLE', offset=32, limit=12)) --
 34|   "name":"pkg31",
 35|   "type":"directory",
 36|   "children":[
>37|    {"name":"deep","type":"directory","children":[{"name":"deeper","type":"directory","children":[{"name":"needle-7f3a.cfg","type":"file"}]}]},
 38|    {"name":"module00.txt","type":"file"},
 39|    {"name":"module01.txt","type":"file"},
 40|    {"name":"module02.txt","type":"file"},\
""")


async def test_a_search_is_stored_one_path_per_line(run: Callable[[Session], Any], files: Path) -> None:
    session = Session(
        [ToolCallPart('search_files', {'path': str(files / 'src'), 'pattern': '**/*'})],
        lambda handle: [ToolCallPart('grep_tool_result', {'handle': handle, 'pattern': TREE_NEEDLE})],
    )
    await run(session)
    (spilled,) = session.returns('search_files')
    handle = _spilled(spilled)
    assert _plain(str(spilled.content), files, handle) == snapshot("""\
[`search_files` returned too much to show (~22821 tokens): {"content": <text>}. Saved in full under handle 'HANDLE' (<text> only): 1043 lines, 90226 bytes; a preview follows.
grep_tool_result(handle, pattern) finds lines; read_tool_result(handle, offset=N) reads 200 lines from line N; from_end=True reads the end.]
First lines (1-4 of 1043):
1| <files>/src/pkg00
2| <files>/src/pkg00/module00.txt
3| <files>/src/pkg00/module01.txt
4| <files>/src/pkg00/module02.txt
Last lines (1042-1043):
1042| <files>/src/pkg39/module23.txt
1043| <files>/src/pkg39/module24.txt\
""")
    (grep,) = session.returns('grep_tool_result')
    assert _plain(str(grep.content), files, handle) == snapshot("""\
1 matching line for 'needle-7f3a.cfg' (literal, case-sensitive; 1043 lines searched). Showing all 1, marked ">", with 2 lines of context:
-- match at line 810 (read around it: read_tool_result(handle='HANDLE', offset=805, limit=12)) --
 808| <files>/src/pkg31/deep
 809| <files>/src/pkg31/deep/deeper
>810| <files>/src/pkg31/deep/deeper/needle-7f3a.cfg
 811| <files>/src/pkg31/module00.txt
 812| <files>/src/pkg31/module01.txt\
""")


async def test_an_error_message_too_long_to_show_is_headed_as_the_failure(
    run: Callable[[Session], Any], files: Path
) -> None:
    outside = '/outside/' + 'a' * 30_000
    session = Session([ToolCallPart('read_text_file', {'path': outside})])
    await run(session)
    (failed,) = session.returns('read_text_file')
    assert failed.outcome == 'retried'
    handle = _spilled(failed)
    assert _plain(str(failed.content), files, handle).replace('a' * 100, 'a…') == snapshot("""\
[`read_text_file` failed with an error message too long to show (~7533 tokens). Saved in full under handle 'HANDLE': 1 line, 30130 bytes; a preview follows.
grep_tool_result(handle, pattern) finds each match and its byte offset; read_tool_result(handle, unit='bytes', offset=N, limit=16000) reads 16000 bytes from byte N.]
Start of the one line:
Access denied - path outside allowed directories: /outside/a…a[... line cut: read on with unit='bytes', offset=160]\
""")


async def test_a_small_result_reaches_the_model_as_the_server_sent_it(
    run: Callable[[Session], Any], files: Path
) -> None:
    session = Session([ToolCallPart('list_allowed_directories', {})])
    await run(session)
    (listed,) = session.returns('list_allowed_directories')
    assert listed.metadata is None
    assert listed.content == {'content': f'Allowed directories:\n{files}'}


def test_the_server_run_is_the_version_the_project_pins(server_script: Path) -> None:
    installed = json.loads((server_script.parents[1] / 'package.json').read_text())['version']
    lock = json.loads((PINNED / 'package-lock.json').read_text())
    assert installed == VERSION == lock['packages'][f'node_modules/{PACKAGE}']['version']


def _docs_example() -> str:
    """The code block of docs/mcp.md's filesystem section."""
    text = (Path(__file__).resolve().parents[2] / 'docs' / 'mcp.md').read_text()
    section = text[text.index('## The filesystem server') :]
    return section[section.index('```python\n') + len('```python\n') : section.index('\n```\n')]


def test_the_docs_example_runs_against_the_pinned_server(server_script: Path, tmp_path: Path) -> None:
    # The example starts the server as a user would, `npx -y <package>@<version>`; here `npx` is a shim that runs
    # the pinned install (no download, nothing written outside tmp_path), and refuses any other package or version.
    source = _docs_example()
    assert f"'{PACKAGE}@{VERSION}'" in source  # the docs name the version the tests pin
    node = shutil.which('node')
    assert node is not None
    shim = tmp_path / 'bin' / 'npx'
    shim.parent.mkdir()
    shim.write_text(
        '#!/bin/sh\n'
        f'[ "$1" = "-y" ] && [ "$2" = "{PACKAGE}@{VERSION}" ] || {{ echo "npx shim: unexpected $*" >&2; exit 2; }}\n'
        'shift 2\n'
        f'exec "{node}" "{server_script}" "$@"\n'
    )
    shim.chmod(0o755)
    (tmp_path / 'example.py').write_text(source)
    (tmp_path / 'tmp').mkdir()
    env = {**os.environ, 'PATH': f'{shim.parent}{os.pathsep}{os.environ["PATH"]}', 'TMPDIR': str(tmp_path / 'tmp')}
    done = subprocess.run(
        [sys.executable, 'example.py'], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
