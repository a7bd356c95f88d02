"""Query the platform's DuckDB file from the shell, read-only, with the venv's Python (no separate CLI).

    .venv/bin/giant-sql "select benchmark_name, value_pct from benchmark_metrics"

The database is ``$GIANT_DATA_DIR/giant.duckdb`` (default ``./data``) unless ``--db PATH`` is given.
Opening it read-only never takes the write lock, so it works while Dagster materializes.

    .venv/bin/giant-sql --refresh-views

(re)creates the view of every table under the data folder: needed only when a table's first write found
the DuckDB file open in another session and deferred its view (see ``giant_assets.core.storage``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import duckdb
import pandas as pd
from pandas.api.types import is_datetime64_any_dtype, is_float_dtype

from giant_assets.core.settings import DUCKDB_NAME, data_dir
from giant_assets.core.storage import DuckDBDamaged, DuckDBLocked, ParquetStore, damaged, is_damage

NULL = "NULL"  # how a missing value prints


def run(sql: str, db: Path) -> pd.DataFrame:
    """The query's result; raises FileNotFoundError when the DuckDB file does not exist yet."""
    if not db.exists():
        raise FileNotFoundError(f"{db} does not exist yet: run `make demo` (or materialize assets) first")
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.IOException as exc:
        if is_damage(exc):
            raise damaged(db, exc) from None
        raise
    with con:
        relation = con.sql(sql)
        return relation.df() if relation is not None else pd.DataFrame()


def printable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every missing value shown as ``NULL``, as DuckDB's CLI does (pandas would show
    ``NaN``, ``<NA>`` or ``None`` depending on the column's type)."""
    shown = frame.copy()
    for column in shown.columns:
        values = shown[column]
        if values.isna().any() and not (
            is_float_dtype(values.dtype) or is_datetime64_any_dtype(values.dtype)
        ):
            shown[column] = values.astype(object).where(values.notna(), NULL)
    return shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="giant-sql", description=__doc__.splitlines()[0])
    parser.add_argument("sql", nargs="?", help='one SQL statement, e.g. "select * from benchmark_metrics"')
    parser.add_argument(
        "--refresh-views",
        action="store_true",
        help="(re)create the DuckDB view of every table in the data folder (waits for the file's lock)",
    )
    parser.add_argument(
        "--db", type=Path, default=None, help=f"DuckDB file (default: <data dir>/{DUCKDB_NAME})"
    )
    parser.add_argument("--limit", type=int, default=200, help="print at most this many rows (default 200)")
    args = parser.parse_args(argv)
    if args.refresh_views:
        return _refresh_views(args.db.parent if args.db else data_dir())
    if not args.sql:
        parser.error("give an SQL statement, or --refresh-views")
    db = args.db or data_dir() / DUCKDB_NAME
    try:
        frame = run(args.sql, db)
    except (FileNotFoundError, duckdb.Error, DuckDBDamaged) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 60):
            shown = printable(frame.head(args.limit))
            print(shown.to_string(index=False, na_rep=NULL) if len(frame) else "(no rows)")
        if len(frame) > args.limit:
            print(f"... {len(frame) - args.limit} more rows (use --limit)")
        sys.stdout.flush()
    except BrokenPipeError:  # `giant-sql ... | head` stopped reading: end quietly, as other shell tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
    return 0


def _refresh_views(root: Path) -> int:
    try:
        tables = ParquetStore(root, log=lambda line: print(line, file=sys.stderr)).refresh_views()
    except (DuckDBLocked, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"views of {len(tables)} table(s) in {root / DUCKDB_NAME}: {', '.join(tables) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
