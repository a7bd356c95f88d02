"""Golden tests of slide views on real pyramidal TIFFs: level choice, long side, guides, clipping, no upscale.

Expected levels and sizes are worked out by hand from the released protocol's rule: OpenSlide's best level
for (max(w, h) / long_side) x 0.85 (the largest level downsample not above that), one level finer if the
read would be smaller than the target; output long side = target, unless the level-0 box is smaller.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from giant_assets.slides.access import InvalidRegion, open_slide
from giant_assets.slides.guides import font_path
from giant_assets.slides.synthetic import LESION, ONE_LESION_DESIGN, render_level
from giant_assets.slides.views import overview, region, thumbnail_view
from tests.support.slides import write_pyramidal_slide

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


# (box or None for the overview, target) -> image size, line columns and rows (i/5 of the image, truncated:
# Pillow draws a line at a float position in the pixel it truncates to), and their level-0 labels
# x0 + int(i/5 * image side * ds), ds = long side's level-0 pixels per image pixel; worked out by hand.
GUIDES = [
    # 2400 x 1000 at 1000 px: 1000 x 417, ds 2.4; rows int(83.4, 166.8, 250.2, 333.6); y labels
    # 500 + int(200.16, 400.32, 600.48, 800.64)
    (
        (1000, 500, 2400, 1000),
        1000,
        (1000, 417),
        [200, 400, 600, 800],
        [83, 166, 250, 333],
        [1480, 1960, 2440, 2920],
        [700, 900, 1100, 1300],
    ),
    # the overview at 500 px: 500 x 375, ds 8.192: x labels int(819.2, 1638.4, 2457.6, 3276.8)
    (
        None,
        500,
        (500, 375),
        [100, 200, 300, 400],
        [75, 150, 225, 300],
        [819, 1638, 2457, 3276],
        [614, 1228, 1843, 2457],
    ),
    # a 224 x 72 patch at native size, ds 1: columns int(44.8, 89.6, 134.4, 179.2), rows int(14.4 ...)
    (
        (100, 3000, 224, 72),
        224,
        (224, 72),
        [44, 89, 134, 179],
        [14, 28, 43, 57],
        [144, 189, 234, 279],
        [3014, 3028, 3043, 3057],
    ),
]
GREEN, RED, BLACK, WHITE = (0, 255, 0), (255, 0, 0), (0, 0, 0), (255, 255, 255)


def _font(size: tuple[int, int]) -> ImageFont.FreeTypeFont:
    """The released code's font: DejaVu Sans at int(2% of the short side), at least 8 px."""
    return ImageFont.truetype(str(font_path()), max(int(0.02 * min(size)), 8))


def _label_boxes(size, cols, rows, labels_x, labels_y, corner):
    """Every label as (text, its top-left, padding), where the released code puts it."""
    font, probe = _font(size), ImageDraw.Draw(Image.new("RGB", (1, 1)))
    out = [(str(v), (size[0] * (i + 1) / 5 + 3, 3), 3) for i, v in enumerate(labels_x)]
    for i, v in enumerate(labels_y):
        _, top, _, bottom = probe.textbbox((0, 0), str(v), font=font)
        out.append((str(v), (3, size[1] * (i + 1) / 5 - (bottom - top) - 6), 3))
    out.append((corner, (2, 2), 4))
    return font, out


