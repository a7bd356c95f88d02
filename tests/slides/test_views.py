"""Golden tests of slide views on real pyramidal TIFFs: level choice, long side, guides, clipping, no upscale.

Expected levels and sizes are worked out by hand from the released protocol's rule: OpenSlide's best level
for (max(w, h) / long_side) x 0.85 (the largest level downsample not above that), one level finer if the
read would be smaller than the target; output long side = target, unless the level-0 box is smaller.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from giant_assets.slides.access import InvalidRegion, open_slide
from giant_assets.slides.guides import GUIDE_COLOR, LABEL_INK, label_font
from giant_assets.slides.synthetic import LESION, ONE_LESION_DESIGN, render_level, write_pyramidal_slide
from giant_assets.slides.views import overview, region

DESIGN = ONE_LESION_DESIGN  # 4096 x 3072


class SlideSpy:
    """A real OpenSlide handle recording reads; ``coarser`` makes the best-level answer one level coarser."""

    def __init__(self, slide, coarser: bool = False) -> None:
        self._slide = slide
        self.coarser = coarser
        self.reads: list[tuple[tuple[int, int], int, tuple[int, int]]] = []

    def __getattr__(self, name):
        return getattr(self._slide, name)

    def get_best_level_for_downsample(self, downsample: float) -> int:
        level = self._slide.get_best_level_for_downsample(downsample)
        return min(level + 1, self._slide.level_count - 1) if self.coarser else level

    def read_region(self, location, level, size):
        self.reads.append((tuple(location), level, tuple(size)))
        return self._slide.read_region(location, level, size)


@pytest.fixture(scope="module")
def slides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("views")
    return {
        "x2": write_pyramidal_slide(root / "x2.tiff", DESIGN, levels=4),  # downsamples 1, 2, 4, 8
        "x4": write_pyramidal_slide(root / "x4.tiff", DESIGN, levels=3, level_factor=4),  # 1, 4, 16
        "svs": write_pyramidal_slide(root / "x2.svs", DESIGN, levels=3, svs=True),  # 1, 2, 4 (JPEG)
    }


@pytest.fixture
def open_spy(slides):
    opened: list = []

    def _open(name: str, coarser: bool = False) -> SlideSpy:
        spy = SlideSpy(open_slide(slides[name]), coarser)
        opened.append(spy)
        return spy

    yield _open
    for spy in opened:
        spy.close()


# (slide, box or None for the overview, target) -> (level, read size, image size); worked out by hand.
GOLDEN = [
    # overview of 4096 x 3072 on 1, 2, 4, 8: needed 4.096 x 0.85 = 3.48 -> level 1 (2)
    ("x2", None, 1000, 1, (2048, 1536), (1000, 750)),
    ("x2", None, 500, 2, (1024, 768), (500, 375)),  # 8.19 x 0.85 = 6.96 -> level 2 (4)
    ("x2", None, 250, 3, (512, 384), (250, 188)),  # 16.4 x 0.85 = 13.9 -> level 3 (8)
    ("x2", None, 4000, 0, (4096, 3072), (4000, 3000)),  # 1.024 x 0.85 = 0.87 -> level 0
    # 2300 / 1000 = 2.3 x 0.85 = 1.955 < 2 -> level 0 (without the 0.85 it would be level 1)
    ("x2", (1000, 500, 2300, 1000), 1000, 0, (2300, 1000), (1000, 435)),
    ("x2", (1000, 500, 2400, 1000), 1000, 1, (1200, 500), (1000, 417)),  # 2.04 -> level 1
    ("x2", (0, 0, 4000, 2000), 500, 2, (1000, 500), (500, 250)),  # 6.8 -> level 2
    ("x2", (2000, 1000, 1000, 800), 1000, 0, (1000, 800), (1000, 800)),  # exactly the target
    ("x2", (2000, 1000, 600, 400), 1000, 0, (600, 400), (600, 400)),  # smaller: native, no upsampling
    ("x2", (100, 100, 224, 224), 224, 0, (224, 224), (224, 224)),  # a patch at its native size
    # on 1, 4, 16: the overview at 1000 needs 3.48 < 4 -> level 0; at 500 6.96 -> level 1; 200: 17.4 -> 2
    ("x4", None, 1000, 0, (4096, 3072), (1000, 750)),
    ("x4", None, 500, 1, (1024, 768), (500, 375)),
    ("x4", None, 200, 2, (256, 192), (200, 150)),
    ("x4", (0, 0, 3000, 3000), 500, 1, (750, 750), (500, 500)),  # 6 x 0.85 = 5.1 -> level 1 (4)
    ("svs", None, 1000, 1, (2048, 1536), (1000, 750)),
    ("svs", (1024, 512, 2048, 2048), 500, 1, (1024, 1024), (500, 500)),  # 4.096 x 0.85 = 3.48 -> level 1
]


@pytest.mark.parametrize(("name", "box", "target", "level", "read", "size"), GOLDEN)
def test_level_choice_and_size_golden(open_spy, name, box, target, level, read, size) -> None:
    slide = open_spy(name)
    view = overview(slide, target) if box is None else region(slide, box, target)
    shown = box or (0, 0, 4096, 3072)
    assert (view.level, view.read_size, view.image.size) == (level, read, size)
    assert view.box == shown and not view.clipped and view.image.mode == "RGB"
    assert view.downsample == pytest.approx(slide.level_downsamples[level])
    assert max(view.image.size) == min(target, max(shown[2:]))  # exact long side, or native if smaller
    assert slide.reads == [((shown[0], shown[1]), level, read)]  # one read: only the region, only that level


def test_one_level_finer_when_the_best_level_reads_too_small(open_spy) -> None:
    """If the best level's read would be under the target, the next finer level is read instead."""
    slide = open_spy("x2", coarser=True)  # answers level 2 where OpenSlide says level 1
    view = region(slide, (1000, 500, 2400, 1000), 1000)
    assert view.level == 1 and view.read_size == (1200, 500) and view.image.size == (1000, 417)
    assert slide.reads == [((1000, 500), 1, (1200, 500))]
    view = region(slide, (1000, 500, 3000, 1000), 1000)  # best 3.0 x 0.85 = 2.55 -> 1; spied: 2 -> 750 px
    assert view.level == 1 and view.image.size == (1000, 333)


