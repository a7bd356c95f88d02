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


def test_balanced_accuracy_on_text_labels_is_recall_over_the_true_classes() -> None:
    """Text labels are coded together; recall is over the TRUE classes: lung 2/3, liver 1/1 -> 5/6
    (sklearn's balanced_accuracy_score). Swapping truth and prediction in the coding gives 3/4 (the
    symmetric hand case above cannot tell them apart). A missing prediction stays wrong."""
    from sklearn.metrics import balanced_accuracy_score

    truth = np.array(["lung", "lung", "lung", "liver"], dtype=object)
    pred = np.array(["lung", "lung", "liver", "liver"], dtype=object)
    assert get_metric("balanced_accuracy")(truth, pred) == pytest.approx(5 / 6)
    assert get_metric("balanced_accuracy")(truth, pred) == pytest.approx(balanced_accuracy_score(truth, pred))
    assert get_metric("balanced_accuracy")(pred, truth) == pytest.approx(3 / 4)
    missing = np.array(["lung", "lung", None, "liver"], dtype=object)
    assert get_metric("balanced_accuracy")(truth, missing) == pytest.approx((2 / 3 + 1) / 2)
    assert get_metric("accuracy")(truth, missing) == pytest.approx(3 / 4)


def test_f1_macro_is_the_unweighted_mean_of_per_class_f1() -> None:
    """Per class F1 (hand): class 0 P=1 R=2/3 -> 4/5; class 1 P=1/3 R=1 -> 1/2; class 2 -> 0; macro =
    (4/5 + 1/2 + 0) / 3 = 13/30 (the support-weighted mean would be 0.58)."""
    y = np.array([0, 0, 0, 1, 2])
    p = np.array([0, 0, 1, 1, 1])
    assert get_metric("f1_macro")(y, p) == pytest.approx(13 / 30)
    assert get_metric("f1_macro")(y, p) == pytest.approx(f1_score(y, p, average="macro"))
