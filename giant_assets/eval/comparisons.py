"""Paired comparisons of experiments: metric(a) - metric(b) on their shared items, with a paired bootstrap.

For each benchmark and each pair of experiments ``a < b`` (by name) that share items, the shared items
(inner join on ``benchmark_id``) are put in ``benchmark_id`` order (numeric when every id is an integer,
else text) and resampled with :func:`giant_assets.eval.bootstrap.bootstrap_indices`, i.e. exactly::

    idx = np.random.default_rng(seed).integers(0, n_shared, size=(n_replicates, n_shared))

Both experiments are scored on the SAME rows ``idx[r]`` in replicate ``r`` (a paired bootstrap), with
the vectorised replicate metrics of ``bootstrap.py`` (balanced accuracy over the classes present in the
resampled truth). A missing prediction (NA) counts wrong. ``p_le_0`` is the share of replicates whose
difference is <= 0; a difference within ``TIE_TOLERANCE`` of zero counts as a tie (<= 0), so float
rounding in balanced accuracy sums never decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from giant_assets.benchmarks.registry import ordered
from giant_assets.eval.bootstrap import REPLICATES, bootstrap_indices
from giant_assets.eval.itemsets import ITEM_SET
from giant_assets.eval.metrics import METRICS, LabelArray, as_label_arrays

TIE_TOLERANCE = 1e-12
REQUIRED_COLUMNS = (
    "experiment",
    "benchmark_name",
    "benchmark_id",
    "metric_type",
    "truth_label",
    "predicted_label",
)
COMPARISON_COLUMNS = (
    "benchmark_name",
    "metric_type",
    "experiment_a",
    "experiment_b",
    "n_shared",  # items both experiments have (the bootstrap's n)
    "n_items_a",  # items of a in this benchmark
    "n_items_b",
    "metric_a_pct",  # a's metric on the shared items
    "metric_b_pct",
    "diff_pct",  # metric_a_pct - metric_b_pct
    "boot_mean_diff_pct",
    "boot_std_diff_pct",
    "ci_low_pct",  # 2.5th percentile of the replicate differences
    "ci_high_pct",  # 97.5th percentile
    "p_le_0",  # share of replicates with difference <= 0
    "diff_format",  # "+3.2 ± 1.1" (bootstrap mean ± std, percentage points)
    "n_replicates",
    "seed",
    ITEM_SET,  # the item set both experiments were scored over (None: rows without fingerprints)
)
_REPLICATES = REPLICATES


@dataclass(frozen=True)
class PairedDifference:
    """metric(a) - metric(b) as fractions: point value, bootstrap mean/std (ddof=1), 95% interval, p_le_0."""

    point: float
    mean: float
    std: float
    ci_lower: float
    ci_upper: float
    p_le_0: float
    n_replicates: int
    n: int


def _difference(point: float, diffs: np.ndarray, n: int) -> PairedDifference:
    return PairedDifference(
        point=float(point),
        mean=float(np.mean(diffs)),
        std=float(np.std(diffs, ddof=1)),
        ci_lower=float(np.percentile(diffs, 2.5)),
        ci_upper=float(np.percentile(diffs, 97.5)),
        p_le_0=float(np.mean(diffs <= TIE_TOLERANCE)),
        n_replicates=int(diffs.size),
        n=n,
    )


def _metric_name(metric: str) -> str:
    if metric not in _REPLICATES:
        raise ValueError(f"unknown metric_type {metric!r}; expected one of {sorted(_REPLICATES)}")
    return metric


def paired_difference(
    y_true: LabelArray,
    pred_a: LabelArray,
    pred_b: LabelArray,
    metric: str,
    n_replicates: int = 1000,
    seed: int = 42,
) -> PairedDifference:
    """Paired bootstrap of metric(a) - metric(b) over the same items (missing predictions count wrong)."""
    replicate = _REPLICATES[_metric_name(metric)]
    truth, a = as_label_arrays(y_true, pred_a)
    _, b = as_label_arrays(truth, pred_b)
    idx = bootstrap_indices(truth.size, n_replicates, seed)
    point = METRICS[metric](truth, a) - METRICS[metric](truth, b)
    return _difference(point, replicate(truth, a, idx) - replicate(truth, b, idx), truth.size)


def _item_order(ids: pd.Index) -> pd.Index:
    """Item ids sorted numerically when all are integers (``"2" < "10"``), else as text."""
    text = ids.astype(str)
    if text.str.fullmatch(r"\d+").all():
        return ids[np.argsort(text.astype(np.int64), kind="stable")]
    return ids[np.argsort(text.to_numpy(), kind="stable")]


def _check_columns(frame: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"item_predictions: missing column(s) {missing}; it has {list(frame.columns)}")


def _benchmark_metric(benchmark: str, rows: pd.DataFrame) -> str:
    kinds = sorted(rows["metric_type"].dropna().unique().tolist())
    if len(kinds) != 1:
        raise ValueError(f"item_predictions, benchmark {benchmark!r}: expected one metric_type, got {kinds}")
    try:
        return _metric_name(kinds[0])
    except ValueError as exc:
        raise ValueError(f"item_predictions, benchmark {benchmark!r}: {exc}") from None


def _label_grid(benchmark: str, rows: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Per-item truth (ordered ids) and a predictions grid (item x experiment; NaN = item not run)."""
    repeated = rows.duplicated(["experiment", "benchmark_id"], keep=False)
    if repeated.any():
        first = rows.loc[repeated, ["experiment", "benchmark_id"]].drop_duplicates().head(5)
        pairs = list(first.itertuples(index=False, name=None))
        raise ValueError(f"item_predictions, benchmark {benchmark!r}: repeated (experiment, item) {pairs}")
    try:
        truth, pred = as_label_arrays(rows["truth_label"], rows["predicted_label"])
    except ValueError as exc:
        raise ValueError(f"item_predictions, benchmark {benchmark!r}: {exc}") from None
    labelled = rows.assign(truth=truth, pred=pred)
    truths = labelled.groupby("benchmark_id")["truth"].agg(["min", "max"])
    conflict = truths.index[truths["min"] != truths["max"]]
    if len(conflict):
        item = conflict[0]
        who = labelled.loc[labelled["benchmark_id"] == item, ["experiment", "truth"]]
        seen = dict(who.itertuples(index=False, name=None))
        raise ValueError(
            f"item_predictions, benchmark {benchmark!r}: experiments disagree on the truth label of "
            f"item(s) {conflict[:5].tolist()}; item {item!r}: {seen}"
        )
    order = _item_order(truths.index)
    grid = labelled.pivot(index="benchmark_id", columns="experiment", values="pred").reindex(order)
    return truths["min"].reindex(order).to_numpy(np.int64), grid


