"""Library metrics: directions, and values against hand computations or other scipy/sklearn routines."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata
from sklearn.metrics import f1_score, mean_squared_error

from giant_assets.grading.metrics import METRIC_LIBRARY, get_metric

T = np.array([1, 0, 1, 1, 0, 1])
P = np.array([1, 1, 1, 0, 0, 1])


def test_directions() -> None:
    lower = {name for name, m in METRIC_LIBRARY.items() if m.is_lower_better}
    assert lower == {"rmse", "mae", "rmsd"}
    assert {
        "accuracy",
        "balanced_accuracy",
        "roc_auc",
        "precision",
        "recall",
        "f1",
        "r2",
        "spearman",
        "dice",
    } <= set(METRIC_LIBRARY)


def test_classification_hand_computed() -> None:
    # TP=3 (idx 0,2,5) FP=1 (idx 1) FN=1 (idx 3) TN=1 (idx 4)
    assert get_metric("accuracy")(T, P) == pytest.approx(4 / 6)
    assert get_metric("precision")(T, P) == pytest.approx(3 / 4)
    assert get_metric("recall")(T, P) == pytest.approx(3 / 4)
    assert get_metric("f1")(T, P) == pytest.approx(3 / 4)
    # recall of class 1 = 3/4, of class 0 = 1/2
    assert get_metric("balanced_accuracy")(T, P) == pytest.approx((3 / 4 + 1 / 2) / 2)


def test_roc_auc_is_share_of_correctly_ordered_pairs() -> None:
    scores = np.array([0.9, 0.4, 0.8, 0.3, 0.35, 0.7])
    pos, neg = scores[T == 1], scores[T == 0]
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert get_metric("roc_auc")(T, scores) == pytest.approx(pairs)


def test_dice_equals_binary_f1_and_overlap_formula() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    expected = 2 * np.sum(a & b) / (a.sum() + b.sum())
    assert get_metric("dice")(a, b) == pytest.approx(expected)
    assert get_metric("dice")(a, b) == pytest.approx(f1_score(a, b))


def test_regression_metrics() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    p = np.array([1.5, 2.0, 2.0, 5.0])
    assert get_metric("rmse")(y, p) == pytest.approx(np.sqrt((0.25 + 0 + 1 + 1) / 4))
    assert get_metric("rmse")(y, p) == pytest.approx(np.sqrt(mean_squared_error(y, p)))
    assert get_metric("mae")(y, p) == pytest.approx(2.5 / 4)
    assert get_metric("r2")(y, p) == pytest.approx(1 - 2.25 / 5.0)
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=50), rng.normal(size=50)
    assert get_metric("spearman")(a, b) == pytest.approx(np.corrcoef(rankdata(a), rankdata(b))[0, 1])
    assert np.sign(get_metric("spearman")(a, b)) == np.sign(kendalltau(a, b).statistic)


def test_unknown_metric_lists_names() -> None:
    with pytest.raises(KeyError, match="unknown metric 'mse'.*rmse"):
        get_metric("mse")
