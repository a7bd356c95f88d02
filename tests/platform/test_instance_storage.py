"""The instance's SQLite storage (platform/instance_storage.py): Dagster's, keeping one engine per database
file. Checked against Dagster's own storage on real files: a run's event file is created identically,
a home Dagster wrote is read and extended, a run another process deletes is gone at once, engines are
built once per file and bounded."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from dagster import AssetKey, DagsterInstance, asset, materialize
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from giant_assets.platform.instance_storage import KEPT_RUN_FILES, KeptEngineEventLogStorage

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
        subprocess.run([sys.executable, "-c", deleter, str(folder), run_id], check=True, timeout=120)
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
