"""One definition of a viewed region (``runs.viewed``) for every reader: a patch baseline's patches are
viewed regions in the QuPath export (checked against QuPath 0.5's own layout of the same annotation) and
in the ROI evaluation (IoU computed here with shapely), in step order, and a step whose box is no box is
none, alike in the trajectory dicts and in the ``trajectory_steps`` table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import shapely

from giant_assets.eval.qupath import CROP_CLASS, CROP_COLOR, export_qupath
from giant_assets.eval.reviews import build_units
from giant_assets.eval.roi import score_trajectories
from giant_assets.geometry.qupath import read_qupath_objects
from giant_assets.runs.records import steps_frame
from giant_assets.runs.viewed import viewed_rows, viewed_steps
from tests.support.qupath_layouts import Obj, feature, rect

SLIDE = "TCGA-EA-A3HT-01Z-00-DX1.svs"
PATCHES = [[100, 200, 224, 224], [1000, 1000, 224, 224], [3000, 2000, 224, 224]]
REFERENCE = [1050, 1100, 300, 200]  # x, y, w, h: overlaps the second patch only


def patch_run(benchmark_id: str = "0", run_index: int = 0) -> dict:
    """A patch baseline's run as ``PatchAgent`` records it: one ``patch`` step per patch (its label as
    text), one with a degenerate box (not a region), then the voted answer."""
    boxes = [PATCHES[0], [5, 5, 0, 224], *PATCHES[1:]]
    steps = [
        {"index": i, "action": "patch", "box": box, "level": 0, "image_size": [224, 224], "text": str(i)}
        for i, box in enumerate(boxes)
    ]
    steps.append({"index": 4, "action": "answer", "text": '{"answer": 2}; majority of 4 patch labels'})
    return {
        "config_hash": "h",
        "benchmark_name": "tcga",
        "benchmark_id": benchmark_id,
        "run_index": run_index,
        "trajectory_json": json.dumps(steps),
    }


def test_a_patch_baselines_patches_are_in_the_qupath_export_as_qupath_writes_annotations(
    tmp_path: Path,
) -> None:
    items = pd.DataFrame({"benchmark_id": ["0"], "image_path": [f"tcga/{SLIDE}"]})
    (path,) = export_qupath(pd.DataFrame([patch_run()]), items, tmp_path)
    assert path.name == "TCGA-EA-A3HT-01Z-00-DX1.geojson"
    features = json.loads(path.read_text(encoding="utf-8"))["features"]
    assert len(features) == 3  # the degenerate patch is no region
    for step, (x, y, w, h), got in zip([0, 2, 3], PATCHES, features, strict=True):
        name = f"0 run 0 step {step}"
        metadata = {"benchmark_id": "0", "run": "0", "step": str(step), "level": "0", "reason": str(step)}
        qupath = feature(
            Obj("annotation", rect(x, y, w, h), (CROP_CLASS,), CROP_COLOR, name=name, locked=True,
                measurements={"run": 0.0, "step": float(step)}, metadata=metadata),
            "0.5",
        )  # fmt: skip
        assert got["type"] == "Feature" and got["geometry"] == qupath["geometry"]
        # what QuPath 0.5 writes is there as it writes it; the rest are properties QuPath drops on import
        assert {k: got["properties"][k] for k in qupath["properties"]} == qupath["properties"]
    read = read_qupath_objects(path)
    assert [o.classification for o in read] == [CROP_CLASS] * 3
    assert [shapely.normalize(o.geometry).wkt for o in read] == [
        shapely.normalize(shapely.box(x, y, x + w, y + h)).wkt for x, y, w, h in PATCHES
    ]


def test_a_patch_baselines_patches_score_in_the_roi_evaluation_against_shapely() -> None:
    runs = pd.DataFrame([patch_run("0", 0), patch_run("1", 0)])
    steps = steps_frame(runs)
    x, y, w, h = REFERENCE
    ring = [[x, y], [x + w, y], [x + w, y + h], [x, y + h]]
    regions = pd.DataFrame(
        [{"benchmark_name": "tcga", "benchmark_id": "0", "region_id": "r", "kind": "polygon",
          "label": "", "coords": ring}]
    )  # fmt: skip
    scored = score_trajectories(steps, runs, regions)
    assert len(scored) == 1  # item 1 has no reference region
    row = scored.iloc[0]
    reference = shapely.box(x, y, x + w, y + h)
    views = [shapely.box(a, b, a + c, b + d) for a, b, c, d in PATCHES]
    ious = [v.intersection(reference).area / v.union(reference).area for v in views]
    assert ious[0] == ious[2] == 0 and ious[1] > 0.1  # written out: (174 * 124) / (224² + 300*200 - 174*124)
    assert ious[1] == pytest.approx(174 * 124 / (224 * 224 + 300 * 200 - 174 * 124))
    assert row.n_viewed == 3
    assert row.best_iou == pytest.approx(max(ious))
    assert bool(row.hit) and row.first_hit_step == 2  # the second region viewed, in step order
    covered = reference.intersection(shapely.union_all(views)).area / reference.area
    assert row.coverage_fraction == pytest.approx(covered)


BOXES = [[0, 0, 10, 10], [0, 0, 0, 10], [0, 0, 10, -3], None, [1, 2, 3], [7, 8, 9, 10]]
ACTIONS = ["crop", "patch", "crop", "patch", "crop", "thumbnail", "answer"]


def test_the_trajectory_and_the_steps_table_agree_on_what_was_viewed() -> None:
    """The dict steps (viewer, review, QuPath) and the table rows (ROI, path review) pick the same steps:
    crops and patches with a positive box, nothing else, whatever the malformed boxes."""
    steps = [
        {"index": i, "action": action, "box": box}
        for i, (action, box) in enumerate((a, b) for a in ACTIONS for b in BOXES if b is None or len(b) == 4)
    ]
    picked = [s["index"] for s in viewed_steps(steps)]
    expected = [
        s["index"]
        for s in steps
        if s["action"] in ("crop", "patch") and s["box"] is not None and s["box"][2] > 0 and s["box"][3] > 0
    ]
    assert picked == expected and len(picked) == 10  # 2 good boxes x 5 crop/patch actions
    frame = steps_frame(pd.DataFrame([{**patch_run(), "trajectory_json": json.dumps(steps)}]))
    assert viewed_rows(frame)["step"].tolist() == picked
    assert viewed_rows(frame.iloc[:0]).empty


@pytest.mark.parametrize("box", [[float("nan"), 0, 5, 5], [0, 0, float("inf"), 5], [1e308, 0, 5, 5], "1234"])
def test_a_box_that_is_no_number_is_no_viewed_region(box) -> None:
    assert viewed_steps([{"index": 0, "action": "patch", "box": box}]) == []


def test_the_review_rates_the_same_patches() -> None:
    """The review's queue offers a patch run's viewed regions, the degenerate patch left out."""
    items = pd.DataFrame(
        [{"benchmark_name": "tcga", "benchmark_id": "0", "prompt": "Q?", "options": ["a", "b"],
          "truth_label": 2, "wsi_path": "/s.svs", "width": 4096, "height": 3072}]
    )  # fmt: skip
    run = patch_run() | {"answer_text": '{"answer": 2}', "correct": True, "truth_label": 2, "model": "m"}
    (unit,) = build_units(b"secret", "exp", pd.DataFrame([run]), items)
    assert [(r["step"], r["box"]) for r in unit["shown"]["regions"]] == [
        (0, PATCHES[0]),
        (2, PATCHES[1]),
        (3, PATCHES[2]),
    ]
