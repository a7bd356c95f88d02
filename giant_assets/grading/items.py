"""Where MultiPathQA truth comes from: the project's ``benchmark_items`` table or an items file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.core.storage import ParquetStore
from giant_assets.multipathqa.loading import parse_items, read_csv_strings

ITEMS_TABLE = "benchmark_items"


class ItemsUnavailableError(RuntimeError):
    """No items table to build MultiPathQA tasks from; the message says how to get one."""


def read_items_file(path: Path | str) -> pd.DataFrame:
    """An items table from Parquet, from a CSV export of it, or from the raw MultiPathQA CSV.

    A raw MultiPathQA CSV (``answer`` column, no ``truth_label``) is parsed like the ingest does; any
    malformed row makes this fail listing the problems.
    """
    path = Path(path)
    if not path.is_file():
        raise ItemsUnavailableError(f"items file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix != ".csv":
        raise ItemsUnavailableError(f"{path}: items must be a .parquet or .csv file")
    header = pd.read_csv(path, nrows=0, encoding="utf-8").columns
    if "truth_label" in header:
        return pd.read_csv(path, dtype={"benchmark_id": str}, keep_default_na=False, encoding="utf-8")
    items, errors = parse_items(read_csv_strings(path), str(path))
    if errors:
        listing = "\n".join(str(e) for e in errors[:10])
        raise ItemsUnavailableError(f"{path}: {len(errors)} malformed row field(s):\n{listing}")
    return items


def project_items(data_dir: Path) -> pd.DataFrame:
    """The ``benchmark_items`` table written by the ingest asset under ``data_dir``."""
    store = ParquetStore(data_dir)
    if not store.partitions(ITEMS_TABLE):
        raise ItemsUnavailableError(
            f"no '{ITEMS_TABLE}' table under {store.root}: materialize the benchmark_items asset "
            "(or set GIANT_DATA_DIR), or pass --items <items parquet/csv or the MultiPathQA CSV>"
        )
    return store.read(ITEMS_TABLE)
