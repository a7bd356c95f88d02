"""``giant-sql`` prints a missing value as NULL in every column type, as DuckDB's own CLI does."""

from __future__ import annotations

import subprocess
import sys
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


def test_a_reader_that_stops_early_ends_giant_sql_quietly(tmp_path: Path) -> None:
    """``giant-sql ... | head``: the pipe closes after the first lines; no BrokenPipeError traceback."""
    db = tmp_path / "giant.duckdb"
    duckdb.connect(str(db)).close()
    sql = "select range as n, repeat('x', 50) as pad from range(100000)"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "giant-sql"), sql, "--db", str(db), "--limit", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` exits
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert first.split() == [b"n", b"pad"] and err == ""
