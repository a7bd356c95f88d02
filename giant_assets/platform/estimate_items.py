"""Which questions ``giant-experiments estimate`` prices, and the line that says so: the ingested
``benchmark_items`` (the bundled sample or a CSV), or a MultiPathQA CSV read alone (``--csv``: no slides,
every question counted as if its slide were in place)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES
from giant_assets.multipathqa.errata import handle_errata
from giant_assets.multipathqa.loading import CsvFormatError, parse_items, read_csv_strings
from giant_assets.multipathqa.sample import sample_csv_path

SHOWN_ROW_ERRORS = 5
PRICE_A_CSV = "`giant-experiments estimate NAME --csv PATH` prices a MultiPathQA CSV before any slide"


def csv_questions(path: Path | str, errata_mode: str) -> pd.DataFrame:
    """The CSV's questions as ``benchmark_items`` would ask them: valid rows (``is_valid``), known errata
    handled per ``errata_mode``; a malformed row is a ``CsvFormatError`` naming file, row and field."""
    items, errors = parse_items(read_csv_strings(path), str(path))
    if errors:
        shown = "\n".join(str(e) for e in errors[:SHOWN_ROW_ERRORS])
        more = f"\n(and {len(errors) - SHOWN_ROW_ERRORS} more)" if len(errors) > SHOWN_ROW_ERRORS else ""
        raise CsvFormatError(f"{len(errors)} malformed row field(s):\n{shown}{more}", errors)
    items = items[items["is_valid"]].reset_index(drop=True)
    return handle_errata(items, errata_mode)[0]


def per_benchmark(items: pd.DataFrame) -> str:
    """``gtex 191, panda 197, ...``: the questions of each benchmark, by name."""
    counts = items["benchmark_name"].astype(str).value_counts().sort_index()
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def ingested_source(store_csv: pd.DataFrame | None) -> Path | None:
    """The CSV file ``multipathqa_csv`` was read from (its ``source_file``), if it is stored."""
    if store_csv is None or "source_file" not in store_csv or not len(store_csv):
        return None
    return Path(str(store_csv["source_file"].iloc[0]))


def item_set_line(items: pd.DataFrame, source: Path | None, *, csv_alone: bool = False) -> str:
    """What was priced, in one line: the bundled sample (and how to price the real CSV), the ingested CSV,
    or a CSV read alone; with the questions of each benchmark."""
    builtin = items["benchmark_name"].isin(BENCHMARK_NAMES)
    n = int(builtin.sum())
    counts = per_benchmark(items[builtin])
    if not builtin.all():  # the experiments file's own benchmarks, beside MultiPathQA's
        counts += f"; declared benchmarks: {per_benchmark(items[~builtin])}"
    if csv_alone:
        return (
            f"priced: the CSV {source} with {n} questions ({counts}), each as if its slide were in place "
            "(no slide read)"
        )
    if source is not None and source.resolve() == sample_csv_path().resolve():
        return f"priced: the bundled {n}-question sample ({counts}), not the full MultiPathQA; {PRICE_A_CSV}"
    where = f" {source}" if source is not None else ""
    return f"priced: the ingested CSV{where} with {n} questions ({counts})"
