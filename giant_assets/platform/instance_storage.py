"""The instance's SQLite storage: Dagster's own, keeping its engines and their connections.

Dagster 1.13's SQLite storages build a new SQLAlchemy engine for every statement they run (each event
stored, each run or partition looked up): the engine's dialect is set up again and its compiled-statement
cache starts empty, so every statement is compiled anew. A cell's run stores ~80 events through ~370
connections. Here each storage keeps its engines (one per database file: the runs index, the event
index, each run's event file, the schedules) and opens every connection through them.

Dagster opens each connection for one statement or transaction and closes it after (``NullPool``). Each
open reads the file's schema again, and the close of a file's last connection checkpoints its WAL and
deletes the WAL and shared-memory files. Every file (the runs index, the event index, each run's
event file, the schedules) keeps up to ``KEPT_CONNECTIONS`` idle connections instead, as SQLAlchemy's
own default for SQLite files does (``perf/bench_instance_storage.py``: 0.52-0.58 -> 0.35-0.36 CPU-s a
run):

- each use is still one transaction, rolled back on return if left open, and every cursor it opened is
  closed on return (a result left unread would otherwise hold the connection's read snapshot: its next
  user would read old data and fail to write, "database is locked"), so an idle connection holds no
  transaction and sees every other process's commits at its next statement;
- a connection is used again only while the path is still the file it opened (same device and inode,
  looked at on each use): a file deleted or replaced by another process is opened afresh, as before;
- a process forked with idle connections never uses its parent's: it opens its own. (Closing the copies
  it inherited is harmless: the parent's connections keep their locks, so the copies neither checkpoint
  nor delete the WAL the parent still uses.)
- every connection commits with ``synchronous=NORMAL`` (``SYNCHRONOUS``), SQLite's recommended pairing
  with the WAL journal Dagster sets: a commit is in the WAL when it returns, so a process killed keeps
  every event it stored, and no commit waits for the disk (Dagster's default, FULL, flushes the WAL at
  every commit: ~0.7 ms and 0.25 CPU-ms each, ~80 events a run). An operating-system crash or power
  loss can roll back the last commits (the file stays whole); a lab that wants them kept too runs on
  PostgreSQL (docs/scale-out.md);
- a process closes its kept connections when it exits (``atexit``), so the files it leaves hold all
  their events and no WAL, as before; a process killed leaves its WAL, which SQLite's next open
  recovers.

The UI follows a running run by watching its event file change (Dagster's watchdog on the file). With
Dagster's connection per use, each close checkpointed the new events into the file; a kept connection
leaves them in the WAL, so a write to a run's file marks the file modified (its modification time) once
committed, and the watching UI reads the new events at once as before.

Questions about the schema (does the index have this column, table, migrated index) are asked of the
database until the answer is yes, then remembered: migrations only ever add them.

A new run's event file is created as Dagster creates it (tables, WAL journal, the schema revision
stamped) by one script taken once per process from Dagster's own schema (``_event_file_script``): ~8
CPU-ms and ~11 ms a run, where Dagster's way (the migration scripts read twice, a reflection per table,
each statement flushed to disk before the WAL journal is on) took ~0.14 CPU-s, then ~47 CPU-ms with the
scripts read once.

Named by :class:`giant_assets.platform.instance.GiantInstance`'s defaults: an instance file that names
its own ``storage`` (PostgreSQL, a custom class) is used as written.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import sqlalchemy as db
import sqlalchemy.exc as db_exc
import yaml
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from dagster._core.storage import sqlite_storage
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sql import get_alembic_config
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

MODULE = __name__
KEPT_RUN_FILES = 16  # engines kept for run event files besides the index (a webserver reads many runs)
SYNCHRONOUS = "NORMAL"  # with the WAL journal: a commit survives the process killed; see the docstring
KEPT_CONNECTIONS = 2  # idle connections kept per file; more at once are opened and closed as needed
# what Dagster's own event file creation retries on: another process creating the same file meanwhile
CONCURRENT_INIT = re.compile(
    r"table [A-Za-z_]* already exists|database is locked|UNIQUE constraint failed: alembic_version"
)


def sqlite_engine(conn_string: str, **kwargs: Any) -> Engine:
    """An engine keeping up to ``KEPT_CONNECTIONS`` idle connections to its file between uses, each used
    again only by this process while the path is still that file (the module's docstring)."""
    connect_args = {**kwargs.pop("connect_args", {}), "check_same_thread": False}  # one thread at a time
    engine = db.create_engine(
        conn_string,
        poolclass=QueuePool,
        pool_size=KEPT_CONNECTIONS,
        max_overflow=-1,  # never waits for a connection, as Dagster's never does
        connect_args=connect_args,
        **kwargs,
    )
    path = engine.url.database or ""

    def opened(dbapi_connection: Any, entry: ConnectionPoolEntry) -> None:
        entry.info["file"] = _file_identity(path)
        dbapi_connection.execute(f"PRAGMA synchronous={SYNCHRONOUS}")

    def reused(dbapi_connection: Any, entry: ConnectionPoolEntry, proxy: Any) -> None:
        if entry.info.get("file") != _file_identity(path):
            raise db_exc.DisconnectionError(f"{path} was deleted or replaced since this connection opened")

    def executed(conn: Connection, cursor: Any, *args: Any) -> None:
        conn.info.setdefault("cursors", weakref.WeakSet()).add(cursor)

    def returned(dbapi_connection: Any, entry: ConnectionPoolEntry) -> None:
        for cursor in list(entry.info.pop("cursors", ())):
            cursor.close()

    event.listen(engine, "connect", opened)
    event.listen(engine, "checkout", reused)
    event.listen(engine, "after_cursor_execute", executed)
    event.listen(engine, "checkin", returned)
    _KEEPING.add(engine)
    return engine


_KEEPING: weakref.WeakSet[Engine] = weakref.WeakSet()  # every engine keeping connections in this process


@atexit.register
def _close_kept_connections() -> None:
    """At exit, close the connections kept: a file's last close checkpoints its WAL into it and deletes the
    WAL and shared-memory files, so a process leaves the files as Dagster's connection per use did."""
    for engine in list(_KEEPING):
        engine.dispose()


def _tell_watchers(path: str) -> None:
    """Mark a run's event file modified after a write committed to its WAL, as the checkpoint of
    Dagster's closing connection did: the UI follows a running run by watching the file change."""
    with contextlib.suppress(FileNotFoundError):  # deleted by another process meanwhile: nobody to tell
        os.utime(path)


def _file_identity(path: str) -> tuple[int, int, int] | None:
    """This process and the file at ``path`` (device, inode), or None when there is none: a connection
    is used again only by the process that opened it, on the file it opened."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return os.getpid(), found.st_dev, found.st_ino


_CREATED = re.compile(r"^CREATE (TABLE|INDEX|UNIQUE INDEX) ")


@cache
def _event_file_script() -> str:
    """The SQL making a run's event file as Dagster makes it (its tables and indexes as Dagster's
    metadata creates them, the WAL journal, the head revision stamped), taken once per process from a
    database made in memory by that same code.

    Dagster creates each file through SQLAlchemy's ``create_all`` (a reflection per table) and alembic's
    stamp, each statement its own transaction flushed to disk before the WAL journal is on: ~47 CPU-ms
    and ~80 ms a run. This script turns the journal to WAL first, then creates everything in one
    transaction taken for writing at once (``BEGIN IMMEDIATE``: a process creating the same file waits,
    then finds it made); ``IF NOT EXISTS``, which SQLite leaves out of the schema it stores, makes it
    harmless to run twice."""
    script = ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))
    engine = db.create_engine("sqlite://")
    try:
        SqlEventLogStorageMetadata.create_all(engine)
        with engine.connect() as connection:
            MigrationContext.configure(connection).stamp(script, "head")
            connection.commit()
            made = connection.exec_driver_sql(
                "SELECT type, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
            ).all()
            (stamped,) = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    finally:
        engine.dispose()
    statements = ["PRAGMA journal_mode=WAL", "BEGIN IMMEDIATE"]
    for kind, sql in made:
        if kind not in ("table", "index") or ";" in sql or not _CREATED.match(sql):
            raise RuntimeError(f"unexpected statement in Dagster's event log schema: {sql!r}")
        statements.append(_CREATED.sub(r"CREATE \1 IF NOT EXISTS ", sql, count=1))
    revision = stamped.replace("'", "''")
    statements.append(
        f"INSERT INTO alembic_version (version_num) SELECT '{revision}' "
        "WHERE NOT EXISTS (SELECT 1 FROM alembic_version)"
    )
    statements.append("COMMIT")
    return ";\n".join(statements) + ";"


class SchemaYes:
    """Schema questions answered yes so far (a yes never turns no: migrations only add)."""

    def __init__(self) -> None:
        self._yes: set[tuple[str, ...]] = set()

    def ask(self, question: tuple[str, ...], answer: Callable[[], bool]) -> bool:
        if question in self._yes:
            return True
        if found := answer():
            self._yes.add(question)
        return found


class KeptEngineEventLogStorage(SqliteEventLogStorage):
    """Dagster's run-sharded SQLite event log, its engines kept per database file."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        self._schema = SchemaYes()
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: dict[str, str]
    ) -> KeptEngineEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = sqlite_engine(
                    self.conn_string_for_shard(shard), connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}
                )
                self._engines[shard] = engine
                runs = [key for key in self._engines if key != sqlite_event_log.INDEX_SHARD_NAME]
                for old in runs[: max(0, len(runs) - KEPT_RUN_FILES)]:
                    self._engines.pop(old).dispose()
            else:
                self._engines.move_to_end(shard)
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        """Dagster's connection to one database file (created on first use), through its kept engine."""
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                changes = conn.connection.dbapi_connection.total_changes  # type: ignore[union-attr]
                with conn.begin():
                    yield conn
                wrote = conn.connection.dbapi_connection.total_changes != changes  # type: ignore[union-attr]
            if wrote and shard != sqlite_event_log.INDEX_SHARD_NAME:
                _tell_watchers(self.path_for_shard(shard))

    def has_table(self, table_name: str) -> bool:
        """Whether the event index has the table (asked for every asset event stored)."""
        engine = self._engine(sqlite_event_log.INDEX_SHARD_NAME)

        def ask() -> bool:
            with engine.connect() as conn:
                return bool(engine.dialect.has_table(conn, table_name))

        return self._schema.ask(("table", table_name), ask)

    def has_asset_key_col(self, column_name: str) -> bool:
        ask = super().has_asset_key_col
        return self._schema.ask(("column", column_name), lambda: ask(column_name))

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        ask = super()._has_asset_key_col_on_connection
        return self._schema.ask(("column", column_name), lambda: ask(conn, column_name))

    def has_secondary_index(self, name: str) -> bool:
        ask = super().has_secondary_index
        return self._schema.ask(("index", name), lambda: ask(name))

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """Create a run's event file as Dagster does (``_event_file_script``).

        The index file (created once per instance, and re-stamped to an older revision in one legacy
        case) is left to Dagster."""
        if for_index_shard:
            super()._initdb(engine, for_index_shard=True)
            return
        for attempt in range(11):  # Dagster's own count and pause
            try:
                with engine.connect() as connection:
                    # made by another process, or by an older Dagster: left as it is, as Dagster does
                    if MigrationContext.configure(connection).get_current_revision():
                        return
                    raw = connection.connection.dbapi_connection
                    raw.executescript(_event_file_script())  # type: ignore[union-attr]
                return
            except (db_exc.DatabaseError, sqlite3.DatabaseError, sqlite3.OperationalError) as exc:
                if attempt == 10 or not CONCURRENT_INIT.search(str(exc)):
                    raise
                time.sleep(0.2)

    def wipe(self) -> None:
        """Dagster's wipe; the engines of the run files it deletes go first."""
        with self._engines_lock:
            for shard in [key for key in self._engines if key != sqlite_event_log.INDEX_SHARD_NAME]:
                self._engines.pop(shard).dispose()
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        with self._engines_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()


