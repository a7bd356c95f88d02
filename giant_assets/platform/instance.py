"""The platform's Dagster instance: Dagster's own, asking for each dynamic partition key once per run.

Dagster 1.13 checks that both dynamic partition keys of a cell (experiment, benchmark) exist for every
input and output of every step, each time through the event log storage (for SQLite a new connection to
its index file): ~170 look-ups per cell run. While this process executes a run or a step (from the start
event it stores to the end event), a key found to exist is remembered until the last of them ends; this
process's own deletes forget it at once. A key not found is asked again every time, so a partition added
meanwhile (by ``sync``, the sensor, another run) is seen at once. A partition another process deletes
while a run executes counts as deleted after that run, as if deleted a moment later. Outside a run (the
daemon, the webserver, sensors, ``giant-experiments``) every question goes to the storage, as in Dagster.

Named by ``instance_class`` in ``dagster_home/dagster.yaml`` and ``dagster_home/postgres/dagster.yaml``:
every process reading that file (run workers launched by the daemon, ``dagster asset materialize``,
``dagster job backfill``, ``materialize()`` on such an instance, the demo) builds this class.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from dagster import DagsterEventType, DagsterInstance, EventLogEntry
from dagster._core.instance.ref import InstanceRef

from giant_assets.platform.instance_storage import storage_defaults
from giant_assets.platform.postgres_pool import keep_connections

Event = DagsterEventType
STARTS = frozenset({Event.RUN_START, Event.STEP_START, Event.STEP_RESTARTED})
RUN_ENDS = frozenset({Event.RUN_SUCCESS, Event.RUN_FAILURE, Event.RUN_CANCELED})
ENDS = RUN_ENDS | {Event.STEP_SUCCESS, Event.STEP_FAILURE, Event.STEP_UP_FOR_RETRY}


class GiantInstance(DagsterInstance):
    """A DagsterInstance that remembers, while a run or step executes here, which partition keys exist."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        keep_connections(self)  # PostgreSQL storages: a kept connection each (postgres_pool.py)
        self._partitions_lock = threading.Lock()
        self._executing: set[tuple[str, str | None]] = set()  # (run id, step key or None for the run)
        self._existing: set[tuple[str, str]] = set()  # (partitions definition, key) found while executing
        self._deletes = 0  # this process's deletes so far: an answer read across one is not kept

    @classmethod
    def config_schema(cls) -> Mapping[str, Any]:
        """No settings of its own (Dagster asks a custom instance class for them)."""
        return {}

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, Any]:
        """Dagster's defaults for every storage the instance file does not name, its SQLite storage
        keeping engines (instance_storage.py)."""
        return {**InstanceRef.config_defaults(base_dir), **storage_defaults(base_dir)}

    def handle_new_event(self, event: EventLogEntry, *, batch_metadata: Any = None) -> None:
        """Store the event as Dagster does, noting the runs and steps executing in this process."""
        super().handle_new_event(event, batch_metadata=batch_metadata)
        kind = event.dagster_event_type
        if kind not in STARTS and kind not in ENDS:
            return
        key = (event.run_id, event.step_key)  # a run's own events have no step key
        with self._partitions_lock:
            if kind in STARTS:
                self._executing.add(key)
                return
            self._executing.discard(key)
            if kind in RUN_ENDS:  # a step whose end never came (its process died) ends with its run
                self._executing = {e for e in self._executing if e[0] != event.run_id}
            if not self._executing:
                self._existing.clear()

    def has_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> bool:
        """Whether the key exists: from memory when found earlier in a run executing here."""
        key = (partitions_def_name, partition_key)
        with self._partitions_lock:
            if key in self._existing:
                return True
            deletes = self._deletes
        found = super().has_dynamic_partition(partitions_def_name, partition_key)
        if found:
            with self._partitions_lock:
                if self._executing and deletes == self._deletes:
                    self._existing.add(key)
        return found

    def delete_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> None:
        """Delete the key as Dagster does; this process forgets it at once."""
        super().delete_dynamic_partition(partitions_def_name, partition_key)
        with self._partitions_lock:
            self._existing.discard((partitions_def_name, partition_key))
            self._deletes += 1
