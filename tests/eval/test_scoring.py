"""From per-run records to re-extracted labels, voted items and metrics over all items (vs scikit-learn),
and the export that grades to the same number."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.eval.export import write_submission
from giant_assets.eval.scoring import benchmark_metrics_row, billed_costs, rescore, vote_items
from giant_assets.grading.grade import grade_csv
from giant_assets.grading.tasks import tasks_from_items
from giant_assets.runs.agent_api import AgentAnswer, Step
from giant_assets.runs.records import NO_ANSWER, SLIDE_UNAVAILABLE, records_frame, steps_frame
from giant_assets.runs.runner import result_row

N_OPTIONS = 4
PAPER_FORMAT = r"^\d+\.\d ± \d+\.\d$"
pytestmark = pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")


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
    return records_frame(rows)


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


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_headline_over_all_items_and_readable_value_equal_sklearn(seed: int, metric: str) -> None:
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
    assert row["value_readable_pct"] == pytest.approx(100 * oracle(scored["truth_label"], y_pred))
    every = oracle(voted["truth_label"], voted["predicted_label"].fillna(-1).astype(int))
    assert row["value"] == pytest.approx(every) and row["value_pct"] == pytest.approx(100 * every)
    assert row["n_slide_readable"] == n - 5 and row["n_slide_unavailable"] == 5
    assert row["n_answered"] == int(voted["predicted_label"].notna().sum())
    assert row["coverage_readable_pct"] == pytest.approx(100 * (n - 5) / n)
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
    assert 100 * report.score == pytest.approx(row["value_pct"])
    assert row["value_pct"] < row["value_readable_pct"]  # unavailable slides count wrong, as in the export


def test_trajectory_steps_split_boxes_into_columns() -> None:
    preds = predictions_frame([run_row("tcga", "id0", 0, 1, 1), run_row("tcga", "id1", 1, 2, 1)])
    steps = steps_frame(preds)
    assert len(steps) == 2
    assert steps[["box_x", "box_y", "box_w", "box_h", "level"]].iloc[0].tolist() == [10, 20, 30, 40, 2]
    assert steps["run_index"].tolist() == [0, 1]


def oracle_vote(runs: list[tuple[int, int | None]]) -> int | None:
    """Most frequent label among (run, label) pairs with a label; ties: the label seen in the earliest run."""
    votes = [(run, label) for run, label in sorted(runs) if label is not None]
    counts = Counter(label for _, label in votes)
    if not counts:
        return None
    top = max(counts.values())
    return next(label for _, label in votes if counts[label] == top)


def test_oracle_vote_tie_rule() -> None:
    assert oracle_vote([(1, 2), (0, 3)]) == 3 and oracle_vote([(0, None), (1, 2), (2, 2), (3, 1)]) == 2
    assert oracle_vote([(0, None)]) is None


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_five_runs_per_item_vote_then_score_like_sklearn(seed: int, metric: str) -> None:
    rng = np.random.default_rng(100 + seed)
    n, runs = 36, 5
    truth = rng.integers(1, N_OPTIONS + 1, n).tolist()
    items = items_frame("tcga_slidebench", truth, metric)
    unavailable = set(rng.choice(n, 4, replace=False).tolist())
    never_run = next(i for i in range(n) if i not in unavailable)  # e.g. stopped by the budget
    rows, expected = [], {}
    for i, t in enumerate(truth):
        if i == never_run:
            continue
        if i in unavailable:
            rows += [
                run_row("tcga_slidebench", f"id{i}", r, None, t, kind=SLIDE_UNAVAILABLE) for r in range(runs)
            ]
            continue
        labels = [None if rng.random() < 0.2 else int(rng.integers(1, N_OPTIONS + 1)) for _ in range(runs)]
        rows += [run_row("tcga_slidebench", f"id{i}", r, label, t) for r, label in enumerate(labels)]
        expected[f"id{i}"] = oracle_vote(list(enumerate(labels)))
    preds = predictions_frame(rows).sample(frac=1, random_state=seed).reset_index(drop=True)
    voted = vote_items(preds, items)
    assert voted["benchmark_id"].tolist() == items["benchmark_id"].tolist()
    by_id = voted.set_index("benchmark_id")
    for bid, label in expected.items():
        got = by_id.at[bid, "predicted_label"]
        assert (pd.isna(got) and label is None) or got == label, bid
    available = [i not in unavailable for i in range(n)]
    assert voted["slide_available"].tolist() == available
    assert pd.isna(by_id.at[f"id{never_run}", "predicted_label"])

    row = benchmark_metrics_row("tcga_slidebench", voted, preds)
    oracle = accuracy_score if metric == "accuracy" else balanced_accuracy_score
    y_true = [t for i, t in enumerate(truth) if available[i]]
    y_pred = [-1 if expected.get(f"id{i}") is None else expected[f"id{i}"] for i in range(n) if available[i]]
    assert row["value_readable_pct"] == pytest.approx(100 * oracle(y_true, y_pred), abs=1e-10)
    every = [-1 if expected.get(f"id{i}") is None else expected[f"id{i}"] for i in range(n)]
    assert row["value"] == pytest.approx(oracle(truth, every), abs=1e-12)
    assert row["value_pct"] == pytest.approx(100 * row["value"])
    assert row["n_items"] == n and row["n_slide_readable"] == n - 4 and row["n_slide_unavailable"] == 4
    assert row["n_slide_readable"] + row["n_slide_unavailable"] == row["n_items"]
    assert row["n_correct"] == sum(expected.get(f"id{i}") == truth[i] for i in range(n) if available[i])
    assert row["runs_per_item"] == runs
    assert row["n_no_label"] == sum(
        r["predicted_label"] is None and r["error_kind"] == NO_ANSWER for r in rows
    )
    assert row["cost_usd"] == pytest.approx(0.001 * len(rows))
    assert row["input_tokens"] == 10 * len(rows) and row["output_tokens"] == 2 * len(rows)


def test_vote_counts_runs_votes_agreement_and_failures() -> None:
    items = items_frame("tcga", [1, 2], "accuracy")
    rows = [
        run_row("tcga", "id0", 0, 2, 1),
        run_row("tcga", "id0", 1, 1, 1),
        run_row("tcga", "id0", 2, 1, 1),
        run_row("tcga", "id0", 3, None, 1),
        run_row("tcga", "id0", 4, None, 1, kind="timeout"),
        run_row("tcga", "id1", 0, None, 2),
        run_row("tcga", "id1", 1, None, 2, kind="agent_error"),
    ]
    preds = predictions_frame(rows)
    voted = vote_items(preds, items).set_index("benchmark_id")
    assert voted["n_runs"].tolist() == [5, 2]
    assert voted["n_votes"].tolist() == [3, 0]
    assert voted.at["id0", "agreement"] == pytest.approx(2 / 3) and pd.isna(voted.at["id1", "agreement"])
    assert voted["n_failed_runs"].tolist() == [2, 2]
    assert voted["correct"].tolist() == [True, False]
    assert voted["config_hash"].unique().tolist() == ["abc"] and voted["agent"].iloc[0] == "random"
    row = benchmark_metrics_row("tcga", voted.reset_index(), preds)
    assert (row["n_no_label"], row["n_timeouts"], row["n_agent_errors"]) == (2, 1, 1)
    assert row["value"] == 0.5 and row["n_correct"] == 1


def test_slide_availability_is_per_benchmark_and_id() -> None:
    """The same id in two benchmarks: an unavailable slide in one must not hide the other's."""
    items = pd.concat([items_frame("tcga", [1, 2], "accuracy"), items_frame("gtex", [3, 4], "accuracy")])
    rows = [
        run_row("tcga", "id0", 0, None, 1, kind=SLIDE_UNAVAILABLE),
        run_row("tcga", "id1", 0, 2, 2),
        run_row("gtex", "id0", 0, 3, 3),
        run_row("gtex", "id1", 0, None, 4, kind=SLIDE_UNAVAILABLE),
    ]
    voted = vote_items(predictions_frame(rows), items).set_index(["benchmark_name", "benchmark_id"])
    assert voted["slide_available"].to_dict() == {
        ("tcga", "id0"): False,
        ("tcga", "id1"): True,
        ("gtex", "id0"): True,
        ("gtex", "id1"): False,
    }
    assert voted["correct"].tolist() == [False, True, True, False]


