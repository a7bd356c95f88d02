"""Kaggle medal thresholds at every leaderboard-size boundary, with ties and lower-is-better."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from giant_assets.grading.graders import Grader
from giant_assets.grading.medals import medal_positions, rank_score


def mle_bench_positions(n: int) -> tuple[int, int, int]:
    """The rule as mle-bench writes it (float products truncated with int()), as an independent oracle."""
    if n < 100:
        return max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 250:
        return 10, max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 1000:
        return 10 + int(n * 0.002), 50, 100
    return 10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1))


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, (1, 1, 1)),
        (4, (1, 1, 1)),
        (5, (1, 1, 2)),
        (10, (1, 2, 4)),
        (99, (9, 19, 39)),
        (100, (10, 20, 40)),
        (249, (10, 49, 99)),
        (250, (10, 50, 100)),
        (999, (11, 50, 100)),
        (1000, (12, 50, 100)),
        (5000, (20, 250, 500)),
    ],
)
def test_positions_hand_computed(n: int, expected: tuple[int, int, int]) -> None:
    assert medal_positions(n) == expected


def test_positions_match_mle_bench_rule_for_all_sizes() -> None:
    for n in range(1, 3001):
        assert medal_positions(n) == mle_bench_positions(n), n


def test_positions_reject_empty_board() -> None:
    with pytest.raises(ValueError, match="at least one team"):
        medal_positions(0)


def board(scores) -> pd.DataFrame:
    scores = list(scores)
    return pd.DataFrame({"team": [f"t{i}" for i in range(len(scores))], "score": scores})


@pytest.mark.parametrize("n", [99, 100, 249, 250, 999, 1000])
@pytest.mark.parametrize("lower", [False, True])
def test_thresholds_at_size_boundaries(n: int, lower: bool) -> None:
    # distinct scores, stored best first (thresholds are read in file order, as upstream)
    best_first = np.arange(n, 0, -1, dtype=float) if not lower else np.arange(1, n + 1, dtype=float)
    shuffled = best_first
    gold_pos, silver_pos, bronze_pos = mle_bench_positions(n)
    res = rank_score(None, board(shuffled), is_lower_better=lower)
    assert res["gold_threshold"] == best_first[gold_pos - 1]
    assert res["silver_threshold"] == best_first[silver_pos - 1]
    assert res["bronze_threshold"] == best_first[bronze_pos - 1]
    assert res["median_threshold"] == np.median(best_first)
    assert res["leaderboard_size"] == n
    step = -0.5 if lower else 0.5  # half a step better / worse than a threshold
    for tier, pos in (("gold", gold_pos), ("silver", silver_pos), ("bronze", bronze_pos)):
        at = rank_score(float(best_first[pos - 1]), board(shuffled), lower)
        assert at[f"{tier}_medal"] and at["any_medal"], (tier, n, lower)  # equal to threshold earns it
        assert sum(at[f"{t}_medal"] for t in ("gold", "silver", "bronze")) == 1
        assert at["leaderboard_position"] == pos  # ties share the better position
        worse = rank_score(float(best_first[pos - 1]) - step, board(shuffled), lower)
        assert not worse[f"{tier}_medal"]
    last = rank_score(float(best_first[-1]), board(shuffled), lower)
    assert not last["any_medal"] and not last["above_median"]


def test_lower_is_better_small_board_hand_checked() -> None:
    # RMSE-like board of 10: best first 0.1..1.0 → gold pos 1 (0.1), silver pos 2 (0.2), bronze pos 4 (0.4)
    lb = board([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    res = rank_score(0.25, lb, is_lower_better=True)
    assert (res["gold_threshold"], res["silver_threshold"], res["bronze_threshold"]) == (0.1, 0.2, 0.4)
    assert res["bronze_medal"] and not res["silver_medal"] and not res["gold_medal"]
    assert res["median_threshold"] == pytest.approx(0.55)
    assert res["above_median"] is True
    assert res["leaderboard_position"] == 3  # 0.1 and 0.2 are better
    assert res["leaderboard_percentile"] == 80.0  # better than 8 of 10
    with pytest.raises(ValueError, match=r"entry 2 \(score 0.2\) is better than entry 1 \(0.1\).*best first"):
        rank_score(0.25, lb, is_lower_better=False)  # read the other way round, the board is not best first
    assert Grader("rmse", lambda s, a: 0.0).is_lower_better(lb)  # direction from the order, as upstream


def test_ties_on_the_leaderboard() -> None:
    # 10 teams, three tied for first: gold (pos 1) = silver (pos 2) = 0.9, bronze (pos 4) = 0.8
    lb = board([0.9, 0.9, 0.9, 0.8, 0.8, 0.5, 0.4, 0.3, 0.2, 0.1])
    tie_top = rank_score(0.9, lb, False)
    assert tie_top["gold_medal"] and tie_top["leaderboard_position"] == 1
    assert tie_top["leaderboard_percentile"] == 70.0  # strictly worse entries only, as upstream
    tie_bronze = rank_score(0.8, lb, False)
    assert tie_bronze["bronze_medal"] and tie_bronze["leaderboard_position"] == 4
    median_tie = rank_score(0.65, lb, False)  # median of the 10 is (0.8 + 0.5) / 2
    assert median_tie["median_threshold"] == pytest.approx(0.65)
    assert median_tie["above_median"] is False  # strictly better is required


def test_four_team_board_only_the_best_gets_a_medal() -> None:
    lb = board([0.888, 0.323, 0.293, 0.033])
    assert medal_positions(4) == (1, 1, 1)
    second = rank_score(0.5, lb, False)
    assert not second["any_medal"] and second["leaderboard_position"] == 2 and second["above_median"]
    best = rank_score(0.9, lb, False)
    assert best["gold_medal"] and best["leaderboard_position"] == 1
    with pytest.raises(ValueError, match="store the leaderboard best first"):
        rank_score(0.5, board([0.323, 0.293, 0.888, 0.033]), False)  # the paper's row order is refused


def test_grader_rank_score_uses_its_direction_and_validates_board() -> None:
    grader = Grader("rmse", lambda s, a: 0.0, is_lower_better=True)
    assert grader.rank_score(0.1, board([0.1, 0.5, 0.9]))["gold_medal"]
    assert grader.rank_score(0.1, board([0.5]))["gold_medal"]  # a constant board: the declared direction
    with pytest.raises(ValueError, match="ordered highest score first, but the task says lower is better"):
        grader.rank_score(0.1, board([0.9, 0.5, 0.1]))
    with pytest.raises(ValueError, match=r"'score' column.*\['team', 'value'\]"):
        grader.rank_score(0.1, pd.DataFrame({"team": ["a"], "value": [1.0]}))
