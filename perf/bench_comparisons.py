"""Paired comparisons (N=221 items, 10 experiments = 45 pairs, 1000 replicates): plain loop vs vectorised.

Baselines are plain per-pair loops over the same draws (a fresh ``default_rng(seed)`` per pair, one
``rng.choice`` per replicate, both experiments scored on the same rows): with this package's metric on
all 45 pairs (the measured baseline), and with scikit-learn on the first pair only (far slower per
call: its per-pair time is measured, its 45-pair total printed as an estimate). Vectorised:
``paired_difference`` per pair (all replicates at once) and ``experiment_comparisons`` (which also
scores each experiment once per shared item set instead of once per pair). Every method's numbers are
checked to agree to 1e-12.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from itertools import combinations

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.comparisons import experiment_comparisons, paired_difference
from giant_assets.eval.metrics import METRICS
from perf.timing import best_of

N_ITEMS, N_CLASSES, N_EXPERIMENTS, N_REPLICATES, SEED = 221, 30, 10, 1000, 42
SKLEARN_PAIRS = 1
SKLEARN = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}
FIELDS = ("boot_mean_diff_pct", "boot_std_diff_pct", "ci_low_pct", "ci_high_pct")


def make_predictions(metric: str) -> tuple[np.ndarray, dict[str, np.ndarray], pd.DataFrame]:
    """Truth, per-experiment predictions (-1 = no answer) and the item_predictions frame."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, N_CLASSES, N_ITEMS)
    preds = {}
    for k in range(N_EXPERIMENTS):
        wrong = rng.integers(-1, N_CLASSES + 2, N_ITEMS)
        preds[f"exp{k:02d}"] = np.where(rng.random(N_ITEMS) < 0.2 + 0.04 * k, truth, wrong)
    frame = pd.concat(
        pd.DataFrame(
            {
                "experiment": name,
                "benchmark_name": "tcga",
                "benchmark_id": [str(i) for i in range(N_ITEMS)],
                "metric_type": metric,
                "truth_label": truth,
                "predicted_label": pd.array(np.where(pred < 0, None, pred), dtype="Int64"),
            }
        )
        for name, pred in preds.items()
    )
    return truth, preds, frame


def plain_pair(truth: np.ndarray, a: np.ndarray, b: np.ndarray, fn: Callable) -> np.ndarray:
    """One pair's replicate differences: a ``rng.choice`` draw and two metric calls per replicate."""
    rng = np.random.default_rng(SEED)
    diffs = np.empty(N_REPLICATES)
    for r in range(N_REPLICATES):
        idx = rng.choice(N_ITEMS, size=N_ITEMS, replace=True)
        diffs[r] = fn(truth[idx], a[idx]) - fn(truth[idx], b[idx])
    return diffs


def summary(diffs: np.ndarray) -> np.ndarray:
    return 100 * np.array(
        [diffs.mean(), diffs.std(ddof=1), np.percentile(diffs, 2.5), np.percentile(diffs, 97.5)]
    )


def bench_metric(metric: str, pairs: list[tuple[str, str]]) -> float:
    """Time every method on one metric, check they agree, print a block; the vectorised speed-up."""
    truth, preds, frame = make_predictions(metric)
    own = METRICS[metric]
    t_loop, loop = best_of(lambda: [plain_pair(truth, preds[a], preds[b], own) for a, b in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn: "y_pred contains classes not in y_true"
        first = pairs[:SKLEARN_PAIRS]
        t_sk, loop_sk = best_of(
            lambda: [plain_pair(truth, preds[a], preds[b], SKLEARN[metric]) for a, b in first]
        )
    t_pairs, per_pair = best_of(
        lambda: [paired_difference(truth, preds[a], preds[b], metric) for a, b in pairs], repeats=3
    )
    t_vec, table = best_of(lambda: experiment_comparisons(frame, N_REPLICATES, SEED), repeats=3)
    worst = 0.0
    for k, (row, diffs) in enumerate(zip(table.itertuples(), loop, strict=True)):
        got = np.array([getattr(row, f) for f in FIELDS])
        worst = max(worst, float(np.max(np.abs(got - summary(diffs)))))
        assert row.p_le_0 == float(np.mean(diffs <= 1e-12)), (metric, k)
        assert abs(100 * per_pair[k].std - row.boot_std_diff_pct) <= 1e-12, (metric, k)
        if k < SKLEARN_PAIRS:
            assert np.max(np.abs(loop_sk[k] - diffs)) <= 1e-12, (metric, k)
    assert worst <= 1e-12, f"{metric}: vectorised differs from the plain loop by {worst}"
    n, sk_per_pair = len(pairs), t_sk / SKLEARN_PAIRS
    rows = [
        (f"plain loop, own metric, {n} pairs (baseline)", t_loop, 1.0),
        (f"paired_difference per pair, {n} pairs", t_pairs, t_loop / t_pairs),
        ("experiment_comparisons (same draws)", t_vec, t_loop / t_vec),
    ]
    for label, seconds, ratio in rows:
        print(f"{metric:<18} {label:<44} {seconds:>9.3f} {ratio:>7.1f}x")
    print(
        f"{'':<18} plain loop with sklearn: {sk_per_pair:.3f} s per pair "
        f"({sk_per_pair / (t_loop / n):.0f}x the own-metric loop's); "
        f"x{n} pairs = {n * sk_per_pair:.0f} s estimated, "
        f"{n * sk_per_pair / t_vec:.0f}x experiment_comparisons"
    )
    print(
        f"{'':<18} agreement with the plain loop: max |diff| {worst:.1e} pp over {n} pairs, p_le_0 equal; "
        f"sklearn loop equal on {SKLEARN_PAIRS} pair(s)"
    )
    return t_loop / t_vec


def main() -> None:
    pairs = list(combinations(sorted(f"exp{k:02d}" for k in range(N_EXPERIMENTS)), 2))
    print(
        f"N={N_ITEMS}, classes={N_CLASSES}, experiments={N_EXPERIMENTS}, pairs={len(pairs)}, B={N_REPLICATES}"
    )
    print(f"{'metric':<18} {'method':<44} {'seconds':>9} {'ratio':>8}")
    ratios = [bench_metric(metric, pairs) for metric in ("accuracy", "balanced_accuracy")]
    print(f"speed-up of experiment_comparisons vs the plain loop (own metric): min {min(ratios):.0f}x")


if __name__ == "__main__":
    main()