@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_bootstrap_columns_match_a_sklearn_resampling_loop(metric: str) -> None:
    """ALL voted items (an unavailable slide or no label is a missing prediction, -1), 1000 replicates
    with seed 42 drawn with replacement (rng.choice), scored by scikit-learn, in percent."""
    rng = np.random.default_rng(7)
    truth = rng.integers(1, N_OPTIONS + 1, 28).tolist()
    items = items_frame("tcga", truth, metric)
    rows, voted_oracle = [], {}
    for i, t in enumerate(truth):
        if i % 9 == 4:  # slide unavailable: resampled like any item, always wrong
            rows += [run_row("tcga", f"id{i}", r, None, t, kind=SLIDE_UNAVAILABLE) for r in range(3)]
            voted_oracle[i] = None
            continue
        labels = [None if rng.random() < 0.2 else (t if rng.random() < 0.5 else 1) for _ in range(3)]
        if i % 9 == 1:  # no run gave a label: a missing prediction, scored wrong
            labels = [None, None, None]
        rows += [run_row("tcga", f"id{i}", r, label, t) for r, label in enumerate(labels)]
        voted_oracle[i] = oracle_vote(list(enumerate(labels)))
    preds = predictions_frame(rows)
    row = benchmark_metrics_row("tcga", vote_items(preds, items), preds)
    scored = sorted(voted_oracle)
    y_true = np.array([truth[i] for i in scored])
    y_pred = np.array([-1 if voted_oracle[i] is None else voted_oracle[i] for i in scored])
    assert len(scored) == row["n_items"] == 28 and row["n_slide_readable"] == 25 and (y_pred == -1).any()
    draw = np.random.default_rng(42)
    oracle = accuracy_score if metric == "accuracy" else balanced_accuracy_score
    scores = []
    for _ in range(1000):
        idx = draw.choice(len(y_true), size=len(y_true), replace=True)
        scores.append(100 * oracle(y_true[idx], y_pred[idx]))
    assert row["boot_mean_pct"] == pytest.approx(np.mean(scores), abs=1e-9)
    assert row["boot_std_pct"] == pytest.approx(np.std(scores, ddof=1), abs=1e-9)
    assert row["ci_low_pct"] == pytest.approx(np.percentile(scores, 2.5), abs=1e-9)
    assert row["ci_high_pct"] == pytest.approx(np.percentile(scores, 97.5), abs=1e-9)
    assert row["value_pct"] == pytest.approx(100 * oracle(y_true, y_pred), abs=1e-10)
    assert 1 < row["boot_std_pct"] < 30 and 0 < row["boot_mean_pct"] < 100  # percent, not fractions
    assert row["paper_format"] == f"{np.mean(scores):.1f} ± {np.std(scores, ddof=1):.1f}"
    assert pd.Series([row["paper_format"]]).str.fullmatch(PAPER_FORMAT).all()


