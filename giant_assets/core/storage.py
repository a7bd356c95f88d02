"""Parquet files under the data directory, exposed as DuckDB views for plain SQL.

Each table is a folder of Parquet files, one per partition (or a single ``_all.parquet`` for an
unpartitioned table). A partition may name a sub-folder: ``random/tcga`` is the file
``<table>/random/tcga.parquet`` (one file per experiment and benchmark). Files are written atomically
(temp file + rename), so a killed run never leaves a half-written partition. The DuckDB file only holds
views whose glob covers every partition file, so partitions materialising at once never contend for the
DuckDB write lock: a view is created once, when its table's first file appears.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from giant_assets.core.settings import DUCKDB_NAME

UNPARTITIONED = "_all"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _check_name(kind: str, value: str) -> str:
    if not _SAFE_NAME.match(value) or value in {".", ".."}:
        raise ValueError(f"unsafe {kind} name {value!r}: use letters, digits, '_', '-', '.'")
    return value


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ParquetStore:
    """Tables as Parquet partition files under ``root`` plus DuckDB views in ``root/giant.duckdb``."""

    def __init__(self, root: Path | str, lock_timeout_s: float = 60.0) -> None:
        self.root = Path(root).resolve()
        self.lock_timeout_s = lock_timeout_s

    @property
    def duckdb_path(self) -> Path:
        return self.root / DUCKDB_NAME

    def table_dir(self, table: str) -> Path:
        return self.root / _check_name("table", table)

    def partition_path(self, table: str, partition: str | None = None) -> Path:
        *folders, name = (partition or UNPARTITIONED).split("/")
        folder = self.table_dir(table).joinpath(*(_check_name("partition", f) for f in folders))
        return folder / f"{_check_name('partition', name)}.parquet"

    def write(self, table: str, df: pd.DataFrame, partition: str | None = None) -> Path:
        """Atomically replace one partition (or the whole unpartitioned table) and ensure its view."""
        path = self.partition_path(table, partition)
        arrow = pa.Table.from_pandas(df, preserve_index=False)
        sink = pa.BufferOutputStream()
        pq.write_table(arrow, sink, compression="zstd")
        atomic_write_bytes(path, sink.getvalue().to_pybytes())
        self.ensure_view(table)
        return path

    def partitions(self, table: str) -> list[str]:
        """Partition keys present, sub-folders joined with '/' (``random/tcga``)."""
        folder = self.table_dir(table)
        if not folder.exists():
            return []
        return sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.parquet"))

    def exists(self, table: str, partition: str | None = None) -> bool:
        return self.partition_path(table, partition).exists()

    def read(self, table: str, partitions: Iterable[str] | None = None) -> pd.DataFrame:
        """Read some partitions (default: all) of a table into one DataFrame."""
        keys = list(partitions) if partitions is not None else self.partitions(table)
        paths = [self.partition_path(table, k) for k in keys]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"table {table!r} has no data for partition file(s): {missing}")
        if not paths:
            raise FileNotFoundError(f"table {table!r} has no partitions under {self.table_dir(table)}")
        frames = [pq.read_table(p).to_pandas() for p in paths]
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

    def connect(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """Open the DuckDB file, retrying while another process holds its lock."""
        self.root.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.duckdb_path), read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def ensure_view(self, table: str) -> None:
        """Create the DuckDB view over the table's Parquet files if it does not exist yet."""
        glob = str(self.table_dir(table) / "**" / "*.parquet").replace("'", "''")
        sql = (
            f'CREATE OR REPLACE VIEW "{table}" AS '
            f"SELECT * FROM read_parquet('{glob}', union_by_name = true)"
        )
        with self.connect() as con:
            current = con.execute(
                "SELECT sql FROM duckdb_views() WHERE view_name = ? AND NOT internal", [table]
            ).fetchone()
            if current is None or glob not in current[0]:
                con.execute(sql)

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """Run SQL against the DuckDB file (read-only) and return a DataFrame."""
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).df()
