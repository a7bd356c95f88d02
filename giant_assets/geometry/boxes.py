"""Axis-aligned boxes: validation, XYXY <-> XYWH conversion, areas and pairwise IoU (vectorised).

A box is valid when its four coordinates are real numbers (see ``numbers.numeric_array``) and it is not
inverted: ``x2 >= x1`` and ``y2 >= y1`` in XYXY (``w, h >= 0`` in XYWH). Anything else is an
"invalid box" error naming the box, never silently given area 0. Zero-area boxes are valid and have IoU 0.

Pairwise work is planned before allocating: an IoU matrix of more than ``MAX_PAIRS`` cells is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from giant_assets.geometry.numbers import MAX_COORDINATE, numeric_array

FloatArray = NDArray[np.float64]
_BLOCK_ELEMENTS = 1 << 16
MAX_PAIRS = 25_000_000  # 5000 x 5000 boxes: a 200 MB float64 IoU matrix


def check_pairs(n: int, m: int, what: str = "boxes", limit: int | None = None) -> None:
    """Refuse an n x m pairwise computation above ``limit`` (default MAX_PAIRS) cells, before allocating."""
    limit = MAX_PAIRS if limit is None else limit
    if n * m > limit:
        raise ValueError(
            f"refusing to compare {n} x {m} {what}: {n * m:,} pairs exceed the limit of {limit:,} "
            f"(about {8 * limit / 1e6:.0f} MB of float64)"
        )


def as_boxes(boxes: ArrayLike | Sequence[Sequence[float]], name: str = "boxes") -> FloatArray:
    """Return `boxes` as a float64 (N, 4) array; a single box of 4 numbers becomes (1, 4).

    Raises ValueError naming `name` for a wrong shape, non-numbers (strings, booleans, null),
    non-finite values or |values| > MAX_COORDINATE. Orientation is checked by ``check_xyxy``.
    """
    arr = numeric_array(boxes, f"{name}", max_depth=2)
    if arr.ndim == 1 and arr.shape[0] in (0, 4):
        arr = arr.reshape(-1, 4)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{name}: expected shape (N, 4) or (4,), got {arr.shape}")
    return arr


def check_xyxy(boxes: FloatArray, name: str = "boxes") -> FloatArray:
    """``boxes`` unchanged if no box is inverted, else ValueError "invalid box" naming the first one."""
    inverted = (boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1])
    if inverted.any():
        i = int(np.flatnonzero(inverted)[0])
        raise ValueError(
            f"{name}: invalid box #{i} {boxes[i].tolist()}: x2 < x1 or y2 < y1 "
            f"({int(inverted.sum())} inverted box(es)); expected [x1, y1, x2, y2] with x1 <= x2, y1 <= y2"
        )
    return boxes


def xyxy_boxes(boxes: ArrayLike, name: str = "boxes") -> FloatArray:
    """Validated, non-inverted XYXY boxes as (N, 4)."""
    return check_xyxy(as_boxes(boxes, name), name)


def xywh_to_xyxy(boxes: ArrayLike, name: str = "boxes") -> FloatArray:
    """[x, y, w, h] (top-left corner, width, height) -> [x1, y1, x2, y2]; negative w or h is invalid."""
    arr = as_boxes(boxes, name)
    negative = (arr[:, 2:] < 0).any(axis=1)
    if negative.any():
        i = int(np.flatnonzero(negative)[0])
        raise ValueError(
            f"{name}: invalid box #{i} {arr[i].tolist()}: negative width or height in [x, y, w, h]"
        )
    return np.concatenate([arr[:, :2], arr[:, :2] + arr[:, 2:]], axis=1)


def xyxy_to_xywh(boxes: ArrayLike, name: str = "boxes") -> FloatArray:
    """[x1, y1, x2, y2] -> [x, y, w, h] (top-left corner, width, height)."""
    arr = xyxy_boxes(boxes, name)
    return np.concatenate([arr[:, :2], arr[:, 2:] - arr[:, :2]], axis=1)


def box_area(boxes_xyxy: ArrayLike) -> FloatArray:
    """Areas of XYXY boxes, (N,)."""
    arr = xyxy_boxes(boxes_xyxy)
    return (arr[:, 2] - arr[:, 0]) * (arr[:, 3] - arr[:, 1])


def _intersection(a: FloatArray, b: FloatArray) -> FloatArray:
    """Pairwise intersection areas of validated XYXY boxes (N, M), computed in place to limit temporaries."""
    iw = np.minimum(a[:, None, 2], b[None, :, 2])
    iw -= np.maximum(a[:, None, 0], b[None, :, 0])
    np.maximum(iw, 0, out=iw)
    ih = np.minimum(a[:, None, 3], b[None, :, 3])
    ih -= np.maximum(a[:, None, 1], b[None, :, 1])
    np.maximum(ih, 0, out=ih)
    iw *= ih
    return iw


def box_intersection(a_xyxy: ArrayLike, b_xyxy: ArrayLike) -> FloatArray:
    """Pairwise intersection areas of XYXY boxes, (N, M)."""
    a, b = xyxy_boxes(a_xyxy, "a"), xyxy_boxes(b_xyxy, "b")
    check_pairs(len(a), len(b))
    return _intersection(a, b)


def box_iou(a_xyxy: ArrayLike, b_xyxy: ArrayLike) -> FloatArray:
    """Pairwise IoU of XYXY boxes, (N, M). Zero-area boxes give IoU 0; inverted boxes are an error.

    Rows are processed in blocks of about _BLOCK_ELEMENTS cells so the temporaries stay in cache.
    """
    a = xyxy_boxes(a_xyxy, "a")
    b = xyxy_boxes(b_xyxy, "b")
    check_pairs(len(a), len(b))
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    out = np.empty((len(a), len(b)))
    step = max(1, _BLOCK_ELEMENTS // max(len(b), 1))
    for start in range(0, len(a), step):
        inter = _intersection(a[start : start + step], b)
        union = area_a[start : start + step, None] + area_b[None, :]
        union -= inter
        # union == 0 only when both boxes have zero area, and then inter is already 0.
        np.divide(inter, union, out=inter, where=union > 0)
        out[start : start + step] = inter
    return out


def level0_box_problem(box: object, slide_size: Sequence[float] | None = None) -> str | None:
    """What is wrong with one level-0 box [x, y, w, h] from outside (a review, a model's reply, a file),
    or None when it is usable: four real numbers (not booleans), finite and within +-MAX_COORDINATE,
    x, y >= 0, w, h > 0, and, when ``slide_size`` (width, height) is known, inside the slide."""
    if not isinstance(box, list | tuple) or len(box) != 4:
        return f"a level-0 box [x, y, w, h] of four numbers is needed, got {_shown(box)}"
    for name, value in zip("xywh", box, strict=True):
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            return f"{name} must be a number, got {_shown(value)}"
        if isinstance(value, int) and abs(value) > MAX_COORDINATE:  # float() of a huge int overflows
            return f"{name} = {_shown(value)}: beyond +-{MAX_COORDINATE:g}"
        if not np.isfinite(value):
            return f"{name} = {_shown(value)}: not a finite number"
        if abs(value) > MAX_COORDINATE:
            return f"{name} = {_shown(value)}: beyond +-{MAX_COORDINATE:g}"
    x, y, w, h = (float(v) for v in box)
    if x < 0 or y < 0:
        return f"x, y must be >= 0 (level-0 pixels), got {x:g}, {y:g}"
    if w <= 0 or h <= 0:
        return f"width and height must be > 0, got {w:g} x {h:g}"
    if slide_size is not None and (x + w > slide_size[0] or y + h > slide_size[1]):
        return f"reaches outside the slide ({slide_size[0]} x {slide_size[1]})"
    return None


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an integer of more than 4300 digits has no repr
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"  # type: ignore[attr-defined]
    return text if len(text) <= 40 else text[:37] + "..."
