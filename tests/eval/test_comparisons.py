"""Paired comparisons vs a plain loop over the same draws with scikit-learn as the metric oracle."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.bootstrap import bootstrap_metric
from giant_assets.eval.comparisons import COMPARISON_COLUMNS, experiment_comparisons, paired_difference
from giant_assets.eval.itemsets import ITEM_SET

SKLEARN = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}


def item_rows(experiment: str, benchmark: str, metric: str, truth: dict, pred: dict) -> list[dict]:
    """item_predictions rows; ``pred`` maps item id -> label or None (no answer)."""
    return [
        {
            "experiment": experiment,
            "benchmark_name": benchmark,
            "benchmark_id": item,
            "metric_type": metric,
            "truth_label": truth[item],
            "predicted_label": label,
            "correct": label == truth[item],
            "slide_available": True,
        }
        for item, label in pred.items()
    ]


def frame(rows: list[dict]) -> pd.DataFrame:
    out = pd.DataFrame(rows)
    out["predicted_label"] = out["predicted_label"].astype("Int64")
    return out


def balanced_accuracy_by_hand(y: np.ndarray, pred: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Balanced accuracy of each bootstrap replicate (row of ``counts``: how often each item is drawn):
    the mean, over the classes drawn, of the share of their drawn items predicted as that class."""
    recalls = []
    for c in np.unique(y):
        drawn = counts[:, y == c]
        total = drawn.sum(axis=1)
        hits = (drawn * (pred[y == c] == c)).sum(axis=1)
        recalls.append(np.where(total > 0, hits / np.maximum(total, 1), np.nan))
    return np.nanmean(np.array(recalls), axis=0)


def oracle_pair(
    truth: dict, pred_a: dict, pred_b: dict, metric: str, n_replicates: int, seed: int, sklearn_first: int = 0
) -> dict:
    """Plain Python: inner join, ids in numeric order, one ``rng.choice`` draw per replicate, sklearn.
    ``sklearn_first`` > 0 (balanced accuracy only): sklearn scores that many replicates, the rest are
    scored by hand, which must equal sklearn on those (sklearn's checks cost ms a call)."""
    shared = sorted(set(pred_a) & set(pred_b), key=int)
    y = np.array([truth[i] for i in shared])
    a = np.array([-1 if pred_a[i] is None else pred_a[i] for i in shared])
    b = np.array([-1 if pred_b[i] is None else pred_b[i] for i in shared])
    fn, n = SKLEARN[metric], len(shared)
    rng = np.random.default_rng(seed)
    draws = [rng.choice(n, size=n, replace=True) for _ in range(n_replicates)]
    by_sklearn = draws[: sklearn_first or n_replicates]
    diffs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn: "y_pred contains classes not in y_true"
        for idx in by_sklearn:
            diffs.append(fn(y[idx], a[idx]) - fn(y[idx], b[idx]))
        point_a, point_b = fn(y, a), fn(y, b)
    if sklearn_first:
        assert metric == "balanced_accuracy"
        counts = np.array([np.bincount(idx, minlength=n) for idx in draws])
        by_hand = balanced_accuracy_by_hand(y, a, counts) - balanced_accuracy_by_hand(y, b, counts)
        assert by_hand[:sklearn_first] == pytest.approx(diffs, abs=1e-12)  # the hand scoring is sklearn's
        diffs = list(by_hand)
    diffs = np.array(diffs)
    return {
        "n_shared": n,
        "metric_a_pct": 100 * point_a,
        "metric_b_pct": 100 * point_b,
        "diff_pct": 100 * (point_a - point_b),
        "boot_mean_diff_pct": 100 * diffs.mean(),
        "boot_std_diff_pct": 100 * diffs.std(ddof=1),
        "ci_low_pct": 100 * np.percentile(diffs, 2.5),
        "ci_high_pct": 100 * np.percentile(diffs, 97.5),
        "p_le_0": float(np.mean(diffs <= 1e-12)),
    }


def random_experiments(seed: int, n_items: int, n_classes: int, names: list[str], coverage: float):
    """Truth per item and, per experiment, predictions on a random subset (some None, some off-truth)."""
    rng = np.random.default_rng(seed)
    truth = {str(i): int(rng.integers(0, n_classes)) for i in range(n_items)}
    preds = {}
    for k, name in enumerate(names):
        pred = {}
        for item, label in truth.items():
            if rng.random() > coverage:
                continue  # the experiment has not run this item
            draw = rng.random()
            if draw < 0.1:
                pred[item] = None
            elif draw < 0.35 + 0.1 * k:
                pred[item] = label
            else:
                pred[item] = int(rng.integers(0, n_classes + 2))  # may be a class absent from the truth
        preds[name] = pred
    return truth, preds