def test_no_runs_at_all_scores_every_item_wrong() -> None:
    """A benchmark stopped before any run (e.g. by the budget): every item is scored, none is correct."""
    items = items_frame("gtex", [1, 2, 2, 4], "balanced_accuracy")
    preds = predictions_frame([])
    voted = vote_items(preds, items)
    assert voted["slide_available"].all() and voted["predicted_label"].isna().all()
    assert voted["n_failed_runs"].tolist() == [0] * 4 and not voted["correct"].any()
    row = benchmark_metrics_row("gtex", voted, preds)
    assert row["value"] == balanced_accuracy_score([1, 2, 2, 4], [-1] * 4) == 0.0
    assert (row["n_items"], row["n_slide_readable"], row["runs_per_item"], row["cost_usd"]) == (4, 4, 0, 0.0)
    assert row["n_answered"] == 0 and row["coverage_answered_pct"] == 0.0
    assert row["paper_format"] == "0.0 ± 0.0"


def test_an_item_with_some_unavailable_runs_is_scored_on_the_others() -> None:
    """Only an item whose every run is slide_unavailable is left unscored; the other runs still vote."""
    items = items_frame("tcga", [3, 2], "accuracy")
    rows = [
        run_row("tcga", "id0", 0, None, 3, kind=SLIDE_UNAVAILABLE),
        run_row("tcga", "id0", 1, 3, 3),
        run_row("tcga", "id0", 2, 1, 3),
        run_row("tcga", "id0", 3, 3, 3),
        run_row("tcga", "id1", 0, None, 2, kind=SLIDE_UNAVAILABLE),
        run_row("tcga", "id1", 1, None, 2, kind=SLIDE_UNAVAILABLE),
    ]
    preds = predictions_frame(rows)
    voted = vote_items(preds, items).set_index("benchmark_id")
    assert voted["slide_available"].tolist() == [True, False]
    assert voted.at["id0", "predicted_label"] == 3 and voted.at["id0", "n_runs"] == 3
    row = benchmark_metrics_row("tcga", voted.reset_index(), preds)
    assert (row["n_slide_readable"], row["n_correct"], row["n_slide_unavailable"]) == (1, 1, 1)
    assert row["value"] == pytest.approx(accuracy_score([3, 2], [3, -1])) and row["value_readable_pct"] == 100


