"""CLAM-style tissue segmentation and patch grid, as the released GIANT runs made their patch coordinates.

The released runs read 224 px patch coordinates from CLAM's ``create_patches_fp.py`` (Lu et al. 2021)
with the per-dataset presets in ``reference/clam_presets``. This module computes the same kind of
coordinates from the slide itself, in numpy and scipy (no OpenCV):

1. the whole slide is read at the level OpenSlide deems best for downsample 64 (``seg_level: -1``); a
   slide without a level that coarse (downsample under 16) is read scaled to downsample 64, strip by
   strip, so level 0 is never read whole;
2. tissue = HSV saturation, median-filtered over ``mthresh`` px (odd), above ``sthresh`` (or Otsu's level
   with ``use_otsu``), then closed with a ``close`` x ``close`` square;
3. tissue pieces (8-connected) whose area, their holes' excluded, exceeds ``a_t`` reference patches
   (512 x 512 level-0 px) are kept, with their ``max_n_holes`` largest holes (4-connected background
   enclosed by the piece) larger than ``a_h`` reference patches;
4. per kept piece, a grid of ``patch_size`` level-0 patches starting at its bounding box's top-left
   corner and covering the box (``use_padding``: the last row and column may reach past it); a patch is
   kept when any of the four points half-way between its centre and its corners lies inside the piece's
   outline (CLAM's ``four_pt``), unless its centre lies in one of the kept holes.

CLAM traces contours (polygons through boundary pixel centres) and tests points against them; here the
pieces and holes are their raster masks and areas are pixel counts, which agree up to a mask pixel at
the outline.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np
import openslide

from giant_assets.slides.access import MAX_READ_PIXELS, read_scaled
from giant_assets.slides.tissue import otsu_threshold

SEG_DOWNSAMPLE = 64.0  # CLAM's seg_level -1: the best level for this downsample
MIN_SEG_DOWNSAMPLE = 16.0  # a coarsest level finer than this is not read whole: the slide is read scaled
REF_PATCH_SIZE = 512  # a_t and a_h count reference patches of this side, level 0
PATCH_SIZE = 224
PRESETS = ("tcga", "panda")
_FIELDS = (
    "sthresh",
    "mthresh",
    "close",
    "use_otsu",
    "a_t",
    "a_h",
    "max_n_holes",
    "use_padding",
    "contour_fn",
)


@dataclass(frozen=True)
class ClamParams:
    """The segmentation and patching parameters that matter (a preset's other columns draw pictures)."""

    sthresh: int = 8
    mthresh: int = 7
    close: int = 4
    use_otsu: bool = False
    a_t: float = 16.0
    a_h: float = 4.0
    max_n_holes: int = 8
    use_padding: bool = True
    contour_fn: str = "four_pt"
    patch_size: int = PATCH_SIZE


def load_preset(name: str) -> ClamParams:
    """The preset ``name`` (``tcga`` or ``panda``) from ``reference/clam_presets/<name>.csv``."""
    if name not in PRESETS:
        raise ValueError(f"unknown CLAM preset {name!r}; use one of {', '.join(PRESETS)}")
    path = resources.files("giant_assets.reference") / "clam_presets" / f"{name}.csv"
    with path.open() as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 1:
        raise ValueError(f"{path}: expected one row of parameters, found {len(rows)}")
    row = rows[0]
    missing = [k for k in _FIELDS if k not in row]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    if row["contour_fn"] != "four_pt":
        raise ValueError(f"{path}: contour_fn {row['contour_fn']!r} is not supported; use four_pt")
    if not row["mthresh"].strip().isdigit() or int(row["mthresh"]) % 2 == 0:
        raise ValueError(f"{path}: mthresh {row['mthresh']!r} must be an odd number (a median filter's size)")
    flag = {"true": True, "false": False}
    try:
        return ClamParams(
            sthresh=int(row["sthresh"]),
            mthresh=int(row["mthresh"]),
            close=int(row["close"]),
            use_otsu=flag[row["use_otsu"].strip().lower()],
            a_t=float(row["a_t"]),
            a_h=float(row["a_h"]),
            max_n_holes=int(row["max_n_holes"]),
            use_padding=flag[row["use_padding"].strip().lower()],
            contour_fn=row["contour_fn"],
        )
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path}: row 1 has a value that is not a number or true/false ({exc})") from exc


