"""The suite's ephemeral instances (tests/support/ephemeral_storage.py) store what Dagster's own store, on
a connection kept per thread instead of one per statement."""

from __future__ import annotations

import gc
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import dagster._core.storage.event_log as event_log_package
import dagster._core.storage.runs as runs_package
import pytest
from dagster import (
    AssetCheckResult,
    AssetKey,
    AssetMaterialization,
    DagsterInstance,
    MetadataValue,
    StaticPartitionsDefinition,
    asset,
    asset_check,
    materialize,
)
from dagster._core.storage.event_log.in_memory import InMemoryEventLogStorage
from dagster._core.storage.runs.in_memory import InMemoryRunStorage
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.support.concurrent_events import report_from_threads
from tests.support.ephemeral_storage import KeptEventLogStorage, KeptRunStorage

LETTERS = StaticPartitionsDefinition(["a", "b"])


@asset(partitions_def=LETTERS)
def letters(context) -> str:
    context.add_output_metadata({"partition": context.partition_key, "table": MetadataValue.md("| x |")})
    return context.partition_key


@asset(partitions_def=LETTERS)
def shouted(letters: str) -> str:
    if letters == "b":
        raise ValueError("b is refused")
    return letters.upper()


@asset_check(asset=letters)
def letters_are_short() -> AssetCheckResult:
    return AssetCheckResult(passed=True, metadata={"longest": 1})


ASSETS = [letters, shouted, letters_are_short]


@contextmanager
def dagster_own() -> Iterator[None]:
    """Ephemeral instances built with Dagster's own in-memory storages while inside."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(event_log_package, "InMemoryEventLogStorage", InMemoryEventLogStorage)
        patch.setattr(runs_package, "InMemoryRunStorage", InMemoryRunStorage)
        yield


@contextmanager
def connections_opened() -> Iterator[list[int]]:
    """Counts the SQLAlchemy connections opened (by any engine) while inside."""
    opened = [0]

    def count(*_) -> None:
        opened[0] += 1

    event.listen(Engine, "connect", count)
    try:
        yield opened
    finally:
        event.remove(Engine, "connect", count)


def record(instance: DagsterInstance) -> dict:
    """What the instance holds after materializing both partitions (the second fails), ids left out."""
    runs = [materialize(ASSETS, partition_key=key, instance=instance, raise_on_error=False) for key in "ab"]
    instance.report_runless_asset_event(AssetMaterialization("outside", metadata={"n": 3}))
    events = {
        r.run_id: [(e.dagster_event.event_type_value, e.step_key) for e in instance.all_logs(r.run_id)
                   if e.dagster_event is not None]
        for r in runs
    }  # fmt: skip
    latest = instance.get_latest_materialization_event(AssetKey("letters")).asset_materialization
    check = letters_are_short.check_key
    checks = instance.event_log_storage.get_asset_check_execution_history(check, limit=5)
    return {
        "statuses": [instance.get_run_by_id(r.run_id).status.value for r in runs],
        "events": [events[r.run_id] for r in runs],
        # the path is in each instance's own temporary folder
        "letters": (latest.partition, {k: v for k, v in latest.metadata.items() if k != "path"}),
        "materialized": sorted(instance.get_materialized_partitions(AssetKey("letters"))),
        "shouted": sorted(instance.get_materialized_partitions(AssetKey("shouted"))),
        "outside": instance.get_latest_materialization_event(AssetKey("outside")).asset_materialization,
        "checks": [(c.partition, c.status.value) for c in checks],
        "runs": len(instance.get_runs()),
    }


def test_the_suites_ephemeral_instances_store_what_dagsters_store_on_far_fewer_connections() -> None:
    with dagster_own(), DagsterInstance.ephemeral() as own:
        assert type(own.event_log_storage) is InMemoryEventLogStorage
        with connections_opened() as own_opened:
            expected = record(own)
    with DagsterInstance.ephemeral() as kept:
        assert type(kept.event_log_storage) is KeptEventLogStorage
        assert type(kept.run_storage) is KeptRunStorage
        with connections_opened() as kept_opened:
            assert record(kept) == expected
    assert expected["statuses"] == ["SUCCESS", "FAILURE"] and expected["checks"]
    # Dagster's: one connection per statement (~70 a materialization); kept: each thread's first use only
    assert own_opened[0] > 60 and kept_opened[0] <= 6, (own_opened, kept_opened)


def test_threads_share_one_instance_each_on_its_own_kept_connection(caplog: pytest.LogCaptureFixture) -> None:
    # Earlier tests' instances never disposed (``materialize()`` without one) hold Dagster's own connection
    # to their database, made with SQLite's same-thread check: finalized by a garbage collection that a
    # thread below triggers, it logs SQLAlchemy's "Exception during reset" (that thread is not its own).
    # Collected here first, with the collector off while the threads run: only this instance's logs count.
    gc.collect()
    caplog.clear()
    gc.disable()
    try:
        with DagsterInstance.ephemeral() as instance:
            storage = instance.event_log_storage
            report_from_threads(instance)
            kept = [conn.connection.dbapi_connection for conn in storage._kept._opened]
            assert 6 <= len(kept) <= 7  # one per reporting thread, and this thread's reads
    finally:
        gc.enable()
    for conn in kept:  # closed (by this thread) when the instance was disposed, without an error logged
        with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
            conn.execute("select 1")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_storages_never_disposed_close_without_an_error_when_another_thread_collects_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Instances nobody disposes (``materialize()`` without one) are closed by the garbage collector, in
    whichever thread triggers it: Dagster's own storages then log "Exception during reset" (their
    connections carry SQLite's same-thread check); the kept ones log nothing."""

    def collect_in_another_thread(make: type) -> list[logging.LogRecord]:
        gc.collect()
        caplog.clear()
        gc.disable()
        try:
            for _ in range(3):
                storage = make()
                storage.cycle = storage  # freed only by a collection
                use = storage.index_connection if hasattr(storage, "index_connection") else storage.connect
                with use():
                    pass
            del storage
            collector = threading.Thread(target=gc.collect)
            collector.start()
            collector.join()
        finally:
            gc.enable()
        return [r for r in caplog.records if r.levelno >= logging.WARNING]

    assert collect_in_another_thread(InMemoryEventLogStorage)  # the oracle: Dagster's own logs errors
    assert collect_in_another_thread(KeptEventLogStorage) == []
    assert collect_in_another_thread(KeptRunStorage) == []


def test_a_use_inside_a_use_gets_its_own_connection_and_the_kept_one_is_used_after() -> None:
    with DagsterInstance.ephemeral() as instance:
        runs = instance.run_storage
        with runs.connect() as outer:
            with runs.connect() as inner:
                assert inner is not outer and inner.exec_driver_sql("select 1").scalar() == 1
            assert outer.exec_driver_sql("select 1").scalar() == 1
        with runs.connect() as again:
            assert again is outer
        assert inner.closed and not outer.closed
