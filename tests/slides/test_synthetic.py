"""The synthetic slides' renderer against its per-pixel definition (the mask-per-blob renderer it
replaced): every pixel the same, for the bundled sample's designs and for random ones."""

from __future__ import annotations

import numpy as np
import openslide
from hypothesis import given, settings
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


def test_the_sample_slides_are_painted_as_defined_at_every_level() -> None:
    for design in (ONE_LESION_DESIGN, *(s.design for s in SAMPLE_SLIDES)):
        for downsample in (1, 2, 3, 8, 64):
            got = render_level(design, downsample)
            assert got.dtype == np.uint8 and got.flags.c_contiguous
            np.testing.assert_array_equal(got, per_pixel(design, downsample))


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