def test_no_readable_slide_scores_zero_and_the_readable_value_is_nan() -> None:
    items = items_frame("tcga", [1, 2], "balanced_accuracy")
    rows = [run_row("tcga", f"id{i}", 0, None, t, kind=SLIDE_UNAVAILABLE) for i, t in enumerate([1, 2])]
    preds = predictions_frame(rows)
    row = benchmark_metrics_row("tcga", vote_items(preds, items), preds)
    assert row["n_slide_readable"] == 0 and row["n_slide_unavailable"] == 2 and row["n_correct"] == 0
    assert row["value"] == 0.0 and row["boot_std_pct"] == 0.0 and np.isnan(row["value_readable_pct"])
    assert row["paper_format"] == "0.0 ± 0.0"


def test_mixed_metric_types_are_refused() -> None:
    items = pd.concat([items_frame("tcga", [1], "accuracy"), items_frame("tcga", [2], "balanced_accuracy")])
    items["benchmark_id"] = ["id0", "id1"]
    preds = predictions_frame([run_row("tcga", "id0", 0, 1, 1), run_row("tcga", "id1", 0, 2, 2)])
    with pytest.raises(ValueError, match="metric_type"):
        benchmark_metrics_row("tcga", vote_items(preds, items), preds)


def test_rows_from_the_batch_runner_score_as_extracted() -> None:
    """Real result rows: answers go through extraction; unreadable answers and missing slides."""
    truth = [2, 3, 1, 4]
    items = items_frame("tcga_expert_vqa", truth, "accuracy")
    texts = {
        "id0": ['{"answer": 2}', "Answer: B", "I cannot tell from this slide."],
        "id1": ["opt1", "The answer is 3.", "(C)"],
        "id2": ["nothing useful", "no idea", "unclear"],
    }
    rows = []
    for i, t in enumerate(truth):
        item = {"benchmark_name": "tcga_expert_vqa", "truth_label": t, "options": items["options"].iloc[i]}
        for run in range(3):
            base = {
                "config_hash": "h",
                "agent": "replay",
                "model": "rec.csv",
                "benchmark_name": "tcga_expert_vqa",
                "benchmark_id": f"id{i}",
                "run_index": run,
                "started_at": None,
            }
            if i == 3:
                rows.append(result_row(base, item, None, SLIDE_UNAVAILABLE, "no file"))
            else:
                text = texts[f"id{i}"][run]
                answer = AgentAnswer(text, [Step(0, "answer", text=text, cost_usd=0.01)])
                rows.append(result_row(base, item, answer, None, None))
    preds = predictions_frame(rows)
    assert preds["predicted_label"].fillna(-1).tolist() == [2, 2, -1, 1, 3, 3, -1, -1, -1, -1, -1, -1]
    kinds = preds["error_kind"].fillna("ok").tolist()
    assert kinds == ["ok", "ok", NO_ANSWER, "ok", "ok", "ok"] + [NO_ANSWER] * 3 + [SLIDE_UNAVAILABLE] * 3
    voted = vote_items(preds, items)
    assert voted["predicted_label"].fillna(-1).tolist() == [2, 3, -1, -1]
    assert voted["slide_available"].tolist() == [True, True, True, False]
    row = benchmark_metrics_row("tcga_expert_vqa", voted, preds)
    assert row["value_readable_pct"] == pytest.approx(100 * accuracy_score([2, 3, 1], [2, 3, -1]))
    assert row["value"] == pytest.approx(accuracy_score(truth, [2, 3, -1, -1]))
    assert (row["n_no_label"], row["n_slide_unavailable"], row["runs_per_item"]) == (4, 1, 3)
    assert row["cost_usd"] == pytest.approx(0.01 * 9)
    steps = steps_frame(preds)
    assert len(steps) == 9 and set(steps["action"]) == {"answer"} and steps["box_x"].isna().all()


