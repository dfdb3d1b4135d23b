from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pydantic_ai_harness
from pydantic_ai_harness.overflowing_tool_output import LocalFileStore
from pydantic_ai_harness.overflowing_tool_output._cli import main


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store = LocalFileStore(base_dir=tmp_path / 'store')

    async def fill() -> None:
        await store.write('run-a/call_1/0', b''.join(b'line %d\n' % i for i in range(1, 1_001)))
        await store.write('run-b/call_2/0', b'ERROR: disk full\nretrying\n')
        await store.write('run-b/call_3/0', b'\x89PNG\r\n\x1a\n\x00\x01')

    asyncio.run(fill())
    return tmp_path / 'store'


def cli(root: Path, *args: str) -> tuple[int, str, str]:
    return run(['--root', str(root), *args])


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def age_everything(root: Path, seconds: float) -> None:
    """Make every payload and directory under `root` look `seconds` old (instead of waiting)."""
    then = time.time() - seconds
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            os.utime(os.path.join(directory, name), (then, then))
        os.utime(directory, (then, then))


def test_ls_lists_handles_sizes_ages(root: Path) -> None:
    code, out, _ = cli(root, 'ls')
    assert code == 0
    assert [line.split()[-1] for line in out.splitlines()] == ['run-a/call_1/0', 'run-b/call_2/0', 'run-b/call_3/0']
    assert '8,893' in out


def test_ls_filters_by_run_and_age_as_json(root: Path) -> None:
    code, out, _ = cli(root, '--json', 'ls', '--run', 'run-b')
    assert code == 0
    rows = json.loads(out)
    assert [r['handle'] for r in rows] == ['run-b/call_2/0', 'run-b/call_3/0']
    assert {r['run_id'] for r in rows} == {'run-b'}
    assert json.loads(cli(root, '--json', 'ls', '--older-than', '1h')[1]) == []
    assert len(json.loads(cli(root, '--json', 'ls', '--newer-than', '1h')[1])) == 3


