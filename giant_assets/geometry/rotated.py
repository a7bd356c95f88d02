"""IoU of rotated rectangles without shapely: separating axis theorem, then convex polygon clipping.

A rotated box is ``[cx, cy, w, h, angle]``: centre, width and height (>= 0) and the rotation of the
width axis counter-clockwise from +x, in degrees by default (the convention of
``shapely.affinity.rotate``). Two convex polygons are disjoint exactly when one of their edge normals
separates their projections (SAT); otherwise the intersection is the Sutherland-Hodgman clip of one
rectangle by the other, and its area comes from the shoelace formula.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from giant_assets.geometry.numbers import numeric_array

FloatArray = NDArray[np.float64]
ANGLE_UNITS = ("degrees", "radians")


def as_rotated_box(value: ArrayLike, name: str = "rotated box") -> FloatArray:
    """A validated ``[cx, cy, w, h, angle]`` as float64 (5,); negative w or h is an invalid box."""
    arr = numeric_array(value, name, max_depth=1)
    if arr.shape != (5,):
        raise ValueError(f"{name}: expected [cx, cy, w, h, angle] (5 numbers), got shape {arr.shape}")
    if arr[2] < 0 or arr[3] < 0:
        raise ValueError(f"{name}: invalid box {arr.tolist()}: negative width or height")
    return arr


def corners(box: FloatArray, angle_unit: str = "degrees") -> FloatArray:
    """The 4 corners (4, 2), counter-clockwise, of a validated rotated box."""
    if angle_unit not in ANGLE_UNITS:
        raise ValueError(f"angle_unit must be one of {ANGLE_UNITS}, got {angle_unit!r}")
    cx, cy, w, h, angle = box
    theta = math.radians(angle) if angle_unit == "degrees" else angle
    c, s = math.cos(theta), math.sin(theta)
    local = np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) / 2.0
    return local @ np.array([[c, s], [-s, c]]) + (cx, cy)


def polygon_area(points: FloatArray) -> float:
    """Shoelace area (positive for counter-clockwise vertex order)."""
    if len(points) < 3:
        return 0.0
    x, y = points[:, 0], points[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def separated(a: FloatArray, b: FloatArray) -> bool:
    """SAT for convex polygons: True when some edge normal of `a` or `b` separates them."""
    for poly in (a, b):
        edges = np.roll(poly, -1, axis=0) - poly
        normals = np.stack([-edges[:, 1], edges[:, 0]], axis=1)
        pa, pb = a @ normals.T, b @ normals.T  # (vertices, axes) projections
        if ((pa.max(axis=0) < pb.min(axis=0)) | (pb.max(axis=0) < pa.min(axis=0))).any():
            return True
    return False


def _side(a: FloatArray, b: FloatArray, p: tuple[float, float]) -> float:
    """Cross product: >= 0 when `p` is on or left of the directed line a -> b (inside a CCW polygon)."""
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])


def clip_convex(subject: FloatArray, clip: FloatArray) -> FloatArray:
    """Sutherland-Hodgman: the part of `subject` inside the convex counter-clockwise polygon `clip`."""
    output = [tuple(p) for p in subject]
    for k in range(len(clip)):
        if not output:
            break
        a, b = clip[k], clip[(k + 1) % len(clip)]
        points, output = output, []
        for i, cur in enumerate(points):
            prev = points[i - 1]
            s_cur, s_prev = _side(a, b, cur), _side(a, b, prev)
            if (s_cur >= 0) != (s_prev >= 0):
                t = s_prev / (s_prev - s_cur)
                output.append((prev[0] + t * (cur[0] - prev[0]), prev[1] + t * (cur[1] - prev[1])))
            if s_cur >= 0:
                output.append(cur)
    return np.array(output, dtype=np.float64).reshape(-1, 2)


def rotated_iou(
    a: ArrayLike, b: ArrayLike, angle_unit: str = "degrees", names: tuple[str, str] = ("a", "b")
) -> float:
    """IoU of two rotated boxes ``[cx, cy, w, h, angle]``; zero-area boxes give 0. `names` label errors."""
    ba, bb = as_rotated_box(a, names[0]), as_rotated_box(b, names[1])
    area_a, area_b = ba[2] * ba[3], bb[2] * bb[3]
    if area_a == 0 or area_b == 0:
        return 0.0
    ca, cb = corners(ba, angle_unit), corners(bb, angle_unit)
    if separated(ca, cb):
        return 0.0
    inter = max(0.0, polygon_area(clip_convex(ca, cb)))
    union = area_a + area_b - inter
    return float(min(1.0, inter / union)) if union > 0 else 0.0
