"""Comparison of an agent's score with human baseline scores.

Definitions and rounding as biomlbench's ``calculate_human_performance_metrics``:
``beats_human``: the agent is strictly better than the human median.
``human_percentile``: the percent of humans the agent matches or beats, rounded to 1 decimal:
``100 * mean(humans <= score)`` when higher is better, ``100 * mean(humans >= score)`` when lower is
better (ties count as beaten). No human scores (none given, or all missing) gives ``(None, None)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

HUMAN_SCORE_COLUMN = "score"


def human_score_array(human_scores: pd.DataFrame | Sequence[float] | np.ndarray | None) -> np.ndarray:
    """Finite human scores from a DataFrame with a ``score`` column or a sequence of numbers."""
    if human_scores is None:
        return np.empty(0)
    if isinstance(human_scores, pd.DataFrame):
        if HUMAN_SCORE_COLUMN not in human_scores.columns:
            raise ValueError(f"human baselines need a 'score' column; they have {list(human_scores.columns)}")
        human_scores = human_scores[HUMAN_SCORE_COLUMN]
    values = pd.to_numeric(pd.Series(human_scores, dtype=object), errors="coerce").to_numpy(dtype=float)
    return values[np.isfinite(values)]


def calculate_human_performance_metrics(
    agent_score: float | None,
    human_scores: pd.DataFrame | Sequence[float] | np.ndarray | None,
    is_lower_better: bool,
) -> tuple[bool | None, float | None]:
    """``(beats_human, human_percentile)``; ``(None, None)`` without a score or without human data."""
    humans = human_score_array(human_scores)
    if agent_score is None or humans.size == 0:
        return None, None
    median = float(np.median(humans))
    beats = agent_score < median if is_lower_better else agent_score > median
    matched = (humans >= agent_score) if is_lower_better else (humans <= agent_score)
    return bool(beats), round(float(100.0 * matched.mean()), 1)