class KeptEngineConnections:
    """A storage whose ``connect`` takes its connection from one kept engine keeping idle connections
    (Dagster's SQLite run and schedule storages build an engine and open a connection per use)."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(conn_string, inst_data)  # type: ignore[call-arg]
        self._kept_engine = sqlite_engine(conn_string)

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict[str, str]) -> Any:
        return cls.from_local(inst_data=inst_data, **config_value)  # type: ignore[attr-defined]

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._kept_engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()  # type: ignore[misc]
        self._kept_engine.dispose()


class KeptEngineRunStorage(KeptEngineConnections, SqliteRunStorage):
    """Dagster's SQLite run storage, its engine kept and its schema answers remembered."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(conn_string, inst_data)
        self._schema = SchemaYes()

    def has_run_stats_index_cols(self) -> bool:
        return self._schema.ask(("run stats",), super().has_run_stats_index_cols)

    def has_bulk_actions_selector_cols(self) -> bool:
        return self._schema.ask(("bulk actions selector",), super().has_bulk_actions_selector_cols)

    def has_backfill_id_column(self) -> bool:
        return self._schema.ask(("backfill id",), super().has_backfill_id_column)


class KeptEngineScheduleStorage(KeptEngineConnections, SqliteScheduleStorage):
    """Dagster's SQLite schedule storage (sensor ticks, cursors), its engine kept."""


