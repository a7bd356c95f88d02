"""Parquet partitions behind DuckDB views: atomic writes, SQL, and concurrent partition writers."""

from __future__ import annotations

import multiprocessing as mp

import duckdb
import pandas as pd
import pytest

from giant_assets.core.storage import ParquetStore


def _write_partition(root: str, name: str, n: int) -> None:
    ParquetStore(root).write("scores", pd.DataFrame({"bench": [name] * n, "x": range(n)}), name)


def test_partitions_are_files_and_one_view_covers_them(tmp_path):
    store = ParquetStore(tmp_path)
    store.write("scores", pd.DataFrame({"bench": ["gtex"] * 3, "x": [1, 2, 3]}), "gtex")
    store.write("scores", pd.DataFrame({"bench": ["tcga"] * 2, "x": [4, 5]}), "tcga")
    store.write("scores", pd.DataFrame({"bench": ["tcga"], "x": [9]}), "tcga")  # replaces the partition
    assert sorted(p.name for p in (tmp_path / "scores").iterdir()) == ["gtex.parquet", "tcga.parquet"]
    con = duckdb.connect(str(tmp_path / "giant.duckdb"), read_only=True)
    rows = con.sql("select bench, count(*), sum(x) from scores group by 1 order by 1").fetchall()
    assert rows == [("gtex", 3, 6), ("tcga", 1, 9)]
    assert store.read("scores", ["tcga"])["x"].tolist() == [9]


def test_a_failed_write_leaves_the_old_partition_and_no_temp_file(tmp_path):
    store = ParquetStore(tmp_path)
    store.write("t", pd.DataFrame({"x": [1]}), "p")
    with pytest.raises(Exception):  # noqa: B017 - pyarrow's error type for a bad column
        store.write("t", pd.DataFrame({"x": [object()]}), "p")
    assert store.read("t")["x"].tolist() == [1]
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["p.parquet"]


def test_unsafe_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unsafe partition name"):
        ParquetStore(tmp_path).write("t", pd.DataFrame({"x": [1]}), "../evil")


def test_concurrent_processes_write_partitions_without_lock_errors(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_partition, args=(str(tmp_path), f"b{i}", i + 1)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    total = ParquetStore(tmp_path).query("select count(*) as n from scores")["n"].iloc[0]
    assert total == 1 + 2 + 3 + 4
