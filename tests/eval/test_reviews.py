"""The review store: tokens, blinded units, validation, and durable append-only submissions (revisions
keep history, a cut line loses nothing else, two writers at once lose nothing)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.eval.reviews import (
    ReviewError,
    ReviewFiles,
    add_reviewer,
    append_review,
    blinded,
    build_units,
    latest_reviews,
    load_queue,
    order_for,
    read_reviews,
    reviewer_for,
    validate_review,
    write_queue,
)

REVIEW = {
    "regions": ["relevant", "not relevant"],
    "answer": "correct",
    "supports": "yes",
    "drawn": [],
    "comment": "",
}


def _units(files: ReviewFiles, experiment: str = "exp-a", n: int = 3) -> list[dict]:
    steps = [
        {"index": 0, "action": "thumbnail", "box": [0, 0, 100, 80]},
        {"index": 1, "action": "crop", "box": [1, 2, 30, 40], "text": "<script>alert(1)</script> why"},
        {"index": 2, "action": "crop", "box": [50, 20, 10, 10], "text": "second"},
        {"index": 3, "action": "answer", "text": "2"},
    ]
    runs = pd.DataFrame(
        {
            "config_hash": "abc123",
            "model": "secret-model",
            "agent": "giant",
            "benchmark_name": "tcga",
            "benchmark_id": [str(i) for i in range(n)],
            "run_index": 0,
            "truth_label": 2,
            "correct": True,
            "answer_text": "The answer is 2",
            "trajectory_json": json.dumps(steps),
        }
    )
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga",
            "benchmark_id": [str(i) for i in range(n)],
            "prompt": "What is it?",
            "wsi_path": "/x.svs",
            "width": 100,
            "height": 80,
        }  # fmt: skip
    )
    return build_units(files.secret(), experiment, runs, items)


def test_units_are_blinded_and_ids_do_not_reveal_the_experiment(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    a, b = _units(files, "exp-a"), _units(files, "exp-b")
    assert {u["unit"] for u in a}.isdisjoint(u["unit"] for u in b)  # the same item under two experiments
    shown = json.dumps([blinded(u) for u in a])
    for hidden in ("exp-a", "abc123", "secret-model", "truth", "correct"):
        assert hidden not in shown
    assert blinded(a[0])["regions"][0] == {
        "box": [1, 2, 30, 40],
        "step": 1,
        "reason": "<script>alert(1)</script> why",
    }
    assert write_queue(files, a) == 3 and write_queue(files, a + b) == 6 and len(load_queue(files)) == 6


def test_each_reviewer_has_an_own_stable_order(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    units = _units(files, n=12)
    one, two = order_for(files, "ana", units), order_for(files, "ben", units)
    assert [u["unit"] for u in one] == [u["unit"] for u in order_for(files, "ana", list(reversed(units)))]
    assert [u["unit"] for u in one] != [u["unit"] for u in two]
    assert sorted(u["unit"] for u in one) == sorted(u["unit"] for u in units)


def test_tokens(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    ana, ben = add_reviewer(files, "ana"), add_reviewer(files, "ben")
    assert reviewer_for(files, ana) == "ana" and reviewer_for(files, ben) == "ben"
    assert reviewer_for(files, ana + "x") is None and reviewer_for(files, "") is None
    assert ana not in files.reviewers.read_text()  # only its hash is stored
    with pytest.raises(ReviewError, match="reviewer name"):
        add_reviewer(files, "../evil")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"regions": ["relevant"]}, r"'regions': one rating per region \(2\)"),
        ({"regions": ["relevant", "maybe"]}, r"'regions\[1\]'.*'maybe'"),
        ({"answer": "right"}, r"'answer'"),
        ({"supports": True}, r"'supports'"),
        ({"drawn": [[0, 0, 0, 5]]}, r"'drawn\[0\]': width and height must be > 0, got 0 x 5"),
        ({"drawn": [[90, 0, 20, 5]]}, r"'drawn\[0\]': reaches outside the slide \(100 x 80\)"),
        ({"drawn": [[0, 70, 5, 11]]}, r"'drawn\[0\]': reaches outside the slide \(100 x 80\)"),  # bottom
        ({"drawn": [[1, 1, 2, 2], [float("nan"), 0, 5, 5]]}, r"'drawn\[1\]': x = nan: not a finite number"),
        ({"drawn": [[0, 0, 5, float("inf")]]}, r"'drawn\[0\]': h = inf: not a finite number"),
        ({"drawn": [[1e308, 0, 10, 10]]}, r"'drawn\[0\]': x = 1e\+308: beyond"),
        ({"drawn": [[10**5000, 0, 10, 10]]}, r"'drawn\[0\]': x = an integer of about 5000 digits"),
        ({"drawn": [[1, 2, 3]]}, r"'drawn\[0\]': a level-0 box \[x, y, w, h\] of four numbers"),
        ({"drawn": [[1, True, 3, 4]]}, r"'drawn\[0\]': y must be a number, got True"),
        ({"comment": "x" * 5000}, r"'comment'"),
    ],
)
def test_a_bad_submission_names_its_field(tmp_path: Path, change: dict, message: str) -> None:
    unit = _units(ReviewFiles(tmp_path))[0]
    with pytest.raises(ReviewError, match=message):
        validate_review(unit, REVIEW | change)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e200])
def test_without_a_slide_size_a_drawn_region_must_still_be_finite(tmp_path: Path, bad: float) -> None:
    unit = _units(ReviewFiles(tmp_path))[0]
    unit["shown"]["slide_size"] = None  # the items did not know the slide's size
    assert validate_review(unit, REVIEW | {"drawn": [[10**6, 10**6, 5, 5]]})["drawn"] == [
        [1e6, 1e6, 5.0, 5.0]
    ]
    for box in ([bad, 0, 5, 5], [0, 0, bad, 5]):
        with pytest.raises(ReviewError, match=r"field 'drawn\[0\]': [xw] = "):
            validate_review(unit, REVIEW | {"drawn": [box]})


def test_unit_ids_are_keyed_by_the_reviews_secret(tmp_path: Path) -> None:
    one, two = ReviewFiles(tmp_path / "one"), ReviewFiles(tmp_path / "two")
    assert one.secret() != two.secret()
    ids_one, ids_two = {u["unit"] for u in _units(one)}, {u["unit"] for u in _units(two)}
    assert len(ids_one) == 3 and ids_one.isdisjoint(ids_two)
    assert ids_one == {u["unit"] for u in _units(one)}  # stable under one secret


def test_revisions_keep_history_and_the_latest_counts(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    append_review(files, "ana", "u1", REVIEW)
    append_review(files, "ana", "u1", REVIEW | {"answer": "wrong"})
    append_review(files, "ben", "u1", REVIEW)
    records, skipped = read_reviews(files)
    assert skipped == 0 and len(records) == 3
    latest = latest_reviews(records)
    assert latest[("ana", "u1")]["answer"] == "wrong" and latest[("ben", "u1")]["answer"] == "correct"


def test_a_line_cut_by_a_crash_loses_only_itself(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    append_review(files, "ana", "u1", REVIEW)
    with open(files.submitted("ana"), "ab") as fh:
        fh.write(b'{"reviewer": "ana", "unit": "u2", "answ')  # the process died mid-write
    append_review(files, "ana", "u3", REVIEW)
    records, skipped = read_reviews(files)
    assert [r["unit"] for r in records] == ["u1", "u3"] and skipped == 1


def test_a_hand_edited_line_that_is_no_submission_is_skipped(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    append_review(files, "ana", "u1", REVIEW)
    with open(files.submitted("ana"), "ab") as fh:
        fh.write(
            b"[1, 2]\n" + b'{"unit": "u2"}\n' + b'{"n": ' + b"9" * 5000 + b"}\n" + b"[" * 100_000 + b"\n"
        )
    append_review(files, "ana", "u3", REVIEW)
    records, skipped = read_reviews(files)
    assert [r["unit"] for r in records] == ["u1", "u3"] and skipped == 4


def _writer(root: str, name: str, n: int) -> None:
    files = ReviewFiles(Path(root))
    for i in range(n):
        append_review(files, name, f"u{i}", REVIEW | {"comment": f"{name} {i} " + "x" * 3000})


def test_two_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), "ana", 60)) for _ in range(2)]
    procs.append(ctx.Process(target=_writer, args=(str(tmp_path), "ben", 60)))
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    records, skipped = read_reviews(ReviewFiles(tmp_path))
    assert skipped == 0 and len(records) == 180
    assert sum(r["reviewer"] == "ana" for r in records) == 120


def test_a_path_review_run_shows_its_reported_regions(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path)
    plain = _units(files, n=2)
    reported = [{"benchmark_id": "1", "run_index": 0, "box": [5, 6, 7, 8], "finding": "mitoses"}]
    steps = [{"index": 1, "action": "crop", "box": [1, 2, 30, 40], "text": "why"}]
    runs = pd.DataFrame(
        {
            "config_hash": "abc123",
            "benchmark_name": "tcga",
            "benchmark_id": ["0", "1"],
            "run_index": 0,
            "truth_label": 2,
            "correct": True,
            "answer_text": "2",
            "trajectory_json": json.dumps(steps),
        }  # fmt: skip
    )
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga",
            "benchmark_id": ["0", "1"],
            "prompt": "q",
            "wsi_path": "",
            "width": 100,
            "height": 80,
        }  # fmt: skip
    )
    units = build_units(files.secret(), "exp-a", runs, items, reported=reported)
    assert [u["unit"] for u in units] == [u["unit"] for u in plain]  # the same runs, the same ids
    assert units[0]["shown"]["regions"] == [{"box": [1, 2, 30, 40], "step": 1, "reason": "why"}]
    assert units[1]["shown"]["regions"] == [{"box": [5, 6, 7, 8], "step": None, "reason": "mitoses"}]
    hostile = [
        {"benchmark_id": "1", "run_index": 0, "box": [1, 2, 3], "finding": "short"},
        {"benchmark_id": "1", "run_index": 0, "box": [1e308, 0, 10, 10], "finding": "far"},
        {"benchmark_id": "1", "run_index": 0, "box": None, "finding": "null"},
        {"benchmark_id": "1", "run_index": 0, "finding": "missing"},
        {"benchmark_id": "1", "run_index": 0, "box": [90, 70, 10, 11], "finding": "below the bottom"},
        {"benchmark_id": "1", "run_index": "0", "box": [5, 6, 7, 8], "finding": "text run"},
        *reported,
    ]
    refused: list[str] = []
    units = build_units(files.secret(), "exp-a", runs, items, reported=hostile, refused=refused)
    assert units[1]["shown"]["regions"] == [{"box": [5, 6, 7, 8], "step": None, "reason": "mitoses"}]
    assert refused == [
        "reported region 0 (item 1 run 0): box: a level-0 box [x, y, w, h] of four numbers is needed, "
        "got [1, 2, 3]",
        "reported region 1 (item 1 run 0): box: x = 1e+308: beyond +-1e+150",
        "reported region 2 (item 1 run 0): box: a level-0 box [x, y, w, h] of four numbers is needed, "
        "got None",
        "reported region 3 (item 1 run 0): box: a level-0 box [x, y, w, h] of four numbers is needed, "
        "got None",
        "reported region 4 (item 1 run 0): box: reaches outside the slide (100 x 80)",
        "reported region 5 (item 1): run_index must be a run number, got '0'",
    ]
    with pytest.raises(ReviewError, match=r"reported region 0 \(item 1 run 0\): box"):
        build_units(files.secret(), "exp-a", runs, items, reported=hostile)  # nobody to tell: refused
