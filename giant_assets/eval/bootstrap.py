"""Item bootstrap of every metric of eval/metrics.py: all replicates at once, the paper's mean ± std format.

Resampling scheme (fixed, so results are reproducible and comparable to a per-replicate loop)::

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_replicates, n))   # row r = the items of replicate r

These are exactly the draws of the loop ``for r in range(B): rng.choice(n, size=n, replace=True)`` on a
fresh ``default_rng(seed)``, so a loop that calls scikit-learn on ``y[idx[r]]`` gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from giant_assets.eval.metrics import (
    METRICS,
    LabelArray,
    MetricFn,
    as_label_arrays,
    f1_macro,
    grade_scale,
    kappa_on_scale,
    worst_filled,
)


@dataclass(frozen=True)
class BootstrapResult:
    """Point value on all items plus the bootstrap distribution's mean, std (ddof=1) and 95% interval."""

    point: float
    mean: float
    std: float
    ci_lower: float  # 2.5th percentile of the replicates
    ci_upper: float  # 97.5th percentile
    n_replicates: int
    n: int  # items

    def as_percent(self) -> BootstrapResult:
        """The same result with every value scaled to percent."""
        return BootstrapResult(
            100 * self.point,
            100 * self.mean,
            100 * self.std,
            100 * self.ci_lower,
            100 * self.ci_upper,
            self.n_replicates,
            self.n,
        )

    def format(self, digits: int = 1) -> str:
        """Paper format, in percent: ``"53.7 ± 3.4"`` (bootstrap mean ± std)."""
        pct = self.as_percent()
        return f"{pct.mean:.{digits}f} ± {pct.std:.{digits}f}"


def bootstrap_indices(n: int, n_replicates: int, seed: int) -> np.ndarray:
    """The ``(n_replicates, n)`` item indices of every replicate (see the module docstring)."""
    if n <= 0:
        raise ValueError(f"cannot bootstrap zero items (n={n})")
    if n_replicates < 2:
        raise ValueError(f"need at least 2 bootstrap replicates for a std, got {n_replicates}")
    return np.random.default_rng(seed).integers(0, n, size=(n_replicates, n))


def replicate_accuracy(truth: np.ndarray, pred: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Accuracy of each replicate: the row mean of the correctness of its drawn items."""
    return (truth == pred)[idx].mean(axis=1)


def replicate_balanced_accuracy(truth: np.ndarray, pred: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Balanced accuracy of each replicate: mean recall over the classes present in its drawn truth.

    One bincount over (replicate, class) pairs gives each replicate's per-class totals and correct counts.
    """
    n_rep = idx.shape[0]
    _, cls = np.unique(truth, return_inverse=True)
    n_cls = int(cls.max()) + 1
    keys = (np.arange(n_rep)[:, None] * n_cls + cls[idx]).ravel()
    size = n_rep * n_cls
    totals = np.bincount(keys, minlength=size).reshape(n_rep, n_cls)
    correct = np.bincount(keys, weights=(truth == pred)[idx].ravel(), minlength=size).reshape(n_rep, n_cls)
    present = totals > 0
    recall = np.divide(correct, totals, out=np.zeros(correct.shape), where=present)
    return recall.sum(axis=1) / present.sum(axis=1)


def replicate_f1_macro(truth: np.ndarray, pred: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Macro F1 of each replicate over the classes present in its drawn truth."""
    return np.array([f1_macro(truth[row], pred[row]) for row in idx], dtype=np.float64)


def replicate_quadratic_kappa(truth: np.ndarray, pred: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Quadratic kappa of each replicate, on the grade scale of all the items (so a missing prediction is
    replaced by the same worst grade in every replicate)."""
    scale = grade_scale(truth, pred)
    filled = worst_filled(truth, pred, scale)
    return np.array([kappa_on_scale(truth[row], filled[row], scale) for row in idx], dtype=np.float64)


REPLICATES: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "accuracy": replicate_accuracy,
    "balanced_accuracy": replicate_balanced_accuracy,
    "f1_macro": replicate_f1_macro,
    "quadratic_kappa": replicate_quadratic_kappa,
}


def bootstrap_metric(
    y_true: LabelArray,
    y_pred: LabelArray,
    metric: str | MetricFn,
    n_replicates: int = 1000,
    seed: int = 42,
) -> BootstrapResult:
    """Bootstrap a metric over items (missing predictions, None/NA/-1, count as wrong).

    ``metric`` is a name from ``METRICS`` (vectorised over all replicates) or any callable
    ``(y_true, y_pred) -> float``, which is then called once per replicate on the same draws.
    """
    truth, pred = as_label_arrays(y_true, y_pred)
    idx = bootstrap_indices(truth.size, n_replicates, seed)
    if isinstance(metric, str):
        if metric not in REPLICATES:
            raise ValueError(f"unknown metric {metric!r}; choose one of {sorted(METRICS)} or pass a callable")
        point = METRICS[metric](truth, pred)
        scores = REPLICATES[metric](truth, pred, idx)
    else:
        point = float(metric(truth, pred))
        scores = np.array([metric(truth[row], pred[row]) for row in idx], dtype=np.float64)
    return BootstrapResult(
        point=float(point),
        mean=float(np.mean(scores)),
        std=float(np.std(scores, ddof=1)),
        ci_lower=float(np.percentile(scores, 2.5)),
        ci_upper=float(np.percentile(scores, 97.5)),
        n_replicates=n_replicates,
        n=int(truth.size),
    )