def _item_set(benchmark: str, rows: pd.DataFrame) -> str | None:
    """The one item set of a benchmark's rows; an error naming the experiments when they differ."""
    if ITEM_SET not in rows.columns:
        return None
    sets = rows.groupby("experiment")[ITEM_SET].first()
    values = sets.dropna().unique().tolist()
    if len(values) > 1 or (values and sets.isna().any()):
        shown = {e: (fp[:12] if isinstance(fp, str) else None) for e, fp in sets.items()}
        raise ValueError(
            f"item_predictions, benchmark {benchmark!r}: experiments scored over different item sets "
            f"{shown}: compare one item set at a time (the experiment_comparisons asset keeps today's)"
        )
    return str(values[0]) if values else None


def _benchmark_comparisons(
    benchmark: str, rows: pd.DataFrame, n_replicates: int, seed: int
) -> list[dict[str, object]]:
    item_set = _item_set(benchmark, rows)
    metric = _benchmark_metric(benchmark, rows)
    replicate, score = _REPLICATES[metric], METRICS[metric]
    truth, grid = _label_grid(benchmark, rows)
    present = grid.notna()
    experiments = sorted(grid.columns)
    indices: dict[int, np.ndarray] = {}  # bootstrap draws per shared-item count
    scores: dict[tuple[bytes, str], tuple[float, np.ndarray]] = {}  # (shared items, experiment) -> scores

    def scored(shared: np.ndarray, experiment: str) -> tuple[float, np.ndarray]:
        key = (np.packbits(shared).tobytes(), experiment)
        if key not in scores:
            n = int(shared.sum())
            if n not in indices:
                indices[n] = bootstrap_indices(n, n_replicates, seed)
            pred = grid[experiment].to_numpy()[shared].astype(np.int64)
            scores[key] = (score(truth[shared], pred), replicate(truth[shared], pred, indices[n]))
        return scores[key]

    out = []
    for a, b in combinations(experiments, 2):
        shared = (present[a] & present[b]).to_numpy()
        n = int(shared.sum())
        if n == 0:
            continue
        (point_a, reps_a), (point_b, reps_b) = scored(shared, a), scored(shared, b)
        diff = _difference(point_a - point_b, reps_a - reps_b, n)
        out.append(
            {
                "benchmark_name": benchmark,
                "metric_type": metric,
                "experiment_a": a,
                "experiment_b": b,
                "n_shared": n,
                "n_items_a": int(present[a].sum()),
                "n_items_b": int(present[b].sum()),
                "metric_a_pct": 100 * point_a,
                "metric_b_pct": 100 * point_b,
                "diff_pct": 100 * diff.point,
                "boot_mean_diff_pct": 100 * diff.mean,
                "boot_std_diff_pct": 100 * diff.std,
                "ci_low_pct": 100 * diff.ci_lower,
                "ci_high_pct": 100 * diff.ci_upper,
                "p_le_0": diff.p_le_0,
                "diff_format": f"{100 * diff.mean:+.1f} ± {100 * diff.std:.1f}",
                "n_replicates": n_replicates,
                "seed": seed,
                ITEM_SET: item_set,
            }
        )
    return out


def experiment_comparisons(
    item_predictions: pd.DataFrame, n_replicates: int = 1000, seed: int = 42
) -> pd.DataFrame:
    """One row per (benchmark, pair of experiments sharing items); columns: COMPARISON_COLUMNS.

    Benchmarks come in the paper's order (then any others by name), pairs by experiment name. Rows of
    one benchmark must share one ``item_set_fingerprint`` (when the column is there): results over
    different items are never compared (eval/itemsets.py picks today's).
    """
    _check_columns(item_predictions)
    frame = item_predictions.assign(
        experiment=item_predictions["experiment"].astype(str),
        benchmark_id=item_predictions["benchmark_id"].astype(str),
    )
    rows: list[dict[str, object]] = []
    for benchmark in ordered(frame["benchmark_name"].astype(str)):
        subset = frame[frame["benchmark_name"] == benchmark]
        rows.extend(_benchmark_comparisons(benchmark, subset, n_replicates, seed))
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
