"""Accuracy / balanced accuracy against scikit-learn, including missing and out-of-truth predictions."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.metrics import METRICS, MISSING, accuracy, as_label_arrays, balanced_accuracy
from giant_assets.multipathqa.benchmarks import BENCHMARKS


def sk_balanced(y_true, y_pred) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "y_pred contains classes not in y_true"
        return balanced_accuracy_score(y_true, y_pred, adjusted=False)


CASES = [
    ([0, 0, 0, 1], [0, 0, 0, 0]),  # imbalanced, minority class never predicted
    ([1, 1, 2], [1, 3, -1]),  # predicted class 3 absent from truth, one missing answer
    ([5, 5, 5, 5], [5, 5, -1, 4]),  # a single class
    ([0, 1, 2, 3, 4, 5], [-1] * 6),  # nothing answered
    ([3, 1, 2, 2, 2, 2, 2, 2], [3, 1, 1, 1, 1, 1, 1, 2]),
    ([10, 20, 30], [30, 20, 10]),  # non-contiguous labels
]


@pytest.mark.parametrize(("y_true", "y_pred"), CASES)
def test_metrics_equal_sklearn_on_hand_cases(y_true, y_pred):
    assert accuracy(y_true, y_pred) == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-15)
    assert balanced_accuracy(y_true, y_pred) == pytest.approx(sk_balanced(y_true, y_pred), abs=1e-15)


def test_hand_computed_values():
    # recalls: class 1 -> 1/2, class 2 -> 0/1 (its item is unanswered); class 3 only predicted
    assert balanced_accuracy([1, 1, 2], [1, 3, None]) == pytest.approx(0.25)
    # 3 of 4 right; recalls 3/3 and 0/1
    assert accuracy([0, 0, 0, 1], [0, 0, 0, 0]) == 0.75
    assert balanced_accuracy([0, 0, 0, 1], [0, 0, 0, 0]) == 0.5


def test_missing_prediction_forms_all_count_wrong():
    truth = [1, 2, 3, 4]
    expected = 0.5
    for pred in (
        [1, 2, None, None],
        [1, 2, -1, -1],
        np.array([1, 2, np.nan, np.nan]),
        pd.Series([1, 2, pd.NA, pd.NA], dtype="Int64"),
        pd.Series([1.0, 2.0, None, None]),
    ):
        assert accuracy(truth, pred) == expected
        assert balanced_accuracy(truth, pred) == expected


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(-1, 8)), min_size=1, max_size=60),
)
def test_metrics_equal_sklearn_on_random_label_sets(pairs):
    y_true = np.array([t for t, _ in pairs])
    y_pred = np.array([p for _, p in pairs])
    assert accuracy(y_true, y_pred) == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
    assert balanced_accuracy(y_true, y_pred) == pytest.approx(sk_balanced(y_true, y_pred), abs=1e-12)


def test_registry_covers_every_benchmark_metric_type():
    assert {spec.metric_type for spec in BENCHMARKS.values()} <= set(METRICS)
    assert METRICS["balanced_accuracy"]([0, 0, 0, 1], [0, 0, 0, 0]) == 0.5


@pytest.mark.parametrize(
    ("y_true", "y_pred", "message"),
    [
        ([], [], "zero items"),
        ([1, 2], [1], "differ in length"),
        ([1, None], [1, 1], "y_true has missing"),
        ([-1, 2], [1, 2], "negative"),
        ([1, 2], [1.5, 2], "non-integer"),
        ([1, 2], ["x", 2], "integer labels"),
        ([[1, 2]], [[1, 2]], "one-dimensional"),
    ],
)
def test_invalid_inputs_raise_clear_errors(y_true, y_pred, message):
    with pytest.raises(ValueError, match=message):
        accuracy(y_true, y_pred)


def test_label_arrays_encode_every_missing_or_negative_prediction_as_minus_one():
    """The documented encoding: a missing or negative prediction is ``MISSING`` (-1) in the arrays the
    bootstrap and the paired comparisons share. (Dropping the mapping cannot change a score, since truth
    is >= 0, but the arrays would no longer say "no prediction" with one value.)"""
    truth, pred = as_label_arrays([0, 1, 2, 3], [-7, None, 2, -1])
    np.testing.assert_array_equal(truth, [0, 1, 2, 3])
    np.testing.assert_array_equal(pred, [MISSING, MISSING, 2, MISSING])
    assert MISSING == -1
