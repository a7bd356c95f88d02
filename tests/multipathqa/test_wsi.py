"""Slide resolution under a WSI root: every layout in its order, path escapes refused, bad slides reported."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from giant_assets.multipathqa import wsi
from giant_assets.multipathqa.sample import SAMPLE_SLIDES
from giant_assets.multipathqa.wsi import read_slide_metadata, resolve_items, resolve_slide, strip_uuid_affix
from giant_assets.slides.synthetic import SlideDesign
from tests.support.corrupt_slides import corrupt_smallest_level_tiles
from tests.support.slides import write_pyramidal_slide

FILE_ID = "d3c8a4a6-5e1e-4c0c-9a8e-2f1d3c2b6a01"
SLIDE_UUID = "1f0e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
OTHER_UUID = "22222222-3333-4444-8555-666666666666"
NAME = "TCGA-05-4244-01Z-00-DX1.svs"


def test_both_layouts_resolve(sample_wsi_root):
    direct = resolve_slide(sample_wsi_root, "gtex", "GTEX-111CU-1826.tiff")
    nested = resolve_slide(sample_wsi_root, "gtex", "GTEX-1117F-0126.tiff")
    assert direct.status == "ok" and direct.path == sample_wsi_root / "GTEX-111CU-1826.tiff"
    assert nested.status == "ok" and nested.path == sample_wsi_root / "gtex" / "GTEX-1117F-0126.tiff"


def test_missing_slide_names_the_places_tried(sample_wsi_root):
    res = resolve_slide(sample_wsi_root, "gtex", "GTEX-NOPE.tiff")
    assert res.status == "missing" and res.path is None
    assert str(sample_wsi_root / "gtex" / "GTEX-NOPE.tiff") in res.error


def test_paths_never_escape_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "tcga").mkdir(parents=True)
    outside = tmp_path / "secret.svs"
    outside.write_bytes(b"x")
    os.symlink(outside, root / "tcga" / "link.svs")
    for image_path in ("../secret.svs", str(outside), "tcga/../../secret.svs", "C:\\slides\\a.svs"):
        res = resolve_slide(root, "tcga", image_path)
        assert res.status == "unsafe_path" and res.path is None, image_path
    via_link = resolve_slide(root, "tcga", "link.svs")
    assert via_link.status == "unsafe_path" and "outside the WSI root" in via_link.error


def test_metadata_matches_the_generated_slides(sample_wsi_root):
    svs = next(s for s in SAMPLE_SLIDES if s.svs)
    meta = read_slide_metadata(sample_wsi_root / svs.relpath)
    assert (meta["width"], meta["height"]) == (svs.design.width, svs.design.height)
    assert meta["level_count"] == 4 and meta["level_downsamples"] == [1.0, 2.0, 4.0, 8.0]
    assert meta["vendor"] == "aperio" and meta["mpp_x"] == 0.5
    tiff = next(s for s in SAMPLE_SLIDES if not s.svs)
    meta = read_slide_metadata(sample_wsi_root / tiff.relpath)
    assert meta["vendor"] == "generic-tiff" and meta["mpp_x"] == 0.5


def test_bad_slides_fail_their_own_rows_only(tmp_path):
    root = tmp_path / "root"
    write_pyramidal_slide(root / "good.tiff", SlideDesign(1024, 768), levels=3)
    (root / "corrupt.svs").write_bytes(b"II*\x00garbage")
    (root / "empty.tiff").write_bytes(b"")
    items = pd.DataFrame(
        {
            "benchmark_name": ["tcga"] * 5,
            "image_path": ["good.tiff", "corrupt.svs", "empty.tiff", "absent.svs", "../x.svs"],
        }
    )
    out = resolve_items(items, root)
    assert out["wsi_status"].tolist() == ["ok", "unreadable", "unreadable", "missing", "unsafe_path"]
    assert out.loc[0, "width"] == 1024 and out.loc[0, "level_count"] == 3
    assert "corrupt.svs" in out.loc[1, "wsi_error"] and "OpenSlide" in out.loc[1, "wsi_error"]
    assert out.loc[1:, "width"].isna().all()


def test_resolution_is_fast_enough_to_not_touch_absent_slides(tmp_path):
    """934 rows whose slides are absent resolve without opening anything (timing is in perf/)."""
    items = pd.DataFrame({"benchmark_name": ["gtex"] * 934, "image_path": [f"s{i}.tiff" for i in range(934)]})
    out = resolve_items(items, Path(tmp_path))
    assert (out["wsi_status"] == "missing").all() and len(out) == 934


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"slide")
    return path


def test_uuid_affixes_are_stripped_only_when_they_are_uuids():
    assert strip_uuid_affix(f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs") == NAME
    assert strip_uuid_affix(f"{SLIDE_UUID}_{NAME}") == NAME
    assert strip_uuid_affix(f"{SLIDE_UUID.upper()}-{NAME}") == NAME
    for unchanged in (NAME, "0005f7aaab2800f6170c399693a96917.tiff", "GTEX-1117F-0126.tiff", "noext"):
        assert strip_uuid_affix(unchanged) == unchanged


def test_each_layout_resolves(tmp_path):
    """gdc-client (exact and GDC's own UUID-suffixed name), shared tcga/ folder, UUID prefix/suffix."""
    cases = {
        "gdc exact": (f"{FILE_ID}/{NAME}", "tcga"),
        "gdc name": (f"{FILE_ID}/TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs", "tcga"),
        "gdc under tcga/": (f"tcga/{FILE_ID}/TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs", "tcga_slidebench"),
        "shared tcga/": (f"tcga/{NAME}", "tcga_expert_vqa"),
        "suffix in root": (f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs", "tcga"),
        "prefix in benchmark": (f"tcga_slidebench/{SLIDE_UUID}_{NAME}", "tcga_slidebench"),
    }
    for label, (relpath, benchmark) in cases.items():
        root = tmp_path / label.replace(" ", "_").replace("/", "")
        target = _touch(root / relpath)
        res = resolve_slide(root, benchmark, NAME, FILE_ID)
        assert res.status == "ok" and res.path == target.resolve(), (label, res)


def test_earlier_places_win_and_the_tcga_folder_is_only_for_tcga_benchmarks(tmp_path):
    flat = _touch(tmp_path / NAME)
    _touch(tmp_path / FILE_ID / NAME)
    _touch(tmp_path / f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs")
    assert resolve_slide(tmp_path, "tcga", NAME, FILE_ID).path == flat.resolve()
    _touch(tmp_path / "tcga" / "GTEX-1117F-0126.tiff")
    gtex = resolve_slide(tmp_path, "gtex", "GTEX-1117F-0126.tiff", "GTEX-1117F-0126")
    assert gtex.status == "missing" and "tcga" not in gtex.error


def test_file_id_places_only_for_uuid_file_ids(tmp_path):
    _touch(tmp_path / "GTEX-1117F-0126" / "GTEX-1117F-0126.tiff")
    res = resolve_slide(tmp_path, "gtex", "GTEX-1117F-0126.tiff", "GTEX-1117F-0126")
    assert res.status == "missing"
    escape = resolve_slide(tmp_path, "tcga", NAME, "../../etc")
    assert escape.status == "missing" and "etc" not in escape.error


def test_two_candidates_in_one_place_are_ambiguous_naming_both(tmp_path):
    first = _touch(tmp_path / "tcga" / f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs")
    second = _touch(tmp_path / f"{OTHER_UUID}_{NAME}")
    res = resolve_slide(tmp_path, "tcga", NAME, FILE_ID)
    assert res.status == "ambiguous" and res.path is None
    assert str(first) in res.error and str(second) in res.error
    gdc_a = _touch(tmp_path / FILE_ID / f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs")
    gdc_b = _touch(tmp_path / FILE_ID / f"TCGA-05-4244-01Z-00-DX1.{OTHER_UUID}.svs")
    res = resolve_slide(tmp_path, "tcga", NAME, FILE_ID)
    assert res.status == "ambiguous" and str(gdc_a) in res.error and str(gdc_b) in res.error


def test_one_file_reached_twice_is_not_ambiguous(tmp_path):
    target = _touch(tmp_path / "store" / "slide.bin")
    os.symlink(target, tmp_path / f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs")
    os.symlink(target, tmp_path / f"{SLIDE_UUID}_{NAME}")
    res = resolve_slide(tmp_path, "tcga", NAME, FILE_ID)
    assert res.status == "ok" and res.path == target.resolve()


def test_new_layouts_never_escape_the_root(tmp_path):
    root = tmp_path / "root"
    outside = _touch(tmp_path / "secret.svs")
    (root / FILE_ID).mkdir(parents=True)
    os.symlink(outside, root / FILE_ID / NAME)
    res = resolve_slide(root, "tcga", NAME, FILE_ID)
    assert res.status == "unsafe_path" and "outside the WSI root" in res.error
    other = tmp_path / "other"
    (other / "tcga").mkdir(parents=True)
    os.symlink(outside, other / "tcga" / f"TCGA-05-4244-01Z-00-DX1.{SLIDE_UUID}.svs")
    res = resolve_slide(other, "tcga_expert_vqa", NAME, None)
    assert res.status == "unsafe_path" and res.path is None
    third = tmp_path / "third"
    third.mkdir()
    os.symlink(tmp_path, third / FILE_ID)  # a gdc folder that is a link out of the root
    res = resolve_slide(third, "tcga", "secret.svs", FILE_ID)
    assert res.status == "unsafe_path"


def test_an_image_path_that_is_a_directory_says_so(tmp_path):
    (tmp_path / "gtex" / "GTEX-1117F-0126.tiff").mkdir(parents=True)
    res = resolve_slide(tmp_path, "gtex", "GTEX-1117F-0126.tiff")
    assert res.status == "unreadable" and "is a directory, not a slide file" in res.error
    assert "not found" not in res.error


def test_a_slide_whose_tiles_do_not_decode_is_unreadable(tmp_path):
    for name, svs, codec in (("tiles.tiff", False, "ZIPDecode"), ("tiles.svs", True, "JPEG")):
        path = write_pyramidal_slide(tmp_path / name, SlideDesign(1024, 768), levels=3, svs=svs)
        read_slide_metadata(path)  # intact: decodes
        assert corrupt_smallest_level_tiles(path) == 1  # the 256 x 192 level is one tile
        items = pd.DataFrame({"benchmark_name": ["tcga"], "image_path": [name]})
        out = resolve_items(items, tmp_path)
        assert out.loc[0, "wsi_status"] == "unreadable", name
        assert name in out.loc[0, "wsi_error"] and codec in out.loc[0, "wsi_error"]


def test_a_tree_of_1000_files_is_listed_once_for_934_rows(tmp_path, monkeypatch):
    for i in range(1000):
        _touch(tmp_path / "tcga" / f"{i:08d}-0000-4000-8000-000000000000" / f"TCGA-{i}.{SLIDE_UUID}.svs")
    walks = []
    real_walk = os.walk
    monkeypatch.setattr(wsi.os, "walk", lambda *a, **k: walks.append(a) or real_walk(*a, **k))
    items = pd.DataFrame(
        {
            "benchmark_name": ["tcga_slidebench"] * 934,
            "image_path": [f"TCGA-X{i}.svs" for i in range(934)],
            "file_id": [f"{i:08d}-0000-4000-8000-000000000000" for i in range(934)],
        }
    )
    out = resolve_items(items, tmp_path)
    assert len(walks) == 1 and (out["wsi_status"] == "missing").all()
    items["image_path"] = [f"TCGA-{i}.svs" for i in range(934)]  # now each matches its gdc folder's file
    out = resolve_items(items, tmp_path)
    assert (out["wsi_status"] == "unreadable").all()  # found (5-byte files), then OpenSlide refuses them
    assert out.loc[7, "wsi_error"].startswith(str(tmp_path / "tcga" / "00000007-0000-4000-8000-000000000000"))
