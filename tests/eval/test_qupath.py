"""The QuPath round trip on hand-written files in QuPath's export layouts (0.4+ FeatureCollection with
UUID ids and ``classification.color``; 0.2/0.3 bare arrays with ``"id": "PathAnnotationObject"`` and
``colorRGB``; a single Feature), shapely's reading of the same JSON as the oracle."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import shapely
import shapely.geometry

from giant_assets.eval.qupath import (
    CROP_CLASS,
    REPORTED_CLASS,
    export_qupath,
    import_qupath,
    match_slide,
    write_reference_regions,
)
from giant_assets.geometry.qupath import QuPathFileError, read_qupath_objects
from giant_assets.geometry.roi import Region, load_reference_regions, regions_from_frame

EXPORTS = Path(__file__).with_name("qupath_exports")
A3HT, A0BZ = "TCGA-EA-A3HT-01Z-00-DX1.svs", "TCGA-BH-A0BZ-01Z-00-DX1.svs"
MAIN = EXPORTS / f"{A3HT}.geojson"
LEGACY = EXPORTS / "TCGA-EA-A3HT-01Z-00-DX1 - stroma.json"
SINGLE = EXPORTS / f"{A0BZ}.geojson"


def items() -> pd.DataFrame:
    """Items as benchmark_items has them: A3HT carries three questions in two benchmarks."""
    rows = [
        ("tcga_slidebench", "0", f"tcga/{A3HT}"),
        ("tcga_slidebench", "1", A0BZ),
        ("tcga_slidebench", "2", f"tcga/{A3HT}"),
        ("tcga_expert_vqa", "0", A3HT),
        ("tcga_expert_vqa", "1", "TCGA-D8-A1XK-01Z-00-DX1.svs"),
    ]
    frame = pd.DataFrame(rows, columns=["benchmark_name", "benchmark_id", "image_path"])
    return frame.assign(width=4096, height=3072)


def oracle(path: Path) -> list[tuple[str | None, shapely.Geometry, str]]:
    """(classification, geometry, geojson type) of each annotation feature, read by shapely alone."""
    data = json.loads(path.read_text())
    features = data["features"] if isinstance(data, dict) and "features" in data else data
    features = [features] if isinstance(features, dict) else features
    out = []
    for f in features:
        props = f["properties"]
        if props.get("objectType", "annotation") != "annotation":
            continue
        cls = (props.get("classification") or {}).get("name") or props.get("name")
        out.append((cls, shapely.geometry.shape(f["geometry"]), f["geometry"]["type"]))
    return out


def test_reads_the_three_export_layouts() -> None:
    main = read_qupath_objects(MAIN)
    assert [o.object_type for o in main] == ["annotation"] * 4 + ["detection"]
    assert [o.classification for o in main] == ["Tumor", "Necrosis", "Tumor", "Mitosis", None]  # not read
    assert main[1].geometry.area == 600 * 600 - 200 * 200  # the hole is kept
    assert main[2].geometry.geom_type == "MultiPolygon" and main[3].is_points
    (legacy,) = read_qupath_objects(LEGACY)
    assert (legacy.object_type, legacy.feature_id, legacy.classification) == ("annotation", "", "Stroma")
    (single,) = read_qupath_objects(SINGLE)
    assert (single.classification, single.name) == (None, "lesion")


def test_import_gives_every_item_of_the_slide_the_annotations_as_drawn() -> None:
    frame, summary = import_qupath([MAIN, LEGACY, SINGLE], items())
    assert summary.skipped == {"detection": 1} and summary.regions == 4 + 1 + 1
    a3ht = [("tcga_slidebench", "0"), ("tcga_slidebench", "2"), ("tcga_expert_vqa", "0")]
    by_item = {k: g for k, g in frame.groupby(["benchmark_name", "benchmark_id"])}
    assert set(by_item) == {*a3ht, ("tcga_slidebench", "1")}
    expected = oracle(MAIN) + oracle(LEGACY)
    for key in a3ht:
        regions = regions_from_frame(by_item[key])
        areas = [r for r in regions if r.kind != "box"]
        assert len(areas) == len(expected) - 1  # the points annotation becomes boxes
        for region, (cls, geom, _) in zip(areas, [e for e in expected if e[2] != "MultiPoint"], strict=True):
            assert region.label == cls and region.geometry().equals(geom), region.region_id
        kinds = [r.kind for r in regions]
        assert kinds == ["polygon", "multipolygon", "multipolygon", "box", "box", "polygon"]
        points = [r for r in regions if r.kind == "box"]
        assert [list(p.coords) for p in points] == [[1672.5, 1272.25, 256, 256], [0, 0, 178, 188]]
        assert {p.label for p in points} == {"Mitosis"}
    (lesion,) = regions_from_frame(by_item[("tcga_slidebench", "1")])
    assert lesion.label == "lesion" and lesion.geometry().equals(shapely.box(2900, 1800, 3100, 2000))


def test_written_regions_load_back_identically(tmp_path: Path) -> None:
    frame, _ = import_qupath([MAIN, LEGACY, SINGLE], items(), point_size=100, classes=["Tumor", "Mitosis"])
    assert set(frame["label"]) == {"Tumor", "Mitosis"}
    path = tmp_path / "regions.json"
    write_reference_regions(frame, path)
    loaded = regions_from_frame(load_reference_regions(path))
    original = regions_from_frame(frame)
    assert len(loaded) == len(original) == 3 * 4
    for a, b in zip(original, loaded, strict=True):
        assert (a.region_id, a.kind, a.label) == (b.region_id, b.kind, b.label)
        assert a.geometry().equals(b.geometry())


def test_files_match_slides_by_name_or_folder(tmp_path: Path) -> None:
    slides = ["X-1.svs", "X-10.svs", "Y.tiff"]
    assert match_slide(Path("X-10.svs.geojson"), slides) == "X-10.svs"
    assert match_slide(Path("X-1 - tumour.geojson"), slides) == "X-1.svs"
    assert match_slide(Path("X-10_reader2.json"), slides) == "X-10.svs"
    assert match_slide(Path("Y/annotations.geojson"), slides) == "Y.tiff"
    with pytest.raises(QuPathFileError, match="X-100.geojson: no slide"):
        match_slide(Path("X-100.geojson"), slides)


def _bad(tmp_path: Path, change, name: str = f"{A3HT}.geojson") -> Path:
    data = json.loads(MAIN.read_text())
    change(data["features"])
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


BAD = {
    "outside": (
        lambda fs: fs[2]["geometry"]["coordinates"][1][0].__setitem__(1, [4100, 2000]),
        r"feature 2 \(id '2b3c4d5e-6f70-4a8b-9cad-becf0a1b2c3d', name 'satellite nodules'\): lies outside "
        r"slide 'TCGA-EA-A3HT-01Z-00-DX1.svs' \(4096 x 3072 level-0 pixels\): bounds x 2500..4100",
    ),
    "negative point": (
        lambda fs: fs[3]["geometry"]["coordinates"].append([-1, 5]),
        r"feature 3 \(id '7e8f9a0b-1c2d-4e3f-a4b5-c6d7e8f9a0b1'\): lies outside",
    ),
    "text coordinate": (
        lambda fs: fs[0]["geometry"]["coordinates"][0][1].__setitem__(0, "2050"),
        r"feature 0 \(id '5a1f0c2e-3b7d-4c19-9e0a-7d1b2c3e4f50', name 'lesion \(rectangle\)'\): "
        r"geometry ring 0.*'2050'",
    ),
    "line": (
        lambda fs: fs[1].__setitem__("geometry", {"type": "LineString", "coordinates": [[0, 0], ["5", 5]]}),
        r"feature 1 .*geometry: expected numbers, got str '5'",
    ),
    "no geometry": (lambda fs: fs[1].pop("geometry"), r"feature 1 .*geometry: missing"),
    "flat": (
        lambda fs: fs[0]["geometry"].__setitem__("coordinates", [[[0, 0], [10, 0], [20, 0], [0, 0]]]),
        r"feature 0 .*zero area",
    ),
    "duplicate id": (
        lambda fs: fs[1].__setitem__("id", fs[0]["id"]),
        r"feature 1 .*a second feature with this id",
    ),
    "classification": (
        lambda fs: fs[0]["properties"].__setitem__("classification", 7),
        r"feature 0 .*'classification' must be an object",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_feature_is_named_with_its_file(tmp_path: Path, case: str) -> None:
    change, message = BAD[case]
    path = _bad(tmp_path, change)
    with pytest.raises(QuPathFileError, match=f"^{path}: {message}"):
        import_qupath([path], items())


def test_a_bad_file_is_named(tmp_path: Path) -> None:
    broken = tmp_path / f"{A3HT}.geojson"
    broken.write_text('{"type": "FeatureCollection", "features": [')
    with pytest.raises(QuPathFileError, match=f"^{broken}: invalid JSON"):
        import_qupath([broken], items())
    broken.write_text('{"type": "Polygon", "coordinates": []}')
    with pytest.raises(QuPathFileError, match=f"^{broken}: not a QuPath GeoJSON export"):
        import_qupath([broken], items())
    unknown = tmp_path / "TCGA-XX-0000.svs.geojson"
    shutil.copy(MAIN, unknown)
    with pytest.raises(QuPathFileError, match=f"^{unknown}: no slide of the items"):
        import_qupath([unknown], items())
    sizeless = items().assign(width=float("nan"), height=float("nan"))
    with pytest.raises(QuPathFileError, match="has no known size"):
        import_qupath([MAIN], sizeless)


def _run(item: str, run: int, boxes: list[list[int]]) -> dict:
    steps = [{"index": 0, "action": "thumbnail", "box": [0, 0, 4096, 3072], "text": "overview"}]
    steps += [
        {"index": i, "action": "crop", "box": b, "level": 1, "text": f"look <b>{item}</b> {run}.{i}"}
        for i, b in enumerate(boxes, start=1)
    ]
    steps.append({"index": len(steps), "action": "answer", "text": "2"})
    return {"benchmark_id": item, "run_index": run, "trajectory_json": json.dumps(steps)}


def test_export_then_import_gives_the_viewed_boxes_back(tmp_path: Path) -> None:
    runs = [
        _run("0", 0, [[1700, 1300, 350, 280], [10, 20, 300, 301]]),
        _run("0", 1, [[0, 0, 4096, 3072]]),
        _run("1", 0, [[2900, 1800, 200, 200]]),
        _run("2", 0, []),
    ]
    bench = items()[items()["benchmark_name"] == "tcga_slidebench"]
    reported = [{"benchmark_id": "2", "run_index": 0, "box": [3000, 2000, 100, 90], "finding": "necrosis"}]
    written = export_qupath(pd.DataFrame(runs), bench, tmp_path / "out", reported=reported)
    assert [p.name for p in written] == ["TCGA-BH-A0BZ-01Z-00-DX1.geojson", "TCGA-EA-A3HT-01Z-00-DX1.geojson"]
    doc = json.loads(written[1].read_text())
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == 4
    first = doc["features"][0]
    assert first["geometry"]["type"] == "Polygon" and len(first["id"]) == 36
    props = first["properties"]
    assert props["objectType"] == "annotation" and props["classification"] == {
        "name": CROP_CLASS,
        "color": [255, 140, 0],
    }
    assert (props["name"], props["run"], props["step"], props["reason"]) == (
        "0 run 0 step 1",
        0,
        1,
        "look <b>0</b> 0.1",
    )
    assert doc["features"][-1]["properties"]["finding"] == "necrosis"
    assert doc["features"][-1]["properties"]["classification"]["name"] == REPORTED_CLASS
    # the same export writes the same bytes (ids derive from content)
    again = export_qupath(pd.DataFrame(runs), bench, tmp_path / "again", reported=reported)
    assert again[1].read_bytes() == written[1].read_bytes()

    # QuPath's "export all objects" brings our own objects back: never references of themselves...
    frame, summary = import_qupath(written, bench)
    assert frame.empty and summary.skipped == {CROP_CLASS: 4, REPORTED_CLASS: 1}
    # ...unless asked for by class
    frame, summary = import_qupath(written, bench, classes=[CROP_CLASS, REPORTED_CLASS])
    assert summary.regions == 5 and summary.skipped == {}

    def boxes(*items: str) -> list[list[int]]:
        """The crops of these items' runs and their reported regions: what their slide's file holds."""
        steps = [s for r in runs if r["benchmark_id"] in items for s in json.loads(r["trajectory_json"])]
        crops = [s["box"] for s in steps if s["action"] == "crop"]
        return crops + [r["box"] for r in reported if r["benchmark_id"] in items]

    slide_boxes = {"0": boxes("0", "2"), "2": boxes("0", "2"), "1": boxes("1")}
    for item, expected in slide_boxes.items():
        got = sorted(
            r.geometry().normalize().wkt for r in regions_from_frame(frame[frame.benchmark_id == item])
        )
        want = sorted(shapely.box(x, y, x + w, y + h).normalize().wkt for x, y, w, h in expected)
        assert got == want, item


def test_multipolygon_regions_score_as_one_region() -> None:
    region = Region(
        "multipolygon", [[[[0, 0], [10, 0], [10, 10], [0, 10]], [[4, 4], [6, 4], [6, 6], [4, 6]]]]
    )
    assert region.geometry().area == 96
    with pytest.raises(ValueError, match="polygon 0 ring 1: a ring needs at least 3 distinct"):
        Region("multipolygon", [[[[0, 0], [10, 0], [10, 10]], [[4, 4], [4, 4]]]])


def test_the_cli_exports_from_the_store_and_imports_back(tmp_path: Path, capsys) -> None:
    from giant_assets.core.storage import ParquetStore
    from giant_assets.eval.qupath_cli import main

    data = tmp_path / "data"
    store = ParquetStore(data)
    store.write("benchmark_items", items())
    runs = pd.DataFrame([_run("0", 0, [[1700, 1300, 350, 280]]), _run("1", 0, [[2900, 1800, 200, 200]])])
    store.write("predictions", runs.assign(benchmark_name="tcga_slidebench"), "review-exp/tcga_slidebench")
    reported = tmp_path / "reported.json"
    reported.write_text(
        json.dumps([{"benchmark_id": "1", "run_index": 0, "box": [3000, 2000, 50, 60], "finding": "x"}])
    )
    args = ["--data-dir", str(data)]
    assert (
        main(
            [
                *args,
                "export",
                "--experiment",
                "review-exp",
                "--benchmark",
                "tcga_slidebench",
                "--reported",
                str(reported),
            ]
        )
        == 0
    )
    out = data / "qupath" / "review-exp" / "tcga_slidebench"
    assert sorted(p.name for p in out.iterdir()) == [
        "TCGA-BH-A0BZ-01Z-00-DX1.geojson",
        "TCGA-EA-A3HT-01Z-00-DX1.geojson",
    ]
    regions = tmp_path / "regions.json"
    again = str(out / "TCGA-BH-A0BZ-01Z-00-DX1.geojson")  # named twice: read once
    assert main([*args, "import", str(out), again, "--class", REPORTED_CLASS, "--out", str(regions)]) == 0
    (region,) = regions_from_frame(load_reference_regions(regions))
    assert region.geometry().equals(shapely.box(3000, 2000, 3050, 2060)) and region.label == REPORTED_CLASS
    capsys.readouterr()

    reported.write_text(json.dumps([{"run_index": 0, "box": [0, 0, 1, 1]}]))
    assert (
        main(
            [
                *args,
                "export",
                "--experiment",
                "review-exp",
                "--benchmark",
                "tcga_slidebench",
                "--reported",
                str(reported),
            ]
        )
        == 2
    )
    assert (
        capsys.readouterr().err
        == f"giant-qupath: error: {reported}: region 0: missing field 'benchmark_id'\n"
    )
    bad = _bad(tmp_path, lambda fs: fs[0]["geometry"].__setitem__("type", "Circle"))
    assert main([*args, "import", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"giant-qupath: error: {bad}: feature 0 (id '5a1f0c2e-3b7d-4c19-9e0a-7d1b2c3e4f50', "
        "name 'lesion (rectangle)'): geometry: unsupported geometry type 'Circle'\n"
    )
    assert main([*args, "export", "--experiment", "nope", "--benchmark", "tcga_slidebench"]) == 2
    assert "no 'predictions' table (nope/tcga_slidebench)" in capsys.readouterr().err


@pytest.mark.parametrize("order", [1, -1])
def test_the_longest_name_matches_whatever_the_slides_order(order: int) -> None:
    slides = ["S1.svs", "S1_2.svs", "X.ome.tif", "Y.svs", "Y.tiff"][::order]
    assert match_slide(Path("S1_2.geojson"), slides) == "S1_2.svs"
    assert match_slide(Path("S1_2 - tumour.geojson.gz"), slides) == "S1_2.svs"
    assert match_slide(Path("S1_3.geojson"), slides) == "S1.svs"
    assert match_slide(Path("S1.svs.geojson"), slides) == "S1.svs"
    assert match_slide(Path("X.zip"), slides) == "X.ome.tif"  # QuPath strips .ome.tif whole
    assert match_slide(Path("Y.svs.geojson"), slides) == "Y.svs"
    with pytest.raises(
        QuPathFileError, match=r"Y.geojson: named like several slides .*\['Y.svs', 'Y.tiff'\]"
    ):
        match_slide(Path("Y.geojson"), slides)


def test_export_names_files_as_qupath_and_writes_only_slides_with_crops(tmp_path: Path) -> None:
    bench = pd.DataFrame(
        {
            "benchmark_id": ["0", "1", "2", "3"],
            "image_path": ["a/X.ome.tif", "b/Y.svs", "c/Y.tiff", "d/Z.svs"],
        }
    )
    runs = [_run("0", 0, [[1, 2, 3, 4]]), _run("1", 0, [[5, 6, 7, 8]]), _run("2", 0, [[9, 9, 9, 9]])]
    runs.append(_run("3", 0, []))  # ran, viewed nothing: no file
    written = export_qupath(pd.DataFrame(runs), bench, tmp_path)
    # X.ome.tif -> X.geojson as QuPath names it; Y.svs and Y.tiff would share Y.geojson: full names
    assert [p.name for p in written] == ["X.geojson", "Y.svs.geojson", "Y.tiff.geojson"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in written]


def test_export_puts_the_models_text_in_qupath_metadata_as_strings(tmp_path: Path) -> None:
    bench = items()[items()["benchmark_name"] == "tcga_slidebench"]
    runs = [_run("0", 3, [[10, 20, 30, 40]])]
    reported = [
        {"benchmark_id": "0", "run_index": 3, "box": [1, 2, 3, 4], "finding": "mitoses", "best_iou": 0.25},
        {
            "benchmark_id": "0",
            "run_index": 3,
            "box": [5, 6, 7, 8],
            "diagnostic_relevance": "high",
            "viewed": True,
        },
        {"benchmark_id": "0", "run_index": 4, "box": [5, 6, 7, 8]},
    ]
    (path,) = export_qupath(pd.DataFrame(runs), bench, tmp_path, reported=reported)
    features = json.loads(path.read_text())["features"]
    crop, first, second, other_run = (f["properties"] for f in features)
    assert crop["metadata"] == {
        "benchmark_id": "0",
        "run": "3",
        "step": "1",
        "level": "1",
        "reason": "look <b>0</b> 3.1",
    }
    assert first["metadata"] == {
        "benchmark_id": "0",
        "run": "3",
        "finding": "mitoses",
        "best_iou": "0.25",
    }
    assert second["metadata"]["diagnostic_relevance"] == "high" and second["metadata"]["viewed"] == "true"
    assert all(isinstance(v, str) for p in (crop, first, second) for v in p["metadata"].values())
    # regions are numbered per run: run 3 has regions 1 and 2, run 4 its region 1
    assert [(p["name"], p["measurements"]["region"]) for p in (first, second, other_run)] == [
        ("0 run 3 region 1", 1.0),
        ("0 run 3 region 2", 2.0),
        ("0 run 4 region 1", 1.0),
    ]


def _region(box: str = "[0, 1, 2, 3]", run: str = "0", extra: str = "") -> str:
    """One reported region as JSON text, hostile parts written in (NaN, 1e400... are JSON to Python)."""
    return f'[{{"benchmark_id": "0", "run_index": {run}, "box": {box}{extra}}}]'


REPORTED_BAD = {
    "letters in the box": (
        _region(box='["a", 1, 2, 3]'),
        r"region 0: field 'box': expected 4 finite numbers",
    ),
    "NaN in the box": (_region(box="[NaN, 1, 2, 3]"), r"region 0: field 'box': expected 4 finite"),
    "1e400 width": (_region(box="[0, 1, 1e400, 3]"), r"region 0: field 'box': expected 4 finite"),
    "zero height": (
        _region(box="[0, 1, 2, 0]"),
        r"region 0: field 'box': the box's width and height must be > 0",
    ),
    "run index text": (
        _region(run='"first"'),
        r"region 0: field 'run_index': expected a whole number >= 0, got 'first'",
    ),
    "run index 1.5": (
        _region(run="1.5"),
        r"region 0: field 'run_index': expected a whole number >= 0, got 1.5",
    ),
    "NaN property": (_region(extra=', "best_iou": NaN'), r"region 0: field 'best_iou': not a finite number"),
    "5,000 digits": (_region(run="9" * 5000), r"invalid JSON: Exceeds the limit"),
    "100,000 deep": ("[" * 100_000 + "]" * 100_000, r"invalid JSON: nested too deeply"),
}


@pytest.mark.parametrize("case", [*REPORTED_BAD, "not UTF-8"])
def test_hostile_reported_regions_are_refused_naming_file_and_field(
    tmp_path: Path, capsys, case: str
) -> None:
    from giant_assets.core.storage import ParquetStore
    from giant_assets.eval.qupath_cli import main

    data = tmp_path / "data"
    ParquetStore(data).write("benchmark_items", items())
    runs = pd.DataFrame([_run("0", 0, [[1700, 1300, 350, 280]])])
    ParquetStore(data).write(
        "predictions", runs.assign(benchmark_name="tcga_slidebench"), "e/tcga_slidebench"
    )
    reported = tmp_path / "reported.json"
    if case == "not UTF-8":
        reported.write_bytes(b'[{"benchmark_id": "\xff"}]')
        message = r"not UTF-8 text \(byte 0xff at offset 19\)"
    else:
        reported.write_text(REPORTED_BAD[case][0])
        message = REPORTED_BAD[case][1]
    args = ["--data-dir", str(data), "export", "--experiment", "e", "--reported", str(reported)]
    assert main([*args, "--benchmark", "tcga_slidebench"]) == 2
    err = capsys.readouterr().err
    assert re.match(rf"giant-qupath: error: {re.escape(str(reported))}: {message}", err), err
    assert "Traceback" not in err and not (data / "qupath").exists()


def test_a_bom_reported_file_is_read_and_export_runs_every_benchmark(tmp_path: Path, capsys) -> None:
    from giant_assets.core.storage import ParquetStore
    from giant_assets.eval.qupath_cli import main

    data = tmp_path / "data"
    store = ParquetStore(data)
    store.write("benchmark_items", items())
    store.write(
        "predictions",
        pd.DataFrame([_run("0", 0, [[1, 2, 3, 4]])]).assign(benchmark_name="tcga_slidebench"),
        "e/tcga_slidebench",
    )
    store.write(
        "predictions",
        pd.DataFrame([_run("1", 0, [[5, 6, 7, 8]])]).assign(benchmark_name="tcga_expert_vqa"),
        "e/tcga_expert_vqa",
    )
    store.write(
        "predictions",
        pd.DataFrame([_run("0", 0, [[5, 6, 7, 8]])]).assign(benchmark_name="tcga_slidebench"),
        "f/tcga_slidebench",
    )
    reported = tmp_path / "reported.json"
    regions = [
        {"benchmark_name": "tcga_expert_vqa", "benchmark_id": "1", "run_index": 0, "box": [9, 9, 9, 9]}
    ]
    reported.write_bytes(b"\xef\xbb\xbf" + json.dumps(regions).encode())
    assert main(["--data-dir", str(data), "export", "--experiment", "e", "--reported", str(reported)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["tcga_expert_vqa", "tcga_slidebench"]
    assert "and 1 reported region(s)" in out[0] and "reported region" not in out[1]
    vqa = data / "qupath" / "e" / "tcga_expert_vqa" / "TCGA-D8-A1XK-01Z-00-DX1.geojson"
    assert len(json.loads(vqa.read_text())["features"]) == 2
    assert sorted(p.name for p in (data / "qupath" / "e").iterdir()) == ["tcga_expert_vqa", "tcga_slidebench"]
    # without --benchmark, every region must name its benchmark
    reported.write_text(json.dumps([{"benchmark_id": "1", "run_index": 0, "box": [9, 9, 9, 9]}]))
    assert main(["--data-dir", str(data), "export", "--experiment", "e", "--reported", str(reported)]) == 2
    assert "region 0: missing field 'benchmark_name'" in capsys.readouterr().err


def test_every_flag_has_help() -> None:
    import argparse

    from giant_assets.eval.qupath_cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {"export", "import"}
    for sub in [parser, *commands.choices.values()]:
        flags = [
            a for a in sub._actions if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        ]
        assert flags and all(a.help and a.help.strip() for a in flags), [a.dest for a in flags if not a.help]
