"""Leaderboards as data: the paper's Table 1 per MultiPathQA benchmark, and user leaderboard CSVs.

The shipped boards (``giant_assets/reference/leaderboards/<benchmark>.csv``: team, score, source) hold
the four model rows of Table 1 of arXiv 2511.19652 with scores as fractions 0..1, the unit the
MultiPathQA metrics return, stored best first: as in biomlbench, medal thresholds are read in file
order and the score direction from the first and last rows, so every leaderboard must be sorted best
first (``Grader.rank_score`` refuses one that is not).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.grading.medals import SCORE_COLUMN, leaderboard_scores
from giant_assets.multipathqa.benchmarks import BENCHMARKS

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "reference" / "leaderboards"


def read_leaderboard_csv(path: Path | str) -> pd.DataFrame:
    """A leaderboard CSV with a numeric ``score`` column (and any others, e.g. ``team``, ``source``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"leaderboard CSV not found: {path}")
    board = pd.read_csv(path, encoding="utf-8")
    try:
        scores = leaderboard_scores(board)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if len(scores) != len(board):
        bad = board.index[pd.to_numeric(board[SCORE_COLUMN], errors="coerce").isna()] + 2
        raise ValueError(f"{path}: non-numeric or missing score in row(s) {bad.tolist()} (header is row 1)")
    if board.empty:
        raise ValueError(f"{path}: the leaderboard has no rows")
    return board


def reference_leaderboard(benchmark: str) -> pd.DataFrame | None:
    """The shipped leaderboard of a MultiPathQA benchmark, or None for any other name."""
    return read_leaderboard_csv(REFERENCE_DIR / f"{benchmark}.csv") if benchmark in BENCHMARKS else None
