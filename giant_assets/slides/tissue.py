"""Where the tissue is: Otsu's threshold on a low-resolution overview, and random patches inside it.

Stained tissue is coloured and the glass around it is grey-white, so the mask is Otsu's threshold on the
HSV saturation of the overview: a pixel is tissue when its saturation is above the threshold (the level
that maximises the between-class variance of the two sides, as ``skimage.filters.threshold_otsu`` defines
it). Saturation, not grey level: on grey level a dark lesion can be split from the rest of the tissue,
leaving only the lesion as "tissue". Patches are drawn so that their whole level-0 footprint
lies on tissue pixels of the mask (the mask is eroded by the patch's size first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import openslide

from giant_assets.slides.views import overview

MASK_LONG_SIDE = 1024  # long side of the overview the tissue mask is computed on


def otsu_threshold(gray: np.ndarray) -> int:
    """Otsu's threshold of an integer grey image: pixels ``<= t`` form one class, ``> t`` the other.

    Candidates are the grey levels from the image's minimum to one below its maximum; the first level
    with the largest between-class variance wins. A constant image returns its value.
    """
    values = np.asarray(gray)
    if values.size == 0:
        raise ValueError("otsu_threshold: empty image")
    if not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"otsu_threshold: needs an integer image, got {values.dtype}")
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:
        return lo
    counts = np.bincount((values.ravel() - lo).astype(np.int64), minlength=hi - lo + 1).astype(np.float64)
    levels = np.arange(lo, hi + 1, dtype=np.float64)
    w0 = np.cumsum(counts)[:-1]  # pixels <= level t, for t = lo .. hi - 1
    w1 = counts.sum() - w0
    sum0 = np.cumsum(counts * levels)[:-1]
    mean0 = sum0 / w0
    mean1 = (float((counts * levels).sum()) - sum0) / w1
    between = w0 * w1 * (mean0 - mean1) ** 2
    return lo + int(np.argmax(between))


@dataclass(frozen=True)
class TissueMask:
    """A boolean tissue mask over the whole slide and how it maps to level-0 pixels."""

    mask: np.ndarray  # (rows, cols) bool, True = tissue
    threshold: int  # Otsu's saturation level (tissue is above it)
    slide_size: tuple[int, int]  # level-0 (width, height)

    @property
    def scale(self) -> tuple[float, float]:
        """Mask pixels per level-0 pixel, (x, y)."""
        rows, cols = self.mask.shape
        return cols / self.slide_size[0], rows / self.slide_size[1]

    @property
    def fraction(self) -> float:
        return float(self.mask.mean())


def tissue_mask(slide: openslide.OpenSlide, long_side: int = MASK_LONG_SIDE) -> TissueMask:
    """Otsu's tissue mask on the saturation of the slide's overview at ``long_side`` (no guides drawn)."""
    view = overview(slide, long_side, guides=False)
    saturation = np.asarray(view.image.convert("HSV"))[..., 1]
    threshold = otsu_threshold(saturation)
    width, height = slide.dimensions
    return TissueMask(saturation > threshold, threshold, (int(width), int(height)))


def sample_patches(
    tissue: TissueMask, patch_size: int, n: int, rng: np.random.Generator
) -> list[tuple[int, int, int, int]]:
    """``n`` level-0 boxes (x, y, w, h) of ``patch_size`` whose footprint lies on tissue, drawn by ``rng``.

    Centres are drawn among the mask pixels whose whole patch neighbourhood is tissue, without
    replacement while there are enough of them. If no such pixel exists (tissue thinner than a patch),
    any tissue pixel is used, and with no tissue at all any pixel of the slide.
    """
    from scipy import ndimage  # here: building an agent that never samples patches skips the import

    width, height = tissue.slide_size
    if patch_size > min(width, height):
        raise ValueError(f"patch size {patch_size} does not fit a {width} x {height} slide")
    sx, sy = tissue.scale
    # a centre pixel is eligible when every mask pixel its patch touches is tissue
    rx, ry = math.ceil(patch_size / 2 * sx) + 1, math.ceil(patch_size / 2 * sy) + 1
    window = (2 * ry + 1, 2 * rx + 1)
    inner = ndimage.minimum_filter(tissue.mask.view(np.uint8), size=window, mode="constant", cval=0) > 0
    for candidates in (inner, tissue.mask, np.ones_like(tissue.mask)):
        rows, cols = np.nonzero(candidates)
        if rows.size:
            break
    picks = rng.choice(rows.size, size=n, replace=rows.size < n)
    jitter = rng.random((n, 2))
    boxes = []
    for k, (jx, jy) in zip(picks, jitter, strict=True):
        cx, cy = (cols[k] + jx) / sx, (rows[k] + jy) / sy
        x = min(max(0, round(cx - patch_size / 2)), width - patch_size)
        y = min(max(0, round(cy - patch_size / 2)), height - patch_size)
        boxes.append((x, y, patch_size, patch_size))
    return boxes
