"""Dagster's in-memory storages, as the suite's ephemeral instances use them, with kept connections.

Most in-process tests run on an ephemeral instance (``materialize()`` without an instance makes one,
``DagsterInstance.ephemeral()``): its runs and events live in two in-memory SQLite databases. Dagster 1.13
opens a new connection for every statement there (``NullPool``) and runs ``PRAGMA journal_mode=WAL`` and
``PRAGMA foreign_keys=ON`` on it first (~70 connections for a materialization of two small assets), and
asks the event database whether a table exists (a reflection) again each time. Here each thread keeps one
connection per database and runs the foreign-keys pragma once on it (WAL does nothing to an in-memory
database: its journal stays ``memory``), and a table found is remembered (tables are only ever added). The
statements, their transactions and the event log's lock are Dagster's own; a thread whose kept connection
is still in a transaction (a use inside a use) gets a fresh connection, as Dagster would give it. Every
connection (the one holding the database open too) is made without SQLite's same-thread check: closed by
the instance's disposal or by the garbage collector in any thread, it logs nothing.

The product never runs on an ephemeral instance (its own SQLite storage is
``giant_assets/platform/instance_storage.py``). ``tests/conftest.py`` installs these classes in every
test process; ``tests/test_ephemeral_storage.py`` compares them with Dagster's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster._core.storage.event_log as event_log_package
import dagster._core.storage.runs as runs_package
from dagster._core.storage.event_log.in_memory import InMemoryEventLogStorage
from dagster._core.storage.runs.in_memory import InMemoryRunStorage
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool


class KeptConnections:
    """One connection per thread to the database of an engine's URL, opened on the thread's first use.

    Opened without SQLite's same-thread check, so that the instance's disposal or the garbage collector,
    in whichever thread, can close them all; each is used only by the thread that opened it.
    """

    def __init__(self, engine: Callable[[], Engine]) -> None:
        self._dagster_engine = engine
        self._engine: Engine | None = None
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._lock = threading.Lock()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A transaction on this thread's connection, or on a fresh one while that is in a transaction."""
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._open()
        if conn.in_transaction():  # a use inside a use: its own connection, as Dagster's NullPool gives
            with self._open() as fresh, fresh.begin():
                yield fresh
            return
        with conn.begin():
            yield conn

    def engine(self) -> Engine:
        """The database's engine, its connections made without the same-thread check."""
        if self._engine is None:
            url = self._dagster_engine().url
            self._engine = create_engine(url, poolclass=NullPool, connect_args={"check_same_thread": False})
        return self._engine

    def adopt(self, storage: InMemoryEventLogStorage | InMemoryRunStorage) -> None:
        """Give the storage this engine, and a connection of it to hold the database open, instead of
        Dagster's (made with the check: an instance never disposed, collected by a garbage collection
        another thread triggers, would log SQLAlchemy's "Exception during reset" for it)."""
        held = self.engine().connect()  # opened before Dagster's closes: the database stays
        storage._held_conn.close()
        storage._held_conn = held
        storage._engine = self.engine()

    def _open(self) -> Connection:
        conn = self.engine().connect()
        conn.exec_driver_sql("PRAGMA foreign_keys=ON").close()
        conn.commit()
        with self._lock:
            self._opened.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        if self._engine is not None:
            self._engine.dispose()


class KeptEventLogStorage(InMemoryEventLogStorage):
    """Dagster's in-memory event log, its connections kept per thread."""

    def __init__(self, inst_data=None, preload=None) -> None:
        self._kept = KeptConnections(lambda: self._engine)  # before Dagster's __init__ stores a preload
        self._tables: set[str] = set()
        super().__init__(inst_data, preload)
        self._kept.adopt(self)

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with self._db_lock, self._kept.transaction() as conn:
            yield conn

    def has_table(self, table_name: str) -> bool:
        if table_name in self._tables:
            return True
        found = super().has_table(table_name)
        if found:
            self._tables.add(table_name)
        return found

    def dispose(self) -> None:
        self._kept.close()
        super().dispose()


class KeptRunStorage(InMemoryRunStorage):
    """Dagster's in-memory run storage, its connections kept per thread."""

    def __init__(self, preload=None) -> None:
        self._kept = KeptConnections(lambda: self._engine)
        super().__init__(preload)
        self._kept.adopt(self)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._kept.transaction() as conn:
            yield conn

    def dispose(self) -> None:
        self._kept.close()
        super().dispose()


def install() -> None:
    """Make every ephemeral instance created from now on in this process use the kept storages
    (Dagster's factory imports the two classes from these packages each time it builds one)."""
    event_log_package.InMemoryEventLogStorage = KeptEventLogStorage
    runs_package.InMemoryRunStorage = KeptRunStorage