@pytest.mark.parametrize(
    ("metric", "benchmark", "n_classes"),
    [("balanced_accuracy", "tcga", 6), ("accuracy", "tcga_slidebench", 4)],
)
def test_every_pair_equals_the_plain_loop_with_sklearn(metric, benchmark, n_classes):
    names = ["zeta", "alpha", "mid"]
    truth, preds = random_experiments(7, 60, n_classes, names, coverage=0.85)
    rows = [r for name in names for r in item_rows(name, benchmark, metric, truth, preds[name])]
    rows = list(np.random.default_rng(1).permutation(np.array(rows, dtype=object)))  # order must not matter
    out = experiment_comparisons(frame(rows), n_replicates=150, seed=5)
    assert list(out.columns) == list(COMPARISON_COLUMNS)
    pairs = [("alpha", "mid"), ("alpha", "zeta"), ("mid", "zeta")]
    assert list(zip(out["experiment_a"], out["experiment_b"], strict=True)) == pairs
    for row, (a, b) in zip(out.itertuples(index=False), pairs, strict=True):
        expected = oracle_pair(truth, preds[a], preds[b], metric, 150, 5)
        assert expected["n_shared"] < 60  # partial overlap: the inner join matters
        assert row.n_shared == expected["n_shared"]
        assert (row.n_items_a, row.n_items_b) == (len(preds[a]), len(preds[b]))
        for field, value in expected.items():
            assert getattr(row, field) == pytest.approx(value, abs=1e-12), field
        assert row.diff_format == f"{row.boot_mean_diff_pct:+.1f} ± {row.boot_std_diff_pct:.1f}"
        assert (row.benchmark_name, row.metric_type, row.n_replicates, row.seed) == (
            benchmark,
            metric,
            150,
            5,
        )


def test_default_is_1000_replicates_seed_42_on_a_full_tcga_pair():
    truth, preds = random_experiments(3, 221, 30, ["giant", "thumbnail"], coverage=1.0)
    rows = [r for n in preds for r in item_rows(n, "tcga", "balanced_accuracy", truth, preds[n])]
    out = experiment_comparisons(frame(rows))
    expected = oracle_pair(truth, preds["giant"], preds["thumbnail"], "balanced_accuracy", 1000, 42, 100)
    assert len(out) == 1 and out.at[0, "n_replicates"] == 1000 and out.at[0, "seed"] == 42
    for field, value in expected.items():
        assert out.at[0, field] == pytest.approx(value, abs=1e-12), field
    assert 0 < out.at[0, "p_le_0"] < 1  # a real distribution, not a degenerate one


def test_paired_mean_is_the_difference_of_the_single_bootstrap_means():
    """Same draws for both: with all items shared, the mean difference equals bootstrap_metric's means."""
    truth, preds = random_experiments(11, 80, 5, ["a", "b"], coverage=1.0)
    rows = [r for n in preds for r in item_rows(n, "panda", "balanced_accuracy", truth, preds[n])]
    out = experiment_comparisons(frame(rows)).iloc[0]
    y = [truth[str(i)] for i in range(80)]
    means = {
        n: bootstrap_metric(y, [preds[n][str(i)] for i in range(80)], "balanced_accuracy").mean for n in "ab"
    }
    assert out["boot_mean_diff_pct"] == pytest.approx(100 * (means["a"] - means["b"]), abs=1e-12)
    single = paired_difference(
        y,
        [preds["a"][str(i)] for i in range(80)],
        [preds["b"][str(i)] for i in range(80)],
        "balanced_accuracy",
    )
    assert 100 * single.std == pytest.approx(out["boot_std_diff_pct"], abs=1e-12)
    assert single.p_le_0 == out["p_le_0"] and single.n == 80


def test_identical_experiments_differ_by_exactly_zero():
    truth, preds = random_experiments(2, 40, 4, ["x"], coverage=1.0)
    rows = [r for n in ("x", "y") for r in item_rows(n, "gtex", "balanced_accuracy", truth, preds["x"])]
    out = experiment_comparisons(frame(rows), n_replicates=50).iloc[0]
    assert (out["diff_pct"], out["boot_mean_diff_pct"], out["boot_std_diff_pct"]) == (0.0, 0.0, 0.0)
    assert out["p_le_0"] == 1.0  # every replicate's difference is <= 0 (a tie)


