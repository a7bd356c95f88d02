"""Macro F1 and quadratic kappa (declared benchmarks' metrics) against scikit-learn, with their bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, f1_score

from giant_assets.eval.bootstrap import bootstrap_indices, bootstrap_metric
from giant_assets.eval.comparisons import paired_difference
from giant_assets.eval.metrics import f1_macro, quadratic_kappa


def sk_f1(truth, pred) -> float:
    return f1_score(truth, pred, labels=np.unique(truth), average="macro", zero_division=0)


def sk_kappa_worst(truth, pred) -> float:
    """sklearn's kappa after filling each missing (-1) prediction by hand with the farthest grade."""
    truth, pred = np.asarray(truth), np.asarray(pred)
    given_pred = pred[pred >= 0]
    low = min(truth.min(), given_pred.min(initial=truth.min()))
    high = max(truth.max(), given_pred.max(initial=truth.max()))
    filled = [
        p if p >= 0 else (low if t - low >= high - t else high) for t, p in zip(truth, pred, strict=True)
    ]
    return cohen_kappa_score(truth, filled, labels=list(range(low, high + 1)), weights="quadratic")


def test_hand_computed_values():
    # classes 0 and 1: F1(0) = 2*1/(2+0+1) = 2/3, F1(1) = 2*1/(2+1+0) = 2/3
    assert f1_macro([0, 0, 1], [0, 1, 1]) == pytest.approx(2 / 3)
    # a missing prediction is a false negative only: F1(0) = 2/(2+0+1), F1(1) = 1
    assert f1_macro([0, 0, 1], [0, -1, 1]) == pytest.approx((2 / 3 + 1) / 2)
    # perfect grades: kappa 1; reversed 0..2: sum(w*O) = 4+0+4 = 8, sum(w*E) = 36/9 = 4, so 1 - 8/4 = -1
    assert quadratic_kappa([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)
    assert quadratic_kappa([0, 1, 2], [2, 1, 0]) == pytest.approx(-1.0)
    # one grade only: kappa undefined, reported as 0
    assert quadratic_kappa([3, 3], [3, 3]) == 0.0


def test_missing_grade_counts_as_the_farthest_grade():
    # scale 0..4; truth 1 is farther from 4 than from 0, so its missing answer counts as 4
    assert quadratic_kappa([0, 1, 4, 2], [0, -1, 4, 2]) == pytest.approx(
        cohen_kappa_score([0, 1, 4, 2], [0, 4, 4, 2], labels=[0, 1, 2, 3, 4], weights="quadratic")
    )


labels = st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 5)), min_size=2, max_size=60)


@settings(max_examples=150, deadline=None)
@given(labels)
def test_metrics_equal_sklearn_on_random_label_sets(pairs):
    truth = [t for t, _ in pairs]
    pred = [p for _, p in pairs]
    assert f1_macro(truth, pred) == pytest.approx(sk_f1(truth, pred), abs=1e-12)
    expected = sk_kappa_worst(truth, pred)
    assert quadratic_kappa(truth, pred) == pytest.approx(0.0 if np.isnan(expected) else expected, abs=1e-12)


def test_bootstrap_replicates_equal_sklearn_per_replicate():
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 4, 40)
    pred = np.where(rng.random(40) < 0.15, -1, np.clip(truth + rng.integers(-1, 2, 40), 0, 3))
    idx = bootstrap_indices(40, 200, 11)
    f1 = bootstrap_metric(truth, pred, "f1_macro", n_replicates=200, seed=11)
    f1_reps = [sk_f1(truth[r], pred[r]) for r in idx]
    assert f1.point == pytest.approx(sk_f1(truth, pred))
    assert f1.mean == pytest.approx(np.mean(f1_reps)) and f1.std == pytest.approx(np.std(f1_reps, ddof=1))
    kappa = bootstrap_metric(truth, pred, "quadratic_kappa", n_replicates=200, seed=11)
    # every replicate on the whole set's scale 0..3, missing answers filled once (farthest grade)
    filled = np.where(pred < 0, np.where(truth >= 2, 0, 3), pred)
    kappa_reps = [
        cohen_kappa_score(truth[r], filled[r], labels=[0, 1, 2, 3], weights="quadratic") for r in idx
    ]
    assert kappa.point == pytest.approx(sk_kappa_worst(truth, pred))
    assert kappa.mean == pytest.approx(np.mean(kappa_reps))
    assert kappa.ci_lower == pytest.approx(np.percentile(kappa_reps, 2.5))


def test_paired_difference_of_f1_is_the_difference_of_sklearn_scores():
    truth = [0, 1, 2, 0, 1, 2, 0, 1]
    a, b = [0, 1, 2, 0, 1, 1, -1, 1], [0, 0, 2, 2, 1, 2, 0, -1]
    diff = paired_difference(truth, a, b, "f1_macro", n_replicates=50, seed=3)
    assert diff.point == pytest.approx(sk_f1(truth, a) - sk_f1(truth, b))


def test_kappa_replicates_keep_the_whole_sets_scale() -> None:
    """A rare high grade is absent from most replicates: each still fills missing answers and weighs on
    the whole set's scale 0..5, as sklearn does here with that scale given by hand."""
    truth = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 5])
    pred = np.array([0, -1, 1, 1, -1, 1, 2, 2, -1, 4])
    filled = np.where(pred < 0, np.where(truth >= 3, 0, 5), pred)  # farthest grade of 0..5 by hand
    idx = bootstrap_indices(10, 300, 5)
    reps = [cohen_kappa_score(truth[r], filled[r], labels=list(range(6)), weights="quadratic") for r in idx]
    result = bootstrap_metric(truth, pred, "quadratic_kappa", n_replicates=300, seed=5)
    assert result.mean == pytest.approx(np.nanmean(np.nan_to_num(reps, nan=0.0)))
    assert result.std == pytest.approx(np.std(np.nan_to_num(reps, nan=0.0), ddof=1))
