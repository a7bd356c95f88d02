"""roi_evaluation on real materializations: ingest the sample, let GIANT navigate its slides against a
loopback scripted model, score the trajectories, and check every number against plain shapely.

Also checks that the bundled reference regions agree with the sample slides' painted designs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
import shapely
import shapely.affinity
from dagster import DagsterInstance, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    crop_reply,
    demo_policy,
)
from giant_assets.demo.scripted.policy import _dark_region_box
from giant_assets.multipathqa.sample import SAMPLE_SLIDES, sample_csv_path, sample_regions_path
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.predictions import predictions, trajectory_steps
from giant_assets.platform.assets.roi import roi_evaluation
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

PARTITION = "tcga_slidebench"  # 3 items on 2 slides: two lesion regions and one region away from it
EXPERIMENT = "roi-giant"
CELL = f"{EXPERIMENT}/{PARTITION}"
KEY_ENV = "GIANT_TEST_ROI_KEY"
KEY = "sk-roi-test-0c5d2f7aSECRET1234567890"
CORNER = (0, 0, 300, 300)  # background: hits no reference region


def two_crops_then_answer(request: RecordedRequest) -> Reply:
    """Step 1 looks at an empty corner, step 2 at the thumbnail's dark lesion, then the demo answer."""
    if request.assistant_turns == 0:
        return crop_reply(*CORNER, prose="Start at the corner.")
    if request.assistant_turns == 1:
        first = next(t for t in request.turns if t.role == "user")
        system = "\n".join(t for turn in request.turns if turn.role == "system" for t in turn.texts)
        box = _dark_region_box(system + "\n" + "\n".join(first.texts), first.images[0])
        assert box is not None
        return crop_reply(*box, prose="Now the dark area.")
    return demo_policy(request)


pytestmark = pytest.mark.xdist_group("roi_asset")  # one worker builds the module's fixture once


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path):
    data = tmp_path_factory.mktemp("roi") / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    mp.setenv(KEY_ENV, KEY)
    mp.delenv("GIANT_REGIONS_PATH", raising=False)
    instance = DagsterInstance.ephemeral()
    add_experiments(instance, EXPERIMENT)
    declared = data.parent / "experiments.yaml"
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    assets = [multipathqa_csv, benchmark_items, predictions, trajectory_steps, roi_evaluation]
    try:
        assert materialize(assets[:2], resources=resources, instance=instance).success
        with ScriptedModelServer(rule=two_crops_then_answer) as server:
            settings = {
                "agent": "giant",
                "model": "scripted-roi-test",
                "base_url": server.openai_base_url,
                "api_key_env": KEY_ENV,
                "runs_per_item": 2,
            }
            write_experiments(declared, {EXPERIMENT: settings})
            result = materialize(
                assets,
                selection=[predictions, trajectory_steps, roi_evaluation],
                partition_key=result_key(EXPERIMENT, PARTITION),
                resources=resources,
                instance=instance,
            )
            auths = {r.headers.get("Authorization") for r in server.requests}
        assert result.success
        assert auths == {f"Bearer {KEY}"}  # the key went where it belongs
    finally:
        mp.undo()
    store = ParquetStore(data)
    return data, result, store.read("predictions", [CELL]), store.read("roi_evaluation", [CELL])


def reference_boxes() -> dict[tuple[str, str], list[shapely.Polygon]]:
    with open(sample_regions_path(), newline="") as fh:
        rows = list(csv.DictReader(fh))
    refs: dict[tuple[str, str], list[shapely.Polygon]] = {}
    for row in rows:
        assert row["kind"] == "box"
        x, y, w, h = json.loads(row["coords"])
        refs.setdefault((row["benchmark_name"], row["benchmark_id"]), []).append(
            shapely.box(x, y, x + w, y + h)
        )
    return refs


def expected_score(
    views: list[shapely.Polygon], refs: list[shapely.Polygon]
) -> tuple[float, bool, int | None]:
    """best IoU, hit, 1-based first hitting view under geometry.roi's default rule: IoU >= 0.1, or the
    view covers half a reference, or half the view lies inside one."""
    best, first = 0.0, None
    for i, v in enumerate(views, start=1):
        for r in refs:
            inter = v.intersection(r).area
            best = max(best, inter / v.union(r).area)
            if first is None and (
                inter / v.union(r).area >= 0.1 or inter >= 0.5 * r.area or inter >= 0.5 * v.area
            ):
                first = i
    return best, first is not None, first


