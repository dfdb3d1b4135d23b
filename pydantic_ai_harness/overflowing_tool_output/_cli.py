r"""The operator CLI over a spill store: `python -m pydantic_ai_harness.overflowing_tool_output` / `pyai-overflow`.

`ls`, `show`, `grep`, `rm`, `stats` and `prune` on the default `LocalFileStore` root or `--root DIR`. Every
command takes `--json` for scripts; options go before or after the command. Exit codes follow shell habits:
0 success, 1 nothing found (no match, unknown handle), 2 usage or store errors (a root that does not
exist is one, unless `--create` is given).

Stored payloads are tool output, which is attacker text: control characters in it are printed escaped
(`\x1b`, `\u202e`), so a stored escape sequence cannot act on the operator's terminal; `--raw` prints them
as they are, on purpose.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TextIO

from .._clash import claim_clash_report, installed_version
from ._rendering._visible import visible as escaped
from .stores._local_fs import StoreRootError, default_root
from .stores._paths import is_short_handle, names_for_handle
from .stores._protocol import HandleNotFoundError

if TYPE_CHECKING:
    from .stores._local import LocalFileStore
    from .stores._protocol import StoredPayload

# Only the standard library and the light modules above load at start-up: `--version` and `--help` answer in well
# under 150 ms. The store, the query and grep code (and asyncio) are imported by the commands that use them; no
# command imports pydantic-ai (bench/bench_cli.py measures it).

__all__ = ('main',)

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_ERROR = 2


class CliError(Exception):
    """A user-facing error: printed to stderr with exit code 2."""


def visible(text: str, *, raw: bool = False) -> str:
    """`text` with every control character a terminal could act on written as a Python-style escape (as the model
    sees it too), or as it is with `raw`.
    """
    return text if raw else escaped(text)


def _plural(count: int, noun: str) -> str:
    return f'{count:,} {noun}' if count == 1 else f'{count:,} {noun}s'


def _duration(text: str) -> timedelta:
    from ._spec import SpecError, parse_duration

    try:
        return parse_duration(text, 'duration')
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix('duration: ')) from None


def _default_root_text() -> str:
    try:
        return default_root()
    except Exception as exc:  # noqa: BLE001 - help must print whatever the environment is
        return f'(cannot be resolved here: {exc})'


_EPILOG = """\
exit codes:
  0  success
  1  nothing found: no line matched, or no payload has that handle
  2  usage error, or the store root is missing (see --create) or unusable

ages (AGE): a number of seconds or a duration such as 90s, 30m, 6h, 2d, 1w; it must be positive.
control characters in stored output are printed escaped (\\x1b); --raw prints them as they are.

