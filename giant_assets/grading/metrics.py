"""Metric library for user tasks: thin wrappers over scikit-learn and scipy, each with its direction.

Every metric takes ``(y_true, y_pred)`` as 1-D arrays aligned by item and returns a float. Classification
metrics expect integer labels (binary ones: 0/1 with 1 the positive class); ``roc_auc`` expects the
predicted score or probability of the positive class (``auc_roc`` is the same metric under the
README's name); ``dice`` expects binary (0/1) masks flattened to one array per task. ``rmsd``,
``tm_score`` and ``gdt_ts`` (protein structures, see ``structure``) take (N, 3) coordinate arrays; a
flat array of N*3 values is read as N residues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.spatial.distance import dice as dice_dissimilarity
from scipy.stats import spearmanr
from sklearn import metrics as skm

from giant_assets.eval.metrics import accuracy, balanced_accuracy
from giant_assets.grading import structure

MetricFn = Callable[[np.ndarray, np.ndarray], float]


@dataclass(frozen=True)
class Metric:
    """A named metric, whether lower is better, and whether its value is a fraction in [0, 1]."""

    name: str
    fn: MetricFn
    is_lower_better: bool
    is_fraction: bool

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return float(self.fn(np.asarray(y_true), np.asarray(y_pred)))


def _spearman(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(spearmanr(y_true, y_pred).statistic)


def _xyz(values: np.ndarray) -> np.ndarray:
    return values.reshape(-1, 3) if values.ndim == 1 else values


def _structure(fn: MetricFn) -> MetricFn:
    return lambda t, p: fn(_xyz(p.astype(float)), _xyz(t.astype(float)))


def _on_codes(metric: Callable[[np.ndarray, np.ndarray], float]) -> MetricFn:
    """``metric`` of the project (eval.metrics) on any labels: both sides coded as integers together
    (accuracy and balanced accuracy do not depend on the label values; a missing prediction stays
    missing, -1, and counts wrong)."""

    def coded(y_true: np.ndarray, y_pred: np.ndarray) -> float:
        codes, _ = pd.factorize(
            np.concatenate([np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)])
        )
        return metric(codes[: len(y_true)], codes[len(y_true) :])

    return coded


def _dice(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Dice coefficient 2|A∩B| / (|A| + |B|) of two binary masks (1 - scipy's Dice dissimilarity)."""
    return 1.0 - float(dice_dissimilarity(y_true.astype(bool), y_pred.astype(bool)))


METRIC_LIBRARY: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", _on_codes(accuracy), is_lower_better=False, is_fraction=True),
        Metric("balanced_accuracy", _on_codes(balanced_accuracy), is_lower_better=False, is_fraction=True),
        Metric("roc_auc", skm.roc_auc_score, is_lower_better=False, is_fraction=True),
        Metric("auc_roc", skm.roc_auc_score, is_lower_better=False, is_fraction=True),
        Metric("precision", skm.precision_score, is_lower_better=False, is_fraction=True),
        Metric("recall", skm.recall_score, is_lower_better=False, is_fraction=True),
        Metric("f1", skm.f1_score, is_lower_better=False, is_fraction=True),
        Metric(
            "f1_macro",
            lambda t, p: skm.f1_score(t, p, average="macro"),
            is_lower_better=False,
            is_fraction=True,
        ),
        Metric("rmse", skm.root_mean_squared_error, is_lower_better=True, is_fraction=False),
        Metric("mae", skm.mean_absolute_error, is_lower_better=True, is_fraction=False),
        Metric("r2", skm.r2_score, is_lower_better=False, is_fraction=False),
        Metric("spearman", _spearman, is_lower_better=False, is_fraction=False),
        Metric("dice", _dice, is_lower_better=False, is_fraction=True),
        Metric("rmsd", _structure(structure.rmsd), is_lower_better=True, is_fraction=False),
        Metric("tm_score", _structure(structure.tm_score), is_lower_better=False, is_fraction=True),
        Metric("gdt_ts", _structure(structure.gdt_ts), is_lower_better=False, is_fraction=True),
    )
}


def get_metric(name: str) -> Metric:
    """The library metric called ``name``; the error lists the known names."""
    try:
        return METRIC_LIBRARY[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known metrics: {sorted(METRIC_LIBRARY)}") from None
