"""``giant-review`` as a user runs it over a real Parquet store: add a reviewer, prepare a queue mixing
two experiments, serve it on loopback (stops on SIGTERM); a missing cell is one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd

from giant_assets.core.storage import ParquetStore
from giant_assets.eval.reviews import ReviewFiles, append_review, load_queue
from giant_assets.report.review.cli import main

COMMAND = [sys.executable, "-m", "giant_assets.report.review.cli"]


SLIDE = "tcga/TCGA-05-4244-01Z-00-DX1.svs"  # 4096 x 3072


def _store(data: Path, slide: Path) -> None:
    store = ParquetStore(data)
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga",
            "benchmark_id": ["0", "1"],
            "prompt": "q?",
            "wsi_path": str(slide),
            "width": 4096,
            "height": 3072,
        }  # fmt: skip
    )
    store.write("benchmark_items", items)
    steps = json.dumps([{"index": 1, "action": "crop", "box": [1, 2, 3, 4], "text": "why"}])
    for experiment in ("exp-a", "exp-b"):
        runs = pd.DataFrame(
            {
                "config_hash": f"h-{experiment}",
                "model": "m",
                "agent": "giant",
                "benchmark_name": "tcga",
                "benchmark_id": ["0", "1"],
                "run_index": 0,
                "truth_label": 1,
                "correct": True,
                "answer_text": "1",
                "trajectory_json": steps,
            }  # fmt: skip
        )
        store.write("predictions", runs, f"{experiment}/tcga")


def test_add_prepare_and_serve(tmp_path: Path, sample_wsi_root: Path, capsys) -> None:
    data = tmp_path / "data"
    _store(data, sample_wsi_root / SLIDE)
    args = ["--data-dir", str(data)]
    assert main([*args, "add-reviewer", "ana"]) == 0
    token = capsys.readouterr().out.split()[2]
    assert (
        main([*args, "prepare", "--experiment", "exp-a", "--experiment", "exp-b", "--benchmark", "tcga"]) == 0
    )
    assert capsys.readouterr().out == "added 4 run(s) of exp-a, exp-b on tcga; the queue holds 4\n"
    assert {u["experiment"] for u in load_queue(ReviewFiles(data / "reviews"))} == {"exp-a", "exp-b"}
    proc = subprocess.Popen(
        [*COMMAND, *args, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("review: http://127.0.0.1:"), line
        request = urllib.request.Request(
            line.split()[1] + "api/queue", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            listing = json.loads(response.read())
        assert listing["reviewer"] == "ana" and len(listing["units"]) == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_a_missing_cell_is_one_line(tmp_path: Path, sample_wsi_root: Path, capsys) -> None:
    data = tmp_path / "data"
    _store(data, sample_wsi_root / SLIDE)
    assert main(["--data-dir", str(data), "prepare", "--experiment", "nope", "--benchmark", "tcga"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no predictions for nope/tcga" in err


def test_prepare_shows_a_path_review_runs_reported_regions(
    tmp_path: Path, sample_wsi_root: Path, capsys
) -> None:
    data = tmp_path / "data"
    _store(data, sample_wsi_root / SLIDE)
    reported = tmp_path / "reported.json"
    region = {
        "experiment": "exp-b",
        "benchmark_id": "1",
        "run_index": 0,
        "box": [10, 20, 30, 40],
        "finding": "f",
    }
    reported.write_text(json.dumps([region]))
    args = ["--data-dir", str(data), "prepare", "--benchmark", "tcga", "--reported", str(reported)]
    assert main([*args, "--experiment", "exp-a", "--experiment", "exp-b"]) == 0
    shown = {
        (u["experiment"], u["benchmark_id"]): u["shown"]["regions"]
        for u in load_queue(ReviewFiles(data / "reviews"))
    }
    assert shown[("exp-b", "1")] == [{"box": [10, 20, 30, 40], "step": None, "reason": "f"}]
    assert shown[("exp-a", "1")] == [
        {"box": [1, 2, 3, 4], "step": 1, "reason": "why"}
    ]  # another experiment's run
    reported.write_text("{")
    capsys.readouterr()
    assert main([*args, "--experiment", "exp-a"]) == 2
    assert capsys.readouterr().err.startswith(f"giant-review: error: {reported}: invalid JSON")


def test_prepare_refuses_bad_reported_regions_one_by_one(
    tmp_path: Path, sample_wsi_root: Path, capsys
) -> None:
    data = tmp_path / "data"
    _store(data, sample_wsi_root / SLIDE)
    reported = tmp_path / "reported.json"
    regions = [
        {"benchmark_id": "1", "run_index": 0, "box": [1, 2, 3], "finding": "three numbers"},
        {"benchmark_id": "1", "run_index": 0, "box": [1e308, 0, 10, 10], "finding": "far away"},
        {"benchmark_id": "1", "run_index": 0, "box": None, "finding": "null"},
        {"benchmark_id": "0", "run_index": 0, "finding": "no box"},
        {"benchmark_id": "1", "run_index": 0, "box": [10, 20, 30, 40], "finding": "kept"},
    ]
    reported.write_text(json.dumps(regions))
    args = ["--data-dir", str(data), "prepare", "--benchmark", "tcga", "--reported", str(reported)]
    assert main([*args, "--experiment", "exp-a"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "added 2 run(s) of exp-a on tcga; the queue holds 2"
    assert out[1] == "refused 4 reported region(s) (left out, the rest kept):"
    assert out[2:] == [
        "  exp-a: reported region 0 (item 1 run 0): box: a level-0 box [x, y, w, h] of four numbers is "
        "needed, got [1, 2, 3]",
        "  exp-a: reported region 1 (item 1 run 0): box: x = 1e+308: beyond +-1e+150",
        "  exp-a: reported region 2 (item 1 run 0): box: a level-0 box [x, y, w, h] of four numbers is "
        "needed, got None",
        "  exp-a: reported region 3 (item 0 run 0): box: a level-0 box [x, y, w, h] of four numbers is "
        "needed, got None",
    ]
    shown = {u["benchmark_id"]: u["shown"]["regions"] for u in load_queue(ReviewFiles(data / "reviews"))}
    assert shown["1"] == [{"box": [10, 20, 30, 40], "step": None, "reason": "kept"}]
    assert shown["0"] == [
        {"box": [1, 2, 3, 4], "step": 1, "reason": "why"}
    ]  # its own crops: none valid given


def test_prepare_leaves_out_runs_that_cannot_be_reviewed(
    tmp_path: Path, sample_wsi_root: Path, capsys
) -> None:
    """No slide file, no answer, no region (a thumbnail is none): counted and left out; patches are kept."""
    data = tmp_path / "data"
    _store(data, sample_wsi_root / SLIDE)
    store = ParquetStore(data)
    items = store.read("benchmark_items")
    items = pd.concat([items, items.assign(benchmark_id=["2", "3"])], ignore_index=True)
    items.loc[items["benchmark_id"] == "2", "wsi_path"] = str(tmp_path / "gone.svs")
    store.write("benchmark_items", items)
    crop = {"index": 0, "action": "crop", "box": [1, 2, 3, 4], "text": "why"}
    patch = {"index": 0, "action": "patch", "box": [100, 200, 256, 256], "text": "2"}
    thumb = {"index": 0, "action": "answer", "box": [0, 0, 4096, 3072], "text": "1"}
    rows = [("0", "1", [patch]), ("1", "", [crop]), ("2", "1", [crop]), ("3", "1", [thumb])]
    runs = pd.DataFrame(
        {
            "config_hash": "h",
            "model": "m",
            "agent": "patch",
            "benchmark_name": "tcga",
            "benchmark_id": [r[0] for r in rows],
            "run_index": 0,
            "truth_label": 1,
            "correct": True,
            "answer_text": [r[1] for r in rows],
            "trajectory_json": [json.dumps(r[2]) for r in rows],
        }  # fmt: skip
    )
    store.write("predictions", runs, "exp-p/tcga")
    assert main(["--data-dir", str(data), "prepare", "--experiment", "exp-p", "--benchmark", "tcga"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "added 1 run(s) of exp-p on tcga; the queue holds 1",
        "left out 3 run(s) that cannot be reviewed: 1 no answer, 1 no region to rate, 1 no slide file",
    ]
    (unit,) = load_queue(ReviewFiles(data / "reviews"))
    assert unit["benchmark_id"] == "0"
    assert unit["shown"]["regions"] == [{"box": [100, 200, 256, 256], "step": 0, "reason": "2"}]


def test_prepare_names_the_old_demo_reviewers_files_left_in_the_real_review(
    tmp_path: Path, sample_wsi_root: Path, capsys
) -> None:
    """A data folder from before reviews-demo/: prepare (and serve) say which files hold the demo's scripted
    reviews and that they are left out; a pathologist's own review file is not named."""
    data = tmp_path / "data"
    _store(data, sample_wsi_root / SLIDE)
    args = ["--data-dir", str(data), "prepare", "--experiment", "exp-a", "--benchmark", "tcga"]
    assert main(args) == 0
    assert "note:" not in capsys.readouterr().out
    files = ReviewFiles(data / "reviews")
    unit = load_queue(files)[0]["unit"]
    review = {"regions": ["relevant"], "answer": "correct", "supports": "yes", "drawn": []}
    append_review(files, "demo-a", unit, review | {"comment": "scripted demo reviewer demo-a"})
    append_review(files, "demo-b", unit, review | {"comment": "a pathologist named demo-b"})
    assert main(args) == 0
    note = capsys.readouterr().out.splitlines()[-1]
    assert note.startswith(f"note: {files.submitted('demo-a')} hold the demo's scripted reviews")
    assert "demo-b" not in note and "pathologist_reviews leaves them out" in note
