import json

import pandas as pd
import pytest
import shapely

from giant_assets.geometry import Region, evaluate_viewed_regions, load_reference_regions, regions_from_frame

LESION = Region("box", [1000, 1000, 100, 100], "lesion")  # small lesion
TUMOUR = Region("polygon", [[5000, 5000], [9000, 5000], [9000, 9000], [5000, 9000]], "tumour")  # big region


def test_steps_and_hit_rules_hand_computed():
    viewed = [
        [0, 0, 500, 500],  # nowhere
        [900, 900, 400, 400],  # contains the whole lesion: IoU 1/16 < 0.1 but covers 100% of it
        [6000, 6000, 300, 300],  # inside the tumour: IoU tiny, 100% of the view inside it
    ]
    res = evaluate_viewed_regions(viewed, [LESION, TUMOUR])
    assert res.step_hits == (False, True, True)
    assert (res.hit, res.first_hit_step, res.n_references_hit, res.n_references) == (True, 2, 2, 2)
    assert res.best_iou == pytest.approx(100 * 100 / 400 / 400)
    assert res.coverage_fraction == pytest.approx((100 * 100 + 300 * 300) / (100 * 100 + 4000 * 4000))


def test_criteria_can_be_switched_off():
    viewed = [[900, 900, 400, 400], [6000, 6000, 300, 300]]
    refs = [LESION, TUMOUR]
    only_iou = evaluate_viewed_regions(viewed, refs, min_reference_covered=None, min_view_inside=None)
    assert only_iou.step_hits == (False, False) and only_iou.first_hit_step is None
    assert evaluate_viewed_regions(
        viewed, refs, min_iou=0.05, min_reference_covered=None, min_view_inside=None
    ).step_hits == (True, False)


def test_partial_overlap_iou_and_coverage_against_shapely():
    tri = Region("polygon", [[0, 0], [200, 0], [0, 200]], "tri")
    viewed = [[50, 0, 100, 100]]
    res = evaluate_viewed_regions(viewed, [tri], min_reference_covered=None, min_view_inside=None)
    v = shapely.box(50, 0, 150, 100)
    t = shapely.Polygon([[0, 0], [200, 0], [0, 200]])
    assert res.best_iou == pytest.approx(v.intersection(t).area / v.union(t).area)
    assert res.coverage_fraction == pytest.approx(v.intersection(t).area / t.area)
    assert res.hit


def test_no_views_and_degenerate_views():
    empty = evaluate_viewed_regions([], [LESION])
    assert (empty.hit, empty.first_hit_step, empty.best_iou) == (False, None, 0.0)
    assert empty.coverage_fraction == 0.0
    flat = evaluate_viewed_regions([[1000, 1000, 0, 50]], [LESION])
    assert not flat.hit and flat.best_iou == 0.0


def test_argument_errors():
    with pytest.raises(ValueError, match="at least one reference"):
        evaluate_viewed_regions([[0, 0, 1, 1]], [])
    with pytest.raises(ValueError, match="min_iou must be in"):
        evaluate_viewed_regions([[0, 0, 1, 1]], [LESION], min_iou=1.5)
    with pytest.raises(ValueError, match="width and height must be >= 0"):
        evaluate_viewed_regions([[0, 0, -1, 1]], [LESION])
    with pytest.raises(ValueError, match="zero area"):
        Region("box", [0, 0, 0, 10], "r1")
    with pytest.raises(ValueError, match="kind must be one of"):
        Region("circle", [0, 0, 1], "r1")


HEADER = "benchmark_name,benchmark_id,region_id,kind,coords,label\n"


