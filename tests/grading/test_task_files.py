"""User tasks from YAML/JSON descriptions: metrics, import-string graders, leaderboards, human baselines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score, root_mean_squared_error

from giant_assets.grading import TaskDefinitionError, grade_csv, load_task_file, validate_submission
from tests.grading.conftest import write_submission


def regression_task(folder: Path) -> Path:
    """A lower-is-better RMSE task with a 10-team leaderboard and 5 human baselines."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"drug": [f"d{i}" for i in range(30)], "y": rng.normal(size=30)}).to_csv(
        folder / "answers.csv", index=False
    )
    pd.DataFrame({"team": list("abcdefghij"), "score": np.linspace(0.1, 1.0, 10)}).to_csv(
        folder / "board.csv", index=False
    )
    pd.DataFrame({"who": list("vwxyz"), "score": [0.2, 0.4, 0.6, 0.8, 1.0]}).to_csv(
        folder / "humans.csv", index=False
    )
    (folder / "task.yaml").write_text(
        "id: caco2\nname: Caco-2\nanswers: answers.csv\nid_column: drug\ntarget_column: y\n"
        "metric: rmse\nleaderboard: board.csv\nhuman_baselines: humans.csv\n"
    )
    return folder / "task.yaml"


def test_yaml_regression_task_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "def").mkdir()
    task = load_task_file(regression_task(tmp_path / "def"))  # paths resolve next to the YAML file
    assert task.is_lower_better and task.grader.name == "rmse" and not task.score_as_percent
    truth = task.answers["y"].to_numpy()
    preds = truth + np.random.default_rng(1).normal(scale=0.3, size=truth.size)
    write_submission(tmp_path / "s.csv", task.answers["drug"], preds, header=("drug", "prediction"))
    report = grade_csv(tmp_path / "s.csv", task)
    expected = root_mean_squared_error(truth, preds)
    assert report.valid_submission and report.score == round(expected, 5)  # upstream rounds to 5 decimals
    assert report.is_lower_better
    # 10 teams → gold pos 1 (0.1), silver pos 2 (0.2), bronze pos 4 (0.4): lower is better
    assert (report.gold_threshold, report.silver_threshold, report.bronze_threshold) == (0.1, 0.2, 0.4)
    assert report.bronze_medal == (0.2 < expected <= 0.4)
    humans = [0.2, 0.4, 0.6, 0.8, 1.0]
    assert report.beats_human == (expected < 0.6)
    assert report.human_percentile == round(100 * sum(h >= report.score for h in humans) / len(humans), 1)


def test_json_task_with_import_string_and_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "task_mod_auc.py").write_text(
        "from sklearn.metrics import roc_auc_score\n"
        "def auc(sub, ans):\n"
        "    merged = ans.merge(sub, on='id')\n"
        "    return roc_auc_score(merged['label'], merged['prediction'])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pd.DataFrame({"id": ["a", "b", "c", "d"], "label": [0, 1, 1, 0]}).to_csv(
        tmp_path / "ans.csv", index=False
    )
    (tmp_path / "t.json").write_text(
        json.dumps(
            {
                "id": "auc_task",
                "answers": "ans.csv",
                "id_column": "id",
                "target_column": "label",
                "grade_fn": "task_mod_auc:auc",
            }
        )
    )
    task = load_task_file(tmp_path / "t.json")
    assert task.allowed_labels is None and not task.is_lower_better
    write_submission(
        tmp_path / "s.csv", ["d", "c", "b", "a"], [0.2, 0.9, 0.4, 0.3], header=("id", "prediction")
    )
    report = grade_csv(tmp_path / "s.csv", task)
    assert report.score == round(roc_auc_score([0, 1, 1, 0], [0.3, 0.4, 0.9, 0.2]), 5)
    assert report.leaderboard_size == 0 and report.beats_human is None
    write_submission(
        tmp_path / "bad.csv", ["a", "b", "c", "d"], [0.1, "inf", 0.5, 0.5], header=("id", "prediction")
    )
    ok, message = validate_submission(tmp_path / "bad.csv", task)
    assert (
        not ok
        and "row 3 (id='b'): prediction 'inf' is not a finite number; allowed: any finite number" in message
    )
    sys.modules.pop("task_mod_auc", None)


def test_classification_labels(tmp_path: Path) -> None:
    pd.DataFrame({"benchmark_id": ["a", "b", "c"], "truth_label": [0, 2, 1]}).to_csv(
        tmp_path / "a.csv", index=False
    )
    (tmp_path / "t.yaml").write_text("id: cls\nanswers: a.csv\nmetric: accuracy\nlabels: [0, 1, 2]\n")
    task = load_task_file(tmp_path / "t.yaml")
    assert task.score_as_percent and task.allowed_labels == (0, 1, 2)
    write_submission(tmp_path / "s.csv", ["a", "b", "c"], [0, 3, 1])
    ok, message = validate_submission(tmp_path / "s.csv", task)
    assert (
        not ok
        and "row 3 (benchmark_id='b'): prediction '3' is out of range; allowed: an integer 0..2" in message
    )
    write_submission(tmp_path / "s.csv", ["a", "b", "c"], [0, 1, 1])
    assert grade_csv(tmp_path / "s.csv", task).score == 0.66667


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id: t\nanswers: a.csv\nmetric: rmse\nmetirc: x\n", r"unknown key\(s\) \['metirc'\]"),
        ("answers: a.csv\nmetric: rmse\n", "missing required key 'id'"),
        ("id: t\nanswers: a.csv\n", "give exactly one of 'metric'"),
        ("id: t\nanswers: a.csv\nmetric: rmse\ngrade_fn: m:f\n", "give exactly one of 'metric'"),
        ("id: ../t\nanswers: a.csv\nmetric: rmse\n", "id '../t' must use only"),
        ("id: t\nanswers: nope.csv\nmetric: rmse\n", "answers CSV not found: .*nope.csv"),
        ("id: t\nanswers: a.csv\nmetric: mse\n", "unknown metric 'mse'"),
        ("id: t\nanswers: a.csv\ngrade_fn: no_such_module_q:f\n", "cannot import module 'no_such_module_q'"),
        ("id: t\nanswers: a.csv\nmetric: rmse\ntarget_column: z\n", r"missing column\(s\) \['z'\]"),
        ("id: t\nanswers: a.csv\nmetric: rmse\nleaderboard: lb.csv\n", "leaderboard CSV not found"),
        ("id: t\nanswers: a.csv\nmetric: rmse\nlabels: [a]\n", "'labels' must be a list of integers"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_bad_descriptions_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    pd.DataFrame({"benchmark_id": ["a"], "truth_label": [1.0]}).to_csv(tmp_path / "a.csv", index=False)
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(TaskDefinitionError, match=message):
        load_task_file(tmp_path / "t.yaml")


def test_non_numeric_target_names_rows(tmp_path: Path) -> None:
    pd.DataFrame({"benchmark_id": ["a", "b"], "truth_label": [1.5, "x"]}).to_csv(
        tmp_path / "a.csv", index=False
    )
    (tmp_path / "t.yaml").write_text("id: t\nanswers: a.csv\nmetric: rmse\n")
    with pytest.raises(TaskDefinitionError, match=r"'truth_label' is not a number in row\(s\) \[3\]"):
        load_task_file(tmp_path / "t.yaml")
