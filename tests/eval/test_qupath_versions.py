"""QuPath exports as each version writes them (tests/eval/qupath_versions: one scenario in the layouts of
QuPath 0.2 to 0.6, plus its gzip and ZIP exports), read back; shapely's reading of the same JSON and the
types the scenario was written with are the oracle. Also: large exports streamed, hostile files."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import shapely
import shapely.geometry

import giant_assets.geometry.qupath as qupath_geometry
from giant_assets.eval.qupath import CROP_CLASS, import_qupath
from giant_assets.eval.qupath_cli import main
from giant_assets.geometry.qupath import QuPathFileError, read_qupath_objects
from tests.eval.qupath_versions.scenario import VERSIONS, objects
from tests.support.qupath_layouts import Obj, cell_objects, export_text, rect, write_export

HERE = Path(__file__).with_name("qupath_versions")
SLIDE = "TCGA-EA-A3HT-01Z-00-DX1.svs"
FIXTURES = {v: HERE / f"v{v}" / "TCGA-EA-A3HT-01Z-00-DX1.geojson" for v in VERSIONS}
# what the scenario holds, in order: the type each object was written as, an annotation's class
TYPES = ["annotation"] * 5 + ["detection"] * 2 + ["cell"] * 2 + ["tile", "tma_core"]
CLASSES = ["Tumor", "Tumor: Positive", "Mitosis", None, CROP_CLASS]
SKIPPED = {"line": 1, CROP_CLASS: 1, "detection": 2, "cell": 2, "tile": 1, "tma_core": 1}


def items(slide: str = SLIDE, width: int = 4096, height: int = 3072) -> pd.DataFrame:
    rows = [("tcga", "0", f"tcga/{slide}"), ("tcga", "1", slide), ("tcga", "2", "OTHER.svs")]
    frame = pd.DataFrame(rows, columns=["benchmark_name", "benchmark_id", "image_path"])
    return frame.assign(width=width, height=height)


def raw_features(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, list) else data["features"]


def test_the_fixtures_are_the_scenario_as_each_version_writes_it() -> None:
    """The committed files are what the layout writer gives (so the scenario below is what they hold),
    and carry each version's markers as QuPath's serialiser writes them."""
    for version, options in VERSIONS.items():
        assert FIXTURES[version].read_text(encoding="utf-8") == export_text(objects(), version, **options)
    first = {v: raw_features(p)[0] for v, p in FIXTURES.items()}
    assert first["0.2"]["id"] == "PathAnnotationObject" and "objectType" not in first["0.2"]["properties"]
    assert "id" not in first["0.3"] and first["0.3"]["properties"]["object_type"] == "annotation"
    assert first["0.4"]["properties"]["objectType"] == "annotation" and len(first["0.4"]["id"]) == 36
    assert raw_features(FIXTURES["0.3"])[1]["properties"]["classification"]["parentClass"]["name"] == "Tumor"
    assert raw_features(FIXTURES["0.6"])[1]["properties"]["classification"]["names"] == ["Tumor", "Positive"]
    assert raw_features(FIXTURES["0.6"])[4]["properties"]["metadata"]["reason"] == "look at the margin"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_reads_with_qupath_types_and_class_names(version: str) -> None:
    read = read_qupath_objects(FIXTURES[version])
    assert [o.object_type for o in read] == TYPES
    annotations = read[:5]
    assert [o.classification for o in annotations] == CLASSES
    for obj, feature in zip(annotations, raw_features(FIXTURES[version]), strict=False):
        assert obj.geometry.equals(shapely.geometry.shape(feature["geometry"])), obj.index
    assert [o.is_line for o in annotations] == [False, False, False, True, False]
    assert all(o.geometry is None for o in read[5:])  # other objects: only counted, never built
    ids = [o.feature_id for o in read]
    assert ids == ([""] * 11 if version < "0.4" else [o.uid for o in objects()])


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_imports_only_the_pathologists_areas_and_points(version: str) -> None:
    frame, summary = import_qupath([FIXTURES[version]], items())
    assert (summary.regions, summary.skipped) == (3, SKIPPED)
    item0 = frame[frame.benchmark_id == "0"]
    assert list(item0["label"]) == ["Tumor", "Tumor: Positive", "Mitosis", "Mitosis"]
    assert list(item0["kind"]) == ["polygon", "multipolygon", "box", "box"]
    assert set(frame.benchmark_id) == {"0", "1"}  # every item of the slide, none of another


def test_gzip_and_zip_exports_read_as_the_plain_file(tmp_path: Path) -> None:
    """QuPath names them X.geojson.gz and X.zip (holding X.geojson)."""
    gz = write_export(tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.geojson.gz", objects(), "0.6")
    zipped = write_export(tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.zip", objects(), "0.5")
    assert gzip.decompress(gz.read_bytes()).decode() == FIXTURES["0.6"].read_text(encoding="utf-8")
    assert zipfile.ZipFile(zipped).namelist() == ["TCGA-EA-A3HT-01Z-00-DX1.geojson"]
    for path, version in ((gz, "0.6"), (zipped, "0.5")):
        frame, summary = import_qupath([path], items())
        plain, _ = import_qupath([FIXTURES[version]], items())
        assert (summary.files, summary.regions, summary.skipped) == (1, 3, SKIPPED)
        assert frame[["benchmark_id", "kind", "label"]].equals(plain[["benchmark_id", "kind", "label"]])
        assert [json.dumps(c) for c in frame.coords] == [json.dumps(c) for c in plain.coords]
        uid = objects()[0].uid
        assert (
            frame.region_id.iloc[0] == f"{gz.name if path == gz else 'TCGA-EA-A3HT-01Z-00-DX1.geojson'}#{uid}"
        )


def test_a_folder_with_gzip_and_zip_exports_imports_both(tmp_path: Path, capsys) -> None:
    from giant_assets.core.storage import ParquetStore

    folder = tmp_path / "exports"
    write_export(folder / "TCGA-EA-A3HT-01Z-00-DX1.geojson.gz", objects(), "0.6")
    other = [Obj("annotation", rect(100, 100, 50, 40), ("Stroma",))]
    write_export(folder / "sub" / "TCGA-EA-A3HT-01Z-00-DX1 - stroma.zip", other, "0.5")
    data = tmp_path / "data"
    ParquetStore(data).write("benchmark_items", items())
    out = tmp_path / "regions.json"
    assert main(["--data-dir", str(data), "import", str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("4 annotation(s) from 2 file(s) -> 10 reference region row(s)")
    labels = {r["label"] for r in json.loads(out.read_text())}
    assert labels == {"Tumor", "Tumor: Positive", "Mitosis", "Stroma"}


def test_a_qupath_project_is_explained_and_its_own_files_left_out(tmp_path: Path, capsys) -> None:
    from giant_assets.core.storage import ParquetStore

    data = tmp_path / "data"
    ParquetStore(data).write("benchmark_items", items())
    project = tmp_path / "project"
    (project / "data" / "1").mkdir(parents=True)
    (project / "project.qpproj").write_text('{"version": "0.5.1", "images": []}')
    (project / "data" / "1" / "server.json").write_text('{"builderType": "uri"}')  # not an export
    (project / "classifiers").mkdir()
    (project / "classifiers" / "classes.json").write_text('{"pathClasses": []}')
    for given in (project, project / "project.qpproj"):
        assert main(["--data-dir", str(data), "import", str(given)]) == 2
        err = capsys.readouterr().err
        assert "is a QuPath project" in err and "File > Export objects as GeoJSON" in err, err
    # QuPath saves exports into the project folder by default: those are read, its own files are not
    write_export(project / "TCGA-EA-A3HT-01Z-00-DX1.geojson", objects(), "0.5")
    out = tmp_path / "r.json"
    assert main(["--data-dir", str(data), "import", str(project), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("3 annotation(s) from 1 file(s)")


def test_ids_are_unique_per_slide_across_files(tmp_path: Path) -> None:
    copy = tmp_path / "TCGA-EA-A3HT-01Z-00-DX1 - again.geojson"
    copy.write_bytes(FIXTURES["0.4"].read_bytes())
    with pytest.raises(
        QuPathFileError, match=r"a second feature with this id on slide 'TCGA-EA-A3HT.*first is in"
    ):
        import_qupath([FIXTURES["0.4"], copy], items())
    # the same ids on another slide are another slide's objects
    other = tmp_path / "OTHER.geojson"
    other.write_bytes(FIXTURES["0.4"].read_bytes())
    frame, summary = import_qupath([FIXTURES["0.4"], other], items(width=5000))
    assert summary.regions == 6 and set(frame.benchmark_id) == {"0", "1", "2"}


def test_large_cell_exports_are_streamed_without_building_cells(tmp_path: Path, monkeypatch) -> None:
    """A 1,500-cell export (~3 MB) is read a feature at a time: the import's peak Python allocation
    stays far below what the file as a parsed whole needs; a cell's geometry is never parsed."""
    path = tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.geojson"
    cells = list(cell_objects(1500, 4096, 3072))
    bad = Obj("cell", {"type": "Polygon", "coordinates": "not coordinates"}, ("Tumor",))
    write_export(path, [objects()[0], bad, *cells], "0.4")
    tracemalloc.start()
    json.loads(path.read_text())
    whole = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    monkeypatch.setattr(qupath_geometry, "_CHUNK", 1 << 16)
    tracemalloc.start()
    frame, summary = import_qupath([path], items())
    streamed = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert summary.skipped == {"cell": 1501} and summary.regions == 1
    assert streamed < whole / 10, (streamed, whole)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_chunk_boundaries_anywhere_read_the_same(tmp_path: Path, monkeypatch, chunk: int) -> None:
    """Numbers, strings and escapes cut by a chunk's end are read whole, a single Feature's top-level
    members (a number id too) as well as an array's or a collection's features."""
    single = tmp_path / "single.geojson"
    single.write_text(
        '{"type": "Feature", "id": 123456789012, "geometry": {"type": "Point", "coordinates": [1, 2]}}'
    )
    expected = [
        (o.object_type, o.classification, o.feature_id, o.geometry)
        for o in read_qupath_objects(FIXTURES["0.5"])
    ]
    monkeypatch.setattr(qupath_geometry, "_CHUNK", chunk)
    for version in ("0.2", "0.5"):
        got = [
            (o.object_type, o.classification, o.feature_id, o.geometry)
            for o in read_qupath_objects(FIXTURES[version])
        ]
        assert [g[:2] for g in got] == [e[:2] for e in expected]
        assert all(
            a[3] is None and b[3] is None or a[3].equals(b[3]) for a, b in zip(got, expected, strict=True)
        )
    (point,) = read_qupath_objects(single)
    assert point.feature_id == "123456789012" and point.geometry.equals(shapely.MultiPoint([(1, 2)]))


