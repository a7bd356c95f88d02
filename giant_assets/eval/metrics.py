"""Accuracy, balanced accuracy, macro F1 and quadratic kappa on integer labels; a missing prediction
always counts as wrong.

* ``accuracy`` and ``balanced_accuracy`` equal scikit-learn's ``accuracy_score`` and
  ``balanced_accuracy_score(adjusted=False)``: balanced accuracy is the mean recall over the classes
  present in ``y_true``; predicted labels absent from the truth lower the recall of the true class but
  add no class of their own (sklearn warns "y_pred contains classes not in y_true" and drops them).
* ``f1_macro`` is the mean F1 over the classes present in ``y_true``, as scikit-learn's
  ``f1_score(y_true, y_pred, labels=np.unique(y_true), average="macro")``: a wrong or missing
  prediction is a false negative of the true class (and a false positive of a predicted truth class).
* ``quadratic_kappa`` (ordinal grades) is scikit-learn's ``cohen_kappa_score(weights="quadratic")``
  over the grade scale ``min..max`` of the truth and the given predictions; a missing prediction counts
  as the grade of that scale farthest from the truth (the worst answer). Where kappa is undefined
  (a single grade, so no disagreement is expected by chance) it is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

MISSING = -1  # the encoded "no prediction"; truth labels are non-negative, so it never matches

LabelArray = Sequence[Any] | np.ndarray | pd.Series
MetricFn = Callable[[LabelArray, LabelArray], float]


def _as_labels(values: LabelArray, what: str, *, allow_missing: bool) -> np.ndarray:
    """A 1-D int64 array; None/NaN/pd.NA become ``MISSING`` when allowed, else raise."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if values.ndim != 1:
            raise ValueError(f"{what} must be one-dimensional, got shape {values.shape}")
        return values.astype(np.int64)
    if isinstance(values, pd.Series):
        array = values.to_numpy(dtype=object)
    else:
        array = np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    series = pd.Series(array)
    missing = series.isna().to_numpy()
    if missing.any() and not allow_missing:
        raise ValueError(f"{what} has missing values at position(s) {np.flatnonzero(missing)[:10].tolist()}")
    filled = series.where(~missing, MISSING) if missing.any() else series
    try:
        as_float = pd.to_numeric(filled, errors="raise").to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must hold integer labels: {exc}") from None
    if not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
        bad = np.flatnonzero(~np.isfinite(as_float) | (as_float != np.round(as_float)))[:10].tolist()
        raise ValueError(f"{what} must hold integer labels; non-integer value(s) at position(s) {bad}")
    return as_float.astype(np.int64)


def as_label_arrays(y_true: LabelArray, y_pred: LabelArray) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(y_true, y_pred)`` int64 arrays: same non-zero length, truth >= 0, missing pred -> -1."""
    truth = _as_labels(y_true, "y_true", allow_missing=False)
    pred = _as_labels(y_pred, "y_pred", allow_missing=True)
    if truth.shape != pred.shape:
        raise ValueError(f"y_true and y_pred differ in length: {truth.size} vs {pred.size}")
    if truth.size == 0:
        raise ValueError("cannot score zero items: y_true and y_pred are empty")
    if truth.min() < 0:
        raise ValueError(
            f"y_true holds negative label(s) {sorted(set(truth[truth < 0].tolist()))}; "
            "truth labels must be >= 0 (-1 encodes a missing prediction)"
        )
    pred[pred < 0] = MISSING
    return truth, pred


def accuracy(y_true: LabelArray, y_pred: LabelArray) -> float:
    """Share of items whose prediction equals the truth."""
    truth, pred = as_label_arrays(y_true, y_pred)
    return float(np.mean(truth == pred))


def balanced_accuracy(y_true: LabelArray, y_pred: LabelArray) -> float:
    """Mean over the classes in ``y_true`` of the share of that class's items predicted correctly."""
    truth, pred = as_label_arrays(y_true, y_pred)
    _, cls = np.unique(truth, return_inverse=True)
    totals = np.bincount(cls)
    correct = np.bincount(cls, weights=truth == pred, minlength=totals.size)
    return float(np.mean(correct / totals))


def f1_macro(y_true: LabelArray, y_pred: LabelArray) -> float:
    """Mean over the classes in ``y_true`` of 2·TP / (2·TP + FP + FN)."""
    truth, pred = as_label_arrays(y_true, y_pred)
    scores = []
    for label in np.unique(truth):
        true_pos = int(np.sum((truth == label) & (pred == label)))
        false_pos = int(np.sum((truth != label) & (pred == label)))
        false_neg = int(np.sum((truth == label) & (pred != label)))
        scores.append(2 * true_pos / (2 * true_pos + false_pos + false_neg))  # FN + TP >= 1: a truth class
    return float(np.mean(scores))


def grade_scale(truth: np.ndarray, pred: np.ndarray) -> tuple[int, int]:
    """The ordinal scale ``(lowest, highest)`` over the truth and the given (non-missing) predictions."""
    given = pred[pred != MISSING]
    return int(min(truth.min(), given.min(initial=truth.min()))), int(
        max(truth.max(), given.max(initial=truth.max()))
    )


def worst_filled(truth: np.ndarray, pred: np.ndarray, scale: tuple[int, int]) -> np.ndarray:
    """Predictions with each missing one replaced by the grade of ``scale`` farthest from its truth."""
    low, high = scale
    farthest = np.where(truth - low >= high - truth, low, high)
    return np.where(pred == MISSING, farthest, pred)


def kappa_on_scale(truth: np.ndarray, pred: np.ndarray, scale: tuple[int, int]) -> float:
    """Quadratic-weighted kappa of complete predictions (no ``MISSING``) on the grade scale ``scale``."""
    low, high = scale
    size = high - low + 1
    observed = np.bincount((truth - low) * size + (pred - low), minlength=size * size).reshape(size, size)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / truth.size
    grades = np.arange(size)
    weights = (grades[:, None] - grades[None, :]) ** 2
    chance = float(np.sum(weights * expected))
    return 1.0 - float(np.sum(weights * observed)) / chance if chance > 0 else 0.0


def quadratic_kappa(y_true: LabelArray, y_pred: LabelArray) -> float:
    """Cohen's kappa with quadratic weights on the grades (see the module docstring for missing ones)."""
    truth, pred = as_label_arrays(y_true, y_pred)
    scale = grade_scale(truth, pred)
    return kappa_on_scale(truth, worst_filled(truth, pred, scale), scale)


METRICS: dict[str, MetricFn] = {
    "accuracy": accuracy,
    "balanced_accuracy": balanced_accuracy,
    "f1_macro": f1_macro,
    "quadratic_kappa": quadratic_kappa,
}