@pytest.mark.parametrize(("box", "target", "size", "cols", "rows", "labels_x", "labels_y"), GUIDES)
def test_guides_drawn_as_the_released_code_draws_them(
    open_spy, box, target, size, cols, rows, labels_x, labels_y
) -> None:
    """1 px opaque green lines, labels white on black boxes, a red border and the (x0, y0) corner label;
    everything else is the plain view."""
    slide = open_spy("x2")
    view = overview(slide, target) if box is None else region(slide, box, target)
    plain = overview(slide, target, guides=False) if box is None else region(slide, box, target, guides=False)
    img, base = np.asarray(view.image), np.asarray(plain.image)
    assert view.image.size == size and view.guides is not None
    assert [(g.pixel, g.level0) for g in view.guides.x] == list(zip(cols, labels_x, strict=True))
    assert [(g.pixel, g.level0) for g in view.guides.y] == list(zip(rows, labels_y, strict=True))
    x0, y0 = (0, 0) if box is None else box[:2]
    font, labels = _label_boxes(size, cols, rows, labels_x, labels_y, f"({x0}, {y0})")
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    covered = np.zeros(img.shape[:2], dtype=bool)
    for text, xy, pad in labels:
        left, top, right, bottom = probe.textbbox(xy, text, font=font)
        covered[
            max(0, int(top) - pad) : int(bottom) + pad + 1, max(0, int(left) - pad) : int(right) + pad + 1
        ] = True
    # the border: pure red on the four edges, but under the corner label
    edges = np.zeros_like(covered)
    edges[[0, -1], :] = edges[:, [0, -1]] = True
    assert (img[edges & ~covered] == RED).all()
    # the lines: pure green in full, one pixel wide, wherever no label box or the border covers them
    free = ~(covered | edges)
    free_of_lines = free.copy()
    free_of_lines[:, cols] = free_of_lines[rows, :] = False
    green = (img == GREEN).all(axis=2)
    for c in cols:  # green down the whole column, and not in the next one (one pixel wide)
        assert green[free[:, c], c].all() and not green[free_of_lines[:, c + 1], c + 1].any()
    for r in rows:
        assert green[r, free[r, :]].all() and not green[r + 1, free_of_lines[r + 1, :]].any()
    corner_text, corner_xy, _ = labels[-1]
    assert corner_text == f"({x0}, {y0})" and covered[0, 0] and (img[0, 0] == BLACK).all()
    # a label's box is black but for the ink of its text, white on black as the text renders alone: the
    # corner label (drawn last) and the last x label (on the patch, the corner label covers the first)
    for text, xy, pad in (labels[-1], labels[len(cols) - 1]):
        alone = Image.new("RGB", view.image.size, BLACK)
        ImageDraw.Draw(alone).text(xy, text, font=font, fill=WHITE)
        left, top, right, bottom = (int(v) for v in probe.textbbox(xy, text, font=font))
        # the box, without its last row and column (a horizontal line may cross there on a small image)
        window = (
            slice(max(0, top - pad), min(bottom + pad, rows[0])),
            slice(max(0, left - pad), right + pad),
        )
        want = np.asarray(alone)[window]
        assert (want.min(axis=2) > 150).any()  # light ink inside the box
        np.testing.assert_array_equal(img[window], want)
    # everything else is the plain view
    marks = covered | edges
    marks[:, cols] = True
    marks[rows, :] = True
    np.testing.assert_array_equal(img[~marks], base[~marks])


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


def test_thumbnail_view_is_get_thumbnail_up_to_1024_then_the_overview(open_spy) -> None:
    """The released thumbnail baseline: OpenSlide's get_thumbnail (a square bound) up to 1024 px, the
    overview reader above; a level too large to read whole goes to the (strip-reading) overview reader."""
    slide = open_spy("x2")
    small = thumbnail_view(slide, 700)
    np.testing.assert_array_equal(np.asarray(small.image), np.asarray(slide._slide.get_thumbnail((700, 700))))
    assert small.image.size == (700, 525) and small.level == 2 and small.box == (0, 0, 4096, 3072)
    big = thumbnail_view(slide, 2000)
    np.testing.assert_array_equal(
        np.asarray(big.image), np.asarray(overview(slide, 2000, guides=False).image)
    )
    bounded = thumbnail_view(slide, 700, max_read_pixels=100_000)  # level 2 is 1024 x 768 > 100,000 px
    want = overview(slide, 700, guides=False, max_read_pixels=100_000).image
    assert bounded.image.size == (700, 525)
    np.testing.assert_array_equal(np.asarray(bounded.image), np.asarray(want))