default root: {root}
"""


def _common_options(parser: argparse.ArgumentParser, *, default: Any) -> None:
    """`--root`, `--create` and `--json`, accepted before the command and after it.

    The copies after the command default to `SUPPRESS`, so they only override what was given before it.
    """
    parser.add_argument(
        '--root', metavar='DIR', default=default, help='the store root (default: the per-user LocalFileStore root)'
    )
    parser.add_argument(
        '--create',
        action='store_true',
        default=default if default is argparse.SUPPRESS else False,
        help='create the root (mode 0700) when it does not exist, instead of failing',
    )
    parser.add_argument(
        '--json',
        action='store_true',
        default=default if default is argparse.SUPPRESS else False,
        help='machine-readable output',
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='pyai-overflow',
        description='Inspect and clean the store where OverflowingToolOutput spills oversized tool outputs.',
        epilog=_EPILOG.format(root=_default_root_text()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('--version', action='version', version=f'%(prog)s {installed_version()}')
    _common_options(parser, default=None)
    common = argparse.ArgumentParser(add_help=False)
    _common_options(common, default=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=help, parents=[common])

    ls = command('ls', 'list stored payloads (size, age, short handle, full handle)')
    ls.add_argument('--run', help='only this run id (the first segment of the handle)')
    ls.add_argument('--older-than', type=_duration, metavar='AGE', help='only payloads older than AGE (e.g. 6h)')
    ls.add_argument('--newer-than', type=_duration, metavar='AGE', help='only payloads newer than AGE')

    show = command('show', 'print a stored payload, or a range of it')
    show.add_argument('handle')
    show.add_argument('--lines', metavar='A:B', help='1-based inclusive line range, e.g. 100:200 or 100:')
    show.add_argument('--bytes', metavar='A:B', help='0-based byte range [A, B), e.g. 0:4096 or 4096:')
    show.add_argument('--raw', action='store_true', help='print control characters unescaped (--bytes: the bytes)')

    grep = command('grep', 'print the lines of a payload that contain a pattern (like grep -n)')
    grep.add_argument('handle')
    grep.add_argument('pattern')
    grep.add_argument('-E', '--regex', action='store_true', help='the pattern is an RE2 regular expression')
    grep.add_argument('-m', '--max', type=int, default=1_000, help='stop after this many matching lines')
    grep.add_argument('--raw', action='store_true', help='print control characters unescaped')

    rm = command('rm', 'delete stored payloads by handle')
    rm.add_argument('handles', nargs='+', metavar='HANDLE')

    command('stats', 'count, total size, oldest and newest payload')

    prune = command('prune', 'delete payloads older than an age, and the directories they leave empty')
    prune.add_argument('--older-than', type=_duration, required=True, metavar='AGE', help='e.g. 6h, 30m, 2d, 3600')
    prune.add_argument('--yes', action='store_true', help='really delete (default: only list what would go)')
    return parser


def _range(text: str, what: str, *, first: int) -> tuple[int, int | None]:
    """`A:B` with `first <= A` and `A <= B` (B may be left out): 1-based lines, 0-based bytes."""
    start_text, sep, end_text = text.partition(':')
    try:
        start = int(start_text) if start_text else None
        end = int(end_text) if end_text else None
    except ValueError:
        raise CliError(f'--{what} takes A:B with whole numbers, got {text!r}') from None
    if not sep or start is None or start < first or (end is not None and end < start):
        raise CliError(f'--{what} takes A:B with {first} <= A <= B (B may be left out), got {text!r}')
    return start, end


def _age(payload: StoredPayload, now: float) -> float:
    return max(0.0, now - payload.modified)


def _human_age(seconds: float) -> str:
    for unit, size in (('d', 86_400), ('h', 3_600), ('m', 60)):
        if seconds >= size:
            return f'{seconds / size:.1f}{unit}'
    return f'{seconds:.0f}s'


def _json(value: Any, out: TextIO) -> None:
    # `ensure_ascii` (the default) also escapes every control character, so JSON output is terminal-safe.
    json.dump(value, out)
    out.write('\n')


async def _listing(store: LocalFileStore) -> list[StoredPayload]:
    return sorted(await store.list(), key=lambda p: p.modified)


async def _ls(store: LocalFileStore, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    now = time.time()
    rows = [
        p
        for p in await _listing(store)
        if (options.run is None or p.handle.split('/', 1)[0] == options.run)
        and (options.older_than is None or _age(p, now) > options.older_than.total_seconds())
        and (options.newer_than is None or _age(p, now) < options.newer_than.total_seconds())
    ]
    known = await store.aliases() if rows else {}
    shorts = [known.get(p.handle) for p in rows]  # What the model was shown for each.
    if options.json:
        _json(
            [
                {
                    **asdict(p),
                    'short_handle': short,
                    'age_seconds': round(_age(p, now), 3),
                    'run_id': p.handle.split('/', 1)[0],
                }
                for p, short in zip(rows, shorts)
            ],
            out,
        )
    else:
        out.writelines(
            f'{p.size:>12,}  {_human_age(_age(p, now)):>7}  {short or "-":<10}  {visible(p.handle)}\n'
            for p, short in zip(rows, shorts)
        )
        if not rows:
            filtered = any(value is not None for value in (options.run, options.older_than, options.newer_than))
            out.write(f'no stored payloads{" match" if filtered else ""} in {visible(store.root_path)}\n')
    _note_upstream_spills(store, err)
    return EXIT_OK


_UPSTREAM = 'upstream pydantic-ai-harness (ToolOutputLimits)'


def _note_upstream_spills(store: LocalFileStore, err: TextIO) -> None:
    """Say where spills of upstream pydantic-ai-harness are, which this tool does not list (their own layout)."""
    shared = os.path.join(tempfile.gettempdir(), 'pyai_harness_overflow')
    if os.path.isdir(shared) and not os.path.islink(shared) and shared != store.root_path:
        err.write(
            f'pyai-overflow: note: {visible(shared)} holds spills of {_UPSTREAM} in its own layout, not listed here; '
            'read them as plain files there, and delete them with `rm -r` when no run needs them\n'
        )
    foreign = _foreign_files(store.root_path)
    if foreign:
        err.write(
            f'pyai-overflow: note: {visible(store.root_path)} also holds {_plural(foreign, "file")} in the layout of '
            f'{_UPSTREAM} (`<run id>/<tool call id>.<retry>`), not listed here; `show` and `grep` read one by that '
            'handle, as the query tools do, and this tool never deletes them\n'
        )


def _foreign_files(root: str, limit: int = 100_000) -> int:
    """How many regular files below `root` are no part of this store's layout (upstream's spills share its root)."""
    count = 0
    for directory, dirs, files in os.walk(root):
        if directory == root:
            dirs[:] = [name for name in dirs if not name.startswith('.')]
            continue
        count += sum(1 for name in files if not name.startswith('.') and not name.endswith(('.out', '.idx')))
        if count >= limit:
            break
    return count


async def _show(store: LocalFileStore, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ._search._query import open_payload, read_byte_window, read_lines

    if options.lines and options.bytes:
        raise CliError('give --lines or --bytes, not both')
    payload = await open_payload(store, await _stored_handle(store, options.handle))
    if options.bytes:
        start, end = _range(options.bytes, 'bytes', first=0)
        window = await read_byte_window(payload, start, (end or payload.size) - start, utf8_edges=False)
        if options.json:
            _json({'handle': options.handle, 'start': window.start, 'end': window.end, 'hex': window.data.hex()}, out)
        elif options.raw and hasattr(out, 'buffer'):
            out.flush()
            out.buffer.write(window.data)
        else:
            out.write(visible(window.data.decode('utf-8', 'replace'), raw=options.raw))
        return EXIT_OK
    first, last = _range(options.lines, 'lines', first=1) if options.lines else (1, None)
    total = payload.index.line_count
    count = (min(last, total) if last is not None else total) - first + 1
    lines = await read_lines(payload, first - 1, max(count, 0), max_line_chars=sys.maxsize)
    if options.json:
        _json({'handle': options.handle, 'lines': [{'number': ln.number, 'text': ln.text} for ln in lines]}, out)
    else:
        out.writelines(visible(line.text, raw=options.raw) + '\n' for line in lines)
    return EXIT_OK


_WRAPPING = ' \t\r\n\'"`<>()[]{}'
_LABEL = re.compile(r'^(?:handle|overflow_handle|overflow_key)\s*[=:]\s*', re.IGNORECASE)


class HandleMissing(HandleNotFoundError):
    """No payload under the handle an operator gave: the message names it."""


async def _stored_handle(store: LocalFileStore, given: str) -> str:
    """The handle `given` names in `store`, forgiving what the query tools forgive.

    Surrounding quotes, backticks, brackets or whitespace, a trailing full stop, a `handle=` label, and an upper-case
    short handle (`P7JRRMPJR4`). `HandleMissing`, naming `given`, when none of these forms is stored.
    """
    candidates = [given]
    text = None
    cleaned = given
    while text != cleaned:
        text = cleaned
        cleaned = _LABEL.sub('', text.strip(_WRAPPING).removesuffix('.'))
    candidates += [cleaned, cleaned.lower()] if is_short_handle(cleaned.lower()) else [cleaned]
    for candidate in dict.fromkeys(candidates):
        if not candidate:
            continue
        try:
            await store.size(candidate)
        except HandleNotFoundError:
            continue
        return candidate
    raise HandleMissing(f'no stored payload under {visible(given)!r}')


async def _grep(store: LocalFileStore, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ._search._grep import grep_lines as scan_lines
    from ._search._matcher import Matcher, PatternError
    from ._search._query import open_payload, read_lines_at

    try:
        matcher = Matcher.compile(options.pattern, is_regex=options.regex)
    except PatternError as exc:
        raise CliError(f'bad pattern: {exc}') from None
    if options.max < 1:
        raise CliError('--max must be at least 1')
    payload = await open_payload(store, await _stored_handle(store, options.handle))
    result = await scan_lines(payload, matcher, max_hits=options.max, stop_when_full=True, deadline=float('inf'))
    lines = await read_lines_at(payload, [(hit.line, hit.line_start) for hit in result.hits], sys.maxsize)
    if options.json:
        _json(
            {
                'handle': options.handle,
                'total': result.total,
                'complete': result.complete,
                'matches': [{'line': ln.number, 'text': ln.text} for ln in lines],
            },
            out,
        )
    else:
        out.writelines(f'{line.number}:{visible(line.text, raw=options.raw)}\n' for line in lines)
    return EXIT_OK if result.total else EXIT_NOT_FOUND


def _remove_emptied_directories(root: str, handle: str) -> None:
    """Remove the directories above a deleted payload that are now empty, without following any symlink."""
    names = names_for_handle(handle)
    if names is None or len(names) < 2 or os.rmdir not in os.supports_dir_fd:
        return
    flags = os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0) | getattr(os, 'O_NOFOLLOW', 0)
    descriptors: list[int] = []
    try:
        descriptors.append(os.open(root, flags))
        for name in names[:-2]:
            descriptors.append(os.open(name, flags, dir_fd=descriptors[-1]))
        for depth in range(len(names) - 2, -1, -1):
            os.rmdir(names[depth], dir_fd=descriptors[depth])  # Fails when not empty: a writer got there first.
    except OSError:
        pass
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


async def _rm(store: LocalFileStore, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import asyncio

    deleted: list[str] = []
    missing: list[str] = []
    for handle in options.handles:
        full = await store.resolve(handle)  # A short handle: its payload's directories are those of the full one.
        if await store.delete(handle):
            deleted.append(handle)
            await asyncio.to_thread(_remove_emptied_directories, store.root_path, full)
        else:
            missing.append(handle)
    if options.json:
        _json({'deleted': deleted, 'not_found': missing}, out)
    else:
        out.writelines(f'deleted  {visible(handle)}\n' for handle in deleted)
        err.writelines(f'pyai-overflow: no stored payload under {visible(handle)!r}\n' for handle in missing)
    return EXIT_NOT_FOUND if missing else EXIT_OK


async def _stats(store: LocalFileStore, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
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
        _json(stats, out)
    else:
        out.write(f'root:    {visible(stats["root"])}\n')
        out.write(f'count:   {_plural(stats["count"], "payload")} from {_plural(stats["runs"], "run")}\n')
        out.write(f'size:    {_plural(stats["total_bytes"], "byte")}\n')
        if rows:
            out.write(f'oldest:  {visible(rows[0].handle)} ({_human_age(_age(rows[0], now))} old)\n')
            out.write(f'newest:  {visible(rows[-1].handle)}\n')
    return EXIT_OK


async def _prune(store: LocalFileStore, options: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    limit: timedelta = options.older_than
    now = time.time()
    doomed = [p for p in await _listing(store) if _age(p, now) > limit.total_seconds()]
    deleted = 0
    if options.yes:
        # The store's own pruner: it also removes the directories it empties and stale temp files.
        with warnings.catch_warnings(record=True) as problems:
            warnings.simplefilter('always')
            deleted = await store.prune(limit)
        err.writelines(f'pyai-overflow: {visible(str(problem.message))}\n' for problem in problems)
    if options.json:
        _json({'dry_run': not options.yes, 'matched': [p.handle for p in doomed], 'deleted': deleted}, out)
    else:
        verb = 'deleted' if options.yes else 'would delete'
        out.writelines(f'{verb}  {payload.size:>12,}  {visible(payload.handle)}\n' for payload in doomed)
        total = sum(p.size for p in doomed)
        count = deleted if options.yes else len(doomed)
        out.write(f'{verb} {_plural(count, "payload")} ({_plural(total, "byte")})')
        out.write('\n' if options.yes else '; run again with --yes to delete them\n')
    return EXIT_OK


_COMMANDS = {'ls': _ls, 'show': _show, 'grep': _grep, 'rm': _rm, 'stats': _stats, 'prune': _prune}


def _open_store(options: argparse.Namespace) -> LocalFileStore:
    from .stores._local import LocalFileStore

    store = LocalFileStore(base_dir=options.root)
    if not os.path.lexists(store.root_path):
        if not options.create:
            raise CliError(
                f'no store at {store.root_path}: it does not exist (check --root; nothing has spilled there yet; '
                'pass --create to start an empty one)'
            )
        try:
            os.makedirs(store.root_path, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise CliError(f'cannot create {store.root_path}: {exc.strerror or exc}') from None
    return store


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code."""
    stdout: TextIO = out or sys.stdout
    stderr: TextIO = err or sys.stderr
    clash = claim_clash_report()  # `None` when an import warned already: one report per process
    if clash is not None:
        stderr.write(f'pyai-overflow: warning: {clash}\n')
    parser = _parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_ERROR if exit_.code else EXIT_OK
    try:
        import asyncio

        store = _open_store(options)
        return asyncio.run(_COMMANDS[options.command](store, options, stdout, stderr))
    except HandleNotFoundError as exc:
        stderr.write(f'pyai-overflow: {visible(str(exc))}\n')
        return EXIT_NOT_FOUND
    except (CliError, StoreRootError) as exc:
        stderr.write(f'pyai-overflow: {visible(str(exc))}\n')
        return EXIT_ERROR
    except OSError as exc:
        stderr.write(f'pyai-overflow: {visible(str(exc.strerror or exc))}\n')
        return EXIT_ERROR
