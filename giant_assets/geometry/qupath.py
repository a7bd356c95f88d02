"""QuPath's GeoJSON, read and written: the objects a pathologist draws and the annotations we hand back.

What QuPath writes (File > Export objects as GeoJSON, or ``exportObjectsToGeoJson``): a
``FeatureCollection`` (the "FEATURE_COLLECTION" option), otherwise a bare JSON array of features (or one
feature). Each feature has a ``geometry`` in level-0 pixels (origin top left of the full-resolution image)
and ``properties``: ``objectType`` ("annotation", "detection", "cell", ...), optional ``name``,
``classification`` (``{"name": ..., "color": [r, g, b]}``; QuPath 0.2/0.3 wrote ``colorRGB`` as a
packed int and named the object type in the feature's ``id``, e.g. "PathAnnotationObject"), ``isLocked``
and ``measurements``. Rectangles and ellipses are Polygons; points are a MultiPoint; polylines are
LineStrings (no area: refused as regions).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import shapely
from shapely.geometry.base import BaseGeometry

from giant_assets.geometry.numbers import numeric_array

# QuPath 0.2/0.3 named the object type in the feature's id
LEGACY_OBJECT_TYPES = {
    "PathAnnotationObject": "annotation",
    "PathDetectionObject": "detection",
    "PathCellObject": "cell",
    "PathTileObject": "tile",
    "TMACoreObject": "tma_core",
}
_NAMESPACE = uuid.UUID("8c1d6a52-5b7e-4d8e-9a51-2f0e6c4b7a10")  # ids of the features we write


class QuPathFileError(ValueError):
    """A QuPath GeoJSON file that cannot be read; the message names the file and the feature."""


@dataclass(frozen=True)
class QuPathObject:
    """One feature of a QuPath export: its geometry in level-0 pixels and what QuPath says of it."""

    index: int  # 0-based position in the file
    feature_id: str  # the feature's id ("" when it has none or a legacy type name)
    object_type: str
    geometry: BaseGeometry  # Polygon / MultiPolygon (areas) or MultiPoint (points)
    classification: str | None = None
    name: str | None = None

    @property
    def is_points(self) -> bool:
        return isinstance(self.geometry, shapely.MultiPoint)

    def describe(self) -> str:
        """How an error names this feature: its position, and its id and name when it has them."""
        return _describe(self.index, self.feature_id, self.name)


def _describe(index: int, feature_id: str, name: Any) -> str:
    extra = [f"id {feature_id!r}"] if feature_id else []
    extra += [f"name {name!r}"] if name not in (None, "") else []
    return f"feature {index}" + (f" ({', '.join(extra)})" if extra else "")


def _points(value: Any, where: str) -> np.ndarray:
    pts = numeric_array(value, where, max_depth=2)
    if pts.ndim != 2 or pts.shape[1] < 2:
        raise ValueError(f"{where}: expected a list of [x, y] positions, got shape {pts.shape}")
    if not np.isfinite(pts).all():
        raise ValueError(f"{where}: coordinates must be finite numbers")
    return pts[:, :2]


def _polygon(rings: Any, where: str) -> shapely.Polygon:
    if not isinstance(rings, list) or not rings:
        raise ValueError(f"{where}: a polygon is a non-empty list of rings (exterior, then holes)")
    parsed = []
    for j, ring in enumerate(rings):
        pts = _points(ring, f"{where} ring {j}")
        if len(np.unique(pts, axis=0)) < 3:
            raise ValueError(f"{where} ring {j}: a ring needs at least 3 distinct positions")
        parsed.append(pts)
    return shapely.Polygon(parsed[0], parsed[1:])


def parse_geometry(geometry: Any, where: str = "geometry") -> BaseGeometry:
    """A GeoJSON geometry as shapely: Polygon / MultiPolygon as they are (holes kept), Point / MultiPoint
    as a MultiPoint, a GeometryCollection as its polygonal parts. Raises ValueError otherwise."""
    if not isinstance(geometry, dict) or "type" not in geometry:
        raise ValueError(f"{where}: missing or not a GeoJSON geometry object")
    kind = geometry["type"]
    if kind == "GeometryCollection":
        parts = [
            parse_geometry(g, f"{where} part {i}") for i, g in enumerate(geometry.get("geometries") or [])
        ]
        areas = [p for p in parts if not isinstance(p, shapely.MultiPoint)]
        if not areas:
            raise ValueError(f"{where}: a GeometryCollection without any polygon")
        return shapely.unary_union(areas)
    coords = geometry.get("coordinates")
    if coords is None:
        raise ValueError(f"{where}: {kind} without 'coordinates'")
    if kind == "Polygon":
        return _polygon(coords, where)
    if kind == "MultiPolygon":
        if not isinstance(coords, list) or not coords:
            raise ValueError(f"{where}: a MultiPolygon is a non-empty list of polygons")
        return shapely.MultiPolygon([_polygon(p, f"{where} polygon {i}") for i, p in enumerate(coords)])
    if kind == "Point":
        return shapely.MultiPoint(_points([coords], where))
    if kind == "MultiPoint":
        return shapely.MultiPoint(_points(coords, where))
    if kind in ("LineString", "MultiLineString"):
        raise ValueError(f"{where}: a {kind} (a QuPath line) has no area and cannot be a region")
    raise ValueError(f"{where}: unsupported geometry type {kind!r}")


def _classification(props: Mapping[str, Any], where: str) -> str | None:
    value = props.get("classification")
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: 'classification' must be an object with a 'name'")
    if isinstance(value.get("names"), list) and value["names"]:  # a derived class, e.g. Tumor: Positive
        return ": ".join(str(n) for n in value["names"])
    name = value.get("name")
    return str(name) if name not in (None, "") else None


def _features(data: Any, path: Path) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        features = data.get("features")
        if not isinstance(features, list):
            raise QuPathFileError(f"{path}: a FeatureCollection whose 'features' is not a list")
        return features
    if isinstance(data, dict) and data.get("type") == "Feature":
        return [data]
    raise QuPathFileError(
        f"{path}: not a QuPath GeoJSON export (expected a FeatureCollection, a Feature or an array of them)"
    )


def read_qupath_objects(path: str | Path) -> list[QuPathObject]:
    """Every feature of a QuPath GeoJSON file, in file order; QuPathFileError names file and feature."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise QuPathFileError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise QuPathFileError(f"{path}: invalid JSON: {exc}") from exc
    objects = []
    for i, feature in enumerate(_features(data, path)):
        if not isinstance(feature, dict):
            raise QuPathFileError(f"{path}: feature {i}: not a GeoJSON Feature object")
        raw_id = feature.get("id")
        feature_id = "" if raw_id is None or raw_id in LEGACY_OBJECT_TYPES else str(raw_id)
        props = feature.get("properties") or {}
        if not isinstance(props, dict):
            raise QuPathFileError(f"{path}: feature {i}: 'properties' is not an object")
        name = props.get("name")
        where = f"{path}: {_describe(i, feature_id, name)}"
        object_type = props.get("objectType") or LEGACY_OBJECT_TYPES.get(str(raw_id), "annotation")
        try:
            geometry = parse_geometry(feature.get("geometry"), "geometry")
            classification = _classification(props, "properties")
        except ValueError as exc:
            raise QuPathFileError(f"{where}: {exc}") from exc
        objects.append(
            QuPathObject(
                index=i,
                feature_id=feature_id,
                object_type=str(object_type),
                geometry=geometry,
                classification=classification,
                name=None if name in (None, "") else str(name),
            )
        )
    return objects