def test_rescoring_reads_the_stored_answers_again_and_keeps_failed_runs() -> None:
    """Labels come from the stored answer text, not the label recorded when the run finished: an old
    record labelled with a since-fixed extractor is scored anew; failed runs keep their error."""
    items = items_frame("tcga_slidebench", [2, 3, 1], "accuracy")
    rows = [
        run_row("tcga_slidebench", "id0", 0, None, 2) | {"answer_text": '{"answer": 2}'},  # was unparsed
        run_row("tcga_slidebench", "id1", 0, 1, 3) | {"answer_text": "The answer is option 3."},
        run_row("tcga_slidebench", "id2", 0, None, 1, kind="agent_error") | {"answer_text": "1"},
    ]
    preds = predictions_frame(rows)
    scored = rescore(preds, items)
    assert scored["predicted_label"].fillna(-1).tolist() == [2, 3, -1]
    assert scored["error_kind"].fillna("ok").tolist() == ["ok", "ok", "agent_error"]
    assert scored["correct"].tolist() == [True, True, False]
    assert preds["predicted_label"].fillna(-1).tolist() == [-1, 1, -1]  # the input is not modified
    row = benchmark_metrics_row("tcga_slidebench", vote_items(scored, items), preds)
    assert row["value"] == pytest.approx(accuracy_score([2, 3, 1], [2, 3, -1]))
    # label counts follow the re-extraction, error counts the stored runs
    assert preds["error_kind"].eq("no_answer").sum() == 1 and row["n_no_label"] == 0
    assert row["n_agent_errors"] == 1


@pytest.mark.parametrize(("policy", "label"), [("benign", 0), ("no_answer", None)])
def test_panda_null_grade_policy_is_applied_when_rescoring(policy: str, label: int | None) -> None:
    items = pd.DataFrame(
        {"benchmark_name": "panda", "benchmark_id": ["p0"], "metric_type": "balanced_accuracy",
         "truth_label": [0], "options": [None]}
    )  # fmt: skip
    row = run_row("panda", "p0", 0, None, 0) | {"answer_text": '<response>{"isup_grade": null}</response>'}
    scored = rescore(predictions_frame([row]), items, panda_null_grade=policy)
    got = scored.at[0, "predicted_label"]
    assert (pd.isna(got) and label is None) or got == label
    metrics = benchmark_metrics_row("panda", vote_items(scored, items), scored)
    assert metrics["n_null_grades"] == 1


def test_untagged_responses_are_counted() -> None:
    items = items_frame("tcga", [1, 2], "accuracy")
    rows = [
        run_row("tcga", "id0", 0, 1, 1) | {"response_tagged": True},
        run_row("tcga", "id1", 0, 2, 2) | {"response_tagged": False},
    ]
    preds = predictions_frame(rows)
    row = benchmark_metrics_row("tcga", vote_items(preds, items), preds)
    assert row["n_untagged_responses"] == 1


