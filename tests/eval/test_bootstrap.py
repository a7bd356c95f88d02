"""Vectorised bootstrap vs a per-replicate loop calling scikit-learn on the same item draws."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.bootstrap import BootstrapResult, bootstrap_indices, bootstrap_metric

SKLEARN = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}


def loop_oracle(y_true, y_pred, metric: str, n_replicates: int, seed: int) -> np.ndarray:
    """The spec's loop: ``rng.choice`` per replicate, sklearn per replicate."""
    rng = np.random.default_rng(seed)
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    n = len(y_true)
    scores = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_replicates):
            idx = rng.choice(n, size=n, replace=True)
            scores.append(SKLEARN[metric](y_true[idx], y_pred[idx]))
    return np.array(scores)


def assert_matches_oracle(result: BootstrapResult, scores: np.ndarray, point: float) -> None:
    assert result.point == pytest.approx(point, abs=1e-12)
    assert result.mean == pytest.approx(np.mean(scores), abs=1e-12)
    assert result.std == pytest.approx(np.std(scores, ddof=1), abs=1e-12)
    assert result.ci_lower == pytest.approx(np.percentile(scores, 2.5), abs=1e-12)
    assert result.ci_upper == pytest.approx(np.percentile(scores, 97.5), abs=1e-12)


@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
@pytest.mark.parametrize(("n", "n_classes", "seed"), [(1, 1, 0), (7, 3, 1), (60, 6, 2), (221, 30, 42)])
def test_vectorised_equals_sklearn_loop_on_seeded_grid(metric, n, n_classes, seed):
    rng = np.random.default_rng(seed + 100)
    y_true = rng.integers(0, n_classes, n)
    y_pred = np.where(rng.random(n) < 0.4, y_true, rng.integers(-1, n_classes + 2, n))
    result = bootstrap_metric(y_true, y_pred, metric, n_replicates=80, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        point = SKLEARN[metric](y_true, y_pred)
    assert_matches_oracle(result, loop_oracle(y_true, y_pred, metric, 80, seed), point)
    assert (result.n, result.n_replicates) == (n, 80)


@settings(max_examples=15, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 4), st.integers(-1, 6)), min_size=1, max_size=40),
    seed=st.integers(0, 2**32 - 1),
    metric=st.sampled_from(["accuracy", "balanced_accuracy"]),
)
def test_vectorised_equals_sklearn_loop_property(pairs, seed, metric):
    y_true = [t for t, _ in pairs]
    y_pred = [p for _, p in pairs]
    result = bootstrap_metric(y_true, y_pred, metric, n_replicates=30, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        point = SKLEARN[metric](y_true, y_pred)
    assert_matches_oracle(result, loop_oracle(y_true, y_pred, metric, 30, seed), point)


def test_index_scheme_is_documented_integers_draw():
    idx = bootstrap_indices(13, 5, seed=7)
    expected = np.random.default_rng(7).integers(0, 13, size=(5, 13))
    np.testing.assert_array_equal(idx, expected)


def test_callable_metric_uses_the_same_draws():
    y_true = np.array([0, 1, 1, 2, 2, 2, 3])
    y_pred = np.array([0, 1, -1, 2, 0, 2, 1])
    named = bootstrap_metric(y_true, y_pred, "balanced_accuracy", n_replicates=100, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        called = bootstrap_metric(y_true, y_pred, balanced_accuracy_score, n_replicates=100, seed=3)
    for field in ("point", "mean", "std", "ci_lower", "ci_upper"):
        assert getattr(named, field) == pytest.approx(getattr(called, field), abs=1e-12)


def test_missing_predictions_count_wrong_in_every_replicate():
    result = bootstrap_metric([1, 2, 3], [None, None, None], "accuracy", n_replicates=20)
    assert (result.point, result.mean, result.std, result.ci_lower, result.ci_upper) == (0, 0, 0, 0, 0)


def test_paper_format_and_percent():
    result = BootstrapResult(
        point=0.5, mean=0.537, std=0.0341, ci_lower=0.47, ci_upper=0.6, n_replicates=1000, n=191
    )
    assert result.format() == "53.7 ± 3.4"
    assert result.format(digits=2) == "53.70 ± 3.41"
    pct = result.as_percent()
    assert (pct.point, pct.ci_lower, pct.ci_upper, pct.n) == (50.0, 47.0, 60.0, 191)


def test_errors():
    with pytest.raises(ValueError, match="zero items"):
        bootstrap_metric([], [], "accuracy")
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        bootstrap_metric([1], [1], "f1")
    with pytest.raises(ValueError, match="at least 2"):
        bootstrap_metric([1], [1], "accuracy", n_replicates=1)


def test_defaults_are_1000_replicates_drawn_with_seed_42():
    """The spec's defaults (B = 1000, seed 42): the default call equals the ``rng.choice`` loop on a fresh
    ``default_rng(42)`` with 1000 replicates (numpy oracle). Mutations: 999 replicates, seed 0."""
    y_true = np.array([0, 1, 1, 2, 2, 2, 0, 1, 2, 0, 1, 2])
    y_pred = np.array([0, 1, 0, 2, 1, 2, 0, -1, 2, 1, 1, 0])
    result = bootstrap_metric(y_true, y_pred, "accuracy")
    rng = np.random.default_rng(42)
    right = y_true == y_pred
    scores = np.array([right[rng.choice(12, size=12, replace=True)].mean() for _ in range(1000)])
    assert (result.n_replicates, result.n) == (1000, 12)
    assert_matches_oracle(result, scores, right.mean())
