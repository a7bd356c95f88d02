"""``giant-sql`` prints a missing value as NULL in every column type, as DuckDB's own CLI does."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from giant_assets.core.sql import main

QUERY = "select * from t order by k"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "giant.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "create table t as select * from (values"
            " (1, 7, 2.5, 'tcga', true, date '2020-01-02'),"
            " (2, NULL, NULL, NULL, NULL, NULL)) v(k, n, value_pct, name, ok, day)"
        )
    return path


def test_missing_values_print_as_null(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), QUERY]) == 0
    header, first, second = capsys.readouterr().out.splitlines()
    assert header.split() == ["k", "n", "value_pct", "name", "ok", "day"]
    assert first.split() == ["1", "7", "2.5", "tcga", "True", "2020-01-02"]
    assert second.split() == ["2", "NULL", "NULL", "NULL", "NULL", "NULL"]  # not NaN, <NA>, None, NaT


def test_present_values_keep_their_type(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(db), "select n from t where k = 1"]) == 0
    assert capsys.readouterr().out.split() == ["n", "7"]  # an integer column stays integer (not 7.0)