def test_short_handles_are_listed_shown_grepped_and_removed(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')
    key = '019adc3e-8f21-7c4b-9a6e-5d0f2b7c8e13/call_Xq3vR8bN2mKp7LwT9yZc/0'
    short = asyncio.run(store.write(key, b'ERROR: disk full\nretrying\n'))
    root = tmp_path / 'store'
    [row] = cli(root, 'ls')[1].splitlines()
    assert row.split()[-2:] == [short, key]  # What the model was shown, and the full form.
    assert json.loads(cli(root, '--json', 'ls')[1])[0]['short_handle'] == short
    assert cli(root, 'show', short) == (0, 'ERROR: disk full\nretrying\n', '')
    assert cli(root, 'grep', short, 'disk') == (0, '1:ERROR: disk full\n', '')
    assert cli(root, 'rm', short) == (0, f'deleted  {short}\n', '')
    assert sorted(p.name for p in root.iterdir()) == ['.aliases']  # The run's directories went.
    # The alias became a tombstone of its handle: the id goes to no other key until a prune removes it.
    assert [(p.name, p.read_bytes()) for p in (root / '.aliases').iterdir()] == [(short, b'\x00' + key.encode())]
    assert cli(root, 'show', short)[0] == 1


def test_show_whole_and_ranges(root: Path) -> None:
    assert cli(root, 'show', 'run-b/call_2/0') == (0, 'ERROR: disk full\nretrying\n', '')
    assert cli(root, 'show', 'run-a/call_1/0', '--lines', '999:')[1] == 'line 999\nline 1000\n'
    assert cli(root, 'show', 'run-a/call_1/0', '--lines', '2:3')[1] == 'line 2\nline 3\n'
    assert cli(root, 'show', 'run-a/call_1/0', '--bytes', '0:6')[1] == 'line 1'
    code, out, _ = cli(root, '--json', 'show', 'run-b/call_3/0', '--bytes', '0:4')
    assert code == 0
    assert json.loads(out)['hex'] == '89504e47'


def test_grep_is_like_grep_n(root: Path) -> None:
    assert cli(root, 'grep', 'run-a/call_1/0', 'line 50') == (
        0,
        '50:line 50\n500:line 500\n501:line 501\n502:line 502\n503:line 503\n504:line 504\n505:line 505\n506:line 506\n507:line 507\n508:line 508\n509:line 509\n',
        '',
    )
    assert cli(root, 'grep', '-E', 'run-a/call_1/0', r'^line 7\d$')[1].splitlines()[0] == '70:line 70'
    assert cli(root, 'grep', '-m', '1', 'run-a/call_1/0', 'line')[1] == '1:line 1\n'
    code, out, _ = cli(root, '--json', 'grep', 'run-b/call_2/0', 'disk')
    assert code == 0
    assert json.loads(out) == {
        'handle': 'run-b/call_2/0',
        'total': 1,
        'complete': True,
        'matches': [{'line': 1, 'text': 'ERROR: disk full'}],
    }


def test_grep_without_match_exits_1(root: Path) -> None:
    assert cli(root, 'grep', 'run-a/call_1/0', 'nothing like this') == (1, '', '')


@pytest.mark.parametrize(
    ('args', 'code', 'message'),
    [
        (('show', 'no/such/handle'), 1, 'no stored payload'),
        (('show', '../../etc/passwd'), 1, 'pyai-overflow: '),
        (('show', 'run-a/call_1/0', '--lines', '5-7'), 2, '--lines takes A:B'),
        (('show', 'run-a/call_1/0', '--lines', '9:3'), 2, '--lines takes A:B'),
        (('show', 'run-a/call_1/0', '--lines', '0:2'), 2, '--lines takes A:B with 1 <= A <= B'),
        (('show', 'run-a/call_1/0', '--bytes=-1:2'), 2, '--bytes takes A:B with 0 <= A <= B'),
        (('show', 'run-a/call_1/0', '--lines', '1:2', '--bytes', '0:1'), 2, 'not both'),
        (('grep', '-E', 'run-a/call_1/0', '(unclosed'), 2, 'bad pattern'),
        (('grep', '-m', '0', 'run-a/call_1/0', 'x'), 2, '--max must be at least 1'),
        (('prune', '--older-than', 'soon'), 2, 'expected seconds or a duration'),
        (('prune', '--older-than', '0'), 2, 'greater than zero'),
        (('ls', '--older-than', '0s'), 2, 'greater than zero'),
        (('rm', 'run-a/nope/0'), 1, "no stored payload under 'run-a/nope/0'"),
        (('frobnicate',), 2, 'invalid choice'),
    ],
)
def test_errors_have_shell_exit_codes_and_messages(
    root: Path, args: tuple[str, ...], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    got, _, err = cli(root, *args)
    assert got == code
    assert message in err + capsys.readouterr().err
    assert str(root) not in err  # paths of the store are not echoed for handle errors


def test_stats(root: Path) -> None:
    code, out, _ = cli(root, '--json', 'stats')
    assert code == 0
    stats = json.loads(out)
    assert stats['count'] == 3
    assert stats['runs'] == 2
    assert stats['total_bytes'] == 8_893 + 26 + 10
    assert stats['oldest'] == 'run-a/call_1/0'


def test_prune_is_a_dry_run_unless_yes_and_removes_the_directories_it_empties(root: Path) -> None:
    age_everything(root, 7_200)
    code, out, _ = cli(root, 'prune', '--older-than', '3600')  # a number is seconds
    assert code == 0
    assert 'would delete 3 payloads (8,929 bytes); run again with --yes' in out
    assert len(json.loads(cli(root, '--json', 'ls')[1])) == 3  # nothing deleted yet
    code, out, _ = cli(root, 'prune', '--older-than', '1h', '--yes', '--json')
    assert json.loads(out)['deleted'] == 3
    assert json.loads(cli(root, '--json', 'ls')[1]) == []
    # run-a/, run-b/ and their call directories; the aliases of the payloads went with them (the directory stays).
    assert [p.name for p in root.iterdir() if p.is_dir()] == ['.aliases']
    assert list((root / '.aliases').iterdir()) == []


def test_prune_deletes_what_its_dry_run_listed_and_leaves_files_that_are_not_payloads(root: Path) -> None:
    """Files a user or a tool put in the root are no payloads: `ls` does not show them, so neither the dry run nor
    `--yes` may count or delete them (the dry run said 3 and `--yes` deleted 10, these 7 with them)."""
    strangers = ['.hidden.out', 'UPPER.out', 'a b.out', '%zz.out', '.dir/x.out', 'run-a/.x.out', '~~2.out']
    for name in strangers:
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text('not a payload')
    age_everything(root, 7_200)
    dry = cli(root, '--json', 'prune', '--older-than', '1h')[1]
    assert len(json.loads(dry)['matched']) == 3
    code, out, _ = cli(root, 'prune', '--older-than', '1h', '--yes', '--json')
    assert (code, json.loads(out)['deleted']) == (0, 3)
    assert sorted(name for name in strangers if (root / name).exists()) == sorted(strangers)


def test_prune_keeps_what_is_younger(root: Path) -> None:
    age_everything(root, 7_200)
    asyncio.run(LocalFileStore(base_dir=root).write('run-c/call_9/0', b'fresh\n'))
    code, out, _ = cli(root, 'prune', '--older-than', '1h', '--yes')
    assert (code, out.splitlines()[-1]) == (0, 'deleted 3 payloads (8,929 bytes)')
    assert [line.split()[-1] for line in cli(root, 'ls')[1].splitlines()] == ['run-c/call_9/0']
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ['.aliases', 'run-c']


def test_singular_counts(tmp_path: Path) -> None:
    store_root = tmp_path / 'one'
    asyncio.run(LocalFileStore(base_dir=store_root).write('run/call/0', b'x'))
    out = cli(store_root, 'stats')[1]
    assert 'count:   1 payload from 1 run\n' in out and 'size:    1 byte\n' in out
    age_everything(store_root, 100)
    assert cli(store_root, 'prune', '--older-than', '10')[1].endswith(
        'would delete 1 payload (1 byte); run again with --yes to delete them\n'
    )


def test_options_go_before_or_after_the_command(root: Path) -> None:
    before = run(['--root', str(root), '--json', 'ls'])
    after = run(['ls', '--json', '--root', str(root)])
    mixed = run(['--root', str(root), 'ls', '--json'])
    assert before[0] == after[0] == mixed[0] == 0
    handles = [[row['handle'] for row in json.loads(listing)] for _, listing, _ in (before, after, mixed)]
    assert handles == [['run-a/call_1/0', 'run-b/call_2/0', 'run-b/call_3/0']] * 3
    assert run(['show', 'run-b/call_2/0', '--root', str(root)]) == (0, 'ERROR: disk full\nretrying\n', '')


def test_a_root_that_does_not_exist_is_an_error_unless_created(tmp_path: Path) -> None:
    missing = tmp_path / 'typo'
    for command in (['ls'], ['stats'], ['show', 'run/call/0'], ['prune', '--older-than', '1h', '--yes']):
        code, out, err = cli(missing, *command)
        assert (code, out) == (2, '')
        assert f'no store at {missing}: it does not exist' in err and '--create' in err
    assert not missing.exists()
    assert cli(missing, 'ls', '--create') == (0, f'no stored payloads in {missing}\n', '')
    assert stat.S_IMODE(missing.stat().st_mode) == 0o700
    assert cli(missing, 'stats')[1].splitlines()[1] == 'count:   0 payloads from 0 runs'


def test_rm_deletes_handles_and_their_emptied_directories(root: Path) -> None:
    assert cli(root, 'rm', 'run-a/call_1/0') == (0, 'deleted  run-a/call_1/0\n', '')
    assert not (root / 'run-a').exists()  # run-a/call_1/ held only that payload
    code, out, _ = cli(root, '--json', 'rm', 'run-b/call_2/0', 'run-b/missing/0')
    assert code == 1
    assert json.loads(out) == {'deleted': ['run-b/call_2/0'], 'not_found': ['run-b/missing/0']}
    assert [p['handle'] for p in json.loads(cli(root, '--json', 'ls')[1])] == ['run-b/call_3/0']
    assert (root / 'run-b').is_dir()  # still holds call_3
    assert cli(root, 'rm', '../../etc/passwd')[0] == 1


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['--version']) == 0
    assert capsys.readouterr().out == f'pyai-overflow {pydantic_ai_harness.__version__}\n'
    assert main(['--help']) == 0
    help_text = capsys.readouterr().out
    assert '0  success' in help_text and '1  nothing found' in help_text and '2  usage error' in help_text
    assert f'default root: {LocalFileStore().root}' in help_text
    for command in ('ls', 'show', 'grep', 'rm', 'stats', 'prune'):
        assert f'    {command} ' in help_text


def test_a_refused_root_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / 'real').mkdir(mode=0o700)
    (tmp_path / 'link').symlink_to(tmp_path / 'real')
    code, _, err = cli(tmp_path / 'link', 'ls')
    assert code == 2
    assert err.startswith(f'pyai-overflow: LocalFileStore.base_dir: {tmp_path / "link"} (mode 0777) is a symlink')