def test_pixels_are_the_region_downscaled(open_spy) -> None:
    slide = open_spy("x2")
    box = (1000, 500, 2400, 1000)
    view = region(slide, box, 1000, guides=False)
    level1 = render_level(DESIGN, 2)[250:750, 500:1700]
    want = np.asarray(Image.fromarray(level1).resize((1000, 417), Image.Resampling.LANCZOS), dtype=int)
    assert np.abs(np.asarray(view.image, dtype=int) - want).mean() < 1.0
    mask = np.abs(np.asarray(view.image, dtype=int) - np.array(LESION)).sum(axis=2) < 40
    ys, xs = np.nonzero(mask)
    x0, y0 = view.to_level0(xs.mean(), ys.mean())
    assert (x0, y0) == (pytest.approx(2800, abs=6), pytest.approx(1100, abs=6))
    native = region(slide, (2000, 1000, 600, 400), 1000, guides=False)
    np.testing.assert_array_equal(np.asarray(native.image), render_level(DESIGN, 1)[1000:1400, 2000:2600])


def _guide_columns(image: np.ndarray, row: int) -> list[int]:
    return [int(c) for c in np.nonzero((image[row] == GUIDE_COLOR).all(axis=1))[0]]


@pytest.mark.parametrize(
    ("box", "target", "size", "cols", "rows", "labels_x", "labels_y", "width"),
    [
        # 2400 x 1000 at 1000 px: image 1000 x 417; lines at i/5: columns 200, 400, 600, 800, rows
        # round(417 i / 5) = 83, 167, 250, 334; level-0 1000 + 480 i and 500 + 200 i; width 2 -> [c-1, c]
        (
            (1000, 500, 2400, 1000),
            1000,
            (1000, 417),
            [200, 400, 600, 800],
            [83, 167, 250, 334],
            [1480, 1960, 2440, 2920],
            [700, 900, 1100, 1300],
            2,
        ),
        # the overview at 500 px: 500 x 375, columns 100, 200, 300, 400, rows 75, 150, 225, 300, width 1
        (
            None,
            500,
            (500, 375),
            [100, 200, 300, 400],
            [75, 150, 225, 300],
            [819, 1638, 2458, 3277],
            [614, 1229, 1843, 2458],
            1,
        ),
        # a 224 patch at native size: columns round(224 i / 5) = 45, 90, 134, 179; level-0 100 + the same
        (
            (100, 3000, 224, 72),
            224,
            (224, 72),
            [45, 90, 134, 179],
            [14, 29, 43, 58],
            [145, 190, 234, 279],
            [3014, 3029, 3043, 3058],
            1,
        ),
    ],
)
def test_guides_positions_and_labels(
    open_spy, box, target, size, cols, rows, labels_x, labels_y, width
) -> None:
    slide = open_spy("x2")
    view = overview(slide, target) if box is None else region(slide, box, target)
    plain = overview(slide, target, guides=False) if box is None else region(slide, box, target, guides=False)
    img = np.asarray(view.image)
    assert view.image.size == size
    assert view.guides is not None
    assert [g.pixel for g in view.guides.x] == cols and [g.level0 for g in view.guides.x] == labels_x
    assert [g.pixel for g in view.guides.y] == rows and [g.level0 for g in view.guides.y] == labels_y
    # vertical lines: a row between two horizontal lines, below the labels, is guide-coloured exactly there
    mid_row = (rows[1] + rows[2]) // 2
    expected_cols = [c - width // 2 + k for c in cols for k in range(width)]
    assert _guide_columns(img, mid_row) == expected_cols
    mid_col = (cols[1] + cols[2]) // 2
    got_rows = [int(r) for r in np.nonzero((img[:, mid_col] == GUIDE_COLOR).all(axis=1))[0]]
    assert got_rows == [r - width // 2 + k for r in rows for k in range(width)]
    # away from lines and labels the image is the plain view
    untouched = np.ones(img.shape[:2], dtype=bool)
    untouched[:, [c for c in range(size[0]) if any(abs(c - x) <= width for x in cols)]] = False
    untouched[[r for r in range(size[1]) if any(abs(r - y) <= width for y in rows)], :] = False
    font_px = label_font(max(size)).size
    untouched[: font_px + 8, :] = False  # x labels along the top
    untouched[:, : 5 * font_px] = False  # y labels along the left
    assert (img[untouched] == np.asarray(plain.image)[untouched]).all()
    # each label: black ink on white near its line, the same ink as the text drawn on its own
    font = label_font(max(size))
    for g in view.guides.x:
        _assert_label(img, font, str(g.level0), (g.pixel, 2), "mt")
    for g in view.guides.y:
        _assert_label(img, font, str(g.level0), (2, g.pixel), "lm")


def _assert_label(img: np.ndarray, font, text: str, xy: tuple[int, int], anchor: str) -> None:
    """The label's box in ``img`` holds exactly the ink of ``text`` rendered alone (shifted inside)."""
    probe = Image.new("RGB", (img.shape[1], img.shape[0]), (255, 255, 255))
    draw = ImageDraw.Draw(probe)
    left, top, right, bottom = draw.textbbox(xy, text, font=font, anchor=anchor)
    dx = max(0, 2 - left) - max(0, right + 2 - img.shape[1])
    dy = max(0, 2 - top) - max(0, bottom + 2 - img.shape[0])
    draw.text((xy[0] + dx, xy[1] + dy), text, fill=LABEL_INK, font=font, anchor=anchor)
    region_ = (slice(top + dy, bottom + dy), slice(left + dx, right + dx))
    want = np.asarray(probe)[region_]
    got = img[region_]
    assert (want != 255).any()
    np.testing.assert_array_equal(got, want)


def test_clipping_and_invalid_boxes(open_spy) -> None:
    slide = open_spy("x2")
    view = region(slide, (-500, -200, 1500, 1200), 500)
    assert view.clipped and view.box == (0, 0, 1000, 1000) and view.image.size == (500, 500)
    view = region(slide, (3800, 2900, 1000, 1000), 1000)  # partly off the bottom-right corner
    assert view.clipped and view.box == (3800, 2900, 296, 172) and view.image.size == (296, 172)
    assert region(slide, (0, 0, 100.0, 100), 50).box == (0, 0, 100, 100)  # integral floats are integers
    reads = len(slide.reads)
    for box, fragment in [
        ((10.5, 0, 100, 100), "x=10.5 is not an integer"),
        (("10", 0, 100, 100), "x='10' is not an integer"),
        ((0, True, 100, 100), "y=True is not an integer"),
        ((0, 0, float("inf"), 100), "w=inf is not an integer"),
        ((0, 0, 0, 100), "zero or negative"),
        ((0, 0, 100, -5), "zero or negative"),
        ((5000, 100, 100, 100), "outside the slide"),
        ((-300, -300, 200, 200), "outside the slide"),
        ((0, 0, 100), "got 3 values"),
        (None, "must be four integers"),
    ]:
        with pytest.raises(InvalidRegion, match=fragment):
            region(slide, box, 500)
    assert len(slide.reads) == reads  # nothing read for a refused box


def test_long_side_exact_for_many_boxes(open_spy) -> None:
    """Random boxes, the protocol's targets: the long side is the target, or the native size if smaller."""
    slide = open_spy("svs")
    rng = np.random.default_rng(7)
    for _ in range(12):
        w, h = (int(v) for v in rng.integers(16, 4096, size=2))
        x, y = int(rng.integers(0, 4096 - w + 1)), int(rng.integers(0, 3072 - min(h, 3072) + 1))
        for target in (250, 500, 1000):
            view = region(slide, (x, y, w, h), target)
            shown_long = max(view.box[2], view.box[3])
            assert max(view.image.size) == min(target, shown_long), (x, y, w, h, target)
            assert max(view.read_size) >= max(view.image.size)  # never upsampled


def test_single_level_slide_reads_in_strips(tmp_path: Path) -> None:
    path = write_pyramidal_slide(tmp_path / "flat.tiff", DESIGN, levels=1)
    with open_slide(path) as raw:
        spy = SlideSpy(raw)
        view = overview(spy, 256, max_read_pixels=500_000)
    assert view.level == 0 and view.image.size == (256, 192)
    assert len(spy.reads) > 1 and max(w * h for _, _, (w, h) in spy.reads) <= 500_000
