"""The instance's PostgreSQL storages keeping a connection, instead of opening one per statement.

Dagster's PostgreSQL storages (runs, event log, schedules) open a new database connection for every
statement or transaction and close it after (``NullPool``), so that an instance holds no connection
between uses. On PostgreSQL's side each connection is a new server process (fork, authentication, the
catalog caches built again): the daemon's loops, each run's ~80 stored events and each step's look-ups pay
it every time. Here each storage keeps one idle connection (a pool of one, as Dagster's own webserver keeps
for itself), checked with a ping when taken and replaced after ``RECYCLE_S``; a use while it is taken
(another thread) opens a connection of its own and closes it after, as before. A process keeps at most
three idle connections, one per storage.

A process forked while holding connections (a ``fork`` child of a step, a worker pool) never uses its
parent's: the pools are emptied in the child without closing them (the parent's stay open).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

RECYCLE_S = 600  # an idle connection older than this is replaced (a rotated password or token applies)
_KEPT: weakref.WeakSet[Engine] = weakref.WeakSet()


def keep_connections(instance: Any) -> int:
    """Give each of the instance's PostgreSQL storages an engine keeping one connection; how many.

    An instance on SQLite imports nothing here (dagster_postgres costs ~0.6 CPU-s to import)."""
    storages = (instance.run_storage, instance.event_log_storage, instance._schedule_storage)  # noqa: SLF001
    if not any(type(storage).__module__.startswith("dagster_postgres.") for storage in storages):
        return 0
    from dagster_postgres.event_log.event_log import PostgresEventLogStorage
    from dagster_postgres.run_storage.run_storage import PostgresRunStorage
    from dagster_postgres.schedule_storage.schedule_storage import PostgresScheduleStorage
    from dagster_postgres.utils import create_pg_engine

    kinds = (PostgresRunStorage, PostgresEventLogStorage, PostgresScheduleStorage)
    changed = 0
    for storage in storages:
        if not isinstance(storage, kinds) or not isinstance(storage._engine.pool, NullPool):  # noqa: SLF001
            continue
        options = storage._engine.url.query.get("options")  # noqa: SLF001  # as Dagster's webserver passes them
        engine = create_pg_engine(
            storage.postgres_url,
            storage._token_provider,  # noqa: SLF001
            isolation_level="AUTOCOMMIT",
            pool_size=1,
            max_overflow=-1,  # no limit on connections at once, as before
            pool_pre_ping=True,
            pool_recycle=RECYCLE_S,
            **({"connect_args": {"options": options}} if options else {}),
        )
        storage._engine = engine  # noqa: SLF001
        _KEPT.add(engine)
        changed += 1
    return changed


def _forget_in_child() -> None:
    for engine in list(_KEPT):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_in_child)