def test_roi_evaluation_matches_shapely_on_the_trajectories(scored) -> None:
    _, _, runs, roi = scored
    refs = reference_boxes()
    items_with_refs = {k for b, k in refs if b == PARTITION}
    assert len(runs) == 3 * 2 and set(roi["benchmark_id"]) == items_with_refs
    assert len(roi) == 2 * len(items_with_refs)  # every run of an item with regions is scored
    for run in runs.itertuples():
        steps = json.loads(run.trajectory_json)
        boxes = [s["box"] for s in steps if s["action"] == "crop"]
        assert boxes[0] == list(CORNER) and len(boxes) == 2
        views = [shapely.box(x, y, x + w, y + h) for x, y, w, h in boxes]
        best, hit, first = expected_score(views, refs[(PARTITION, run.benchmark_id)])
        row = roi[(roi.benchmark_id == run.benchmark_id) & (roi.run_index == run.run_index)].iloc[0]
        assert row.n_viewed == 2 and row.config_hash == run.config_hash
        assert row.best_iou == pytest.approx(best, abs=1e-12)
        assert bool(row.hit) == hit
        assert (None if pd.isna(row.first_hit_step) else int(row.first_hit_step)) == first


def test_the_sample_regions_give_a_mix_of_hits_and_misses(scored) -> None:
    _, result, _, roi = scored
    by_item = roi.groupby("benchmark_id")["hit"].all().to_dict()
    # items 0 and 1 mark the dark lesion the agent looks at second; item 2 (necrosis) lies elsewhere
    assert by_item == {"0": True, "1": True, "2": False}
    assert set(roi.loc[roi.hit, "first_hit_step"]) == {2}  # the corner crop came first
    meta = result.asset_materializations_for_node("roi_evaluation")[0].metadata
    assert meta["hit_rate"].value == pytest.approx(roi["hit"].mean())
    assert meta["mean_best_iou"].value == pytest.approx(roi["best_iou"].mean())


def test_the_key_is_stored_nowhere(scored) -> None:
    data, result, _, _ = scored
    for path in data.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for node in ("predictions", "trajectory_steps", "roi_evaluation"):
        meta = result.asset_materializations_for_node(node)[0].metadata
        assert KEY not in json.dumps({k: str(v.value) for k, v in meta.items()})


def ellipse(blob) -> shapely.Polygon:
    return shapely.affinity.scale(shapely.Point(blob.cx, blob.cy).buffer(1, 64), blob.rx, blob.ry)


def test_sample_regions_agree_with_the_painted_slides() -> None:
    """A lesion region is its lesion's bounding box; every region lies on tissue of its item's slide."""
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        slide_of = {(r["benchmark_name"], r["benchmark_id"]): r["image_path"] for r in csv.DictReader(fh)}
    designs = {Path(s.relpath).name: s.design for s in SAMPLE_SLIDES}
    with open(sample_regions_path(), newline="") as fh:
        regions = list(csv.DictReader(fh))
    for row in regions:
        design = designs[slide_of[(row["benchmark_name"], row["benchmark_id"])]]
        x, y, w, h = json.loads(row["coords"])
        tissue = shapely.unary_union([ellipse(b) for b in design.tissue])
        assert tissue.contains(shapely.box(x, y, x + w, y + h)), row
        if row["label"] == "lesion":
            assert [x, y, w, h] in [b.box_xywh for b in design.lesions], row


QUPATH_EXPORTS = Path(__file__).parents[1] / "eval" / "qupath_exports"  # a pathologist's, hand-written


def qupath_references(path: Path, size=(4096, 3072), point_size=256) -> list[shapely.Geometry]:
    """The annotations of a QuPath export as shapely reads them (points: the import's boxes, clipped)."""
    data = json.loads(path.read_text())
    features = data["features"] if isinstance(data, dict) and "features" in data else data
    refs = []
    for f in [features] if isinstance(features, dict) else features:
        if f["properties"].get("objectType", "annotation") != "annotation":
            continue
        geom = shapely.geometry.shape(f["geometry"])
        if geom.geom_type == "MultiPoint":
            slide = shapely.box(0, 0, *size)
            half = point_size / 2
            refs += [shapely.box(p.x - half, p.y - half, p.x + half, p.y + half) & slide for p in geom.geoms]
        else:
            refs.append(geom)
    return refs


