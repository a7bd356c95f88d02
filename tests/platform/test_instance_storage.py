"""The instance's SQLite storage (platform/instance_storage.py): Dagster's, keeping one engine per database
file. Checked against Dagster's own storage on real files: a run's event file is created identically,
a home Dagster wrote is read and extended, a run another process deletes is gone at once, engines are
built once per file and bounded."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import AssetKey, DagsterInstance, asset, materialize
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from giant_assets.demo.ui import create_storage
from giant_assets.platform.instance_storage import KEPT_CONNECTIONS, KEPT_RUN_FILES, KeptEngineEventLogStorage
from tests.support.warm_start.server import warm_code

REPO = Path(__file__).resolve().parents[2]


@asset
def leaf() -> int:
    return 1


@asset
def branch(leaf: int) -> int:
    return leaf + 1


def schema(path: Path) -> tuple[list[tuple], list[tuple], str]:
    """A SQLite file's tables and indexes as created, its schema revision and journal mode."""
    with sqlite3.connect(path) as con:
        master = sorted(con.execute("select type, name, tbl_name, sql from sqlite_master").fetchall())
        stamped = con.execute("select version_num from alembic_version").fetchall()
        mode = con.execute("pragma journal_mode").fetchone()[0]
    return master, stamped, mode


def home(tmp_path: Path, name: str, *, shipped: bool) -> Path:
    """A Dagster home: the shipped dagster.yaml (the platform instance) or none (Dagster's defaults)."""
    folder = tmp_path / name
    folder.mkdir()
    if shipped:
        shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", folder / "dagster.yaml")
    return folder


def instance_at(folder: Path) -> DagsterInstance:
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(folder)))


def test_a_run_event_file_is_created_as_dagsters_own(tmp_path: Path) -> None:
    ours = KeptEngineEventLogStorage(str(tmp_path / "ours"))
    theirs = SqliteEventLogStorage(str(tmp_path / "theirs"))
    for storage in (ours, theirs):
        with storage.run_connection("run-a") as conn:
            conn.exec_driver_sql("select 1")
    created = schema(tmp_path / "ours" / "run-a.db")
    assert created == schema(tmp_path / "theirs" / "run-a.db")
    assert created[1] and created[2] == "wal"
    assert schema(tmp_path / "ours" / "index.db") == schema(tmp_path / "theirs" / "index.db")


