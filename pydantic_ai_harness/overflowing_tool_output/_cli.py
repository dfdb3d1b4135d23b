"""The operator CLI over a spill store: `python -m pydantic_ai_harness.overflowing_tool_output` / `pyai-overflow`.

`ls`, `show`, `grep`, `stats` and `prune` on the default `LocalFileStore` root or `--root DIR`. Every
command takes `--json` for scripts. Exit codes follow shell habits: 0 success, 1 nothing found (no match,
unknown handle), 2 usage or store errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any, TextIO

from ._query import (
    Matcher,
    PatternError,
    grep_lines as scan_lines,
    open_payload,
    read_byte_window,
    read_lines,
    read_lines_at,
)
from ._spec import SpecError, parse_duration
from .stores import HandleNotFoundError, LocalFileStore, StoredPayload, StoreRootError

__all__ = ('main',)

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_ERROR = 2


class CliError(Exception):
    """A user-facing error: printed to stderr with exit code 2."""


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text, 'duration')
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix('duration: ')) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='pyai-overflow',
        description='Inspect and clean the store where OverflowingToolOutput spills oversized tool outputs.',
    )
    parser.add_argument('--root', help='the store root (default: the per-user LocalFileStore root)')
    parser.add_argument('--json', action='store_true', help='machine-readable output')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    ls = commands.add_parser('ls', help='list stored payloads (handle, size, age, run id)')
    ls.add_argument('--run', help='only this run id (the first segment of the handle)')
    ls.add_argument('--older-than', type=_duration, metavar='AGE', help='only payloads older than AGE (e.g. 6h)')
    ls.add_argument('--newer-than', type=_duration, metavar='AGE', help='only payloads newer than AGE')

    show = commands.add_parser('show', help='print a stored payload, or a range of it')
    show.add_argument('handle')
    show.add_argument('--lines', metavar='A:B', help='1-based inclusive line range, e.g. 100:200 or 100:')
    show.add_argument('--bytes', metavar='A:B', help='byte range [A, B), e.g. 0:4096')

    grep = commands.add_parser('grep', help='print the lines of a payload that contain a pattern (like grep -n)')
    grep.add_argument('handle')
    grep.add_argument('pattern')
    grep.add_argument('-E', '--regex', action='store_true', help='the pattern is an RE2 regular expression')
    grep.add_argument('-m', '--max', type=int, default=1_000, help='stop after this many matching lines')

    commands.add_parser('stats', help='count, total size, oldest and newest payload')

    prune = commands.add_parser('prune', help='delete payloads older than an age (dry run unless --yes)')
    prune.add_argument('--older-than', type=_duration, required=True, metavar='AGE', help='e.g. 6h, 30m, 2d')
    prune.add_argument('--yes', action='store_true', help='really delete (default: only list what would go)')
    return parser


def _range(text: str, what: str) -> tuple[int, int | None]:
    start_text, sep, end_text = text.partition(':')
    try:
        start = int(start_text) if start_text else None
        end = int(end_text) if end_text else None
    except ValueError:
        raise CliError(f'--{what} takes A:B with whole numbers, got {text!r}') from None
    if not sep or start is None or start < 0 or (end is not None and end < start):
        raise CliError(f'--{what} takes A:B with 0 <= A <= B (B may be left out), got {text!r}')
    return start, end


def _age(payload: StoredPayload, now: float) -> float:
    return max(0.0, now - payload.modified)


def _human_age(seconds: float) -> str:
    for unit, size in (('d', 86_400), ('h', 3_600), ('m', 60)):
        if seconds >= size:
            return f'{seconds / size:.1f}{unit}'
    return f'{seconds:.0f}s'


async def _listing(store: LocalFileStore) -> list[StoredPayload]:
    return sorted(await store.list(), key=lambda p: p.modified)


async def _ls(store: LocalFileStore, options: argparse.Namespace, out: TextIO) -> int:
    now = time.time()
    rows = [
        p
        for p in await _listing(store)
        if (options.run is None or p.handle.split('/', 1)[0] == options.run)
        and (options.older_than is None or _age(p, now) > options.older_than.total_seconds())
        and (options.newer_than is None or _age(p, now) < options.newer_than.total_seconds())
    ]
    if options.json:
        json.dump(
            [{**asdict(p), 'age_seconds': round(_age(p, now), 3), 'run_id': p.handle.split('/', 1)[0]} for p in rows],
            out,
            indent=1,
        )
        out.write('\n')
    else:
        out.writelines(f'{p.size:>12,}  {_human_age(_age(p, now)):>7}  {p.handle}\n' for p in rows)
    return EXIT_OK


async def _show(store: LocalFileStore, options: argparse.Namespace, out: TextIO) -> int:
    if options.lines and options.bytes:
        raise CliError('give --lines or --bytes, not both')
    payload = await open_payload(store, options.handle)
    if options.bytes:
        start, end = _range(options.bytes, 'bytes')
        window = await read_byte_window(payload, start, (end or payload.size) - start, utf8_edges=False)
        if options.json:
            json.dump(
                {'handle': options.handle, 'start': window.start, 'end': window.end, 'hex': window.data.hex()}, out
            )
            out.write('\n')
        else:
            out.write(window.data.decode('utf-8', 'replace'))
        return EXIT_OK
    first, last = _range(options.lines, 'lines') if options.lines else (1, None)
    first = max(first, 1)
    total = payload.index.line_count
    count = (min(last, total) if last is not None else total) - first + 1
    lines = await read_lines(payload, first - 1, max(count, 0), max_line_chars=sys.maxsize)
    if options.json:
        json.dump({'handle': options.handle, 'lines': [{'number': ln.number, 'text': ln.text} for ln in lines]}, out)
        out.write('\n')
    else:
        out.writelines(line.text + '\n' for line in lines)
    return EXIT_OK


async def _grep(store: LocalFileStore, options: argparse.Namespace, out: TextIO) -> int:
    try:
        matcher = Matcher.compile(options.pattern, is_regex=options.regex)
    except PatternError as exc:
        raise CliError(f'bad pattern: {exc}') from None
    if options.max < 1:
        raise CliError('--max must be at least 1')
    payload = await open_payload(store, options.handle)
    result = await scan_lines(payload, matcher, max_hits=options.max, stop_when_full=True, deadline=float('inf'))
    lines = await read_lines_at(payload, [(hit.line, hit.line_start) for hit in result.hits], sys.maxsize)
    if options.json:
        json.dump(
            {
                'handle': options.handle,
                'total': result.total,
                'complete': result.complete,
                'matches': [{'line': ln.number, 'text': ln.text} for ln in lines],
            },
            out,
        )
        out.write('\n')
    else:
        out.writelines(f'{line.number}:{line.text}\n' for line in lines)
    return EXIT_OK if result.total else EXIT_NOT_FOUND


async def _stats(store: LocalFileStore, options: argparse.Namespace, out: TextIO) -> int:
    rows = await _listing(store)
    now = time.time()
    stats: dict[str, Any] = {
        'root': str(store.root),
        'count': len(rows),
        'total_bytes': sum(p.size for p in rows),
        'oldest': rows[0].handle if rows else None,
        'oldest_age_seconds': round(_age(rows[0], now), 3) if rows else None,
        'newest': rows[-1].handle if rows else None,
        'runs': len({p.handle.split('/', 1)[0] for p in rows}),
    }
    if options.json:
        json.dump(stats, out)
        out.write('\n')
    else:
        out.write(f'root:    {stats["root"]}\n')
        out.write(f'count:   {stats["count"]:,} payloads from {stats["runs"]:,} runs\n')
        out.write(f'size:    {stats["total_bytes"]:,} bytes\n')
        if rows:
            out.write(f'oldest:  {rows[0].handle} ({_human_age(_age(rows[0], now))} old)\n')
            out.write(f'newest:  {rows[-1].handle}\n')
    return EXIT_OK


async def _prune(store: LocalFileStore, options: argparse.Namespace, out: TextIO) -> int:
    limit: timedelta = options.older_than
    now = time.time()
    doomed = [p for p in await _listing(store) if _age(p, now) > limit.total_seconds()]
    deleted = 0
    if options.yes:
        for payload in doomed:
            deleted += await store.delete(payload.handle)
    if options.json:
        json.dump(
            {'dry_run': not options.yes, 'matched': [p.handle for p in doomed], 'deleted': deleted},
            out,
        )
        out.write('\n')
    else:
        verb = 'deleted' if options.yes else 'would delete'
        for payload in doomed:
            out.write(f'{verb}  {payload.size:>12,}  {payload.handle}\n')
        total = sum(p.size for p in doomed)
        out.write(f'{verb} {len(doomed):,} payloads ({total:,} bytes)')
        out.write('\n' if options.yes else '; run again with --yes to delete them\n')
    return EXIT_OK


_COMMANDS = {'ls': _ls, 'show': _show, 'grep': _grep, 'stats': _stats, 'prune': _prune}


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code."""
    stdout: TextIO = out or sys.stdout
    stderr: TextIO = err or sys.stderr
    parser = _parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_ERROR if exit_.code else EXIT_OK
    try:
        store = LocalFileStore(base_dir=options.root)
        return asyncio.run(_COMMANDS[options.command](store, options, stdout))
    except HandleNotFoundError as exc:
        stderr.write(f'pyai-overflow: {exc}\n')
        return EXIT_NOT_FOUND
    except (CliError, StoreRootError) as exc:
        stderr.write(f'pyai-overflow: {exc}\n')
        return EXIT_ERROR
    except OSError as exc:
        stderr.write(f'pyai-overflow: {exc.strerror or exc}\n')
        return EXIT_ERROR
