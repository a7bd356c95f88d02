"""Resources for real materializations over a temp data directory."""

from __future__ import annotations

from pathlib import Path

from giant_assets.platform.io_manager import ParquetDuckDBIOManager
from giant_assets.platform.resources import MultiPathQAResource, StorageResource


def resources_for(data_dir: Path, **dataset: str) -> dict:
    storage = StorageResource(data_dir=str(data_dir))
    return {
        "io_manager": ParquetDuckDBIOManager(storage=storage),
        "storage": storage,
        "dataset": MultiPathQAResource(**dataset),
    }
