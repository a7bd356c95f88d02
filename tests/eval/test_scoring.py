"""From per-run predictions to voted items, metrics (vs scikit-learn), the summary, and the export that
grades to the same number."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.paper import paper_results
from giant_assets.export import write_submission
from giant_assets.grading.grade import grade_csv
from giant_assets.grading.tasks import tasks_from_items
from giant_assets.scoring import (
    PREDICTION_DTYPES,
    benchmark_metrics_row,
    summary_table,
    trajectory_steps,
    vote_items,
)

N_OPTIONS = 4


def items_frame(benchmark: str, truth: list[int], metric: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "benchmark_name": benchmark,
            "benchmark_id": [f"id{i}" for i in range(len(truth))],
            "metric_type": metric,
            "truth_label": truth,
            "options": [[f"opt{k}" for k in range(1, N_OPTIONS + 1)]] * len(truth),
        }
    )


def run_row(
    benchmark: str, bid: str, run: int, label: int | None, truth: int, kind: str | None = None
) -> dict:
    steps = [{"index": 0, "action": "crop", "box": [10, 20, 30, 40], "level": 2, "image_size": [30, 40]}]
    kind = kind or (None if label is not None else "no_answer")
    return {
        "config_hash": "abc",
        "agent": "random",
        "model": "",
        "benchmark_name": benchmark,
        "benchmark_id": bid,
        "run_index": run,
        "started_at": None,
        "answer_text": "" if label is None else str(label),
        "predicted_label": label,
        "extraction": None,
        "truth_label": truth,
        "correct": label == truth,
        "error_kind": kind,
        "error": None,
        "input_tokens": 10,
        "output_tokens": 2,
        "cost_usd": 0.001,
        "latency_s": 0.5,
        "n_steps": 1,
        "trajectory_json": json.dumps(steps),
        "finished_at": None,
    }


def predictions_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=list(PREDICTION_DTYPES)).astype(PREDICTION_DTYPES)


def test_votes_ties_no_labels_and_unavailable_slides() -> None:
    items = items_frame("tcga_slidebench", [1, 2, 3, 4], "accuracy")
    rows = [
        run_row("tcga_slidebench", "id0", 0, 2, 1),
        run_row("tcga_slidebench", "id0", 1, 1, 1),
        run_row("tcga_slidebench", "id0", 2, 1, 1),  # 1 wins 2:1
        run_row("tcga_slidebench", "id1", 0, 3, 2),
        run_row("tcga_slidebench", "id1", 1, 2, 2),  # tie: the earliest run's label (3)
        run_row("tcga_slidebench", "id2", 0, None, 3),
        run_row("tcga_slidebench", "id2", 1, 3, 3),  # runs without a label do not vote
        run_row("tcga_slidebench", "id3", 0, None, 4, kind="slide_unavailable"),
    ]
    voted = vote_items(predictions_frame(rows), items).set_index("benchmark_id")
    assert pd.isna(voted["predicted_label"].iloc[3])
    assert voted["predicted_label"].iloc[:3].tolist() == [1, 3, 3]
    assert voted["slide_available"].tolist() == [True, True, True, False]
    assert voted["correct"].tolist() == [True, False, True, False]
    assert voted["n_failed_runs"].tolist() == [0, 0, 1, 0]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_metrics_equal_sklearn_on_scored_items(seed: int, metric: str) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    truth = rng.integers(1, N_OPTIONS + 1, n).tolist()
    items = items_frame("tcga", truth, metric)
    rows, unavailable = [], set(rng.choice(n, 5, replace=False).tolist())
    for i, t in enumerate(truth):
        if i in unavailable:
            rows.append(run_row("tcga", f"id{i}", 0, None, t, kind="slide_unavailable"))
            continue
        label = None if rng.random() < 0.15 else int(rng.integers(1, N_OPTIONS + 1))
        rows.append(run_row("tcga", f"id{i}", 0, label, t))
    preds = predictions_frame(rows)
    voted = vote_items(preds, items)
    row = benchmark_metrics_row("tcga", voted, preds)
    scored = voted[voted["slide_available"]]
    y_pred = scored["predicted_label"].fillna(-1).astype(int)
    oracle = accuracy_score if metric == "accuracy" else balanced_accuracy_score
    assert row["value"] == pytest.approx(oracle(scored["truth_label"], y_pred))
    every = oracle(voted["truth_label"], voted["predicted_label"].fillna(-1).astype(int))
    assert row["value_all_items_pct"] == pytest.approx(100 * every)
    assert row["n_scored"] == n - 5 and row["n_slide_unavailable"] == 5
    assert row["n_no_label"] == int(preds["error_kind"].eq("no_answer").sum())
    assert row["cost_usd"] == pytest.approx(0.001 * n)
    assert row["ci_low_pct"] <= row["boot_mean_pct"] <= row["ci_high_pct"]
    assert 0 < row["boot_std_pct"] < 20
    assert row["paper_format"] == f"{row['boot_mean_pct']:.1f} ± {row['boot_std_pct']:.1f}"


def test_exported_submission_grades_to_the_metrics_value(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    truth = rng.integers(1, N_OPTIONS + 1, 30).tolist()
    items = items_frame("tcga", truth, "balanced_accuracy")
    rows = []
    for i, t in enumerate(truth):
        kind = "slide_unavailable" if i % 7 == 0 else None
        label = None if kind or i % 5 == 0 else int(rng.integers(1, N_OPTIONS + 1))
        rows.append(run_row("tcga", f"id{i}", 0, label, t, kind=kind))
    preds = predictions_frame(rows)
    voted = vote_items(preds, items)
    row = benchmark_metrics_row("tcga", voted, preds)
    path = write_submission(voted, tmp_path / "tcga__export.csv")
    report = grade_csv(path, tasks_from_items(items)["tcga"])
    assert report.valid_submission, report.error
    assert 100 * report.score == pytest.approx(row["value_all_items_pct"])
    assert row["value_all_items_pct"] < row["value_pct"]  # unavailable slides count wrong in the export


def test_summary_puts_the_paper_beside_each_benchmark() -> None:
    rows = []
    for name in ["panda", "gtex"]:
        items = items_frame(name, [1, 2, 1], "balanced_accuracy")
        preds = predictions_frame([run_row(name, f"id{i}", 0, 1, t) for i, t in enumerate([1, 2, 1])])
        rows.append(benchmark_metrics_row(name, vote_items(preds, items), preds))
    table = summary_table(pd.DataFrame(rows))
    assert table["benchmark_name"].tolist() == ["gtex", "panda"]  # the paper's benchmark order
    paper = paper_results().set_index(["model", "benchmark"])
    for name, shown in zip(table["benchmark_name"], table["paper_giant"], strict=True):
        mean, std = paper.loc[("GPT-5 + GIANT", name), ["mean", "std"]]
        assert shown == f"{mean:.1f} ± {std:.1f}"
    assert table.set_index("benchmark_name").at["gtex", "paper_giant"] == "53.7 ± 3.4"


def test_trajectory_steps_split_boxes_into_columns() -> None:
    preds = predictions_frame([run_row("tcga", "id0", 0, 1, 1), run_row("tcga", "id1", 1, 2, 1)])
    steps = trajectory_steps(preds)
    assert len(steps) == 2
    assert steps[["box_x", "box_y", "box_w", "box_h", "level"]].iloc[0].tolist() == [10, 20, 30, 40, 2]
    assert steps["run_index"].tolist() == [0, 1]
