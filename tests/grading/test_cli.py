"""giant-grade: real subprocesses for the main paths, in-process runs for the usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from giant_assets.core.storage import ParquetStore
from giant_assets.grading.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, default_report_path, run, safe_stem
from giant_assets.multipathqa.sample import sample_csv_path
from tests.grading.conftest import make_items, write_submission

GIANT_GRADE = Path(sys.executable).parent / "giant-grade"


def giant_grade(args: list[str], cwd: Path, data_dir: Path) -> subprocess.CompletedProcess:
    assert GIANT_GRADE.exists(), "console script missing: run `.venv/bin/pip install -e . --no-deps`"
    env = {**os.environ, "GIANT_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [str(GIANT_GRADE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path, pd.DataFrame]:
    """(work dir, data dir holding a benchmark_items table, items)."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    items = make_items(n_per=30, seed=5)
    ParquetStore(data).write("benchmark_items", items)
    return work, data, items


def half_right(items: pd.DataFrame, benchmark: str) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    rows = items[items["benchmark_name"] == benchmark]
    truth = rows["truth_label"].to_numpy()
    preds = np.where(np.arange(len(truth)) % 2 == 0, truth, np.where(truth == 1, 2, 1))
    return rows["benchmark_id"], truth, preds


def test_graded_submission_subprocess(project) -> None:
    work, data, items = project
    ids, truth, preds = half_right(items, "gtex")
    write_submission(work / "gtex_run.csv", ids, preds)
    before = files_under(work.parent)
    proc = giant_grade(["gtex_run.csv", "--task", "gtex"], work, data)
    assert proc.returncode == EXIT_OK, proc.stderr
    expected = balanced_accuracy_score(truth, preds)
    assert f"Score: {100 * expected:.1f} %" in proc.stdout
    assert "Medal: none" in proc.stdout and "Human baseline: none available" in proc.stdout
    assert "TITAN (zero-shot)" in proc.stdout and "▶ this run" in proc.stdout
    new = files_under(work.parent) - before
    (report_path,) = [p for p in new if p.suffix == ".json"]
    assert report_path.parent == data / "grades" and f"Report written to {report_path}" in proc.stdout
    payload = json.loads(report_path.read_text())
    assert payload["reports"][0]["score"] == pytest.approx(expected)
    assert payload["summary"]["total_valid_submissions"] == 1


def test_invalid_submission_subprocess_exit_1(project) -> None:
    work, data, items = project
    ids, truth, _ = half_right(items, "tcga_slidebench")
    preds = truth.astype(object)
    preds[3] = 9
    write_submission(work / "s.csv", ids, preds)
    proc = giant_grade(["s.csv", "--task", "tcga_slidebench"], work, data)
    assert proc.returncode == EXIT_INVALID
    assert "INVALID submission" in proc.stdout
    assert (
        f"row 5 (benchmark_id='{ids.iloc[3]}'): prediction '9' is out of range; allowed: an option index 1..4"
        in proc.stdout
    )
    (report_path,) = (data / "grades").glob("*.json")
    assert json.loads(report_path.read_text())["reports"][0]["valid_submission"] is False


def test_hostile_submission_name_never_writes_outside_data_dir(project) -> None:
    work, data, items = project
    deep = work / "a" / "b"
    deep.mkdir(parents=True)
    ids, _, preds = half_right(items, "panda")
    write_submission(work / "x.csv", ids, preds)
    weird = work / "..; rm -rf ~ $(id) ..csv"
    write_submission(weird, ids, preds)
    outside_before = files_under(work.parent) - files_under(data)
    for name in ("../../x.csv", f"../../{weird.name}"):
        proc = giant_grade([name, "--task", "panda"], deep, data)
        assert proc.returncode == EXIT_OK, proc.stderr
    assert (
        files_under(work.parent) - files_under(data) == outside_before
    )  # nothing new outside GIANT_DATA_DIR
    written = sorted(p.name for p in (data / "grades").iterdir())
    assert len(written) == 2 and all(p.startswith(("x__panda__", "rm_-rf_id__panda__")) for p in written), (
        written
    )


