"""The shipped Dagster instance (dagster_home/dagster.yaml): no telemetry or first-visit pop-up; queued
runs launched together."""

from __future__ import annotations

import shutil
from pathlib import Path

from dagster import DagsterInstance

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_instance_has_no_telemetry_and_no_nux(tmp_path: Path) -> None:
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.telemetry_enabled is False
        assert instance.nux_enabled is False  # what the UI asks before showing its first-visit modal


def test_the_shipped_instance_launches_a_rows_queued_runs_together(tmp_path: Path) -> None:
    """As many launch threads as runs may run at once: Dagster's default launches one queued run at a time."""
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        coordinator = instance.run_coordinator
        assert coordinator.get_run_queue_config().max_concurrent_runs == 4
        assert coordinator.dequeue_use_threads is True and coordinator.dequeue_num_workers == 4