def test_load_csv_and_json(tmp_path):
    csv = tmp_path / "refs.csv"
    csv.write_text(
        HEADER + 'tcga,q1,r1,box,"[10, 20, 30, 40]",tumour\n'
        'panda,q2,r1,polygon,"[[0, 0], [10, 0], [0, 10]]",\n'
    )
    frame = load_reference_regions(csv)
    assert list(frame.columns) == ["benchmark_name", "benchmark_id", "region_id", "kind", "coords", "label"]
    assert frame.coords.tolist() == [[10.0, 20.0, 30.0, 40.0], [[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]]
    assert frame.label[0] == "tumour" and frame.label.isna()[1]
    regions = regions_from_frame(frame)
    assert [r.geometry().area for r in regions] == [1200.0, 50.0]
    assert [(r.region_id, r.label) for r in regions] == [("r1", "tumour"), ("r1", None)]

    js = tmp_path / "refs.json"
    js.write_text(
        json.dumps(
            {
                "regions": [
                    {
                        "benchmark_name": "gtex",
                        "benchmark_id": 7,
                        "region_id": "a",
                        "kind": "box",
                        "coords": [1, 2, 3, 4],
                    }
                ]
            }
        )
    )
    frame = load_reference_regions(js)
    row = frame.iloc[0].to_dict()
    assert row.pop("label") is None or frame.label.isna()[0]
    assert row == {
        "benchmark_name": "gtex",
        "benchmark_id": "7",
        "region_id": "a",
        "kind": "box",
        "coords": [1.0, 2.0, 3.0, 4.0],
    }


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('tcga,q1,r1,box,"[10, 20, 30]",', r"row 2 \(line 3\): field 'coords': .*shape"),
        ('nope,q1,r1,box,"[10, 20, 30, 40]",', r"row 2 \(line 3\): field 'benchmark_name': unknown 'nope'"),
        ('tcga,q1,r1,ellipse,"[10, 20, 30, 40]",', r"row 2 \(line 3\): field 'kind'"),
        ('tcga,q1,r1,box,"[10, 20, 30, 40",', r"row 2 \(line 3\): field 'coords': not valid JSON"),
        ('tcga,q1,r1,polygon,"[[0, 0], [1, 1]]",', r"row 2 \(line 3\): field 'coords': .*3 distinct points"),
        ('tcga,q1,,box,"[10, 20, 30, 40]",', r"row 2 \(line 3\): missing field\(s\) \['region_id'\]"),
        ('tcga,q0,r0,box,"[1, 2, 3, 4]",', r"row 2: duplicate region_id 'r0' for \(tcga, q0\)"),
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path, row, message):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + 'tcga,q0,r0,box,"[0, 0, 5, 5]",\n' + row + "\n")
    with pytest.raises(ValueError, match=f"bad.csv: {message}"):
        load_reference_regions(path)


def test_bad_files(tmp_path):
    (tmp_path / "r.txt").write_text("x")
    with pytest.raises(ValueError, match="unsupported reference file type '.txt'"):
        load_reference_regions(tmp_path / "r.txt")
    (tmp_path / "r.json").write_text("{")
    with pytest.raises(ValueError, match="r.json: invalid JSON"):
        load_reference_regions(tmp_path / "r.json")
    (tmp_path / "r2.json").write_text('{"x": 1}')
    with pytest.raises(ValueError, match="expected a list of region objects"):
        load_reference_regions(tmp_path / "r2.json")


def test_a_declared_benchmarks_regions_load_and_score_like_a_built_ins(tmp_path):
    """Regions of a declared benchmark load when the registry names it (and only then), and are scored
    as a built-in's are: numbers against shapely."""
    from giant_assets.benchmarks.declaration import Declaration
    from giant_assets.benchmarks.registry import benchmark_names
    from giant_assets.eval.roi import score_trajectories

    path = tmp_path / "refs.csv"
    path.write_text(
        HEADER + 'lesion-check,c1,r1,polygon,"[[100, 100], [500, 100], [100, 400]]",lesion\n'
        'tcga,q1,r1,box,"[0, 0, 10, 10]",\n'
    )
    with pytest.raises(ValueError, match=r"row 1 \(line 2\): field 'benchmark_name': unknown 'lesion-check'"):
        load_reference_regions(path)  # the built-ins alone: not known
    names = benchmark_names(
        {"lesion-check": Declaration("lesion-check", tmp_path / "i.csv", "label", "accuracy")}
    )
    frame = load_reference_regions(path, names)
    assert frame["benchmark_name"].tolist() == ["lesion-check", "tcga"]

    viewed = [(0, 0, 50, 50), (150, 150, 200, 100), (90, 90, 420, 320)]
    steps = pd.DataFrame(
        [
            {"benchmark_name": "lesion-check", "benchmark_id": "c1", "config_hash": "h", "run_index": 0,
             "step": i, "action": "crop", "box_x": x, "box_y": y, "box_w": w, "box_h": h}
            for i, (x, y, w, h) in enumerate(viewed)
        ]
    )  # fmt: skip
    runs = steps[["benchmark_name", "benchmark_id", "config_hash", "run_index"]].drop_duplicates()
    (row,) = score_trajectories(steps, runs, frame).to_dict(orient="records")
    triangle = shapely.Polygon([(100, 100), (500, 100), (100, 400)])
    views = [shapely.box(x, y, x + w, y + h) for x, y, w, h in viewed]
    ious = [v.intersection(triangle).area / v.union(triangle).area for v in views]
    assert ious[0] == 0 and 0 < ious[1] < ious[2]
    assert row["best_iou"] == pytest.approx(max(ious), abs=1e-12)
    assert row["n_viewed"] == 3 and row["n_references"] == 1
    covered = shapely.unary_union(views).intersection(triangle).area / triangle.area
    assert row["coverage_fraction"] == pytest.approx(covered, abs=1e-12)
    # view 2 (150..350 x 150..250) lies inside the triangle for more than half its area: the first hit
    assert views[1].intersection(triangle).area / views[1].area > 0.5
    assert (bool(row["hit"]), int(row["first_hit_step"])) == (True, 2)