def test_a_run_event_file_created_by_many_at_once_is_made_once_as_dagsters(tmp_path: Path) -> None:
    """Storages of several processes (here threads, each its own storage and connections) creating the
    same run's event file at once: none fails, the file is as Dagster's own, stamped once."""
    import threading

    barrier, failed = threading.Barrier(6), []

    def create() -> None:
        storage = KeptEngineEventLogStorage(str(tmp_path / "ours"))
        barrier.wait()
        try:
            with storage.run_connection("run-a") as conn:
                conn.exec_driver_sql("select 1")
        except Exception as exc:  # noqa: BLE001 (collected, asserted below)
            failed.append(exc)
        finally:
            storage.dispose()

    threads = [threading.Thread(target=create) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    theirs = SqliteEventLogStorage(str(tmp_path / "theirs"))
    with theirs.run_connection("run-a") as conn:
        conn.exec_driver_sql("select 1")
    assert failed == []
    created = schema(tmp_path / "ours" / "run-a.db")
    assert created == schema(tmp_path / "theirs" / "run-a.db") and len(created[1]) == 1


def test_a_run_event_file_of_an_older_revision_is_left_as_it_is(tmp_path: Path) -> None:
    """As Dagster's own: a run file stamped with another revision is used as it is, not re-created."""
    ours = KeptEngineEventLogStorage(str(tmp_path / "ours"))
    with ours.run_connection("run-a") as conn:
        conn.exec_driver_sql("select 1")
    path = tmp_path / "ours" / "run-a.db"
    with sqlite3.connect(path) as con:
        con.execute("update alembic_version set version_num = 'older'")
        con.execute("drop index idx_step_key")
    ours.dispose()
    again = KeptEngineEventLogStorage(str(tmp_path / "ours"))
    with again.run_connection("run-a") as conn:
        conn.exec_driver_sql("select 1")
    again.dispose()
    master, stamped, _ = schema(path)
    assert stamped == [("older",)] and "idx_step_key" not in {row[1] for row in master}


def test_the_shipped_instance_materializes_with_kept_engines_built_once_per_file(tmp_path: Path) -> None:
    built: list[str] = []
    schema: list[str] = []  # statements asking the schema: columns of a table, a migrated index

    def count(dbapi_connection: object, record: object) -> None:
        built.append("engine")

    def asks(conn: Connection, cursor: object, statement: str, *args: object) -> None:
        questions = ("table_info", "table_xinfo", "FROM secondary_indexes")
        shared = Path(conn.engine.url.database or "").name in {"index.db", "runs.db"}  # not a new run's file
        if shared and any(q in statement for q in questions):
            schema.append(statement)

    with instance_at(home(tmp_path, "h", shipped=True)) as instance:
        assert type(instance.event_log_storage).__name__ == "KeptEngineEventLogStorage"
        assert type(instance.run_storage).__name__ == "KeptEngineRunStorage"
        assert type(instance.schedule_storage).__name__ == "KeptEngineScheduleStorage"
        event.listen(Engine, "first_connect", count)  # a dialect set up: once per new engine
        event.listen(Engine, "before_cursor_execute", asks)
        try:
            assert materialize([leaf, branch], instance=instance).success
            first = len(schema)
            for _ in range(2):
                assert materialize([leaf, branch], instance=instance).success
        finally:
            event.remove(Engine, "first_connect", count)
            event.remove(Engine, "before_cursor_execute", asks)
        assert len(schema) == first, schema  # each schema question answered yes once, then remembered
        # three runs: one engine per run event file, the event index, the runs index (Dagster's storage
        # builds one per statement: ~200 for these three runs)
        assert len(built) <= 3 + 2, built
        records = instance.fetch_materializations(AssetKey("branch"), limit=10).records
        assert len(records) == 3


def test_a_home_dagster_wrote_is_read_and_extended(tmp_path: Path) -> None:
    folder = home(tmp_path, "h", shipped=False)
    with instance_at(folder) as plain:
        assert type(plain.event_log_storage) is SqliteEventLogStorage
        first = materialize([leaf, branch], instance=plain).run_id
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", folder / "dagster.yaml")
    with instance_at(folder) as ours:
        assert type(ours.event_log_storage).__name__ == "KeptEngineEventLogStorage"
        assert ours.get_run_by_id(first).is_success
        assert len(ours.all_logs(first)) == len(plain_logs(folder, first))
        second = materialize([leaf, branch], instance=ours).run_id
        assert [r.run_id for r in ours.get_runs()] == [second, first]
    folder.joinpath("dagster.yaml").unlink()
    with instance_at(folder) as plain:  # and Dagster reads what ours wrote
        assert plain.get_run_by_id(second).is_success
        assert len(plain.fetch_materializations(AssetKey("leaf"), limit=10).records) == 2


def plain_logs(folder: Path, run_id: str) -> list:
    storage = SqliteEventLogStorage(str(folder / "history" / "runs"))
    return storage.get_logs_for_run(run_id)


def test_a_run_deleted_by_another_process_is_gone_at_once(tmp_path: Path) -> None:
    folder = home(tmp_path, "h", shipped=True)
    with instance_at(folder) as instance:
        run_id = materialize([leaf], instance=instance).run_id
        assert instance.all_logs(run_id)  # this process holds an engine on the run's file now
        deleter = (
            "import sys\nfrom dagster import DagsterInstance\n"
            "from dagster._core.instance.ref import InstanceRef\n"
            "with DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1])) as i:\n"
            "    i.delete_run(sys.argv[2])\n"
        )
        subprocess.run(
            [sys.executable, "-c", deleter, str(folder), run_id], check=True, timeout=120, env=warm_code()
        )
        assert instance.get_run_by_id(run_id) is None
        assert instance.all_logs(run_id) == []
        assert instance.fetch_materializations(AssetKey("leaf"), limit=10).records == []


def test_engines_of_run_files_are_bounded_and_dropped_by_a_wipe(tmp_path: Path) -> None:
    storage = KeptEngineEventLogStorage(str(tmp_path / "events"))
    for n in range(KEPT_RUN_FILES + 5):
        with storage.run_connection(f"run-{n}") as conn:
            conn.exec_driver_sql("select 1")
    kept = list(storage._engines)
    assert len(kept) == KEPT_RUN_FILES + 1 and kept[0] == "index"  # the index stays, the oldest runs go
    assert kept[-1] == f"run-{KEPT_RUN_FILES + 4}" and "run-0" not in kept
    with storage.run_connection("run-0") as conn:  # a dropped engine is built again on use
        assert conn.exec_driver_sql("select count(*) from event_logs").scalar() == 0
    storage.wipe()
    assert list(storage._engines) == ["index"]
    storage.dispose()
    assert not storage._engines


def test_a_schema_question_answered_no_is_asked_again(tmp_path: Path) -> None:
    """Only a yes is remembered: a data migration not done yet reads as not done until it is."""
    storage = KeptEngineEventLogStorage(str(tmp_path / "events"))
    assert not storage.has_secondary_index("not_migrated_yet")
    assert not storage.has_secondary_index("not_migrated_yet")
    storage.enable_secondary_index("not_migrated_yet")
    assert storage.has_secondary_index("not_migrated_yet")
    assert not storage.has_asset_key_col("no_such_column")


def file_name(dbapi_connection: sqlite3.Connection) -> str:
    return Path(dbapi_connection.execute("pragma database_list").fetchone()[2]).name


@contextmanager
def connections_counted() -> Iterator[tuple[dict[str, int], dict[str, int]]]:
    """Connections opened and connections used (checked out of their pool) meanwhile, per database file
    name (SQLAlchemy's pool events on every engine)."""
    opened: dict[str, int] = {}
    used: dict[str, int] = {}

    def on_open(dbapi_connection: sqlite3.Connection, entry: object) -> None:
        name = file_name(dbapi_connection)
        opened[name] = opened.get(name, 0) + 1

    def on_use(dbapi_connection: sqlite3.Connection, entry: object, proxy: object) -> None:
        name = file_name(dbapi_connection)
        used[name] = used.get(name, 0) + 1

    event.listen(Engine, "connect", on_open)
    event.listen(Engine, "checkout", on_use)
    try:
        yield opened, used
    finally:
        event.remove(Engine, "connect", on_open)
        event.remove(Engine, "checkout", on_use)


def test_every_file_keeps_its_connections_between_uses(tmp_path: Path) -> None:
    """The runs index, event index, schedules and each run's event file keep idle connections between
    uses, where Dagster opens one per statement."""
    with instance_at(home(tmp_path, "h", shipped=True)) as instance, connections_counted() as (opened, used):
        runs = [materialize([leaf, branch], instance=instance).run_id for _ in range(3)]
        for _ in range(20):
            instance.all_instigator_state()
    files = ["runs.db", "index.db", "schedules.db", *(f"{run_id}.db" for run_id in runs)]
    for name in files:  # ~20-100 uses each (a run's: its ~25 events stored), one thread at a time
        assert used[name] >= 20 and opened.get(name, 0) <= KEPT_CONNECTIONS, (name, opened, used)


WRITER = """
import sys
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
with DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1])) as instance:
    for line in sys.stdin:  # one event per line read, its connection kept open in between
        instance.report_engine_event(line.strip(), job_name="watched", run_id=sys.argv[2])
        print("stored", flush=True)
"""


def test_a_watcher_sees_each_event_another_process_stores_while_it_keeps_its_connection(
    tmp_path: Path,
) -> None:
    """The UI follows a running run through Dagster's watch of the run's event file: each event another
    process stores reaches the watcher while that process's connection stays open (the events are in
    the WAL, not yet checkpointed into the file)."""
    import time

    folder = home(tmp_path, "h", shipped=True)
    run_id = "0f0e0d0c-0000-4000-8000-000000000001"
    create_storage(folder)  # first, as `make ui` does: Dagster's own creation of a new home's files is
    # not safe for two processes at once ("table ... already exists")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), run_id], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env=warm_code(),
    )  # fmt: skip
    seen: list[str] = []
    try:
        with instance_at(folder) as watcher:
            writer.stdin.write("first\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "stored\n"
            watcher.event_log_storage.watch(run_id, None, lambda entry, cursor: seen.append(entry.message))

            def store_and_see(message: str, seconds: float) -> bool:
                writer.stdin.write(f"{message}\n")
                writer.stdin.flush()
                assert writer.stdout.readline() == "stored\n"
                deadline = time.monotonic() + seconds
                while message not in seen and time.monotonic() < deadline:
                    time.sleep(0.05)
                return message in seen

            # the watch starts on the observer's thread: events until one arrives, not a fixed pause
            assert any(store_and_see(f"ready-{n}", 1) for n in range(20)), seen
            assert seen[0] == "first"  # from the file's start: the events stored before the watch too
            for message in ("second", "third"):  # then each event as it is stored
                assert store_and_see(message, 10), (message, seen)
            assert (folder / "history" / "runs" / f"{run_id}.db-wal").exists()  # the writer's connection
    finally:
        writer.stdin.close()
        assert writer.wait(60) == 0


def test_a_shared_file_another_process_replaces_is_opened_afresh(tmp_path: Path) -> None:
    """Another process moves the home's storage aside and starts a new one: this process's next
    statements read and write the new files, not the moved ones its idle connections still hold."""
    from giant_assets.platform.partitions import EXPERIMENT

    folder = home(tmp_path, "h", shipped=True)
    with instance_at(folder) as instance:
        instance.add_dynamic_partitions(EXPERIMENT, ["old"])
        first = materialize([leaf], instance=instance).run_id
        assert instance.get_dynamic_partitions(EXPERIMENT) == ["old"]  # idle connections held now
        replacer = (
            "import sys, os\nfrom dagster import DagsterInstance\n"
            "from dagster._core.instance.ref import InstanceRef\n"
            "os.rename(os.path.join(sys.argv[1], 'history'), os.path.join(sys.argv[1], 'history-old'))\n"
            "with DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1])) as i:\n"
            "    i.add_dynamic_partitions('experiment', ['new'])\n"
        )
        subprocess.run(
            [sys.executable, "-c", replacer, str(folder)], check=True, timeout=120, env=warm_code()
        )
        assert instance.get_dynamic_partitions(EXPERIMENT) == ["new"]
        assert instance.get_run_by_id(first) is None and instance.get_runs() == []
        instance.add_dynamic_partitions(EXPERIMENT, ["mine"])
        second = materialize([leaf], instance=instance).run_id
    with instance_at(folder) as reader:  # what this process wrote went to the new files
        assert reader.get_dynamic_partitions(EXPERIMENT) == ["new", "mine"]
        assert [run.run_id for run in reader.get_runs()] == [second]
    moved = sqlite3.connect(folder / "history-old" / "runs" / "index.db")
    assert moved.execute("select partition from dynamic_partitions").fetchall() == [("old",)]


def test_a_forked_child_opens_its_own_connections_and_the_parents_keep_working(tmp_path: Path) -> None:
    """A process forked while holding idle connections opens its own; closing everything it holds, the
    copies it inherited too, leaves the parent's connections and the WAL they use intact."""
    from giant_assets.platform.partitions import EXPERIMENT

    folder = home(tmp_path, "h", shipped=True)
    index = folder / "history" / "runs" / "index.db"
    with instance_at(folder) as instance:
        instance.add_dynamic_partitions(EXPERIMENT, ["parent-before"])
        assert instance.get_dynamic_partitions(EXPERIMENT) == ["parent-before"]
        with connections_counted() as (opened, _):
            read, write = os.pipe()
            child = os.fork()
            if child == 0:  # the child: its own connection, a write, a read; then it exits
                status = 1
                try:
                    instance.add_dynamic_partitions(EXPERIMENT, ["child"])
                    seen = instance.get_dynamic_partitions(EXPERIMENT)
                    os.write(write, f"{opened.get('index.db', 0)} {','.join(seen)}".encode())
                    instance.dispose()  # closes every connection it holds, the copies inherited too
                    status = 0
                finally:
                    os._exit(status)
            os.close(write)
            assert os.waitpid(child, 0)[1] == 0
            said = os.read(read, 1000).decode()
        child_opened, child_saw = said.split(" ")
        assert int(child_opened) >= 1 and child_saw == "parent-before,child"
        assert opened.get("index.db", 0) == 0  # the parent's idle connection is used again
        assert index.with_name("index.db-wal").exists()  # the child's exit did not checkpoint it away
        instance.add_dynamic_partitions(EXPERIMENT, ["parent-after"])
        assert instance.get_dynamic_partitions(EXPERIMENT) == ["parent-before", "child", "parent-after"]
    with sqlite3.connect(index) as con:
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)