def test_billed_cost_is_every_paid_reply_and_not_counted_is_what_runs_that_do_not_count_cost(
    tmp_path: Path,
) -> None:
    from datetime import UTC, datetime

    from giant_assets.runs.journal import Journal
    from giant_assets.runs.replies import ReplyStore, RunReplies, replies_path
    from giant_assets.runs.run_identity import RunIdentity

    bench = "tcga_slidebench"
    journal = Journal(tmp_path / "journals" / "abc" / f"{bench}.jsonl")
    store = ReplyStore(replies_path(journal.path))

    def paid(bid: str, run: int, *costs: float) -> None:
        replies = RunReplies(store, RunIdentity("abc", bench, bid, run, None))
        for n, cost in enumerate(costs):
            replies.record("d", n, {"n": n}, cost_usd=cost)

    def row(bid: str, run: int, cost: float, kind: str | None = None) -> dict:
        done = datetime.now(UTC).isoformat()
        return run_row(bench, bid, run, 1, 1, kind) | {"cost_usd": cost, "finished_at": done}

    paid("id0", 0, 0.25, 0.25)  # answered: counts
    paid("id0", 1, 0.125)  # failed after paying a reply
    paid("id1", 0, 1.0)  # killed: paid, never journalled
    rows = [row("id0", 0, 0.5), row("id0", 1, 0.125, "agent_error")]
    legacy = row("id1", 1, 0.0625) | {"finished_at": "2020-01-01T00:00:00+00:00"}  # journalled, no store
    journal.append([*rows, legacy])
    predictions = predictions_frame([*rows, legacy])

    costs = billed_costs(journal.path, predictions)
    assert costs["cost_usd_billed"] == pytest.approx(0.5 + 0.125 + 1.0 + 0.0625)
    assert costs["cost_usd_not_counted"] == pytest.approx(0.125 + 1.0)
    assert predictions["cost_usd"].sum() == pytest.approx(0.6875)  # the rows alone miss the killed run
    items = items_frame(bench, [1, 1], "accuracy")
    metrics = benchmark_metrics_row(bench, vote_items(predictions, items), predictions, journal.path)
    assert (metrics["cost_usd_billed"], metrics["cost_usd_not_counted"]) == (
        costs["cost_usd_billed"],
        costs["cost_usd_not_counted"],
    )
    nowhere = billed_costs(tmp_path / "journals" / "other" / f"{bench}.jsonl", predictions)
    assert all(np.isnan(v) for v in nowhere.values())  # no journal, no store: unknown, never $0
    assert np.isnan(
        benchmark_metrics_row(bench, vote_items(predictions, items), predictions)["cost_usd_billed"]
    )


def test_an_unanswered_panda_item_is_never_read_as_grade_0() -> None:
    """PANDA's grade 0 is a real label: an item with no voted label (no answer, unreadable slide) must
    count wrong in the headline and the readable value, not as a prediction of grade 0 (mutation:
    missing labels filled with 0 instead of -1). Oracle: sklearn with -1 for "no prediction"."""
    items = items_frame("panda", [0, 0, 3, 2], "balanced_accuracy")
    rows = [
        run_row("panda", "id0", 0, None, 0),  # no_answer
        run_row("panda", "id1", 0, None, 0, kind=SLIDE_UNAVAILABLE),
        run_row("panda", "id2", 0, 3, 3),
        run_row("panda", "id3", 0, 1, 2),
    ]
    preds = predictions_frame(rows)
    row = benchmark_metrics_row("panda", vote_items(preds, items), preds)
    assert row["value"] == pytest.approx(balanced_accuracy_score([0, 0, 3, 2], [-1, -1, 3, 1])) == 1 / 3
    assert row["value_readable_pct"] == pytest.approx(100 * balanced_accuracy_score([0, 3, 2], [-1, 3, 1]))
    assert row["n_correct"] == 1 and row["n_answered"] == 2
