"""Slide resolution under a WSI root: both layouts, path escapes refused, bad slides reported."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.sample import SAMPLE_SLIDES
from giant_assets.multipathqa.wsi import read_slide_metadata, resolve_items, resolve_slide
from giant_assets.slides.synthetic import SlideDesign, write_pyramidal_slide


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
    """934 rows whose slides are absent resolve without opening anything (timing is in benchmarks/)."""
    items = pd.DataFrame({"benchmark_name": ["gtex"] * 934, "image_path": [f"s{i}.tiff" for i in range(934)]})
    out = resolve_items(items, Path(tmp_path))
    assert (out["wsi_status"] == "missing").all() and len(out) == 934
