"""The random-region ablation's boxes: random squares of at least 1000 px with at least 25% tissue.

As the released ablation draws them, from the slide's CLAM patch coordinates (``slides.clam``):

- the tissue's bounding box is the patches' extent (the last patch's far edge included, clipped to the
  slide); it is cut into a grid of patch-sized cells starting at its top-left corner, and a cell is tissue
  when a patch's top-left corner falls in it;
- a square's tissue is (tissue cells it covers) x patch area, counted over the ``ceil(side / patch)``
  cells from a cell corner; it qualifies with at least ``MIN_TISSUE`` of the square's area;
- sides run from ``MIN_SIDE`` to the largest that could qualify (the tissue area / 25%, and the
  bounding box's short side); each box draws a side uniformly, up to 100 times, until one has a
  qualifying position (then the sides 1000, half, a quarter of the largest, the largest are tried), then
  a position uniformly among the qualifying ones, moved back inside the bounding box if it overhangs.

All counts over every position at once come from a summed-area table (numpy), so a box costs one pass
over the cell grid.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

MIN_SIDE = 1000  # level-0 pixels
MIN_TISSUE = 0.25
SIZE_TRIES = 100


class NoTissueRegion(ValueError):
    """No square of at least ``MIN_SIDE`` px holds ``MIN_TISSUE`` tissue on this slide."""


@dataclass(frozen=True)
class TissueCells:
    """The patch-cell grid over the tissue's bounding box."""

    cells: np.ndarray  # (rows, cols) bool, True = a patch starts in the cell
    origin: tuple[int, int]  # level-0 top-left of the grid (the box's x_min, y_min)
    box_end: tuple[int, int]  # level-0 x_max, y_max (clipped to the slide)
    extent: tuple[int, int]  # the box's width and height (before clipping)
    patch: int

    @property
    def summed(self) -> np.ndarray:
        """Summed-area table with a zero first row and column."""
        return np.pad(self.cells.astype(np.int64).cumsum(0).cumsum(1), ((1, 0), (1, 0)))


def tissue_cells(coords: np.ndarray, slide_size: tuple[int, int], patch: int = 224) -> TissueCells:
    """The cell grid of the patches' bounding box; ``coords`` (N, 2) are level-0 top-left corners."""
    if len(coords) == 0:
        raise NoTissueRegion("no tissue patches on the slide")
    xs, ys = coords[:, 0].astype(np.int64), coords[:, 1].astype(np.int64)
    x_min, y_min = int(xs.min()), int(ys.min())
    x_max, y_max = int(xs.max()) + patch, int(ys.max()) + patch
    width, height = x_max - x_min, y_max - y_min
    cells = np.zeros((-(-height // patch), -(-width // patch)), dtype=bool)
    cells[(ys - y_min) // patch, (xs - x_min) // patch] = True
    end = (min(slide_size[0], x_max), min(slide_size[1], y_max))
    return TissueCells(cells, (max(0, x_min), max(0, y_min)), end, (width, height), patch)


def largest_side(grid: TissueCells) -> int:
    """The largest side a qualifying square could have: tissue area / MIN_TISSUE, and the box's short side."""
    area = float(grid.cells.sum()) * grid.patch**2
    return int(min(min(grid.extent), np.floor(np.sqrt(area / MIN_TISSUE))))


def qualifying(grid: TissueCells, side: int, summed: np.ndarray) -> np.ndarray:
    """Which cell corners start a ``side`` square with at least MIN_TISSUE tissue (bool over positions)."""
    k = -(-side // grid.patch)
    rows, cols = grid.cells.shape
    if k > rows or k > cols:
        return np.zeros((1, 1), dtype=bool)
    sums = summed[k:, k:] - summed[:-k, k:] - summed[k:, :-k] + summed[:-k, :-k]
    return sums * grid.patch**2 >= MIN_TISSUE * side * side


def random_boxes(
    coords: np.ndarray, slide_size: tuple[int, int], n: int, rng: np.random.Generator, patch: int = 224
) -> list[tuple[int, int, int, int]]:
    """``n`` level-0 squares (x, y, side, side); see the module docstring. Raises ``NoTissueRegion``."""
    grid = tissue_cells(coords, slide_size, patch)
    summed = grid.summed
    top = largest_side(grid)
    if top < MIN_SIDE:
        raise NoTissueRegion(
            f"no square of at least {MIN_SIDE} px can hold {MIN_TISSUE:.0%} tissue "
            f"(the largest possible side is {top} px)"
        )
    boxes = []
    for _ in range(n):
        side, ok = _draw_side(grid, top, summed, rng)
        rows, cols = np.nonzero(ok)
        pick = int(rng.integers(0, rows.size))
        x = grid.origin[0] + int(cols[pick]) * patch
        y = grid.origin[1] + int(rows[pick]) * patch
        x = max(min(x, grid.box_end[0] - side), grid.origin[0])
        y = max(min(y, grid.box_end[1] - side), grid.origin[1])
        boxes.append((x, y, side, side))
    return boxes


def _draw_side(
    grid: TissueCells, top: int, summed: np.ndarray, rng: np.random.Generator
) -> tuple[int, np.ndarray]:
    width, height = grid.extent
    tries = (int(rng.integers(MIN_SIDE, top + 1)) for _ in range(SIZE_TRIES))  # drawn one at a time
    fallback = (MIN_SIDE, max(MIN_SIDE, top // 2), max(MIN_SIDE, top // 4), top)
    for side in itertools.chain(tries, fallback):
        if side > width or side > height:
            continue
        ok = qualifying(grid, side, summed)
        if ok.any():
            return side, ok
    raise NoTissueRegion(f"no square of {MIN_SIDE} to {top} px has {MIN_TISSUE:.0%} tissue")