EXITING = """
import sys
from dagster import DagsterInstance, asset, materialize
from dagster._core.instance.ref import InstanceRef

@asset
def leaf() -> int:
    return 1

instance = DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1]))  # never disposed, as the demo's
for _ in range(3):
    assert materialize([leaf], instance=instance).success
instance.add_dynamic_partitions("experiment", ["e1"])
"""


def test_a_process_that_exits_leaves_no_wal_behind(tmp_path: Path) -> None:
    """A process that exits without disposing its instance (the demo, a run worker) closes its kept
    connections at exit: every file it wrote holds its data and no WAL or shared-memory file is left."""
    folder = home(tmp_path, "h", shipped=True)
    subprocess.run([sys.executable, "-c", EXITING, str(folder)], check=True, timeout=120, env=warm_code())
    left = sorted(p.name for p in folder.rglob("*.db-*"))
    assert left == [], left
    with instance_at(folder) as reader:
        assert len(reader.get_runs()) == 3 and reader.get_dynamic_partitions("experiment") == ["e1"]
        assert len(reader.fetch_materializations(AssetKey("leaf"), limit=10).records) == 3


def test_a_result_left_unread_does_not_hold_the_next_users_snapshot(tmp_path: Path) -> None:
    """A use that leaves a query's result unread (still referenced after its connection went back)
    does not pin the kept connection to the data of that moment: the next use sees another process's
    commit and can write."""
    from giant_assets.platform.partitions import EXPERIMENT

    folder = home(tmp_path, "h", shipped=True)
    with instance_at(folder) as instance:
        instance.add_dynamic_partitions(EXPERIMENT, ["a", "b", "c"])
        storage = instance.event_log_storage
        with storage.index_connection() as conn:
            unread = conn.exec_driver_sql("select partition from dynamic_partitions")
            assert unread.fetchone() == ("a",)  # two rows not read yet; the result is still referenced
        adder = (
            "import sys\nfrom dagster import DagsterInstance\n"
            "from dagster._core.instance.ref import InstanceRef\n"
            "with DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1])) as i:\n"
            "    i.add_dynamic_partitions('experiment', ['other'])\n"
        )
        subprocess.run([sys.executable, "-c", adder, str(folder)], check=True, timeout=120, env=warm_code())
        assert instance.get_dynamic_partitions(EXPERIMENT) == ["a", "b", "c", "other"]
        instance.add_dynamic_partitions(EXPERIMENT, ["mine"])  # a write, no "database is locked"
        assert instance.get_dynamic_partitions(EXPERIMENT)[-1] == "mine"
        assert unread is not None