HOSTILE = {
    "100,000 deep": (
        b'{"type":"FeatureCollection","features":[' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
        r"invalid export: JSON nested too deeply at character 40",
    ),
    "5,000 digits": (
        b'[{"type":"Feature","geometry":{"type":"Point","coordinates":[' + b"9" * 5000 + b",1]}}]",
        r"invalid JSON at character 1: Exceeds the limit \(4300 digits\)",
    ),
    "not UTF-8": (b'[{"type":"Feature","properties":{"name":"\xff"}}]', r"not UTF-8 text"),
    "NaN coordinate": (
        b'[{"type":"Feature","geometry":{"type":"Point","coordinates":[NaN,1]}}]',
        r"feature 0: geometry: coordinates must be finite, got NaN or infinity",
    ),
    "1e400": (
        b'[{"type":"Feature","geometry":{"type":"Point","coordinates":[1e400,1]}}]',
        r"feature 0: geometry: coordinates must be finite, got NaN or infinity",
    ),
    "truncated": (
        b'{"type":"FeatureCollection","features":[{"type":"Feature"',
        r"invalid JSON: .* at character",
    ),
    "garbage after": (b'[{"type":"Feature","geometry":{"type":"Point","coordinates":[1,1]}}] x', None),
    "a Polygon": (b'{"type":"Polygon","coordinates":[]}', r"not a QuPath GeoJSON export"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_exports_are_refused_naming_the_file(tmp_path: Path, case: str) -> None:
    data, message = HOSTILE[case]
    path = tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.geojson"
    path.write_bytes(data)
    if message is None:  # QuPath (Gson, lenient) reads the first value and ignores the rest: so do we
        assert len(read_qupath_objects(path)) == 1
        return
    with pytest.raises(QuPathFileError, match=f"^{path}: {message}"):
        import_qupath([path], items())


def test_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.geojson"
    path.write_bytes(b"\xef\xbb\xbf" + FIXTURES["0.4"].read_bytes())
    assert [o.classification for o in read_qupath_objects(path)][:5] == CLASSES
    gz = tmp_path / "x.geojson.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert len(read_qupath_objects(gz)) == len(TYPES)


@pytest.mark.parametrize("size", ["nan", "inf", "-inf", "0", "-5", "1e-300", "0.5"])
def test_point_sizes_that_make_no_box_are_refused(tmp_path: Path, capsys, size: str) -> None:
    from giant_assets.core.storage import ParquetStore

    with pytest.raises(ValueError, match="point size must be a finite number >= 1 level-0 pixel"):
        import_qupath([FIXTURES["0.4"]], items(), point_size=float(size))
    data = tmp_path / "data"
    ParquetStore(data).write("benchmark_items", items())
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "--data-dir",
                str(data),
                "import",
                str(FIXTURES["0.4"]),
                f"--point-size={size}",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "giant-qupath: error: point size must be a finite number >= 1" in capsys.readouterr().err
    assert not out.exists()
    frame, _ = import_qupath([FIXTURES["0.4"]], items(), point_size=1)
    boxes = frame[(frame.kind == "box") & (frame.benchmark_id == "0")].coords.tolist()
    assert boxes[:2] == [[1800.0, 1399.75, 1.0, 1.0], [9.5, 19.5, 1.0, 1.0]]


def test_an_annotation_below_the_slide_is_refused(tmp_path: Path) -> None:
    """Inside the width, past the height only (and, separately, past the width only)."""
    for x, y, axis in ((100, 3000, "y 3000..3100"), (4000, 100, "x 4000..4100")):
        path = write_export(
            tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.geojson", [Obj("annotation", rect(x, y, 100, 100))], "0.6"
        )
        with pytest.raises(
            QuPathFileError, match=rf"lies outside slide .*\(4096 x 3072 level-0 pixels\).*{axis}"
        ):
            import_qupath([path], items())
    on_edge = write_export(
        tmp_path / "TCGA-EA-A3HT-01Z-00-DX1.geojson", [Obj("annotation", rect(3996, 2972, 100, 100))], "0.6"
    )
    assert import_qupath([on_edge], items())[1].regions == 1  # touching the far corner is inside


def test_two_id_less_annotations_both_import(tmp_path: Path) -> None:
    """0.2 and 0.3 write no UUID: two annotations without ids are two annotations, not a repeat."""
    two = [
        Obj("annotation", rect(10, 10, 20, 20), ("Tumor",)),
        Obj("annotation", rect(50, 50, 20, 20), ("Tumor",)),
    ]
    for version in ("0.2", "0.3"):
        path = write_export(tmp_path / version / "TCGA-EA-A3HT-01Z-00-DX1.geojson", two, version)
        frame, summary = import_qupath([path], items())
        assert summary.regions == 2
        assert sorted(set(frame.region_id)) == [
            "TCGA-EA-A3HT-01Z-00-DX1.geojson#0",
            "TCGA-EA-A3HT-01Z-00-DX1.geojson#1",
        ]
