"""The shipped Dagster instance (dagster_home/dagster.yaml) shows no telemetry or first-visit pop-up."""

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
