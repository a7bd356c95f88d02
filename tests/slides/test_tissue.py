"""Otsu's threshold against scikit-image, the tissue mask and patches against the painted slide design."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage.filters import threshold_otsu

from giant_assets.slides.access import open_slide
from giant_assets.slides.synthetic import (
    LESION,
    TISSUE,
    Blob,
    SlideDesign,
    render_level,
    write_pyramidal_slide,
)
from giant_assets.slides.tissue import otsu_threshold, sample_patches, tissue_mask

# two separate tissue fragments (one with a lesion) on glass
DESIGN = SlideDesign(
    4096,
    3072,
    tissue=(Blob(1100, 1500, 800, 1100, TISSUE), Blob(3100, 1200, 700, 600, TISSUE)),
    lesions=(Blob(3000, 1100, 200, 150, LESION),),
)


def in_tissue(x: float, y: float) -> bool:
    return any(((x - b.cx) / b.rx) ** 2 + ((y - b.cy) / b.ry) ** 2 <= 1.0 for b in DESIGN.tissue)


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("tissue") / "two.tiff", DESIGN, levels=4)


@pytest.mark.parametrize("seed", range(6))
def test_otsu_equals_skimage_on_random_images(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # bimodal mixtures of different weights and spreads, plus a uniform image
    a = rng.normal(rng.uniform(40, 120), rng.uniform(5, 30), size=rng.integers(100, 5000))
    b = rng.normal(rng.uniform(140, 230), rng.uniform(5, 30), size=rng.integers(100, 5000))
    img = np.clip(np.concatenate([a, b]), 0, 255).astype(np.uint8).reshape(1, -1)
    assert otsu_threshold(img) == threshold_otsu(img)
    flat = rng.integers(0, 256, size=(64, 64), dtype=np.uint8)
    assert otsu_threshold(flat) == threshold_otsu(flat)


def test_otsu_on_the_rendered_slide_and_edge_cases() -> None:
    gray = np.asarray(Image.fromarray(render_level(DESIGN, 8)).convert("L"))
    assert otsu_threshold(gray) == threshold_otsu(gray)
    assert otsu_threshold(np.array([[7, 7], [7, 7]], dtype=np.uint8)) == 7
    assert otsu_threshold(np.array([[0, 255]], dtype=np.uint8)) == 0  # two values: split between them
    with pytest.raises(ValueError, match="integer image"):
        otsu_threshold(np.zeros((2, 2), dtype=float))


def test_tissue_mask_matches_the_design(slide_path: Path) -> None:
    with open_slide(slide_path) as slide:
        tissue = tissue_mask(slide, long_side=512)
    assert tissue.mask.shape == (384, 512)
    rows, cols = np.mgrid[0:384, 0:512]
    truth = np.vectorize(in_tissue)((cols + 0.5) * 8, (rows + 0.5) * 8)
    assert (tissue.mask != truth).mean() < 0.01  # only pixels on the fragments' rims may differ
    area = sum(np.pi * b.rx * b.ry for b in DESIGN.tissue) / (4096 * 3072)
    assert tissue.fraction == pytest.approx(area, abs=0.01)


def test_a_large_dark_lesion_stays_part_of_the_tissue(tmp_path: Path) -> None:
    """Grey-level Otsu keeps only the lesion here (bg 242, tissue 184, lesion 65); saturation keeps all."""
    big = SlideDesign(
        4096,
        3072,
        tissue=(Blob(2048, 1536, 1600, 1200, TISSUE),),
        lesions=(Blob(1500, 1536, 600, 800, LESION),),
    )
    path = write_pyramidal_slide(tmp_path / "big.tiff", big, levels=3)
    with open_slide(path) as slide:
        tissue = tissue_mask(slide, long_side=512)
    gray = np.asarray(Image.fromarray(render_level(big, 8)).convert("L"))
    assert (gray <= threshold_otsu(gray)).mean() == pytest.approx(np.pi * 600 * 800 / (4096 * 3072), abs=0.01)
    assert tissue.fraction == pytest.approx(np.pi * 1600 * 1200 / (4096 * 3072), abs=0.01)


def test_patches_lie_in_tissue_and_follow_the_rng(slide_path: Path) -> None:
    with open_slide(slide_path) as slide:
        tissue = tissue_mask(slide)
    boxes = sample_patches(tissue, 224, 30, np.random.default_rng(1))
    assert len(boxes) == 30 and len(set(boxes)) == 30
    for x, y, w, h in boxes:
        assert (w, h) == (224, 224)
        assert all(in_tissue(px, py) for px in (x, x + w) for py in (y, y + h)), (x, y)
    fragment = [min(range(2), key=lambda i: abs(x + 112 - DESIGN.tissue[i].cx)) for x, _, _, _ in boxes]
    assert set(fragment) == {0, 1}  # both fragments sampled
    assert sample_patches(tissue, 224, 30, np.random.default_rng(1)) == boxes
    assert sample_patches(tissue, 224, 30, np.random.default_rng(2)) != boxes


def test_patches_without_room_or_tissue(tmp_path: Path) -> None:
    glass = write_pyramidal_slide(tmp_path / "glass.tiff", SlideDesign(1024, 768, texture=False), levels=2)
    with open_slide(glass) as slide:
        tissue = tissue_mask(slide, long_side=256)
    assert tissue.fraction == 0.0  # grey glass only: no pixel is above the threshold
    boxes = sample_patches(tissue, 224, 5, np.random.default_rng(0))  # then anywhere on the slide
    assert all(0 <= x <= 1024 - 224 and 0 <= y <= 768 - 224 for x, y, _, _ in boxes)
    with pytest.raises(ValueError, match="does not fit"):
        sample_patches(tissue, 1000, 1, np.random.default_rng(0))
