"""Axis-aligned boxes: validation, XYXY <-> XYWH conversion, areas and pairwise IoU (vectorised)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
_BLOCK_ELEMENTS = 1 << 16
MAX_COORDINATE = 1e150


def as_boxes(boxes: ArrayLike | Sequence[Sequence[float]], name: str = "boxes") -> FloatArray:
    """Return `boxes` as a float64 (N, 4) array; a single box of 4 numbers becomes (1, 4).

    Raises ValueError naming `name` for a wrong shape, non-finite values or |values| > MAX_COORDINATE.
    """
    try:
        arr = np.asarray(boxes, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected numbers in an (N, 4) array, got {boxes!r:.120}") from exc
    if arr.ndim == 1 and arr.shape[0] in (0, 4):
        arr = arr.reshape(-1, 4)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{name}: expected shape (N, 4) or (4,), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: boxes must be finite, got NaN or infinity")
    if arr.size and np.abs(arr).max() > MAX_COORDINATE:
        raise ValueError(f"{name}: coordinates beyond +-{MAX_COORDINATE:g} would overflow areas")
    return arr


def xywh_to_xyxy(boxes: ArrayLike) -> FloatArray:
    """[x, y, w, h] (top-left corner, width, height) -> [x1, y1, x2, y2]."""
    arr = as_boxes(boxes)
    return np.concatenate([arr[:, :2], arr[:, :2] + arr[:, 2:]], axis=1)


def xyxy_to_xywh(boxes: ArrayLike) -> FloatArray:
    """[x1, y1, x2, y2] -> [x, y, w, h] (top-left corner, width, height)."""
    arr = as_boxes(boxes)
    return np.concatenate([arr[:, :2], arr[:, 2:] - arr[:, :2]], axis=1)


def box_area(boxes_xyxy: ArrayLike) -> FloatArray:
    """Areas of XYXY boxes, (N,); inverted (x2 < x1 or y2 < y1) boxes have area 0."""
    arr = as_boxes(boxes_xyxy)
    return np.clip(arr[:, 2] - arr[:, 0], 0, None) * np.clip(arr[:, 3] - arr[:, 1], 0, None)


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
    return _intersection(as_boxes(a_xyxy, "a"), as_boxes(b_xyxy, "b"))


def box_iou(a_xyxy: ArrayLike, b_xyxy: ArrayLike) -> FloatArray:
    """Pairwise IoU of XYXY boxes, (N, M). Degenerate boxes (zero or negative area) give IoU 0.

    Rows are processed in blocks of about _BLOCK_ELEMENTS cells so the temporaries stay in cache.
    """
    a = as_boxes(a_xyxy, "a")
    b = as_boxes(b_xyxy, "b")
    area_a, area_b = box_area(a), box_area(b)
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
