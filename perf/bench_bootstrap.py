"""Bootstrap (N=221 items, 30 classes, 1000 replicates): the spec's per-replicate loop vs all at once.

Baselines are the spec's loop (``rng.choice`` per replicate, Python lists, a metric call per replicate)
with scikit-learn and with this package's own metric; both see the same draws as the vectorised
``bootstrap_metric`` (a fresh ``default_rng(seed)``), and the replicate values are checked to agree.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.bootstrap import (
    bootstrap_indices,
    bootstrap_metric,
    replicate_accuracy,
    replicate_balanced_accuracy,
)
from giant_assets.eval.metrics import METRICS
from perf.timing import best_of

N_ITEMS, N_CLASSES, N_REPLICATES, SEED = 221, 30, 1000, 42
TARGET_RATIO = 100.0


def spec_loop(truth: np.ndarray, pred: np.ndarray, metric_fn: Callable, seed: int) -> np.ndarray:
    """The spec's baseline: per replicate one ``rng.choice`` draw, two list copies and a metric call."""
    rng = np.random.default_rng(seed)
    n = len(truth)
    truths, preds = truth.tolist(), pred.tolist()
    scores = []
    for _ in range(N_REPLICATES):
        idx = rng.choice(n, size=n, replace=True)
        sample_truth = [truths[i] for i in idx]
        sample_pred = [preds[i] for i in idx]
        scores.append(metric_fn(sample_truth, sample_pred))
    return np.asarray(scores, dtype=np.float64)


def main() -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(0, N_CLASSES, N_ITEMS)
    wrong = rng.integers(-1, N_CLASSES + 2, N_ITEMS)  # includes -1 (no answer) and labels absent in truth
    pred = np.where(rng.random(N_ITEMS) < 0.35, truth, wrong)
    vectorised = {"accuracy": replicate_accuracy, "balanced_accuracy": replicate_balanced_accuracy}
    sklearn_fns = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}
    print(f"N={N_ITEMS}, classes={N_CLASSES}, replicates={N_REPLICATES}")
    print(f"{'metric':<18} {'method':<34} {'seconds':>9} {'ratio':>8}")
    ratios = []
    for name in ("accuracy", "balanced_accuracy"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn: "y_pred contains classes not in y_true"
            t_sk, loop_sk = best_of(lambda name=name: spec_loop(truth, pred, sklearn_fns[name], SEED))
        t_own, loop_own = best_of(lambda name=name: spec_loop(truth, pred, METRICS[name], SEED))
        t_vec, vec = best_of(
            lambda name=name: vectorised[name](truth, pred, bootstrap_indices(N_ITEMS, N_REPLICATES, SEED)),
            repeats=5,
        )
        for label, other in (("sklearn loop", loop_sk), ("own-metric loop", loop_own)):
            diff = float(np.max(np.abs(vec - other)))
            assert diff <= 1e-12, f"{name}: vectorised differs from the {label} by {diff}"
        result = bootstrap_metric(truth, pred, name, N_REPLICATES, SEED)
        assert result.mean == float(np.mean(vec)) and result.n_replicates == N_REPLICATES
        ratio = t_sk / t_vec
        ratios.append(ratio)
        print(f"{name:<18} {'spec loop + sklearn (baseline)':<34} {t_sk:>9.4f} {1.0:>7.1f}x")
        print(f"{name:<18} {'spec loop + own metric':<34} {t_own:>9.4f} {t_sk / t_own:>7.1f}x")
        print(f"{name:<18} {'vectorised (same draws)':<34} {t_vec:>9.4f} {ratio:>7.0f}x")
        exact = float(np.mean(vec == loop_sk))
        print(
            f"{'':<18} agreement with sklearn loop: max |diff| {np.max(np.abs(vec - loop_sk)):.1e}, "
            f"bit-identical {exact:.1%}; result {result.format()} (point {100 * result.point:.1f})"
        )
    verdict = "met" if min(ratios) >= TARGET_RATIO else "MISSED"
    print(f"speed-up vs sklearn loop: min {min(ratios):.0f}x (target >= {TARGET_RATIO:.0f}x: {verdict})")


if __name__ == "__main__":
    main()
