"""Grading files: scores equal scikit-learn's, JSONL grouping, reports, aggregation, graders."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.grading import (
    GradeFnImportError,
    Grader,
    InvalidSubmissionError,
    Task,
    TaskRegistry,
    TaskReport,
    aggregate_reports,
    get_task,
    grade_csv,
    grade_file,
    grade_predictions_jsonl,
    register_task,
    reports_to_frame,
    task_id_from_filename,
    tasks_from_items,
)
from giant_assets.multipathqa.benchmarks import BENCHMARKS
from tests.grading.conftest import write_submission

SKLEARN = {"accuracy": accuracy_score, "balanced_accuracy": balanced_accuracy_score}


def random_predictions(task, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = task.answers["truth_label"].to_numpy()
    if task.options_column:
        high = task.answers[task.options_column].map(len).to_numpy()
        guess = rng.integers(1, high + 1)
    else:
        guess = rng.integers(0, 6, len(truth))
    keep = rng.random(len(truth)) < 0.4  # ~40 % right, the rest random
    return np.where(keep, truth, guess)


@pytest.mark.parametrize("benchmark", sorted(BENCHMARKS))
def test_scores_equal_sklearn(tmp_path: Path, tasks, benchmark: str) -> None:
    task = tasks[benchmark]
    preds = random_predictions(task, seed=len(benchmark))
    order = np.random.default_rng(3).permutation(task.n_items)  # row order must not matter
    write_submission(tmp_path / "s.csv", task.answers["benchmark_id"].to_numpy()[order], preds[order])
    report = grade_csv(tmp_path / "s.csv", task)
    expected = SKLEARN[BENCHMARKS[benchmark].metric_type](task.answers["truth_label"], preds)
    assert report.valid_submission and report.error is None
    assert report.score == pytest.approx(expected, abs=1e-12)
    assert report.metric == BENCHMARKS[benchmark].metric_type and report.n_items == 40
    assert report.leaderboard_size == 4 and report.rank is not None
    assert report.beats_human is None and report.human_percentile is None  # no published human baselines


def test_report_ranks_against_the_paper_table(tmp_path: Path, tasks) -> None:
    task = tasks["gtex"]  # board: 0.963, 0.607, 0.537, 0.050
    assert sorted(task.leaderboard["score"]) == [0.05, 0.537, 0.607, 0.963]
    ids, truth = task.answers["benchmark_id"], task.answers["truth_label"].to_numpy()
    write_submission(tmp_path / "s.csv", ids, truth)
    perfect = grade_csv(tmp_path / "s.csv", task)
    assert perfect.score == 1.0 and perfect.gold_medal and perfect.medal == "gold" and perfect.rank == 1
    wrong = np.where(truth == 1, 2, 1)
    write_submission(tmp_path / "w.csv", ids, wrong)
    zero = grade_csv(tmp_path / "w.csv", task)
    assert zero.score == 0.0 and not zero.any_medal and zero.rank == 5 and zero.above_median is False
    assert zero.leaderboard_percentile == 0.0
    assert (zero.gold_threshold, zero.median_threshold) == (0.963, pytest.approx((0.537 + 0.607) / 2))


def test_report_to_dict_is_json_and_utc(tmp_path: Path, tasks) -> None:
    task = tasks["panda"]
    write_submission(tmp_path / "s.csv", task.answers["benchmark_id"], task.answers["truth_label"])
    report = grade_csv(tmp_path / "s.csv", task)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["task_id"] == "panda" and data["score"] == 1.0 and data["valid_submission"] is True
    created = datetime.fromisoformat(data["created_at"])
    assert created.tzinfo is not None and created.utcoffset().total_seconds() == 0
    assert abs((datetime.now(UTC) - created).total_seconds()) < 600
    assert TaskReport.from_dict(data) == report
    required = {
        "task_id", "submission_path", "score", "gold_threshold", "silver_threshold", "bronze_threshold",
        "median_threshold", "gold_medal", "silver_medal", "bronze_medal", "any_medal", "above_median",
        "beats_human", "human_percentile", "created_at", "valid_submission", "error", "n_items",
        "is_lower_better",
    }  # fmt: skip
    assert required <= set(data)


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_grade_predictions_jsonl_groups_rows_per_task(tmp_path: Path, tasks) -> None:
    rows = []
    for name in ("tcga_slidebench", "panda"):
        t = tasks[name]
        preds = random_predictions(t, seed=7)
        rows += [  # either field names the task
            {
                ("task_id" if name == "panda" else "benchmark_name"): name,
                "benchmark_id": i,
                "prediction": int(p),
            }
            for i, p in zip(t.answers["benchmark_id"], preds, strict=True)
        ]
    rows.append({"task_id": "nope", "benchmark_id": "x", "prediction": 1})
    path = jsonl(tmp_path / "run.jsonl", rows)
    reports = grade_predictions_jsonl(path, TaskRegistry(tasks.values()))
    by_task = {r.task_id: r for r in reports}
    assert list(by_task) == ["tcga_slidebench", "panda", "nope"]
    for name in ("tcga_slidebench", "panda"):
        t = tasks[name]
        expected = SKLEARN[t.grader.name](t.answers["truth_label"], random_predictions(t, seed=7))
        assert by_task[name].score == pytest.approx(expected)
    assert not by_task["nope"].valid_submission and "unknown task 'nope'" in by_task["nope"].error
    # a list of tasks and a dict work the same; a single task takes its rows and ignores the others
    assert [r.score for r in grade_predictions_jsonl(path, list(tasks.values()))][:2] == [
        r.score for r in reports
    ][:2]
    single = grade_predictions_jsonl(path, tasks["panda"])
    assert len(single) == 1 and single[0].score == by_task["panda"].score


def test_jsonl_numeric_ids_and_rows_without_task(tmp_path: Path, tasks) -> None:
    t = tasks["panda"]  # ids "0".."39": JSON numbers are accepted as ids
    rows = [
        {"benchmark_name": "panda", "benchmark_id": int(i), "prediction": int(p)}
        for i, p in zip(t.answers["benchmark_id"], t.answers["truth_label"], strict=True)
    ]
    rows.append({"benchmark_id": "0", "prediction": 1})
    reports = grade_predictions_jsonl(jsonl(tmp_path / "s.jsonl", rows), tasks)
    assert reports[0].task_id == "panda" and reports[0].score == 1.0
    assert reports[1].task_id == "unknown" and "1 line(s) name no task: line 41" in reports[1].error


def test_grade_file_task_sources(tmp_path: Path, tasks) -> None:
    t = tasks["tcga_expert_vqa"]
    write_submission(
        tmp_path / "tcga_expert_vqa__gpt5.csv", t.answers["benchmark_id"], t.answers["truth_label"]
    )
    assert task_id_from_filename("tcga_expert_vqa__gpt5.csv") == "tcga_expert_vqa"
    assert task_id_from_filename("plain.csv") is None
    (report,) = grade_file(tmp_path / "tcga_expert_vqa__gpt5.csv", tasks)
    assert report.task_id == "tcga_expert_vqa" and report.score == 1.0
    frame = t.answers[["benchmark_id", "truth_label"]].rename(columns={"truth_label": "prediction"})
    frame.assign(task_id="tcga_expert_vqa").to_csv(tmp_path / "cols.csv", index=False)
    assert grade_file(tmp_path / "cols.csv", tasks)[0].score == 1.0
    frame.to_csv(tmp_path / "anonymous.csv", index=False)
    (unknown,) = grade_file(tmp_path / "anonymous.csv", tasks)
    assert not unknown.valid_submission and "rows do not say their task" in unknown.error
    write_submission(tmp_path / "zzz__a.csv", ["1"], [1])
    assert "unknown task 'zzz'" in grade_file(tmp_path / "zzz__a.csv", tasks)[0].error


def test_aggregate_reports(tmp_path: Path, tasks) -> None:
    reports = []
    for name in ("gtex", "tcga"):
        t = tasks[name]
        write_submission(tmp_path / f"{name}.csv", t.answers["benchmark_id"], t.answers["truth_label"])
        reports.append(grade_csv(tmp_path / f"{name}.csv", t))
    preds = random_predictions(tasks["panda"], seed=1)
    write_submission(tmp_path / "p.csv", tasks["panda"].answers["benchmark_id"], preds)
    reports.append(grade_csv(tmp_path / "p.csv", tasks["panda"]))
    reports.append(grade_csv(tmp_path / "missing.csv", tasks["panda"]))
    summary = aggregate_reports(reports)
    panda_score = balanced_accuracy_score(tasks["panda"].answers["truth_label"], preds)
    assert (summary["total_runs"], summary["total_runs_with_submissions"]) == (4, 3)
    assert summary["total_valid_submissions"] == 3
    assert summary["total_gold_medals"] == 2 + (panda_score >= 0.275)
    assert summary["total_medals"] == (
        summary["total_gold_medals"] + summary["total_silver_medals"] + summary["total_bronze_medals"]
    )
    assert summary["mean_score"] == pytest.approx((1.0 + 1.0 + panda_score) / 3)
    assert [row["task_id"] for row in summary["task_reports"]] == ["gtex", "tcga", "panda", "panda"]
    percentiles = [r.leaderboard_percentile for r in reports[:3]]
    assert summary["avg_leaderboard_percentile"] == round(sum(percentiles) / 3, 1)
    assert summary["best_leaderboard_percentile"] == 100.0 and reports[3].submission_exists is False
    json.dumps(summary)
    frame = reports_to_frame(reports)
    assert (
        len(frame) == 4
        and frame["score"].dtype == "float64"
        and str(frame["above_median"].dtype) == "boolean"
    )
    assert frame["medal"].tolist()[:2] == ["gold", "gold"]


def test_tasks_from_items_checks_input(items) -> None:
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['metric_type'\]"):
        tasks_from_items(items.drop(columns="metric_type"))
    bad = items.copy()
    bad.loc[0, "benchmark_name"] = "Image Net"  # a declared benchmark's name, but not one it could have
    with pytest.raises(ValueError, match="benchmark 'Image Net': 'Image Net' is not a benchmark name"):
        tasks_from_items(bad)


def test_registry(tasks) -> None:
    reg = TaskRegistry()
    register_task(tasks["gtex"], to=reg)
    assert get_task("gtex", reg) is tasks["gtex"] and "gtex" in reg and len(reg) == 1
    with pytest.raises(ValueError, match="already registered"):
        register_task(tasks["gtex"], to=reg)
    with pytest.raises(KeyError, match=r"unknown task 'tcga'; registered tasks: \['gtex'\]"):
        get_task("tcga", reg)


def _answers() -> pd.DataFrame:
    return pd.DataFrame({"benchmark_id": ["a", "b", "c"], "truth_label": [1.0, 2.0, 3.0]})


def test_grader_import_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_grading_mod.py").write_text(
        "from giant_assets.grading import InvalidSubmissionError\n"
        "NOT_CALLABLE = 3\n"
        "def max_abs(sub, ans):\n"
        "    if (sub['prediction'] < 0).any():\n"
        "        raise InvalidSubmissionError('negative predictions are not allowed')\n"
        "    return float((sub['prediction'].to_numpy() - ans['truth_label'].to_numpy()).__abs__().max())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    grader = Grader("max_abs", "my_grading_mod:max_abs", is_lower_better=True)
    sub = pd.DataFrame({"benchmark_id": ["a", "b", "c"], "prediction": [1.0, 2.5, 1.0]})
    assert grader(sub, _answers()) == 2.0
    with pytest.raises(
        GradeFnImportError, match="'no_such_mod_xyz:f': cannot import module 'no_such_mod_xyz'"
    ):
        Grader("x", "no_such_mod_xyz:f")
    with pytest.raises(
        GradeFnImportError, match="'my_grading_mod:nope': 'my_grading_mod' has no attribute 'nope'"
    ):
        Grader("x", "my_grading_mod:nope")
    with pytest.raises(
        GradeFnImportError, match="'my_grading_mod:NOT_CALLABLE': 'NOT_CALLABLE' is a int, not callable"
    ):
        Grader("x", "my_grading_mod:NOT_CALLABLE")
    with pytest.raises(GradeFnImportError, match="expected the form 'package.module:function'"):
        Grader("x", "my_grading_mod.max_abs")
    # a grade_fn's InvalidSubmissionError turns into an invalid report, not an exception
    task = Task("toy", "toy", _answers(), grader)
    write_submission(tmp_path / "s.csv", ["a", "b", "c"], [1, -2, 3])
    report = grade_csv(tmp_path / "s.csv", task)
    assert not report.valid_submission and "negative predictions are not allowed" in report.error
    assert report.leaderboard_size == 0 and report.gold_threshold is None and report.above_median is None
    sys.modules.pop("my_grading_mod", None)


def test_grader_rejects_non_finite_scores() -> None:
    grader = Grader("nan", lambda s, a: float("nan"))
    assert grader(pd.DataFrame(), _answers()) is None  # upstream: None for an invalid submission
    with pytest.raises(InvalidSubmissionError, match="grader 'nan' returned nan"):
        grader.score(pd.DataFrame(), _answers())
    assert Grader("third", lambda s, a: 1 / 3)(pd.DataFrame(), _answers()) == 0.33333  # 5 decimals


def test_aggregate_counts_every_medal_and_takes_the_best_percentile_as_the_highest() -> None:
    """Hand-built reports: medals of every kind add up, the best percentile is the highest (a higher
    percentile beats more of the board), the average is over reports with a percentile."""
    reports = [
        TaskReport(
            "a", "a.csv", score=0.9, valid_submission=True, gold_medal=True, leaderboard_percentile=90.0
        ),
        TaskReport(
            "b", "b.csv", score=0.5, valid_submission=True, silver_medal=True, leaderboard_percentile=40.0
        ),
        TaskReport(
            "c", "c.csv", score=0.4, valid_submission=True, bronze_medal=True, leaderboard_percentile=25.0
        ),
        TaskReport("d", "d.csv", valid_submission=False, submission_exists=False),
    ]
    summary = aggregate_reports(reports)
    assert (summary["total_gold_medals"], summary["total_silver_medals"], summary["total_bronze_medals"]) == (
        1,
        1,
        1,
    )
    assert summary["total_medals"] == 3
    assert (summary["best_leaderboard_percentile"], summary["worst_leaderboard_percentile"]) == (90.0, 25.0)
    assert summary["avg_leaderboard_percentile"] == round((90 + 40 + 25) / 3, 1) == 51.7
    assert summary["mean_score"] == pytest.approx((0.9 + 0.5 + 0.4) / 3)


def test_an_invalid_submission_is_neither_above_nor_below_the_median(tmp_path: Path, tasks) -> None:
    """Without a score there is no comparison: ``above_median`` is None (not False), the medal flags False."""
    task = tasks["tcga"]
    assert task.leaderboard is not None
    report = grade_csv(tmp_path / "absent.csv", task)
    assert report.score is None and not report.valid_submission
    assert report.above_median is None
    assert not (report.gold_medal or report.silver_medal or report.bronze_medal or report.any_medal)


def test_an_aligned_metric_scores_a_shuffled_submission_by_id_not_by_position(tasks) -> None:
    """A submission frame in another order than the answers is aligned by id (the validated path is in
    order already; mutation: positional scoring). Oracle: sklearn on the id-aligned pairs."""
    task = tasks["tcga_slidebench"]
    answers = task.answers
    rng = np.random.default_rng(3)
    preds = rng.integers(1, 5, len(answers))
    frame = pd.DataFrame({"benchmark_id": answers["benchmark_id"], "prediction": preds})
    shuffled = frame.sample(frac=1.0, random_state=5).reset_index(drop=True)
    assert not shuffled["benchmark_id"].equals(frame["benchmark_id"])
    expected = accuracy_score(answers["truth_label"], preds)
    assert task.grader.score(shuffled, answers) == pytest.approx(expected)
    with pytest.raises(InvalidSubmissionError, match=r"no prediction for 1 item\(s\)"):
        task.grader.score(shuffled.head(len(answers) - 1), answers)