def test_missing_prediction_counts_wrong():
    truth = {"1": 0, "2": 1, "3": 0, "4": 1}
    a = {"1": 0, "2": 1, "3": 0, "4": 1}
    b = {"1": 0, "2": None, "3": None, "4": 1}
    rows = item_rows("a", "tcga_expert_vqa", "accuracy", truth, a) + item_rows(
        "b", "tcga_expert_vqa", "accuracy", truth, b
    )
    out = experiment_comparisons(frame(rows), n_replicates=20).iloc[0]
    assert (out["metric_a_pct"], out["metric_b_pct"], out["diff_pct"]) == (100.0, 50.0, 50.0)


def test_pairs_without_shared_items_and_lone_experiments_are_left_out():
    truth = {"1": 0, "2": 1, "3": 0, "4": 1}
    rows = (
        item_rows("a", "gtex", "balanced_accuracy", truth, {"1": 0, "2": 1})
        + item_rows("b", "gtex", "balanced_accuracy", truth, {"3": 0, "4": 0})
        + item_rows("c", "gtex", "balanced_accuracy", truth, {"2": 1, "3": 1})
        + item_rows("a", "panda", "balanced_accuracy", truth, {"1": 0})
        + item_rows("a", "tcga", "balanced_accuracy", truth, {"1": 0, "2": 0})
        + item_rows("b", "tcga", "balanced_accuracy", truth, {"1": 0, "2": 1})
    )
    out = experiment_comparisons(frame(rows), n_replicates=10)
    got = list(
        zip(out["benchmark_name"], out["experiment_a"], out["experiment_b"], out["n_shared"], strict=True)
    )
    assert got == [("tcga", "a", "b", 2), ("gtex", "a", "c", 1), ("gtex", "b", "c", 1)]  # paper's order
    empty = experiment_comparisons(frame(item_rows("a", "tcga", "accuracy", truth, {"1": 0})))
    assert empty.empty and list(empty.columns) == list(COMPARISON_COLUMNS)


def test_bad_input_names_the_benchmark_item_and_field():
    truth = {"1": 0, "2": 1}
    good = item_rows("a", "tcga", "balanced_accuracy", truth, {"1": 0, "2": 1})
    with pytest.raises(ValueError, match=r"missing column\(s\) \['truth_label'\]"):
        experiment_comparisons(frame(good).drop(columns="truth_label"))
    other = item_rows("b", "tcga", "balanced_accuracy", {"1": 0, "2": 2}, {"1": 0, "2": 1})
    with pytest.raises(ValueError, match=r"'tcga'.*disagree on the truth label.*\['2'\].*'a': 1, 'b': 2"):
        experiment_comparisons(frame(good + other))
    with pytest.raises(ValueError, match=r"'tcga': repeated \(experiment, item\) \[\('a', '1'\)\]"):
        experiment_comparisons(frame(good + good[:1]))
    mixed = item_rows("b", "tcga", "accuracy", truth, {"1": 0})
    with pytest.raises(ValueError, match=r"'tcga': expected one metric_type, got \['accuracy', 'balanced_"):
        experiment_comparisons(frame(good + mixed))
    odd = item_rows("b", "tcga", "f1", truth, {"1": 0})
    with pytest.raises(ValueError, match=r"'tcga': unknown metric_type 'f1'"):
        experiment_comparisons(frame(item_rows("a", "tcga", "f1", truth, {"1": 0}) + odd))
    with pytest.raises(ValueError, match=r"'tcga': y_true holds negative"):
        negative = item_rows("a", "tcga", "accuracy", {"1": -3}, {"1": 0})
        experiment_comparisons(frame(negative + item_rows("b", "tcga", "accuracy", {"1": -3}, {"1": 0})))


def test_experiments_over_different_item_sets_are_never_compared():
    """Rows of one benchmark carry one item set; two experiments scored over different sets (or one
    without a fingerprint beside one with) are refused, naming both (mutation: the check dropped lets a
    paired bootstrap run over unrelated items). The same set gives the set's fingerprint per row."""
    truth = {"1": 0, "2": 1, "3": 1}
    a = frame(item_rows("a", "tcga", "accuracy", truth, {"1": 0, "2": 1, "3": 0}))
    b = frame(item_rows("b", "tcga", "accuracy", truth, {"1": 1, "2": 1, "3": 1}))
    same = experiment_comparisons(
        pd.concat([a.assign(**{ITEM_SET: "f" * 64}), b.assign(**{ITEM_SET: "f" * 64})])
    )
    assert same[ITEM_SET].tolist() == ["f" * 64]
    for fp_b in ("e" * 64, None):
        rows = pd.concat([a.assign(**{ITEM_SET: "f" * 64}), b.assign(**{ITEM_SET: fp_b})])
        with pytest.raises(
            ValueError, match=r"'tcga': experiments scored over different item sets .*'a': 'ffff"
        ):
            experiment_comparisons(rows)
