"""The instance on a real PostgreSQL (pgserver's) keeps one connection per storage
(giant_assets/platform/postgres_pool.py): what it stores reads back, threads work at once, a connection
the server dropped is replaced, and a forked process opens its own."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest
from dagster import AssetKey, AssetMaterialization, DagsterInstance
from dagster._core.instance.ref import InstanceRef
from sqlalchemy import text
from sqlalchemy.pool import NullPool, QueuePool

from giant_assets.cluster.servers import LocalServer
from giant_assets.core.settings import POSTGRES_URL_ENV
from giant_assets.platform.instance import GiantInstance
from tests.support.concurrent_events import report_from_threads

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def instance(postgres_server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    url = postgres_server.url.replace("postgresql://", "postgresql+psycopg2://", 1)
    monkeypatch.setenv(POSTGRES_URL_ENV, url)
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as opened:
        yield opened


def sessions(server: LocalServer) -> int:
    """Connections the server has accepted so far (PostgreSQL's own count), this one's excluded."""
    with psycopg2.connect(server.url) as conn, conn.cursor() as cur:
        cur.execute("select sum(sessions) from pg_stat_database")
        return int(cur.fetchone()[0])


def backend(storage) -> int:  # noqa: ANN001
    """The server process behind the storage's connection."""
    with storage._engine.connect() as conn:
        return conn.execute(text("select pg_backend_pid()")).scalar()


def test_each_storage_keeps_one_connection(instance: GiantInstance, postgres_server: LocalServer) -> None:
    storages = (instance.run_storage, instance.event_log_storage, instance._schedule_storage)
    assert isinstance(instance, GiantInstance)
    assert [type(s._engine.pool) for s in storages] == [QueuePool] * 3
    before = sessions(postgres_server)
    for n in range(50):
        instance.report_runless_asset_event(AssetMaterialization("kept", metadata={"n": n}))
        latest = instance.get_latest_materialization_event(AssetKey("kept")).asset_materialization
        assert latest.metadata["n"].value == n
    opened = sessions(postgres_server) - before - 1  # the count's own connection
    # Dagster's NullPool: a connection per statement (~600 for these 100 uses, measured); kept: one each
    assert opened <= 3, opened


def test_dagsters_own_storage_opens_a_connection_per_use(postgres_server: LocalServer, monkeypatch) -> None:  # noqa: ANN001
    """The oracle for the count above: the same storage as Dagster builds it, without the kept pool."""
    from dagster_postgres.event_log.event_log import PostgresEventLogStorage

    url = postgres_server.url.replace("postgresql://", "postgresql+psycopg2://", 1)
    storage = PostgresEventLogStorage(url)
    assert isinstance(storage._engine.pool, NullPool)
    before = sessions(postgres_server)
    for _ in range(10):
        storage.get_asset_records([AssetKey("kept")])
    assert sessions(postgres_server) - before - 1 >= 10


def test_threads_at_once_each_get_a_connection_and_one_stays(
    instance: GiantInstance, postgres_server: LocalServer
) -> None:
    report_from_threads(instance)
    pool = instance.event_log_storage._engine.pool
    assert pool.checkedout() == 0 and pool.checkedin() == 1  # the others were closed after their use


def test_a_connection_the_server_dropped_is_replaced(instance: GiantInstance, postgres_server) -> None:  # noqa: ANN001
    storage = instance.event_log_storage
    first = backend(storage)
    with psycopg2.connect(postgres_server.url) as conn, conn.cursor() as cur:
        cur.execute("select pg_terminate_backend(%s)", (first,))  # a server restart or an idle timeout
    instance.report_runless_asset_event(AssetMaterialization("after", metadata={"n": 1}))
    assert instance.get_latest_materialization_event(AssetKey("after")) is not None
    assert backend(storage) != first


def test_a_forked_process_opens_its_own_connection(instance: GiantInstance) -> None:
    storage = instance.event_log_storage
    parent = backend(storage)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its storage's server process, use it, and leave
        try:
            instance.report_runless_asset_event(AssetMaterialization("child", metadata={"n": 1}))
            os.write(write, str(backend(storage)).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = int(os.read(read, 100) or 0)
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != parent
    assert backend(storage) == parent  # the parent's connection is still its own, and still works
    assert instance.get_latest_materialization_event(AssetKey("child")) is not None