def test_module_entry_point(root: Path) -> None:
    done = subprocess.run(
        [sys.executable, '-m', 'pydantic_ai_harness.overflowing_tool_output', '--root', str(root), 'stats'],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert 'count:   3 payloads from 2 runs' in done.stdout


def test_show_and_grep_name_the_missing_handle(root: Path) -> None:
    assert cli(root, 'show', 'no/such/handle') == (1, '', "pyai-overflow: no stored payload under 'no/such/handle'\n")
    assert cli(root, 'grep', 'k3x9m2p7qd', 'x') == (1, '', "pyai-overflow: no stored payload under 'k3x9m2p7qd'\n")


def test_show_and_grep_accept_the_handles_the_query_tools_accept(tmp_path: Path) -> None:
    store = LocalFileStore(base_dir=tmp_path / 'store')
    short = asyncio.run(store.write('run/call_1/0', b'ERROR: disk full\nretrying\n'))
    root = tmp_path / 'store'
    for given in (f"'{short}'", short.upper(), f'`{short}`.', f'handle={short}', ' "run/call_1/0" '):
        assert cli(root, 'show', given, '--lines', '1:1') == (0, 'ERROR: disk full\n', ''), given
        assert cli(root, 'grep', given, 'retry') == (0, '2:retrying\n', ''), given


def test_ls_says_so_when_there_is_nothing(tmp_path: Path) -> None:
    empty = tmp_path / 'empty'
    assert cli(empty, '--create', 'ls') == (0, f'no stored payloads in {empty}\n', '')
    asyncio.run(LocalFileStore(base_dir=empty).write('run/call/0', b'x'))
    assert cli(empty, 'ls', '--run', 'other') == (0, f'no stored payloads match in {empty}\n', '')
    assert cli(empty, '--json', 'ls', '--run', 'other') == (0, '[]\n', '')


def test_ls_says_where_upstream_spills_are(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr('tempfile.tempdir', str(tmp_path))  # Upstream's shared default root lives in the temp dir.
    shared = tmp_path / 'pyai_harness_overflow'
    (shared / 'run-1').mkdir(parents=True)
    (shared / 'run-1' / 'call_1.0').write_text('upstream spill')
    (root / 'run-2').mkdir()
    (root / 'run-2' / 'call_7.0').write_text('upstream spill in the per-user root, which both share')
    code, out, err = cli(root, 'ls')
    assert code == 0 and len(out.splitlines()) == 3  # Only this store's own payloads are listed.
    assert err.splitlines() == [
        (
            f'pyai-overflow: note: {shared} holds spills of upstream pydantic-ai-harness (ToolOutputLimits) in its '
            'own layout, not listed here; read them as plain files there, and delete them with `rm -r` when no run '
            'needs them'
        ),
        (
            f'pyai-overflow: note: {root} also holds 1 file in the layout of upstream pydantic-ai-harness '
            '(ToolOutputLimits) (`<run id>/<tool call id>.<retry>`), not listed here; `show` and `grep` read one by '
            'that handle, as the query tools do, and this tool never deletes them'
        ),
    ]
    assert cli(root, 'show', 'run-2/call_7.0') == (0, 'upstream spill in the per-user root, which both share\n', '')
    age_everything(root, 7_200)
    assert cli(root, 'prune', '--older-than', '1h', '--yes')[1].splitlines()[-1] == 'deleted 3 payloads (8,929 bytes)'
    assert (root / 'run-2' / 'call_7.0').exists()  # Upstream's file is not this store's to delete.


STARTUP_IMPORTS = """
import contextlib, io, sys
from pydantic_ai_harness.overflowing_tool_output._cli import main
with contextlib.redirect_stdout(io.StringIO()):
    for argv in sys.argv[1:]:
        main(argv.split())
heavy = sorted(name for name in ('pydantic_ai', 'pydantic', 'asyncio', 'anyio', 'importlib.metadata') if name in sys.modules)
print(heavy)
"""


def test_version_and_help_import_neither_pydantic_ai_nor_asyncio(root: Path) -> None:
    """What keeps `pyai-overflow --version` and `--help` fast (bench/bench_cli.py times them): they load the standard
    library and a few light modules of the package; `ls` and `stats` add asyncio and anyio, never pydantic-ai."""

    def imported(*argvs: str) -> str:
        done = subprocess.run(
            [sys.executable, '-c', STARTUP_IMPORTS, *argvs], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    assert imported('--version', '--help') == '[]'
    assert imported(f'--root {root} ls', f'--root {root} stats') == "['anyio', 'asyncio']"
