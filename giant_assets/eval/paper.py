"""The paper's Table 1 (arXiv 2511.19652) as data: percent, bootstrap mean ± std over 1000 replicates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

PAPER_TABLE1_CSV = Path(__file__).resolve().parent.parent / "reference" / "paper_table1.csv"
COLUMNS = ("model", "benchmark", "mean", "std")


def paper_results(path: Path | str = PAPER_TABLE1_CSV) -> pd.DataFrame:
    """Rows (model, benchmark, mean, std); ``benchmark`` uses the MultiPathQA benchmark names."""
    table = pd.read_csv(path, dtype={"model": str, "benchmark": str, "mean": float, "std": float})
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; it has {list(table.columns)}")
    unknown = sorted(set(table["benchmark"]) - set(BENCHMARK_NAMES))
    if unknown:
        raise ValueError(f"{path}: unknown benchmark name(s) {unknown}; expected {list(BENCHMARK_NAMES)}")
    if table[["mean", "std"]].isna().any().any():
        rows = (table.index[table[["mean", "std"]].isna().any(axis=1)] + 2).tolist()
        raise ValueError(f"{path}: missing mean/std in row(s) {rows} (header is row 1)")
    return table[list(COLUMNS)]
