"""Slide formats beyond TIFF: a real DICOM-WSI (written by wsidicomizer) opened through OpenSlide and read
by the platform, folders that are not one slide, MIRAX companion folders, and WSI-root resolution.

The DICOM frames are baseline JPEG at quality 90 (4:2:2), so pixels are compared with the source pyramid
(``render_level``, the generator's own arrays) within a lossy-JPEG tolerance: mean absolute difference
under 1.0 per channel and 99th percentile at most 16 (measured: 0.3-0.5 and 7-10).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import openslide
import pandas as pd
import pytest

from giant_assets.multipathqa.schema import WSI_MISSING, WSI_OK, WSI_UNREADABLE, WSI_UNSAFE
from giant_assets.multipathqa.wsi import resolve_items, resolve_slide
from giant_assets.slides.access import SlideError, crop, open_slide, thumbnail
from giant_assets.slides.formats import openslide_target, slide_bytes
from giant_assets.slides.synthetic import LESION, TISSUE, Blob, SlideDesign, render_level
from giant_assets.slides.views import overview, region
from tests.support.dicom_slides import write_dicom_wsi

DESIGN = SlideDesign(
    1024, 768, tissue=(Blob(512, 384, 400, 300, TISSUE),), lesions=(Blob(700, 300, 60, 40, LESION),)
)
MEAN_TOL, P99_TOL = 1.0, 16


def _close(image, expected: np.ndarray) -> None:
    got = np.asarray(image.convert("RGB")).astype(int)
    assert got.shape == expected.shape
    err = np.abs(got - expected.astype(int))
    assert err.mean() < MEAN_TOL and np.percentile(err, 99) <= P99_TOL, (err.mean(), np.percentile(err, 99))


@pytest.fixture(scope="module")
def dicom_root(tmp_path_factory) -> Path:
    """A WSI root with one DICOM-WSI folder ``slides/case1`` (three levels, one instance each)."""
    root = tmp_path_factory.mktemp("wsi")
    write_dicom_wsi(root / "slides" / "case1", DESIGN, levels=3)
    return root


def test_the_dicom_opens_through_the_folder_or_any_instance(dicom_root):
    folder = dicom_root / "slides" / "case1"
    instances = sorted(folder.glob("*.dcm"))
    assert len(instances) == 3
    for path in (folder, instances[-1]):
        with open_slide(path) as slide:
            assert slide.properties[openslide.PROPERTY_NAME_VENDOR] == "dicom"
            assert slide.dimensions == (1024, 768)
            assert slide.level_dimensions == ((1024, 768), (512, 384), (256, 192))
    # the folder opens through a real OpenSlide handle on one of its instances
    assert openslide_target(folder) in instances
    with openslide.OpenSlide(openslide_target(folder)) as slide:
        assert slide.level_count == 3


def test_crops_and_overviews_of_the_dicom_match_the_source_pyramid(dicom_root):
    with open_slide(dicom_root / "slides" / "case1") as slide:
        # level 0, no resize: the box around the lesion, pixel for pixel
        c = crop(slide, [600, 220, 256, 192], target_long_side=256)
        assert (c.level, c.image.size) == (0, (256, 192))
        _close(c.image, render_level(DESIGN, 1)[220:412, 600:856])
        # the whole slide at 256 px is level 2 (downsample 4), read as it is
        c = crop(slide, [0, 0, 1024, 768], target_long_side=256)
        assert c.level == 2
        _close(c.image, render_level(DESIGN, 4))
        t = thumbnail(slide, long_side=512, guides=False)
        assert t.level == 1
        _close(t.image, render_level(DESIGN, 2))
        # the agent's views go through the same reads
        _close(overview(slide, 512, guides=False).image, render_level(DESIGN, 2))
        _close(
            region(slide, [600, 220, 256, 192], 256, guides=False).image,
            render_level(DESIGN, 1)[220:412, 600:856],
        )
        lesion = np.asarray(region(slide, [680, 290, 40, 20], 40, guides=False).image).astype(int)
        assert np.abs(lesion - np.array(LESION)).max(axis=2).mean() < 12


def test_a_folder_without_dicom_instances_is_not_a_slide(tmp_path):
    empty = tmp_path / "scans"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    with pytest.raises(SlideError, match=r"folder .*scans is not a slide.*no \.dcm files"):
        open_slide(empty)


def test_a_folder_of_two_series_is_refused_naming_it(dicom_root, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(dicom_root / "slides" / "case1", mixed)
    write_dicom_wsi(tmp_path / "other", DESIGN, levels=1)
    for f in (tmp_path / "other").glob("*.dcm"):
        shutil.copy(f, mixed / f.name)
    with pytest.raises(SlideError, match=r"folder .*mixed holds 2 DICOM series"):
        open_slide(mixed)
    # one instance still opens its own series
    with open_slide(next((tmp_path / "other").glob("*.dcm"))) as slide:
        assert slide.level_count == 1


def test_a_file_named_dcm_that_is_not_dicom_names_it(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.dcm").write_bytes(b"\x00" * 10)
    with pytest.raises(SlideError, match=r"a\.dcm is not a readable DICOM file"):
        open_slide(bad)


def test_the_dicom_folder_resolves_under_the_wsi_root_and_reads_its_metadata(dicom_root):
    res = resolve_slide(dicom_root, "tcga", "slides/case1")
    assert res.status == WSI_OK and res.path == dicom_root / "slides" / "case1"
    items = pd.DataFrame(
        {
            "benchmark_name": ["tcga", "tcga"],
            "image_path": ["slides/case1", "slides/nothing"],
            "file_id": [None] * 2,
        }
    )
    out = resolve_items(items, dicom_root)
    assert out["wsi_status"].tolist() == [WSI_OK, WSI_MISSING]
    assert (out.loc[0, "width"], out.loc[0, "height"], out.loc[0, "level_count"]) == (1024, 768, 3)
    assert out.loc[0, "vendor"] == "dicom"


def test_a_dicom_instance_leading_outside_the_root_is_unsafe(dicom_root, tmp_path):
    root = tmp_path / "root"
    folder = root / "case"
    shutil.copytree(dicom_root / "slides" / "case1", folder)
    outside = tmp_path / "outside.dcm"
    first = sorted(folder.glob("*.dcm"))[0]
    shutil.move(first, outside)
    first.symlink_to(outside)
    for image_path in ("case", f"case/{sorted(folder.glob('*.dcm'))[-1].name}"):
        res = resolve_slide(root, "gtex", image_path)
        assert res.status == WSI_UNSAFE and "resolves outside the WSI root" in res.error, image_path


def test_a_mixed_folder_is_unreadable_in_its_own_row(dicom_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(dicom_root / "slides" / "case1", root / "mixed")
    write_dicom_wsi(tmp_path / "other", DESIGN, levels=1)
    for f in (tmp_path / "other").glob("*.dcm"):
        shutil.copy(f, root / "mixed" / f.name)
    (root / "plain").mkdir()
    items = pd.DataFrame(
        {"benchmark_name": ["gtex", "gtex"], "image_path": ["mixed", "plain"], "file_id": [None] * 2}
    )
    out = resolve_items(items, root)
    assert out["wsi_status"].tolist() == [WSI_UNREADABLE, WSI_UNREADABLE]
    assert "mixed holds 2 DICOM series" in out.loc[0, "wsi_error"]
    assert "not a slide file nor a DICOM-WSI folder" in out.loc[1, "wsi_error"]


def test_slide_bytes_count_a_dicom_folder_and_a_mirax_companion_folder(tmp_path):
    dcm = tmp_path / "d"
    dcm.mkdir()
    (dcm / "a.dcm").write_bytes(b"1" * 100)
    (dcm / "b.DCM").write_bytes(b"2" * 20)
    (dcm / "readme.txt").write_bytes(b"3" * 1000)  # not an instance
    assert slide_bytes(dcm) == 120
    mrxs = tmp_path / "case.mrxs"
    mrxs.write_bytes(b"x" * 7)
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "Slidedat.ini").write_bytes(b"y" * 30)
    (tmp_path / "case" / "Data0000.dat").write_bytes(b"z" * 500)
    assert slide_bytes(mrxs) == 537
    (tmp_path / "alone.svs").write_bytes(b"s" * 9)
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "x").write_bytes(b"q" * 50)  # a folder of the same name is no companion of an SVS
    assert slide_bytes(tmp_path / "alone.svs") == 9


def test_an_instance_without_a_series_uid_names_it(dicom_root, tmp_path):
    import pydicom

    folder = tmp_path / "noseries"
    folder.mkdir()
    ds = pydicom.dcmread(sorted((dicom_root / "slides" / "case1").glob("*.dcm"))[0])
    del ds.SeriesInstanceUID
    ds.save_as(folder / "x.dcm")
    with pytest.raises(SlideError, match=r"x\.dcm has no SeriesInstanceUID"):
        open_slide(folder)


def test_a_leica_scn_with_bounds_is_read_in_openslides_full_frame(tmp_path):
    """Crops take OpenSlide level-0 coordinates of the whole canvas, the bounds offset included."""
    from tests.support.scn_slides import write_leica_scn

    path = write_leica_scn(tmp_path / "case.scn", DESIGN, offset=(256, 128), canvas=(2048, 1024))
    with open_slide(path) as slide:
        props = slide.properties
        assert props[openslide.PROPERTY_NAME_VENDOR] == "leica"
        assert slide.dimensions == (2048, 1024)
        bounds = [int(props[f"openslide.bounds-{k}"]) for k in ("x", "y", "width", "height")]
        assert bounds == [256, 128, 1024, 768]
        # the lesion box of the design, shifted by the offset by hand
        c = crop(slide, [256 + 600, 128 + 220, 256, 192], target_long_side=256)
        assert c.box == (856, 348, 256, 192) and c.level == 0
        _close(c.image, render_level(DESIGN, 1)[220:412, 600:856])
        # outside the bounds OpenSlide has no pixels: transparent, read as black
        empty = np.asarray(crop(slide, [0, 0, 256, 128], target_long_side=256).image)
        assert empty.max() == 0


@pytest.fixture(scope="module")
def j2k_dicom(tmp_path_factory) -> Path:
    """A DICOM-WSI of lossy JPEG 2000 frames (1.2.840.10008.1.2.4.91, 30 dB, YBR_ICT), two levels."""
    from wsidicom.codec import Jpeg2kSettings

    folder = tmp_path_factory.mktemp("j2k") / "case"
    written = write_dicom_wsi(folder, DESIGN, levels=2, encoding=Jpeg2kSettings(levels=[30]))
    import pydicom

    ds = pydicom.dcmread(written[0], stop_before_pixels=True)
    assert (str(ds.file_meta.TransferSyntaxUID), ds.PhotometricInterpretation) == (
        "1.2.840.10008.1.2.4.91", "YBR_ICT"
    )  # fmt: skip
    return folder


@pytest.mark.parametrize("which", ["jpeg", "jpeg2000"])
def test_the_dicom_frames_are_read_directly_with_openslides_pixels(dicom_root, j2k_dicom, which):
    """``slides.tiles`` decodes the DICOM's JPEG (or lossy JPEG 2000) frames itself (the fast exact path),
    pixel-equal to OpenSlide's ``read_region`` at every level, across frame edges and at the level's edge."""
    from giant_assets.slides.tiles import read_direct, tile_reader

    with open_slide(dicom_root / "slides" / "case1" if which == "jpeg" else j2k_dicom) as slide:
        reader = tile_reader(slide)
        assert reader is not None and all(level is not None for level in reader.levels)
        for level in range(slide.level_count):
            ds = int(slide.level_downsamples[level])
            lw, lh = slide.level_dimensions[level]
            for (x, y), size in (((0, 0), (100, 80)), ((250, 130), (20, 150)), ((0, 0), (lw, lh))):
                if x + size[0] > lw or y + size[1] > lh:
                    continue
                direct = read_direct(slide, (x * ds, y * ds), level, size)
                assert direct is not None, (level, x, y)
                expected = np.asarray(slide.read_region((x * ds, y * ds), level, size).convert("RGB"))
                assert np.array_equal(direct, expected), (level, x, y, size)