def test_jsonl_against_raw_multipathqa_csv_subprocess(tmp_path: Path) -> None:
    from giant_assets.multipathqa.loading import parse_items, read_csv_strings

    items, _ = parse_items(read_csv_strings(sample_csv_path()), "sample")
    rows = [
        {"task_id": r.benchmark_name, "benchmark_id": r.benchmark_id, "prediction": int(r.truth_label)}
        for r in items.itertuples()
    ]
    (tmp_path / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "elsewhere" / "report.json"
    proc = giant_grade(
        ["run.jsonl", "--items", str(sample_csv_path()), "--out", str(out)], tmp_path, tmp_path / "data"
    )
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    payload = json.loads(out.read_text())  # --out goes exactly where the user said
    assert payload["summary"]["total_runs"] == 5 and payload["summary"]["total_valid_submissions"] == 5
    assert {r["score"] for r in payload["reports"]} == {1.0}
    assert "5/5 valid" in proc.stdout
    assert not (tmp_path / "data" / "grades").exists()


def test_usage_errors_exit_2(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture) -> None:
    write_submission(tmp_path / "s.csv", ["a"], [1])
    assert run([str(tmp_path / "s.csv"), "--task", "gtex"]) == EXIT_USAGE  # no benchmark_items yet
    assert "no 'benchmark_items' table under" in capsys.readouterr().err
    ParquetStore(data_dir).write("benchmark_items", make_items(n_per=5))
    assert run([str(tmp_path / "s.csv"), "--task", "imagenet"]) == EXIT_USAGE
    assert "unknown task 'imagenet'; available: ['gtex', 'panda', 'tcga'" in capsys.readouterr().err
    assert run([str(tmp_path / "missing.csv"), "--task", "gtex"]) == EXIT_USAGE
    assert "submission file not found" in capsys.readouterr().err
    assert run([str(tmp_path / "s.csv"), "--items", str(tmp_path / "nope.parquet")]) == EXIT_USAGE
    assert "items file not found" in capsys.readouterr().err
    (tmp_path / "t.yaml").write_text("id: t\nanswers: a.csv\n")
    assert run([str(tmp_path / "s.csv"), "--task-file", str(tmp_path / "t.yaml")]) == EXIT_USAGE
    assert "give exactly one of 'metric'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        run([])
    assert exc.value.code == EXIT_USAGE


def test_user_task_file_needs_no_items(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture) -> None:
    pd.DataFrame({"benchmark_id": ["a", "b", "c", "d"], "truth_label": [0, 1, 1, 0]}).to_csv(
        tmp_path / "ans.csv", index=False
    )
    (tmp_path / "t.yaml").write_text("id: toy\nanswers: ans.csv\nmetric: accuracy\nlabels: [0, 1]\n")
    write_submission(tmp_path / "s.csv", ["a", "b", "c", "d"], [0, 1, 0, 0])
    code = run([str(tmp_path / "s.csv"), "--task", "toy", "--task-file", str(tmp_path / "t.yaml")])
    out = capsys.readouterr().out
    assert code == EXIT_OK and f"Score: {100 * accuracy_score([0, 1, 1, 0], [0, 1, 0, 0]):.1f} %" in out
    assert "Leaderboard: none for this task" in out
    assert len(list((data_dir / "grades").glob("s__toy__*.json"))) == 1


@pytest.mark.parametrize("name", ["../../x.csv", "..", "/etc/passwd", "a\\..\\b.csv", "...csv", "é 名.csv"])
def test_default_report_path_stays_in_grades(tmp_path: Path, name: str) -> None:
    path = default_report_path(tmp_path, Path(name), "../gtex")
    assert path.parent == (tmp_path / "grades").resolve()
    assert safe_stem(name) and not safe_stem(name).startswith(".")
