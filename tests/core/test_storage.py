"""Parquet partitions behind DuckDB views: atomic writes, SQL, and concurrent partition writers."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import re
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.settings import VIEW_WAIT_ENV
from giant_assets.core.sql import main as sql_main
from giant_assets.core.storage import ParquetStore


def _write_partition(root: str, name: str, n: int, start=None) -> None:
    if start is not None:
        start.wait(30)  # all at once, so they race to create the DuckDB file
    ParquetStore(root).write("scores", pd.DataFrame({"bench": [name] * n, "x": range(n)}), name)


def test_partitions_are_files_and_one_view_covers_them(tmp_path):
    store = ParquetStore(tmp_path)
    store.write("scores", pd.DataFrame({"bench": ["gtex"] * 3, "x": [1, 2, 3]}), "gtex")
    store.write("scores", pd.DataFrame({"bench": ["tcga"] * 2, "x": [4, 5]}), "tcga")
    store.write("scores", pd.DataFrame({"bench": ["tcga"], "x": [9]}), "tcga")  # replaces the partition
    assert sorted(p.name for p in (tmp_path / "scores").iterdir()) == ["gtex.parquet", "tcga.parquet"]
    con = duckdb.connect(str(tmp_path / "giant.duckdb"), read_only=True)
    rows = con.sql("select bench, count(*), sum(x) from scores group by 1 order by 1").fetchall()
    assert rows == [("gtex", 3, 6), ("tcga", 1, 9)]
    assert store.read("scores", ["tcga"])["x"].tolist() == [9]


def test_views_found_current_are_not_checked_again_until_another_process_changes_the_file(
    tmp_path, monkeypatch
):
    """Writes to a table whose view this process created or found current open no DuckDB connection, nor
    does a new table's first write look before creating its view; a view another process replaces
    changes the file, so the next write checks again and restores it."""
    store, opened = ParquetStore(tmp_path), []
    connect = ParquetStore.connect

    def counted(self, *args, **kwargs):
        opened.append(kwargs.get("read_only", False))
        return connect(self, *args, **kwargs)

    monkeypatch.setattr(ParquetStore, "connect", counted)
    for name in "abcdef":  # a: the view created, and the file's views remembered as of that write
        store.write("scores", pd.DataFrame({"x": [1, 2]}), name)
    assert opened == [False]  # nothing opened after: the file is as this process left it
    store.write("counts", pd.DataFrame({"n": [3]}))
    assert opened == [False, False]  # a new table: its view created without a look first
    assert _rows(store.duckdb_path, "select n from counts") == [(3,)]
    view = "CREATE OR REPLACE VIEW scores AS SELECT 1 x"
    replace = f"import duckdb, sys; duckdb.connect(sys.argv[1]).execute({view!r})"
    subprocess.run([sys.executable, "-c", replace, str(store.duckdb_path)], check=True, timeout=60)
    store.write("scores", pd.DataFrame({"x": [1, 2]}), "g")
    assert opened == [False, False, True, False]  # looked, found it replaced, created it again
    assert _rows(store.duckdb_path, "select count(*) from scores") == [(14,)]
    store.write("counts", pd.DataFrame({"n": [4]}))
    assert opened == [False, False, True, False]  # the re-creation remembered the file's views


def _partition_by_partition(store: ParquetStore, table: str) -> pd.DataFrame:
    """The oracle: each partition file read by pyarrow on its own, joined by pandas."""
    frames = [pq.read_table(store.partition_path(table, k)).to_pandas() for k in store.partitions(table)]
    return pd.concat(frames, ignore_index=True)


def test_reading_many_partitions_equals_reading_each_and_joining_them(tmp_path):
    """Partitions of one schema are joined before the one conversion to pandas; partitions of other
    columns or types the old way (NaN where a partition has no such column, as pandas' concat has it)."""
    store = ParquetStore(tmp_path)
    for n in range(5):  # one schema: texts, integers, floats, booleans, lists, an all-missing column
        store.write("same", pd.DataFrame({
            "id": [f"e{n}-{i}" for i in range(3)], "run": [n, n + 1, n + 2], "score": [0.5 * n, None, 1e308],
            "ok": [True, False, n % 2 == 0], "boxes": [[1, 2], [], [n]], "error": [None, None, None],
        }), partition=f"e{n}/tcga")  # fmt: skip
    same = store.read("same")
    assert len(same) == 15 and list(same.index) == list(range(15))
    pd.testing.assert_frame_equal(same, _partition_by_partition(store, "same"), check_exact=True)
    store.write("mixed", pd.DataFrame({"id": ["a"], "run": [1], "note": ["kept"]}), partition="p1")
    store.write("mixed", pd.DataFrame({"id": ["b"], "run": [2.5]}), partition="p2")  # no note; a float run
    store.write("mixed", pd.DataFrame({"id": ["c"], "run": [3], "flag": [True]}), partition="p3")
    mixed = store.read("mixed")
    pd.testing.assert_frame_equal(mixed, _partition_by_partition(store, "mixed"), check_exact=True)
    # as pandas' concat has it: NaN (not None) where a partition has no such column
    assert mixed["note"].tolist()[0] == "kept" and isinstance(mixed["flag"][0], float)
    assert mixed["run"].dtype == float
    assert store.read("mixed", ["p2"]).to_dict("list") == {"id": ["b"], "run": [2.5]}


def test_a_failed_write_leaves_the_old_partition_and_no_temp_file(tmp_path):
    store = ParquetStore(tmp_path)
    store.write("t", pd.DataFrame({"x": [1]}), "p")
    with pytest.raises(Exception):  # noqa: B017 - pyarrow's error type for a bad column
        store.write("t", pd.DataFrame({"x": [object()]}), "p")
    assert store.read("t")["x"].tolist() == [1]
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["p.parquet"]


_WRITE_PAST_THE_LIMIT = """
import resource, signal, sys
from pathlib import Path
from giant_assets.core.files import atomic_write_bytes
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    atomic_write_bytes(Path(sys.argv[1]), b"new" * 10_000)
except OSError as exc:
    print(exc.errno)
"""


def test_a_write_failing_midway_leaves_the_old_file_whole_and_no_temp_file(tmp_path):
    """The write itself fails after 4 KiB of 30 KB (RLIMIT_FSIZE in a child process): the old file is
    whole, no temp file is left behind."""
    target = tmp_path / "report.json"
    atomic_write_bytes(target, b"old" * 100)
    child = subprocess.run([sys.executable, "-c", _WRITE_PAST_THE_LIMIT, str(target)], capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert child.stdout.strip() == str(errno.EFBIG), child.stderr
    assert target.read_bytes() == b"old" * 100
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_a_failed_rename_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    """The data is written whole to the temp file, then the rename fails: the old file is untouched."""
    from giant_assets.core import files

    target = tmp_path / "report.json"
    atomic_write_bytes(target, b"old")
    renames = []

    def refuse(src, dst):
        renames.append(Path(src).read_bytes())  # the new data was in the temp file, whole
        raise OSError(errno.EXDEV, "rename refused")

    monkeypatch.setattr(files.os, "replace", refuse)
    with pytest.raises(OSError, match="rename refused"):
        atomic_write_bytes(target, b"new data")
    monkeypatch.undo()
    assert renames == [b"new data"] and target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_unsafe_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unsafe partition name"):
        ParquetStore(tmp_path).write("t", pd.DataFrame({"x": [1]}), "../evil")


def test_concurrent_processes_write_partitions_without_lock_errors(tmp_path):
    # fresh processes (never forks of this multi-threaded one), forked from one server that imported the
    # storage module once, instead of four spawns importing pandas, pyarrow and duckdb each
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    start = ctx.Barrier(4)
    procs = [
        ctx.Process(target=_write_partition, args=(str(tmp_path), f"b{i}", i + 1, start)) for i in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    total = ParquetStore(tmp_path).query("select count(*) as n from scores")["n"].iloc[0]
    assert total == 1 + 2 + 3 + 4
    assert not (tmp_path / "giant.duckdb.damaged").exists()


def _spy_connects(monkeypatch) -> list[tuple[str, int | None]]:
    """Every duckdb.connect the store makes (real DuckDB still opens): its path and the file's size then."""

    seen, real = [], duckdb.connect

    def spy(path, *args, **kwargs):
        seen.append((Path(path).name, Path(path).stat().st_size if Path(path).exists() else None))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", spy)
    return seen


def test_the_duckdb_file_appears_whole(tmp_path, monkeypatch):
    """DuckDB creates a file before locking it and writing its headers, so a process opening it then reads
    "not a valid DuckDB database file" (6 writers racing on a fresh folder: 3 rounds of 40 failed so).
    The store builds it under another name and links it in place: the real path is only ever opened whole."""
    seen = _spy_connects(monkeypatch)
    ParquetStore(tmp_path).write("scores", pd.DataFrame({"x": [1]}), "a")
    on_the_file = [size for name, size in seen if name == "giant.duckdb"]
    assert on_the_file and all(size is not None and size >= 3 * 4096 for size in on_the_file), seen
    assert any(name.endswith(".new") and size is None for name, size in seen)  # built aside
    assert sorted(p.name for p in tmp_path.iterdir()) == ["giant.duckdb", "scores"]  # nothing left over
    assert _rows(tmp_path / "giant.duckdb", "select x from scores") == [(1,)]


def test_a_duckdb_file_created_meanwhile_by_another_process_is_kept(tmp_path, monkeypatch):
    """Another process links its file in first: this one keeps it (views and all) and discards its own."""

    real = duckdb.connect

    def other_wins(path, *args, **kwargs):
        if str(path).endswith(".new") and not (tmp_path / "giant.duckdb").exists():
            with real(str(tmp_path / "giant.duckdb")) as con:
                con.execute("create view theirs as select 7 as y")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", other_wins)
    ParquetStore(tmp_path).write("scores", pd.DataFrame({"x": [1]}), "a")
    monkeypatch.undo()
    db = tmp_path / "giant.duckdb"
    assert _rows(db, "select y from theirs") == [(7,)] and _rows(db, "select x from scores") == [(1,)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["giant.duckdb", "scores"]


def test_without_hard_links_duckdb_creates_the_file_in_place(tmp_path, monkeypatch):
    """A file system refusing hard links (some network shares): the write works, nothing is left over."""
    from giant_assets.core import storage

    def refuse(src, dst):
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(storage.os, "link", refuse)
    ParquetStore(tmp_path).write("scores", pd.DataFrame({"x": [1]}), "a")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["giant.duckdb", "scores"]
    assert _rows(tmp_path / "giant.duckdb", "select x from scores") == [(1,)]


def test_when_the_temporary_file_cannot_be_made_duckdb_creates_the_file_in_place(tmp_path, monkeypatch):

    real = duckdb.connect

    def refuse_temporary(path, *args, **kwargs):
        if str(path).endswith(".new"):
            raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Permission denied')
        return real(path, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", refuse_temporary)
    ParquetStore(tmp_path).write("scores", pd.DataFrame({"x": [1]}), "a")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["giant.duckdb", "scores"]
    assert _rows(tmp_path / "giant.duckdb", "select x from scores") == [(1,)]


def test_a_temporary_duckdb_file_left_by_a_killed_process_is_swept_by_the_next_creation(tmp_path):
    """Killed between building the file aside and linking it, a process leaves ``.giant.duckdb.*.new``:
    the next creation removes it once it is an hour old, and leaves a younger one (it may be in use)."""
    old, young = tmp_path / ".giant.duckdb.123-456.new", tmp_path / ".giant.duckdb.789-1.new"
    for path in (old, young):
        path.write_bytes(b"\0" * 12288)
    os.utime(old, (time.time() - 3700, time.time() - 3700))
    ParquetStore(tmp_path).write("scores", pd.DataFrame({"x": [1]}), "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == [young.name, "giant.duckdb", "scores"]


def test_a_rebuild_moves_aside_only_the_file_found_damaged(tmp_path):
    """Two writers find the file damaged; the first rebuilds it. The second's rebuild must not move the
    first's healthy new file aside as "damaged": it keeps it and only recreates the views."""
    from giant_assets.core.storage import DuckDBDamaged

    first, second = ParquetStore(tmp_path, log=lambda _: None), ParquetStore(tmp_path, log=lambda _: None)
    first.write("scores", pd.DataFrame({"x": [1]}), "a")
    db = tmp_path / "giant.duckdb"
    _truncate(db)
    found = []
    for store in (first, second):
        with pytest.raises(DuckDBDamaged) as caught:
            store.connect(read_only=True)
        found.append(caught.value)
    first.rebuild(found[0])
    rebuilt = db.stat().st_ino
    damaged_size = (tmp_path / "giant.duckdb.damaged").stat().st_size
    second.rebuild(found[1])
    assert db.stat().st_ino == rebuilt and (tmp_path / "giant.duckdb.damaged").stat().st_size == damaged_size
    assert _rows(db, "select x from scores") == [(1,)]


# --- a DuckDB session held open by another process ---------------------------------------------------

DUCKDB_CLI = Path(sys.executable).with_name("duckdb")
_PY_READER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("ready", flush=True)
sys.stdin.read()
"""


@contextmanager
def read_only_session(db: Path, kind: str):
    """A real read-only session in another process (the duckdb CLI or python), open until the block ends."""
    if kind == "cli":
        cmd = [str(DUCKDB_CLI), "-readonly", "-csv", str(db)]
    else:
        cmd = [sys.executable, "-c", _PY_READER, str(db)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if kind == "cli":
            proc.stdin.write("select 'ready' as r;\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "r\n"
        assert proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(10)


def test_a_view_replaced_right_after_this_process_made_one_is_looked_at_and_restored(tmp_path, monkeypatch):
    """Another process replacing a view right after this process created one (once its write lock is
    released): the file is no longer as this process left it, so its next write looks and restores the
    view. Mutation: a remembered file taken as current without comparing its identity."""
    store = ParquetStore(tmp_path)
    store.write("scores", pd.DataFrame({"x": [1, 2]}), "a")
    connect, opened = ParquetStore.connect, []

    @contextmanager
    def replaced_after_close(self, *args, **kwargs):
        opened.append(kwargs.get("read_only", False))
        with connect(self, *args, **kwargs) as con:
            yield con
        if len(opened) == 1:  # the view creation of table counts, then another writer's replacement
            replace = "CREATE OR REPLACE VIEW scores AS SELECT 1 x"
            code = f"import duckdb, sys; duckdb.connect(sys.argv[1]).execute({replace!r})"
            subprocess.run([sys.executable, "-c", code, str(self.duckdb_path)], check=True, timeout=60)

    monkeypatch.setattr(ParquetStore, "connect", replaced_after_close)
    store.write("counts", pd.DataFrame({"n": [3]}))  # a new table: its view made without a look
    assert opened == [False]
    store.write("scores", pd.DataFrame({"x": [4]}), "c")
    assert opened == [False, True, False]  # looked (nothing remembered), found scores replaced, restored it
    assert _rows(store.duckdb_path, "select sum(x) from scores") == [(7,)]


def _rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.parametrize("kind", ["cli", "python"])
def test_writes_go_on_while_a_read_only_session_is_open_and_new_views_are_deferred(tmp_path, kind):
    messages: list[str] = []
    store = ParquetStore(tmp_path, view_wait_s=1.0, log=messages.append)
    store.write("scores", pd.DataFrame({"x": [1]}), "gtex")
    with read_only_session(store.duckdb_path, kind):
        started = time.monotonic()
        store.write("scores", pd.DataFrame({"x": [2, 3]}), "gtex")  # view exists: no write lock needed
        store.write("scores", pd.DataFrame({"x": [4]}), "tcga")
        assert time.monotonic() - started < 2 and messages == []
        store.write("fresh", pd.DataFrame({"y": [7]}))  # a new table needs the lock: deferred, not failed
        assert time.monotonic() - started < 5
        assert store.read("fresh")["y"].tolist() == [7]
        assert store.pending_views() == {"fresh"}
        assert len(messages) == 2 and "waiting up to 1s" in messages[0]
        assert "deferred" in messages[1] and "giant-sql --refresh-views" in messages[1]
        assert re.search(r"pid \d+", messages[1])  # names the process holding the file
        assert _rows(store.duckdb_path, "select sum(x) from scores") == [(9,)]
    store.write("scores", pd.DataFrame({"x": [5]}), "tcga")  # the next write creates the deferred view
    assert store.pending_views() == set()
    assert _rows(store.duckdb_path, "select y from fresh") == [(7,)]


def test_refresh_views_command_creates_deferred_views(tmp_path, capsys):
    store = ParquetStore(tmp_path, view_wait_s=0.2, log=lambda line: None)
    store.write("a", pd.DataFrame({"x": [1]}))
    with read_only_session(store.duckdb_path, "python"):
        store.write("b", pd.DataFrame({"x": [2]}), "p1")
        with pytest.raises(duckdb.CatalogException, match="giant-sql --refresh-views"):
            store.query("select * from b")
        assert sql_main(["--db", str(store.duckdb_path), "select count(*) as n from a"]) == 0
    assert sql_main(["--db", str(store.duckdb_path), "--refresh-views"]) == 0
    assert "views of 2 table(s)" in capsys.readouterr().out
    assert store.pending_views() == set()
    assert _rows(store.duckdb_path, "select x from b") == [(2,)]


def test_a_dagster_materialization_succeeds_while_a_duckdb_shell_is_open(tmp_path):
    # imported here: the spawned writers of another test import this module, and dagster is slow to load
    from dagster import asset, materialize

    from giant_assets.platform.io_manager import ParquetDuckDBIOManager
    from giant_assets.platform.resources import StorageResource

    @asset
    def tiny() -> pd.DataFrame:
        return pd.DataFrame({"v": [1, 2]})

    @asset
    def tiny_new(tiny: pd.DataFrame) -> pd.DataFrame:
        return tiny.assign(w=tiny["v"] * 10)

    storage = StorageResource(data_dir=str(tmp_path))
    resources = {"io_manager": ParquetDuckDBIOManager(storage=storage)}
    assert materialize([tiny], resources=resources).success
    os.environ[VIEW_WAIT_ENV] = "0.5"
    try:
        with read_only_session(tmp_path / "giant.duckdb", "cli"):
            started = time.monotonic()
            result = materialize([tiny, tiny_new], resources=resources)
            assert result.success and time.monotonic() - started < 20
    finally:
        del os.environ[VIEW_WAIT_ENV]
    assert ParquetStore(tmp_path).pending_views() == {"tiny_new"}
    assert sql_main(["--db", str(tmp_path / "giant.duckdb"), "--refresh-views"]) == 0
    assert _rows(tmp_path / "giant.duckdb", "select sum(w) from tiny_new") == [(30,)]


def _truncate(path: Path) -> None:
    """Cut the file to half its size, as a full disk does to a file being written."""
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def test_a_truncated_duckdb_file_is_named_then_rebuilt(tmp_path, capsys):
    from dagster import asset, materialize

    from giant_assets.platform.io_manager import ParquetDuckDBIOManager
    from giant_assets.platform.resources import StorageResource

    @asset
    def tiny() -> pd.DataFrame:
        return pd.DataFrame({"v": [1, 2]})

    @asset
    def tiny_more(tiny: pd.DataFrame) -> pd.DataFrame:
        return tiny.assign(w=tiny["v"] * 10)

    db = tmp_path / "giant.duckdb"
    resources = {"io_manager": ParquetDuckDBIOManager(storage=StorageResource(data_dir=str(tmp_path)))}
    assert materialize([tiny], resources=resources).success
    _truncate(db)
    capsys.readouterr()  # Dagster's own log lines
    # giant-sql: one line naming the file, what it holds and what to do
    assert sql_main(["--db", str(db), "select sum(v) from tiny"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {db} is damaged (") and "\n" not in err
    assert "holds only views over the Parquet files" in err and "giant-sql --refresh-views" in err
    with pytest.raises(Exception, match="is damaged"):
        ParquetStore(tmp_path).query("select 1")
    # a materialization rebuilds it and succeeds; the damaged file is kept beside it
    assert materialize([tiny, tiny_more], resources=resources).success
    assert (tmp_path / "giant.duckdb.damaged").exists()
    assert _rows(db, "select sum(v), sum(w) from tiny_more") == [(3, 30)]
    assert _rows(db, "select sum(v) from tiny") == [(3,)]
    # and so does giant-sql --refresh-views
    _truncate(db)
    assert sql_main(["--db", str(db), "--refresh-views"]) == 0
    captured = capsys.readouterr()
    assert "views of 2 table(s)" in captured.out and "Rebuilding it now" in captured.err
    assert sql_main(["--db", str(db), "select sum(w) as w from tiny_more"]) == 0
    assert "30" in capsys.readouterr().out


# --- paths and permissions ----------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["data[1]", "d*x{a,b}", "it's [a-z]"])
def test_views_work_under_a_data_folder_with_glob_characters(tmp_path, folder):
    root = tmp_path / folder
    decoy = tmp_path / "data1"  # what "data[1]" would match as a glob
    ParquetStore(decoy).write("scores", pd.DataFrame({"x": [100]}), "gtex")
    store = ParquetStore(root)
    store.write("scores", pd.DataFrame({"x": [1, 2]}), "gtex")
    store.write("scores", pd.DataFrame({"x": [3]}), "run/tcga")
    assert store.query("select count(*) as n, sum(x) as s from scores").values.tolist() == [[3, 6]]


@pytest.mark.parametrize(("folder", "what"), [("a\\b", "backslash"), ("a?b", "'[?]'")])
def test_a_data_folder_duckdb_cannot_use_is_refused_clearly(tmp_path, folder, what):
    with pytest.raises(ValueError, match=what):
        ParquetStore(tmp_path / folder)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_get_the_users_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        store = ParquetStore(tmp_path)
        path = store.write("t", pd.DataFrame({"x": [1]}), "p")
        atomic_write_bytes(tmp_path / "report.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == mode
    assert stat.S_IMODE(store.duckdb_path.stat().st_mode) == mode


def test_a_retired_table_is_never_served_even_while_a_session_holds_the_file(tmp_path):
    messages: list[str] = []
    store = ParquetStore(tmp_path, view_wait_s=0.2, log=messages.append)
    store.write("board", pd.DataFrame({"x": [1, 2]}))
    store.write("pairs", pd.DataFrame({"y": [3]}), "p1")
    kept = store.retire("board", "its rebuild failed: ValueError: bad\nsecond line")
    assert kept == tmp_path / ".retired" / "board" and not store.exists("board")
    assert pd.read_parquet(kept / "_all.parquet")["x"].tolist() == [1, 2]
    with pytest.raises(duckdb.InvalidInputException, match="board is not current: its rebuild failed: Val"):
        _rows(store.duckdb_path, "select * from board")
    assert store.refresh_views() == ["pairs"]  # refreshing views does not bring the retired one back
    with pytest.raises(duckdb.InvalidInputException, match=r"Materialize board again; its previous data"):
        _rows(store.duckdb_path, "select count(*) from board")
    with read_only_session(store.duckdb_path, "python"):  # the view cannot be replaced: its glob is empty
        store.retire("pairs", "its rebuild failed")
        assert "view not replaced" in messages[-1]
    with pytest.raises(duckdb.IOException, match="No files found"):
        _rows(store.duckdb_path, "select * from pairs")
    store.write("board", pd.DataFrame({"x": [7]}))  # the next successful build serves again
    assert _rows(store.duckdb_path, "select x from board") == [(7,)]
    _truncate(store.duckdb_path)  # a damaged file (only views inside): rebuilt, then the table retired
    store.retire("board", "its rebuild failed: OSError: disk full")
    assert (tmp_path / "giant.duckdb.damaged").exists()
    with pytest.raises(duckdb.InvalidInputException, match="board is not current: its rebuild failed: OSE"):
        _rows(store.duckdb_path, "select count(*) from board")
