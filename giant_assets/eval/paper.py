"""The paper's results as data (arXiv 2511.19652): percent, bootstrap mean ± std over 1000 replicates.

``reference/paper_table1.csv`` holds Table 1 (GPT-5 + GIANT, x5, TITAN, SlideChat; all five benchmarks)
and the GPT-5 thumbnail and patch baselines for the benchmarks where their numbers are known (tcga,
gtex, panda). An unknown cell has no row: it is never written as zero.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

PAPER_TABLE1_CSV = Path(__file__).resolve().parent.parent / "reference" / "paper_table1.csv"
COLUMNS = ("model", "benchmark", "mean", "std")


def paper_results(path: Path | str = PAPER_TABLE1_CSV) -> pd.DataFrame:
    """Rows (model, benchmark, mean, std, source) in file order; ``benchmark`` uses MultiPathQA names.

    ``source`` (where the numbers come from) is optional in the file; without it, it is the file's path.
    """
    table = pd.read_csv(
        path, dtype={"model": str, "benchmark": str, "mean": float, "std": float, "source": str}
    )
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; it has {list(table.columns)}")
    unknown = sorted(set(table["benchmark"]) - set(BENCHMARK_NAMES))
    if unknown:
        raise ValueError(f"{path}: unknown benchmark name(s) {unknown}; expected {list(BENCHMARK_NAMES)}")
    if table[["mean", "std"]].isna().any().any():
        rows = (table.index[table[["mean", "std"]].isna().any(axis=1)] + 2).tolist()
        raise ValueError(f"{path}: missing mean/std in row(s) {rows} (header is row 1)")
    repeated = table.duplicated(["model", "benchmark"], keep=False)
    if repeated.any():
        rows = (table.index[repeated] + 2).tolist()
        raise ValueError(f"{path}: (model, benchmark) repeated in row(s) {rows} (header is row 1)")
    if "source" not in table.columns:
        table["source"] = str(path)
    return table[[*COLUMNS, "source"]].reset_index(drop=True)


def paper_models(paper: pd.DataFrame | None = None) -> list[str]:
    """The paper's model names in the order their rows first appear."""
    paper = paper_results() if paper is None else paper
    return list(dict.fromkeys(paper["model"]))
