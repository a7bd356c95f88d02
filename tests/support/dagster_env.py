"""Resources for real materializations over a temp data directory, and experiments files for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from dagster import DagsterInstance

from giant_assets.platform.io_manager import ParquetDuckDBIOManager
from giant_assets.platform.partitions import EXPERIMENT
from giant_assets.platform.resources import ExperimentsResource, MultiPathQAResource, StorageResource


def write_experiments(path: Path, experiments: dict[str, dict[str, Any]], **defaults: Any) -> Path:
    """An experiments YAML file declaring ``experiments`` (name -> settings)."""
    doc: dict[str, Any] = {"experiments": experiments}
    if defaults:
        doc["defaults"] = defaults
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def resources_for(data_dir: Path, experiments_file: Path | str = "", **dataset: str) -> dict:
    storage = StorageResource(data_dir=str(data_dir))
    return {
        "io_manager": ParquetDuckDBIOManager(storage=storage),
        "storage": storage,
        "dataset": MultiPathQAResource(**dataset),
        "experiments": ExperimentsResource(path=str(experiments_file)),
    }


def add_experiments(instance: DagsterInstance, *names: str) -> None:
    """Register experiment partitions on an instance (what the sensor or `giant-experiments sync` do)."""
    instance.add_dynamic_partitions(EXPERIMENT, list(names))
