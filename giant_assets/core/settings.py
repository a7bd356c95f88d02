"""Environment-driven locations. Every env var the project reads is named here."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "GIANT_DATA_DIR"  # where Parquet files and giant.duckdb live (default ./data)
WSI_ROOT_ENV = "GIANT_WSI_ROOT"  # default WSI root for the items asset
DUCKDB_NAME = "giant.duckdb"


def data_dir() -> Path:
    """The data directory, absolute, created on first use."""
    path = Path(os.environ.get(DATA_DIR_ENV) or "data").expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
