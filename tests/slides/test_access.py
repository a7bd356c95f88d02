"""Slide access on real generated pyramids: level choice, crop pixels, clipping, errors, guided thumbnails."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from giant_assets.slides.access import (
    InvalidRegion,
    SlideError,
    choose_level,
    crop,
    encode_image,
    open_slide,
    slide_info,
    thumbnail,
)
from giant_assets.slides.guides import GUIDE_COLOR
from giant_assets.slides.synthetic import (
    LESION,
    ONE_LESION_DESIGN,
    TISSUE,
    Blob,
    SlideDesign,
    render_level,
    write_pyramidal_slide,
)

DESIGN = ONE_LESION_DESIGN


class ReadSpy:
    """A real OpenSlide handle that also records every read_region call (level, size)."""

    def __init__(self, slide) -> None:
        self._slide = slide
        self.reads: list[tuple[tuple[int, int], int, tuple[int, int]]] = []

    def __getattr__(self, name):
        return getattr(self._slide, name)

    def read_region(self, location, level, size):
        self.reads.append((tuple(location), level, tuple(size)))
        return self._slide.read_region(location, level, size)


@pytest.fixture(scope="module")
def tiff_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("slides") / "s.tiff", DESIGN, levels=4)


@pytest.fixture
def slide(tiff_path: Path):
    s = ReadSpy(open_slide(tiff_path))
    yield s
    s.close()


def lesion_centroid(img: np.ndarray) -> tuple[float, float]:
    """Centroid (x, y) of pixels close to the lesion colour."""
    mask = np.abs(img.astype(int) - np.array(LESION)).sum(axis=2) < 40
    ys, xs = np.nonzero(mask)
    return float(xs.mean()), float(ys.mean())


@pytest.mark.parametrize(
    ("downsamples", "box_long", "target", "expected"),
    [
        ([1, 2, 4, 8], 4096, 1024, 2),  # 4096 / 4 = 1024 exactly
        ([1, 2, 4, 8], 4000, 1024, 1),  # level 2 would give 1000 < 1024
        ([1, 2, 4, 8], 100_000, 1024, 3),  # coarsest level still gives 12500 px
        ([1, 2, 4, 8], 300, 1024, 0),  # smaller than the target even at level 0
        ([1, 4.00004, 16.0002], 4096, 1024, 1),  # float downsamples of a real pyramid
        ([1, 4, 16, 64], 10_000, 1024, 1),  # 10000/16 = 625 < 1024, 10000/4 = 2500
    ],
)
def test_choose_level(downsamples, box_long, target, expected) -> None:
    assert choose_level(downsamples, box_long, target) == expected


def test_slide_info_matches_design(tiff_path: Path, tmp_path: Path) -> None:
    with open_slide(tiff_path) as s:
        info = slide_info(s)
    assert (info["width"], info["height"], info["level_count"]) == (4096, 3072, 4)
    assert info["level_downsamples"] == [1.0, 2.0, 4.0, 8.0]
    assert info["mpp_x"] == pytest.approx(0.5) and info["mpp_y"] == pytest.approx(0.5)
    assert info["vendor"] == "generic-tiff"
    svs = write_pyramidal_slide(tmp_path / "a.svs", SlideDesign(1024, 768), levels=2, svs=True, mpp=0.25)
    with open_slide(svs) as s:
        info = slide_info(s)
    assert info["vendor"] == "aperio" and info["mpp_x"] == pytest.approx(0.25)
    assert info["level_dimensions"] == [[1024, 768], [512, 384]]


@pytest.mark.parametrize(
    ("box", "target", "level", "ds"),
    [
        ([1024, 512, 2048, 1024], 512, 2, 4),
        ([1024, 512, 2048, 1024], 1024, 1, 2),
        ([2560, 896, 512, 384], 512, 0, 1),
        ([0, 0, 4096, 3072], 512, 3, 8),
    ],
)
def test_crop_reads_chosen_level_with_exact_pixels(slide, box, target, level, ds) -> None:
    """Boxes on the level grid read exactly target pixels, so no resize: compare against the design."""
    res = crop(slide, box, target_long_side=target)
    x, y, w, h = box
    assert res.level == level and res.downsample == ds
    assert res.read_size == (w // ds, h // ds) and res.image.size == (w // ds, h // ds)
    assert not res.clipped and res.box == tuple(box)
    assert slide.reads == [((x, y), level, (w // ds, h // ds))]  # only that region, only that level
    expected = render_level(DESIGN, ds)[y // ds : (y + h) // ds, x // ds : (x + w) // ds]
    np.testing.assert_array_equal(np.asarray(res.image), expected)


def test_crop_resized_keeps_geometry(slide) -> None:
    """A box off the level grid is read at the coarsest sufficient level and resized to the target."""
    box = [2300, 700, 1500, 900]
    res = crop(slide, box, target_long_side=300)
    assert res.level == 2  # 1500/4 = 375 >= 300, 1500/8 = 187.5 < 300
    assert res.read_size == (375, 225) and res.image.size == (300, 180)
    cx, cy = lesion_centroid(np.asarray(res.image))
    s = 300 / 1500
    assert cx / s + box[0] == pytest.approx(2800, abs=6) and cy / s + box[1] == pytest.approx(1100, abs=6)
    want = Image.fromarray(render_level(DESIGN, 4)[175:400, 575:950]).resize((300, 180), Image.LANCZOS)
    diff = np.abs(np.asarray(res.image, dtype=int) - np.asarray(want, dtype=int))
    assert diff.mean() < 1.0


def test_crop_upscales_small_box_from_level0(slide) -> None:
    res = crop(slide, [2790, 1090, 20, 20], target_long_side=100)
    assert res.level == 0 and res.read_size == (20, 20) and res.image.size == (100, 100)
    assert np.abs(np.asarray(res.image, dtype=int) - np.array(LESION)).max() < 12


def test_crop_clips_partly_outside_box(slide) -> None:
    res = crop(slide, [-512, -256, 1024, 1024], target_long_side=128)
    assert res.clipped and res.box == (0, 0, 512, 768)
    assert res.requested == (-512.0, -256.0, 1024.0, 1024.0)
    assert res.level == 2 and res.image.size == (85, 128)  # 768/4 = 192 >= 128 > 768/8
    res = crop(slide, [3584, 2560, 4000, 4000], target_long_side=512)
    assert res.clipped and res.box == (3584, 2560, 512, 512) and res.level == 0
    np.testing.assert_array_equal(np.asarray(res.image), render_level(DESIGN, 1)[2560:, 3584:])


@pytest.mark.parametrize(
    ("box", "fragment"),
    [
        ([100, 100, 0, 50], "zero or negative"),
        ([100, 100, 50, -5], "zero or negative"),
        ([5000, 100, 100, 100], "outside the slide"),
        ([-300, -300, 200, 200], "outside the slide"),
        ([0, 0, float("nan"), 10], "finite"),
        ([0, 0, 10], "four finite numbers"),
        (["a", 0, 10, 10], "four numbers"),
        ([0, 0, 3000, 20], "aspect ratio"),
        ([1e12, 1e12, 1e13, 1e13], "outside the slide"),
    ],
)
def test_invalid_regions_raise_specific_error(slide, box, fragment) -> None:
    with pytest.raises(InvalidRegion, match=fragment):
        crop(slide, box)
    assert slide.reads == []


def test_single_level_slide_reads_in_strips(tmp_path: Path) -> None:
    design = SlideDesign(2048, 1536, tissue=(Blob(1024, 768, 800, 600, TISSUE),), lesions=DESIGN.lesions[:0])
    path = write_pyramidal_slide(tmp_path / "flat.tiff", design, levels=1)
    with open_slide(path) as raw:
        spy = ReadSpy(raw)
        res = crop(spy, [0, 0, 2048, 1536], target_long_side=256, max_read_pixels=200_000)
        whole = crop(raw, [0, 0, 2048, 1536], target_long_side=256)
    assert res.level == 0 and res.image.size == (256, 192)
    assert len(spy.reads) > 1 and max(w * h for _, _, (w, h) in spy.reads) <= 200_000
    assert sum(h for _, _, (_, h) in spy.reads) == 1536  # strips tile the box exactly
    diff = np.abs(np.asarray(res.image, dtype=int) - np.asarray(whole.image, dtype=int))
    assert diff.mean() < 1.0


def test_open_slide_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SlideError, match="not found: .*nope.svs"):
        open_slide(tmp_path / "nope.svs")
    corrupt = tmp_path / "bad.tiff"
    corrupt.write_bytes(b"II*\x00" + b"\x00" * 60 + b"not a slide")
    with pytest.raises(SlideError, match="bad.tiff"):
        open_slide(corrupt)
    text = tmp_path / "notes.svs"
    text.write_text("hello")
    with pytest.raises(SlideError, match="notes.svs"):
        open_slide(text)


def test_thumbnail_without_guides_is_the_level_image(slide) -> None:
    th = thumbnail(slide, long_side=1024, guides=False)
    assert th.level == 2 and th.image.size == (1024, 768) and th.offset == (0, 0)
    np.testing.assert_array_equal(np.asarray(th.image), render_level(DESIGN, 4))


def test_thumbnail_guides_are_drawn_over_the_image(slide) -> None:
    """Guide lines go over the slide area (no margin): same size, lines at i/5, the rest untouched."""
    plain = thumbnail(slide, long_side=1024, guides=False)
    th = thumbnail(slide, long_side=1024, guides=True)
    assert th.image.size == (1024, 768) and th.offset == (0, 0) and th.scale == (0.25, 0.25)
    assert th.guides is not None
    assert [g.level0 for g in th.guides.x] == [819, 1638, 2457, 3276]  # int(i/5 * 1024 * 4)
    img, base = np.asarray(th.image), np.asarray(plain.image)
    for g in th.guides.x:  # 1 px lines
        assert tuple(img[500, g.pixel]) == GUIDE_COLOR and tuple(img[500, g.pixel + 3]) != GUIDE_COLOR
    np.testing.assert_array_equal(img[470:600, 420:600], base[470:600, 420:600])  # between lines
    cx, cy = lesion_centroid(base)
    assert th.to_level0(cx, cy) == (pytest.approx(2800, abs=8), pytest.approx(1100, abs=8))
    assert th.to_image(*th.to_level0(300, 200)) == pytest.approx((300, 200))


def test_encode_image_roundtrip() -> None:
    arr = render_level(DESIGN, 16)
    img = Image.fromarray(arr)
    png = Image.open(io.BytesIO(base64.b64decode(encode_image(img, "PNG"))))
    assert png.format == "PNG"
    np.testing.assert_array_equal(np.asarray(png), arr)
    jpg = Image.open(io.BytesIO(base64.b64decode(encode_image(img, "jpeg"))))
    assert jpg.format == "JPEG" and jpg.size == img.size
    assert np.abs(np.asarray(jpg, dtype=int) - arr).mean() < 4
    with pytest.raises(ValueError, match="GIF"):
        encode_image(img, "GIF")