def test_a_process_killed_after_its_commits_loses_none_of_them(tmp_path: Path) -> None:
    """Each file's connections commit with ``synchronous=NORMAL`` under the WAL journal (no disk flush
    per commit, SQLite's recommended pairing): a commit is in the WAL when it returns, so a process
    killed (kill -9) right after leaves every event it stored; the next open recovers the WAL."""
    import signal

    folder = home(tmp_path, "h", shipped=True)
    run_id = "0f0e0d0c-0000-4000-8000-000000000002"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), run_id], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env=warm_code(),
    )  # fmt: skip
    try:
        for n in range(5):
            writer.stdin.write(f"event-{n}\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "stored\n"
        writer.send_signal(signal.SIGKILL)
        assert writer.wait(60) == -signal.SIGKILL
    finally:
        writer.kill()
    assert (folder / "history" / "runs" / f"{run_id}.db-wal").exists()  # killed: its WAL left behind
    with instance_at(folder) as reader:
        stored = [e.message for e in reader.all_logs(run_id)]
        assert stored == [f"event-{n}" for n in range(5)]
        storage = reader.event_log_storage
        for shard in (run_id, "index"):
            with storage._connect(shard) as conn:  # noqa: SLF001 (the kept engine's own connection)
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        with reader.run_storage.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