def preset_for(benchmark: str) -> str:
    """The preset the released runs used for a benchmark: ``panda`` for PANDA, ``tcga`` for the rest."""
    return "panda" if benchmark == "panda" else "tcga"


@dataclass(frozen=True)
class Segmentation:
    """Tissue pieces and their kept holes on a low-resolution raster of the whole slide."""

    owner: np.ndarray  # (rows, cols) int32: the kept piece whose outline encloses the pixel, 0 for none
    hole_of: np.ndarray  # (rows, cols) int32: the piece whose kept hole holds the pixel, 0 for none
    pieces: tuple[int, ...]  # the kept pieces' labels
    downsample: tuple[float, float]  # level-0 pixels per raster pixel, (x, y)
    slide_size: tuple[int, int]  # level-0 (width, height)


def saturation(rgb: np.ndarray) -> np.ndarray:
    """HSV saturation of an 8-bit RGB image on 0-255, ``round(255 * (max - min) / max)`` (0 where black)."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    top = np.maximum(np.maximum(r, g), b).astype(np.float64)
    spread = top - np.minimum(np.minimum(r, g), b)
    out = np.floor(255 * spread / np.maximum(top, 1) + 0.5)
    return out.astype(np.uint8)


def read_for_segmentation(slide: openslide.OpenSlide) -> tuple[np.ndarray, tuple[float, float]]:
    """The whole slide as RGB at about downsample 64, and its level-0 pixels per pixel (x, y)."""
    width, height = (int(v) for v in slide.dimensions)
    level = int(slide.get_best_level_for_downsample(SEG_DOWNSAMPLE))
    if float(slide.level_downsamples[level]) >= MIN_SEG_DOWNSAMPLE:
        size = tuple(int(v) for v in slide.level_dimensions[level])
    else:
        size = (max(1, math.ceil(width / SEG_DOWNSAMPLE)), max(1, math.ceil(height / SEG_DOWNSAMPLE)))
    image, _ = read_scaled(slide, level, (0, 0, width, height), size, MAX_READ_PIXELS)
    return np.asarray(image.convert("RGB")), (width / size[0], height / size[1])


def tissue_binary(rgb: np.ndarray, params: ClamParams) -> np.ndarray:
    """Step 2 of the module docstring: saturation, median filter, threshold, closing.

    With a fixed threshold the median filter is not computed: over an odd k x k window the median is
    above ``t`` exactly when more than half of the window is, a box count of ``saturation > t`` (the
    image's edge pixels repeated outward, as OpenCV's median filter does).
    """
    from scipy import ndimage  # here, not at the top: an agent that never segments does not pay the import
    from skimage.filters.rank import median

    sat = saturation(rgb)
    k, r = params.mthresh, params.mthresh // 2
    if params.use_otsu:
        med = median(np.pad(sat, r, mode="edge"), np.ones((k, k), dtype=bool))[
            r : r + sat.shape[0], r : r + sat.shape[1]
        ]
        binary = med > otsu_threshold(med)
    else:
        above = np.pad(sat > params.sthresh, r, mode="edge").astype(np.int32)
        summed = np.pad(above.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
        counts = summed[k:, k:] - summed[:-k, k:] - summed[k:, :-k] + summed[:-k, :-k]
        binary = counts > k * k // 2
    if params.close > 0:  # dilate then erode; nothing outside the image takes part (as OpenCV's border)
        grown = ndimage.maximum_filter(binary, size=params.close, mode="constant", cval=0)
        binary = ndimage.minimum_filter(grown, size=params.close, mode="constant", cval=1)
    return binary


def segment(
    rgb: np.ndarray, downsample: tuple[float, float], slide_size: tuple[int, int], params: ClamParams
) -> Segmentation:
    """Step 3 of the module docstring on a raster already read."""
    from scipy import ndimage

    binary = tissue_binary(rgb, params)
    pieces, n = ndimage.label(binary, structure=np.ones((3, 3), dtype=bool))
    background, m = ndimage.label(~binary)  # 4-connected
    ref_area = int(REF_PATCH_SIZE**2 / (downsample[0] * downsample[1]))
    # holes: background components off the image border, each inside the piece just above its top pixel
    border = np.unique(np.concatenate([background[0], background[-1], background[:, 0], background[:, -1]]))
    flat = background.ravel()
    order = np.argsort(flat, kind="stable")
    labels_sorted = flat[order]
    first = order[np.searchsorted(labels_sorted, np.arange(1, m + 1))] if m else np.array([], dtype=int)
    hole_ids = np.setdiff1d(np.arange(1, m + 1), border)
    cols = binary.shape[1]
    parent = np.zeros(m + 1, dtype=np.int64)
    if hole_ids.size:
        top = first[hole_ids - 1]
        parent[hole_ids] = pieces.ravel()[top - cols]  # the pixel above a hole's first pixel is tissue
    piece_area = np.bincount(pieces.ravel(), minlength=n + 1)
    hole_area = np.bincount(flat, minlength=m + 1)
    keep_piece = np.zeros(n + 1, dtype=bool)
    keep_piece[1:] = piece_area[1:] > params.a_t * ref_area
    keep_hole = np.zeros(m + 1, dtype=bool)
    for piece in np.nonzero(keep_piece)[0]:
        holes = hole_ids[parent[hole_ids] == piece]
        largest = holes[np.argsort(-hole_area[holes], kind="stable")][: params.max_n_holes]
        keep_hole[largest[hole_area[largest] > params.a_h * ref_area]] = True
    in_hole = parent[background]  # every hole pixel belongs to its piece's outline
    owner = np.where(keep_piece[pieces], pieces, np.where(keep_piece[in_hole], in_hole, 0)).astype(np.int32)
    hole_of = np.where(keep_hole[background], in_hole, 0).astype(np.int32)
    kept = tuple(int(p) for p in np.nonzero(keep_piece)[0])
    return Segmentation(owner, hole_of, kept, downsample, slide_size)


def segment_slide(slide: openslide.OpenSlide, params: ClamParams) -> Segmentation:
    """Read the slide at about downsample 64 and segment it."""
    rgb, downsample = read_for_segmentation(slide)
    width, height = (int(v) for v in slide.dimensions)
    return segment(rgb, downsample, (width, height), params)


def patch_grid(seg: Segmentation, params: ClamParams) -> np.ndarray:
    """Step 4 of the module docstring: level-0 top-left corners (N, 2) of the kept patches, piece by piece."""
    size = params.patch_size
    shift = int(size // 2 * 0.5)  # four_pt: the points half-way from the centre to the corners
    dx, dy = seg.downsample
    rows, cols = seg.owner.shape
    out = []
    for piece in seg.pieces:
        ys, xs = np.nonzero(seg.owner == piece)
        x0, y0 = int(xs.min() * dx), int(ys.min() * dy)
        w, h = int(xs.max() * dx) - x0 + 1, int(ys.max() * dy) - y0 + 1
        if params.use_padding:
            stop_x, stop_y = x0 + w, y0 + h
        else:
            stop_x = min(x0 + w, seg.slide_size[0] - size + 1)
            stop_y = min(y0 + h, seg.slide_size[1] - size + 1)
        gx, gy = np.meshgrid(np.arange(x0, stop_x, size), np.arange(y0, stop_y, size), indexing="ij")
        gx, gy = gx.ravel(), gy.ravel()
        cx, cy = gx + size // 2, gy + size // 2
        inside = np.zeros(gx.shape, dtype=bool)
        for px, py in ((cx - shift, cy - shift), (cx + shift, cy + shift), (cx + shift, cy - shift),
                       (cx - shift, cy + shift)):  # fmt: skip
            inside |= _lookup(seg.owner, px, py, dx, dy, rows, cols) == piece
        inside &= _lookup(seg.hole_of, cx, cy, dx, dy, rows, cols) != piece
        out.append(np.stack([gx[inside], gy[inside]], axis=1))
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), dtype=np.int64)


def clam_patches(slide: openslide.OpenSlide, params: ClamParams) -> np.ndarray:
    """The slide's CLAM-style patch coordinates (N, 2), level-0 top-left corners; see the module docstring."""
    return patch_grid(segment_slide(slide, params), params)


def _lookup(
    raster: np.ndarray, px: np.ndarray, py: np.ndarray, dx: float, dy: float, rows: int, cols: int
) -> np.ndarray:
    """``raster`` at level-0 points (0 outside it)."""
    c, r = np.floor(px / dx).astype(np.int64), np.floor(py / dy).astype(np.int64)
    ok = (c >= 0) & (c < cols) & (r >= 0) & (r < rows)
    out = np.zeros(px.shape, dtype=raster.dtype)
    out[ok] = raster[r[ok], c[ok]]
    return out
