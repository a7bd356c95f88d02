"""The synthetic slides' renderer against its per-pixel definition (the mask-per-blob renderer it
replaced): every pixel the same, for the bundled sample's designs and for random ones."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import openslide
from hypothesis import example, given, settings
from hypothesis import strategies as st

from giant_assets.multipathqa.sample import SAMPLE_SLIDES
from giant_assets.slides.synthetic import (
    BACKGROUND,
    LESION,
    ONE_LESION_DESIGN,
    TISSUE,
    Blob,
    SlideDesign,
    render_level,
    write_pyramidal_slide,
)
from tests.support import slides as suite_slides


def per_pixel(design: SlideDesign, downsample: int) -> np.ndarray:
    """The definition: a level-0 pixel centre (x, y) takes the colour of the last blob with
    ((x - cx) / rx)^2 + ((y - cy) / ry)^2 <= 1 (tissue first, lesions on top), written as |y - cy| <= ry and
    |x - cx| <= rx * sqrt(1 - ((y - cy) / ry)^2); the texture darkens every other 32 px square by 6."""
    h, w = design.height // downsample, design.width // downsample
    ys, xs = np.arange(h) * downsample, np.arange(w) * downsample
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    for blob in (*design.tissue, *design.lesions):
        with np.errstate(invalid="ignore", divide="ignore"):
            inside_rows = np.abs(ys - blob.cy) <= blob.ry
            half = blob.rx * np.sqrt(np.clip(1.0 - ((ys - blob.cy) / blob.ry) ** 2, 0.0, None))
            mask = inside_rows[:, None] & (np.abs(xs[None, :] - blob.cx) <= half[:, None])
        img[mask] = blob.color
    if design.texture:
        grain = (((ys // 32) % 2)[:, None] ^ ((xs // 32) % 2)[None, :]).astype(np.uint8) * np.uint8(6)
        img -= np.minimum(img, grain[..., None])
    return img


# level 0 of each sample slide as per_pixel paints it: sha256 of the RGB bytes, first 16 hex digits
# (computed with per_pixel, 2026-11-28; the old renderer gave the same). The demo's numbers are read off
# these pixels; per_pixel itself takes ~0.6 CPU-s per 4096 x 3072 level, so it is run on the coarser ones.
SAMPLE_PIXELS = {
    "gtex/GTEX-1117F-0126.tiff": "e735f412705271aa",
    "GTEX-111CU-1826.tiff": "9c63f19dd46de387",
    "tcga/TCGA-05-4244-01Z-00-DX1.svs": "b9732b19eda3a349",
    "TCGA-A1-A0SK-01Z-00-DX1.svs": "3fa09487a2ae30cc",
    "panda/0005f7aaab2800f6170c399693a96917.tiff": "5dac1fe150dbb597",
    "panda/000920ad0b612851f8e01bcc880d9b3d.tiff": "0b37a56df698bd00",
    "TCGA-EA-A3HT-01Z-00-DX1.svs": "fd1124717f0799a1",
    "TCGA-BH-A0BZ-01Z-00-DX1.svs": "6890d003594fefd2",
    "TCGA-D8-A1XK-01Z-00-DX1.svs": "c84e8797a9ca7ca4",
}


def test_the_sample_slides_are_painted_as_defined_at_every_level() -> None:
    assert set(SAMPLE_PIXELS) == {s.relpath for s in SAMPLE_SLIDES}
    for slide in SAMPLE_SLIDES:
        level0 = render_level(slide.design, 1)
        assert level0.dtype == np.uint8 and level0.flags.c_contiguous
        assert hashlib.sha256(level0.tobytes()).hexdigest()[:16] == SAMPLE_PIXELS[slide.relpath], (
            slide.relpath
        )
    np.testing.assert_array_equal(render_level(ONE_LESION_DESIGN, 1), per_pixel(ONE_LESION_DESIGN, 1))
    for design in (ONE_LESION_DESIGN, *(s.design for s in SAMPLE_SLIDES)):
        for downsample in (3, 8, 64):  # 1, 2 and 4 of ONE_LESION_DESIGN: the written slide's test below
            np.testing.assert_array_equal(render_level(design, downsample), per_pixel(design, downsample))


BLOB = st.builds(
    Blob,
    cx=st.integers(-300, 1300),
    cy=st.integers(-300, 1000),
    rx=st.integers(-3, 900),  # zero and negative radii paint a line or nothing, as the definition says
    ry=st.integers(-3, 700),
    color=st.sampled_from([TISSUE, LESION, (3, 200, 5), (0, 0, 0), (255, 255, 255)]),
)


@settings(max_examples=60, deadline=None)
@given(
    tissue=st.lists(BLOB, max_size=4),
    lesions=st.lists(BLOB, max_size=3),
    width=st.integers(1, 1100),
    height=st.integers(1, 800),
    texture=st.booleans(),
    downsample=st.sampled_from([1, 2, 3, 5, 16, 40]),
)
@example(tissue=[], lesions=[], width=1, height=1, texture=True, downsample=2)  # a level of no rows
@example(  # a flat blob (ry 0) on a row: 0/0 there, nothing painted
    tissue=[Blob(50, 40, 30, 0, LESION)], lesions=[], width=100, height=80, texture=False, downsample=1
)
def test_random_designs_are_painted_as_defined(tissue, lesions, width, height, texture, downsample) -> None:
    design = SlideDesign(width, height, tuple(tissue), tuple(lesions), texture)
    np.testing.assert_array_equal(render_level(design, downsample), per_pixel(design, downsample))


def test_each_level_of_a_written_slide_is_the_design_rendered_at_its_downsample(tmp_path) -> None:
    path = write_pyramidal_slide(tmp_path / "s.tiff", ONE_LESION_DESIGN, levels=3)
    with openslide.OpenSlide(str(path)) as slide:
        assert slide.level_downsamples == (1.0, 2.0, 4.0)
        for level, ds in enumerate((1, 2, 4)):
            w, h = slide.level_dimensions[level]
            got = np.asarray(slide.read_region((0, 0), level, (w, h)).convert("RGB"))
            np.testing.assert_array_equal(got, per_pixel(ONE_LESION_DESIGN, ds))


def test_the_suites_slides_are_the_packages_and_each_callers_own(tmp_path: Path) -> None:
    """tests.support.slides renders a slide once per run of the suite and copies it: the copy is the
    file the package writes, and a caller changing its copy changes no later caller's."""
    cached, design = suite_slides.write_pyramidal_slide, ONE_LESION_DESIGN
    first = cached(tmp_path / "a" / "s.svs", design, levels=3, svs=True)
    fresh = write_pyramidal_slide(tmp_path / "fresh.svs", design, levels=3, svs=True)
    assert first.read_bytes() == fresh.read_bytes()
    first.write_bytes(b"changed by its test")
    assert cached(tmp_path / "b" / "s.svs", design, levels=3, svs=True).read_bytes() == fresh.read_bytes()
    other = cached(tmp_path / "c.tiff", design, 2).read_bytes()  # levels given by position
    assert (
        other
        == write_pyramidal_slide(tmp_path / "d.tiff", design, levels=2).read_bytes()
        != fresh.read_bytes()
    )
