"""CLAM-style segmentation, patch grid and the random-region boxes on a real pyramidal TIFF, against the
painted design (ellipses known analytically) and brute-force counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from skimage.color import rgb2hsv

from giant_assets.slides.access import open_slide
from giant_assets.slides.clam import (
    ClamParams,
    clam_patches,
    load_preset,
    preset_for,
    read_for_segmentation,
    saturation,
    segment_slide,
    tissue_binary,
)
from giant_assets.slides.random_regions import NoTissueRegion, random_boxes
from giant_assets.slides.synthetic import (
    BACKGROUND,
    TISSUE,
    Blob,
    SlideDesign,
    render_level,
    write_pyramidal_slide,
)
from giant_assets.slides.tissue import otsu_threshold

BIG = Blob(1300, 1500, 1000, 900, TISSUE)  # x 300..2300
HOLE = Blob(1300, 1500, 350, 300, BACKGROUND)  # glass inside BIG
SPECK = Blob(3600, 2700, 150, 150, TISSUE)  # 70,700 px: under a_t = 1 reference patch (512 x 512)
SIDE = Blob(3300, 1000, 500, 450, TISSUE)  # x 2800..3800
DESIGN = SlideDesign(4096, 3072, tissue=(BIG, SPECK, SIDE), lesions=(HOLE,))
PARAMS = ClamParams(a_t=1, a_h=0.5)  # the presets' thresholds scaled to a 4096 px slide
MASK_PX = 64  # level-0 px per segmentation pixel on this slide (levels 1, 4, 16, 64)
TOL = 3 * MASK_PX  # the median filter (7 px) and the closing (4 px) move an outline by up to ~2 mask px


def inside(blob: Blob, x: np.ndarray, y: np.ndarray, grow: float = 0.0) -> np.ndarray:
    """Points within ``blob`` grown (or shrunk, negative) by ``grow`` px along both radii."""
    return ((x - blob.cx) / (blob.rx + grow)) ** 2 + ((y - blob.cy) / (blob.ry + grow)) ** 2 <= 1.0


def four_points(c: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    cx, cy = c[:, 0] + 112, c[:, 1] + 112
    return [(cx + sx * 56, cy + sy * 56) for sx in (-1, 1) for sy in (-1, 1)]


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("clam") / "s.tiff", DESIGN, levels=4, level_factor=4)


def test_presets_are_the_released_values() -> None:
    tcga, panda = load_preset("tcga"), load_preset("panda")
    assert (tcga.sthresh, tcga.mthresh, tcga.close, tcga.use_otsu) == (8, 7, 4, False)
    assert (tcga.a_t, tcga.a_h, tcga.max_n_holes, tcga.use_padding) == (16, 4, 8, True)
    assert (panda.sthresh, panda.mthresh, panda.close, panda.use_otsu) == (4, 5, 3, False)
    assert (panda.a_t, panda.a_h, panda.max_n_holes, panda.use_padding) == (20, 4, 15, True)
    assert preset_for("panda") == "panda" and preset_for("gtex") == preset_for("tcga") == "tcga"
    with pytest.raises(ValueError, match="unknown CLAM preset 'gtex'"):
        load_preset("gtex")


def test_saturation_matches_skimage() -> None:
    rgb = np.random.default_rng(3).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    rgb[0, :3] = 0  # black: saturation 0
    want = rgb2hsv(rgb)[..., 1] * 255
    assert np.abs(saturation(rgb).astype(float) - want).max() <= 0.5 + 1e-9


def test_segmentation_reads_the_coarse_level(slide_path: Path) -> None:
    slide = open_slide(slide_path)
    try:
        rgb, ds = read_for_segmentation(slide)
        seg = segment_slide(slide, PARAMS)
    finally:
        slide.close()
    assert rgb.shape == (48, 64, 3) and ds == (64.0, 64.0)  # level 3 (downsample 64) read whole
    assert len(seg.pieces) == 2  # BIG and SIDE; the speck is under a_t
    ys, xs = (np.nonzero(seg.hole_of)[k] * MASK_PX + 32 for k in (0, 1))
    assert inside(HOLE, xs, ys, grow=1.5 * MASK_PX).all() and len(xs) > 0.6 * np.pi * 350 * 300 / MASK_PX**2


def test_patch_grid_against_the_painted_tissue(slide_path: Path) -> None:
    slide = open_slide(slide_path)
    try:
        coords = clam_patches(slide, PARAMS)
    finally:
        slide.close()
    assert coords.shape[1] == 2 and len(np.unique(coords, axis=0)) == len(coords)
    points = four_points(coords)
    near = [BIG, SIDE]
    # kept: a four_pt point within TOL of BIG or SIDE, the centre not deep in the hole
    assert np.all(np.any([inside(b, x, y, TOL) for b in near for x, y in points], axis=0))
    assert not inside(HOLE, coords[:, 0] + 112, coords[:, 1] + 112, -TOL).any()
    assert not np.any([inside(SPECK, x, y, TOL) for x, y in points])
    for blob in near:  # one grid per piece, from its bounding box's corner, every sure patch present
        mine = coords[np.any([inside(blob, x, y, TOL) for x, y in points], axis=0)]
        x0, y0 = mine.min(axis=0)
        # the grid starts at the piece's bounding box: a mask pixel's corner, within TOL of the outline
        assert x0 % MASK_PX == 0 and y0 % MASK_PX == 0
        assert blob.cx - blob.rx - TOL <= x0 < blob.cx - blob.rx + 224 + TOL
        assert len({int(v) % 224 for v in mine[:, 0]}) == 1 and len({int(v) % 224 for v in mine[:, 1]}) == 1
        gx, gy = np.meshgrid(np.arange(x0, blob.cx + blob.rx, 224), np.arange(y0, blob.cy + blob.ry, 224))
        grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
        sure = np.any([inside(blob, x, y, -TOL) for x, y in four_points(grid)], axis=0)
        if blob is BIG:
            sure &= ~inside(HOLE, grid[:, 0] + 112, grid[:, 1] + 112, TOL)
        have = {tuple(c) for c in mine.tolist()}
        assert sure.sum() >= 5 and all(tuple(c) in have for c in grid[sure].tolist())


def test_random_boxes_are_tissue_squares(slide_path: Path) -> None:
    slide = open_slide(slide_path)
    try:
        coords = clam_patches(slide, PARAMS)
    finally:
        slide.close()
    boxes = random_boxes(coords, (4096, 3072), 40, np.random.default_rng(5))
    assert boxes == random_boxes(coords, (4096, 3072), 40, np.random.default_rng(5))  # seeded: repeatable
    x_min, y_min = coords.min(axis=0)
    x_max, y_max = coords.max(axis=0) + 224
    tissue = np.zeros((3072 // 16, 4096 // 16), dtype=bool)  # the painted tissue at downsample 16
    level = render_level(DESIGN, 16).astype(int)
    tissue[:] = (level.max(axis=2) - level.min(axis=2)) > 30
    for x, y, w, h in boxes:
        assert w == h >= 1000 and x_min <= x and y_min <= y and x + w <= x_max and y + h <= y_max
        # the rule, counted by brute force: patches touching the box x patch area >= 25% of the box
        touching = (
            (coords[:, 0] < x + w)
            & (coords[:, 0] + 224 > x)
            & (coords[:, 1] < y + h)
            & (coords[:, 1] + 224 > y)
        )
        assert touching.sum() * 224**2 >= 0.25 * w * h
        # and the painted tissue really is there (never a square of glass)
        assert tissue[y // 16 : (y + h) // 16, x // 16 : (x + w) // 16].mean() > 0.1
    assert len({b[2] for b in boxes}) > 5  # sizes vary


def test_no_square_qualifies_on_a_speck() -> None:
    # four patches at the corners of a 1224 px box: 4 x 224^2 px of tissue fill 25% of at most 896^2
    coords = np.array([[0, 0], [1000, 0], [0, 1000], [1000, 1000]])
    with pytest.raises(NoTissueRegion, match="largest possible side is 896 px"):
        random_boxes(coords, (4096, 3072), 3, np.random.default_rng(0))
    with pytest.raises(NoTissueRegion, match="largest possible side is 224 px"):  # a 1 x 5 strip
        random_boxes(np.array([[224 * i, 0] for i in range(5)]), (4096, 3072), 3, np.random.default_rng(0))
    with pytest.raises(NoTissueRegion, match="no tissue"):
        random_boxes(np.zeros((0, 2), dtype=int), (4096, 3072), 3, np.random.default_rng(0))


@pytest.mark.parametrize(("k", "t"), [(7, 8), (5, 4), (3, 100)])
def test_thresholded_median_equals_scipy_median_then_threshold(k: int, t: int) -> None:
    """The box-count shortcut is exactly median filter (edge pixels repeated) then threshold."""
    from scipy import ndimage

    rng = np.random.default_rng(k)
    rgb = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    rgb[rng.random((60, 80)) < 0.5] = 240  # grey glass: saturation 0
    params = ClamParams(sthresh=t, mthresh=k, close=0)
    want = ndimage.median_filter(saturation(rgb), size=k, mode="nearest") > t
    np.testing.assert_array_equal(tissue_binary(rgb, params), want)
    otsu = ClamParams(mthresh=k, close=0, use_otsu=True)
    med = ndimage.median_filter(saturation(rgb), size=k, mode="nearest")
    np.testing.assert_array_equal(tissue_binary(rgb, otsu), med > otsu_threshold(med))
