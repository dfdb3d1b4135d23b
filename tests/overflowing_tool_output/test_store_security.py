"""Handles can never reach outside the store root, and errors never reveal filesystem paths."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pydantic_ai_harness.overflowing_tool_output._query_tools._tools import build_query_toolset
from pydantic_ai_harness.overflowing_tool_output.stores import HandleNotFoundError, LocalFileStore
from pydantic_ai_harness.overflowing_tool_output.stores._paths import (
    MAX_CANDIDATES,
    MAX_WRITTEN_HANDLE_LENGTH,
    candidate_handles,
    handle_for_key,
    handle_for_names,
    names_for_handle,
)

pytestmark = pytest.mark.anyio

SECRET = b'TOP-SECRET-OUTSIDE-THE-ROOT'

TRAVERSAL_CORPUS: list[str] = [
    '..',
    '../',
    '../..',
    '../../etc/passwd',
    '../outside/secret',
    'run/../../outside/secret',
    'run/call/../../../outside/secret',
    '/etc/passwd',
    '//etc/passwd',
    '/outside/secret',
    '\\..\\..\\outside\\secret',
    '..\\outside\\secret',
    'C:\\Windows\\system32',
    'C:/Windows/system32',
    '\\\\server\\share\\x',
    '.',
    './',
    './run/call/0',
    'run/./call/0',
    'run//call/0',
    'run/call/0/',
    '/run/call/0',
    'run/call/0\x00',
    '\x00',
    'run\x00/call/0',
    '..\x00/secret',
    '%2e%2e/outside/secret',
    '%2e%2e%2foutside%2fsecret',
    '..%2f..%2foutside%2fsecret',
    '%252e%252e/outside',
    '..%00/secret',
    '~2e~2e/outside/secret',
    '~2e~2e~2foutside~2fsecret',
    '~2f/outside',
    '\u2025/outside/secret',  # two-dot leader
    '\uff0e\uff0e/outside/secret',  # fullwidth full stops
    '\u2024\u2024/outside/secret',  # one-dot leaders
    '..\u2215outside\u2215secret',  # division slash
    '..\u2044outside',  # fraction slash
    '\u202e../outside',  # right-to-left override
    '\ufeff../outside',  # byte-order mark
    'run/call/0\n',
    'run/call/0\r\n../../x',
    '\t../outside',
    ' ../outside ',
    'a' * 5000,
    '/'.join(['a'] * 500),
    '../' * 200 + 'etc/passwd',
    'x' * 300 + '/0',
    'evil/secret',
    'evil',
    'link-file',
    'fifo',
    'run/evil-dir/secret',
    'run/call/0.out',
    'run/call/0.idx',
    'run/call/.tmp-0000',
    'outside/secret',
    '$HOME/.ssh/id_rsa',
    '~/.ssh/id_rsa',
    '~root/.ssh',
    'file:///etc/passwd',
    'nul',
    'CON',
    'run/call/0;rm -rf /',
    '*',
    'run/*/0',
    '?',
]


@pytest.fixture
def planted(tmp_path: Path) -> tuple[LocalFileStore, Path]:
    """A store with one real payload, and traps planted inside its root that point outside it."""
    outside = tmp_path / 'outside'
    outside.mkdir()
    for name in ('secret', 'secret.out', 'passwd.out'):
        (outside / name).write_bytes(SECRET)
    store = LocalFileStore(base_dir=tmp_path / 'root')
    anyio.run(store.write, 'run/call/0', b'legit payload')
    root = store.root
    (root / 'evil').symlink_to(outside, target_is_directory=True)
    (root / 'evil.out').symlink_to(outside / 'secret')
    (root / 'link-file.out').symlink_to(outside / 'secret')
    (root / 'run' / 'evil-dir').symlink_to(outside, target_is_directory=True)
    (root / 'run' / 'evil-dir.out').symlink_to(outside / 'secret')
    os.mkfifo(root / 'fifo.out')
    return store, tmp_path


@pytest.mark.parametrize('handle', TRAVERSAL_CORPUS)
async def test_traversal_corpus_is_refused_without_leaks(handle: str, planted: tuple[LocalFileStore, Path]) -> None:
    store, base = planted
    with pytest.raises(HandleNotFoundError) as info:
        await store.read(handle)
    message = str(info.value)
    assert str(base) not in message and 'outside' not in message and '/' not in message
    for method, args in (('size', ()), ('read_range', (0, 100)), ('line_index', ())):
        with pytest.raises(HandleNotFoundError):
            await getattr(store, method)(handle, *args)
    assert await store.delete(handle) is False


async def test_corpus_is_large_enough() -> None:
    assert len(TRAVERSAL_CORPUS) >= 50


async def test_query_tools_answer_corpus_handles_with_guidance(planted: tuple[LocalFileStore, Path]) -> None:
    store, base = planted
    toolset = build_query_toolset(store)
    read: Any = toolset.tools['read_tool_result'].function
    grep: Any = toolset.tools['grep_tool_result'].function
    for handle in TRAVERSAL_CORPUS:
        for answer in (await read(handle=handle), await grep(handle=handle, pattern='SECRET')):
            if handle.strip() == 'run/call/0':  # Surrounding whitespace is forgiven: it is the legit handle.
                note, answer = answer.split('\n', 1)
                assert note == f'(Read {handle!r} as the handle {"run/call/0"!r}.)'
                assert 'legit payload' in answer or answer.startswith('No line matches')
                continue
            assert answer.startswith('No stored result found under handle'), answer
            assert str(base) not in answer
            assert SECRET.decode() not in answer


async def test_symlinked_payload_inside_the_root_is_not_followed(planted: tuple[LocalFileStore, Path]) -> None:
    store, _ = planted
    real = next(store.root.rglob('0.out'))
    real.unlink()
    real.symlink_to(planted[1] / 'outside' / 'secret')
    with pytest.raises(HandleNotFoundError):
        await store.read('run/call/0')


async def test_symlinked_directory_inside_the_root_is_not_followed_on_write(
    planted: tuple[LocalFileStore, Path],
) -> None:
    store, base = planted
    with pytest.raises(OSError):
        await store.write('evil/new', b'would land outside')
    assert not (base / 'outside' / 'new.out').exists()


async def test_listing_skips_planted_links(planted: tuple[LocalFileStore, Path]) -> None:
    store, _ = planted
    assert [p.handle for p in await store.list()] == ['run/call/0']


async def test_legit_payload_still_reads(planted: tuple[LocalFileStore, Path]) -> None:
    store, _ = planted
    assert await store.read('run/call/0') == b'legit payload'


_TRICKY = st.sampled_from(['..', '.', '/', '\\', '\x00', '~2e', '~2f', '%2e', 'evil', 'secret', 'run', 'call', '0'])
_HANDLES = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(_TRICKY, st.text(max_size=8)), max_size=12).map(''.join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(handle=_HANDLES)
def test_property_reads_never_escape_and_never_reveal_paths(handle: str, planted: tuple[LocalFileStore, Path]) -> None:
    store, base = planted

    async def attempt() -> bytes | str:
        try:
            return await store.read(handle)
        except HandleNotFoundError as exc:
            return str(exc)

    result = anyio.run(attempt)
    if isinstance(result, bytes):
        assert result == b'legit payload'
        assert handle == 'run/call/0'
    else:
        assert str(base) not in result
        assert os.sep not in result


_KEYS = st.one_of(
    st.text(max_size=120),
    st.text(alphabet='QZ-~=./:ü', max_size=400),
    st.lists(st.sampled_from(['Q' * 80, 'q' * 96, '~~2', '/', 'run', '=']), max_size=10).map(''.join),
)


@settings(max_examples=300, deadline=None)
@given(first=_KEYS, second=_KEYS)
def test_property_key_encoding_is_injective_and_confined(first: str, second: str) -> None:
    handle_a, handle_b = handle_for_key(first), handle_for_key(second)
    if first != second:
        assert handle_a != handle_b
    for handle in (handle_a, handle_b):
        names = names_for_handle(handle)
        assert names is not None
        for name in names:
            assert name and '/' not in name and '\x00' not in name and '.' not in name
            assert name == name.lower() and len(name.encode()) <= 250
    names_a, names_b = names_for_handle(handle_a), names_for_handle(handle_b)
    if first != second:
        assert names_a != names_b
    # Every candidate handle of a key fits in file names, lists back to itself, and names no other key.
    candidates_a = [handle_a, f'{handle_a}~~2', f'{handle_a}~~{MAX_CANDIDATES}']
    assert candidates_a == [*islice(candidate_handles(handle_a), 2), f'{handle_a}~~{MAX_CANDIDATES}']
    for candidate in candidates_a:
        assert len(candidate) <= MAX_WRITTEN_HANDLE_LENGTH
        names = names_for_handle(candidate)
        assert names is not None and all(len(name) <= 250 for name in names)
        assert handle_for_names(names) == candidate
        if first != second:
            assert candidate != handle_b and not candidate.startswith(f'{handle_b}~~')