def box_ring(x: float, y: float, w: float, h: float) -> list[list[float]]:
    """A level-0 box as QuPath writes a rectangle: clockwise from the top-left corner, closed."""
    return [[x, y], [x + w, y], [x + w, y + h], [x, y + h], [x, y]]


def annotation_feature(
    rings: Sequence[Sequence[Sequence[float]]],
    *,
    name: str,
    classification: str,
    color: Sequence[int],
    properties: Mapping[str, Any] | None = None,
    measurements: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One locked QuPath annotation: a Polygon of ``rings`` (exterior, then holes) with a
    classification, a name, measurements (numbers QuPath lists in its table) and extra properties.
    Its id is a UUID derived from its content, so the same export writes the same file."""
    props: dict[str, Any] = {
        "objectType": "annotation",
        "name": name,
        "classification": {"name": classification, "color": [int(c) for c in color]},
        "isLocked": True,
    }
    if measurements:
        props["measurements"] = {k: float(v) for k, v in measurements.items()}
    props |= dict(properties or {})
    geometry = {"type": "Polygon", "coordinates": [[[float(x), float(y)] for x, y in r] for r in rings]}
    digest = json.dumps([geometry, props], sort_keys=True, default=str)
    return {
        "type": "Feature",
        "id": str(uuid.uuid5(_NAMESPACE, digest)),
        "geometry": geometry,
        "properties": props,
    }


def feature_collection(features: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The FeatureCollection QuPath imports (File > Import objects, or drag and drop)."""
    return {"type": "FeatureCollection", "features": list(features)}