def test_qupath_export_then_a_pathologist_import_scored_by_roi_evaluation(
    scored, tmp_path: Path, sample_wsi_root: Path
) -> None:
    """giant-qupath export writes every crop per slide; a pathologist's QuPath files imported with
    giant-qupath import become the regions a new roi_evaluation materialization scores."""
    from giant_assets.eval.qupath_cli import main as qupath

    data, _, runs, _ = scored
    args = ["--data-dir", str(data)]
    assert qupath([*args, "export", "--experiment", EXPERIMENT, "--benchmark", PARTITION]) == 0
    exported = {p.name: p for p in (data / "qupath" / EXPERIMENT / PARTITION).iterdir()}
    slides = {
        "0": "TCGA-EA-A3HT-01Z-00-DX1.svs",
        "1": "TCGA-BH-A0BZ-01Z-00-DX1.svs",
        "2": "TCGA-EA-A3HT-01Z-00-DX1.svs",
    }
    # named as QuPath names its own export of a slide: X.svs -> X.geojson
    assert set(exported) == {s.replace(".svs", ".geojson") for s in slides.values()}
    for name, path in exported.items():
        crops = [
            shapely.box(x, y, x + w, y + h).normalize().wkt
            for run in runs.itertuples()
            if slides[run.benchmark_id].replace(".svs", ".geojson") == name
            for x, y, w, h in [s["box"] for s in json.loads(run.trajectory_json) if s["action"] == "crop"]
        ]
        features = json.loads(path.read_text())["features"]
        assert sorted(shapely.geometry.shape(f["geometry"]).normalize().wkt for f in features) == sorted(
            crops
        )
        assert all(
            f["properties"]["reason"] in ("Start at the corner.", "Now the dark area.") for f in features
        )

    regions = tmp_path / "pathologist.json"
    assert (
        qupath([*args, "import", str(QUPATH_EXPORTS), "--benchmark", PARTITION, "--out", str(regions)]) == 0
    )
    instance = DagsterInstance.ephemeral()
    add_experiments(instance, EXPERIMENT)
    resources = resources_for(
        data,
        experiments_file=data.parent / "experiments.yaml",
        wsi_root=str(sample_wsi_root),
        regions_path=str(regions),
    )
    result = materialize(
        [multipathqa_csv, benchmark_items, predictions, trajectory_steps, roi_evaluation],
        selection=[roi_evaluation],
        partition_key=result_key(EXPERIMENT, PARTITION),
        resources=resources,
        instance=instance,
    )
    assert result.success
    roi = ParquetStore(data).read("roi_evaluation", [CELL])
    a3ht = [p for p in QUPATH_EXPORTS.iterdir() if p.name.startswith("TCGA-EA-A3HT")]
    refs = {
        "0": [g for p in a3ht for g in qupath_references(p)],
        "2": [g for p in a3ht for g in qupath_references(p)],
        "1": qupath_references(QUPATH_EXPORTS / "TCGA-BH-A0BZ-01Z-00-DX1.svs.geojson"),
    }
    assert len(roi) == len(runs) == 6
    for run in runs.itertuples():
        views = [shapely.box(x, y, x + w, y + h) for x, y, w, h in
                 [s["box"] for s in json.loads(run.trajectory_json) if s["action"] == "crop"]]  # fmt: skip
        best, hit, first = expected_score(views, refs[run.benchmark_id])
        row = roi[(roi.benchmark_id == run.benchmark_id) & (roi.run_index == run.run_index)].iloc[0]
        assert row.n_references == len(refs[run.benchmark_id])
        assert row.best_iou == pytest.approx(best, abs=1e-12) and bool(row.hit) == hit
        assert (None if pd.isna(row.first_hit_step) else int(row.first_hit_step)) == first
    assert roi["hit"].any() and roi["best_iou"].gt(0).all()