class KeptEngineSqliteStorage(sqlite_storage.DagsterSqliteStorage):
    """Dagster's default SQLite storage (runs, event logs, schedules under one folder), engines kept."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self.base_dir = base_dir
        self._run_storage = KeptEngineRunStorage.from_local(sqlite_storage._runs_directory(base_dir))
        self._event_log_storage = KeptEngineEventLogStorage(sqlite_storage._event_logs_directory(base_dir))
        self._schedule_storage = KeptEngineScheduleStorage.from_local(
            sqlite_storage._schedule_directory(base_dir)
        )
        self._inst_data = inst_data
        super(sqlite_storage.DagsterSqliteStorage, self).__init__()

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: dict[str, str]
    ) -> KeptEngineSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)

    @property
    def event_storage_data(self) -> ConfigurableClassData:
        return _data("KeptEngineEventLogStorage", sqlite_storage._event_logs_directory(self.base_dir))

    @property
    def run_storage_data(self) -> ConfigurableClassData:
        return _data("KeptEngineRunStorage", sqlite_storage._runs_directory(self.base_dir))

    @property
    def schedule_storage_data(self) -> ConfigurableClassData:
        return _data("KeptEngineScheduleStorage", sqlite_storage._schedule_directory(self.base_dir))


def _data(class_name: str, base_dir: str) -> ConfigurableClassData:
    return ConfigurableClassData(
        MODULE, class_name, yaml.dump({"base_dir": base_dir}, default_flow_style=False)
    )


def storage_defaults(base_dir: str) -> dict[str, ConfigurableClassData]:
    """The instance defaults naming these storages (Dagster's defaults name its own SQLite classes)."""
    return {
        "storage": _data("KeptEngineSqliteStorage", base_dir),
        "run_storage": _data("KeptEngineRunStorage", sqlite_storage._runs_directory(base_dir)),
        "event_log_storage": _data(
            "KeptEngineEventLogStorage", sqlite_storage._event_logs_directory(base_dir)
        ),
        "schedule_storage": _data("KeptEngineScheduleStorage", sqlite_storage._schedule_directory(base_dir)),
    }
