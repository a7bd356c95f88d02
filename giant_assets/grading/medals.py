"""Kaggle-style medals by leaderboard size (the rules of kaggle.com/progression, as in mle-bench).

Medal positions (1-based, best first) for a leaderboard of ``n`` teams:

=============  ======================  ============  ============
teams          gold                    silver        bronze
=============  ======================  ============  ============
1 – 99         floor(10% n)            floor(20% n)  floor(40% n)
100 – 249      10                      floor(20% n)  floor(40% n)
250 – 999      10 + floor(0.2% n)      50            100
1000 +         10 + floor(0.2% n)      floor(5% n)   floor(10% n)
=============  ======================  ============  ============

Rounding: every fraction is rounded *down* and then raised to at least position 1, exactly as
mle-bench's ``int(n * p)`` / ``max(1, …)`` (computed here in integer arithmetic, so no float error;
identical to mle-bench for every n checked up to 200 000). As upstream, a threshold is the score at that
position *in the leaderboard's file order*, so a leaderboard must be stored best first; one that is not
sorted (ties allowed) is refused, naming the first row out of order. A score equal to a threshold earns
that medal; each submission gets at most its best medal. ``above_median`` is strictly better than the
median of the leaderboard scores (mean of the two middle ones for an even count).
``leaderboard_position`` is 1 + the number of entries strictly better; ``leaderboard_percentile`` is the
percent of entries strictly worse, rounded to 1 decimal (biomlbench's definitions).

Small boards are harsh by construction: with 4 teams every medal position is 1, so any medal means
matching or beating the best entry (and is gold).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SCORE_COLUMN = "score"


def medal_positions(n_teams: int) -> tuple[int, int, int]:
    """1-based leaderboard positions whose scores are the gold, silver and bronze thresholds."""
    n = int(n_teams)
    if n < 1:
        raise ValueError(f"a leaderboard needs at least one team, got {n_teams}")
    if n < 100:
        return max(1, n // 10), max(1, n * 2 // 10), max(1, n * 4 // 10)
    if n < 250:
        return 10, n * 2 // 10, n * 4 // 10
    gold = 10 + n * 2 // 1000
    if n < 1000:
        return gold, 50, 100
    return gold, n * 5 // 100, n // 10


def leaderboard_scores(leaderboard: pd.DataFrame) -> np.ndarray:
    """The numeric, non-missing ``score`` column; errors name the columns that were found."""
    if SCORE_COLUMN not in leaderboard.columns:
        raise ValueError(f"leaderboard needs a 'score' column; it has {list(leaderboard.columns)}")
    scores = pd.to_numeric(leaderboard[SCORE_COLUMN], errors="coerce").to_numpy(dtype=float)
    return scores[np.isfinite(scores)]


def check_best_first(scores: np.ndarray, is_lower_better: bool) -> None:
    """Raise ValueError naming the first entry (1-based) that is better than the one above it."""
    steps = np.diff(scores)
    out_of_order = np.flatnonzero(steps < 0 if is_lower_better else steps > 0)
    if out_of_order.size:
        i = int(out_of_order[0]) + 1
        raise ValueError(
            f"leaderboard entry {i + 1} (score {scores[i]:g}) is better than entry {i} ({scores[i - 1]:g}); "
            f"thresholds are read in file order, so store the leaderboard best first "
            f"({'ascending' if is_lower_better else 'descending'} scores)"
        )


def rank_score(score: float | None, leaderboard: pd.DataFrame, is_lower_better: bool) -> dict:
    """Thresholds (file order), medal flags, above-median, leaderboard position, percentile and size."""
    scores = leaderboard_scores(leaderboard)
    n = len(scores)
    check_best_first(scores, is_lower_better)
    gold_pos, silver_pos, bronze_pos = medal_positions(n)
    gold_t, silver_t, bronze_t = (float(scores[p - 1]) for p in (gold_pos, silver_pos, bronze_pos))
    result = {
        "gold_threshold": gold_t,
        "silver_threshold": silver_t,
        "bronze_threshold": bronze_t,
        "median_threshold": float(np.median(scores)),
        "leaderboard_size": n,
        "gold_medal": False,
        "silver_medal": False,
        "bronze_medal": False,
        "any_medal": False,
        "above_median": False,
        "leaderboard_position": None,
        "leaderboard_percentile": None,
    }
    if score is None:
        return result

    def reaches(threshold: float) -> bool:
        return score <= threshold if is_lower_better else score >= threshold

    gold = reaches(gold_t)
    silver = not gold and reaches(silver_t)
    bronze = not gold and not silver and reaches(bronze_t)
    better = int((scores < score).sum() if is_lower_better else (scores > score).sum())
    worse = int((scores > score).sum() if is_lower_better else (scores < score).sum())
    above = score < result["median_threshold"] if is_lower_better else score > result["median_threshold"]
    result.update(
        gold_medal=bool(gold),
        silver_medal=bool(silver),
        bronze_medal=bool(bronze),
        any_medal=bool(gold or silver or bronze),
        above_median=bool(above),
        leaderboard_position=better + 1,
        leaderboard_percentile=round(100.0 * worse / n, 1),
    )
    return result
