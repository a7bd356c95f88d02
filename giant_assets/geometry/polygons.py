"""Polygon IoU with shapely; invalid (e.g. self-intersecting) polygons are repaired with make_valid."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from numpy.typing import ArrayLike
from shapely.geometry.base import BaseGeometry

from giant_assets.geometry.numbers import numeric_array


@dataclass(frozen=True)
class PolygonIoU:
    """IoU of two polygons with the areas behind it and whether each input had to be repaired."""

    iou: float
    intersection: float
    union: float
    area_a: float
    area_b: float
    repaired_a: bool
    repaired_b: bool


def to_polygon(coords: ArrayLike, name: str = "polygon") -> tuple[BaseGeometry, bool]:
    """Build a polygonal geometry from [[x, y], ...] (closing point optional).

    Returns (geometry, repaired). An invalid ring is repaired with `shapely.make_valid` and only its
    polygonal parts are kept (a bow-tie becomes two triangles). Raises ValueError for fewer than 3
    distinct points, a wrong shape or non-finite coordinates.
    """
    pts = numeric_array(coords, name, max_depth=2)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"{name}: expected a list of [x, y] points, got shape {pts.shape}")
    if len(pts) > 1 and np.array_equal(pts[0], pts[-1]):
        pts = pts[:-1]
    n_distinct = len(np.unique(pts, axis=0))
    if n_distinct < 3:
        raise ValueError(f"{name}: a polygon needs at least 3 distinct points, got {n_distinct}")
    poly = shapely.Polygon(pts)
    if poly.is_valid:
        return poly, False
    return polygonal_part(shapely.make_valid(poly)), True


def polygonal_part(geom: BaseGeometry) -> BaseGeometry:
    """The union of the Polygon/MultiPolygon parts of `geom` (drops lines and points from make_valid)."""
    parts = shapely.get_parts(geom)
    polys = [p for p in parts if isinstance(p, shapely.Polygon | shapely.MultiPolygon)]
    return shapely.unary_union(polys) if polys else shapely.Polygon()


def polygon_iou(a: ArrayLike, b: ArrayLike, names: tuple[str, str] = ("a", "b")) -> PolygonIoU:
    """IoU of two polygons given as [[x, y], ...]; zero-area polygons give IoU 0. `names` label errors."""
    pa, rep_a = to_polygon(a, names[0])
    pb, rep_b = to_polygon(b, names[1])
    inter = float(shapely.intersection(pa, pb).area)
    area_a, area_b = float(pa.area), float(pb.area)
    union = area_a + area_b - inter
    return PolygonIoU(
        iou=inter / union if union > 0 else 0.0,
        intersection=inter,
        union=union,
        area_a=area_a,
        area_b=area_b,
        repaired_a=rep_a,
        repaired_b=rep_b,
    )
