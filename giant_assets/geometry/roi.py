"""Where did the agent look? Score viewed crops (XYWH, level-0 pixels) against reference regions.

Hit definition (all thresholds configurable, a criterion set to None is switched off). A viewed box hits
a reference region when ANY of these holds:
- IoU(viewed, reference) >= `min_iou` (default 0.1);
- the viewed box contains at least `min_reference_covered` of the reference's area (default 0.5): a crop
  around most of a small lesion counts even though the crop is much larger than the lesion;
- at least `min_view_inside` of the viewed box lies inside the reference (default 0.5): a zoom into the
  interior of a large region (e.g. a tumour area) counts even though it covers little of it.
Viewed boxes of zero area never hit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from giant_assets.geometry.boxes import as_boxes
from giant_assets.geometry.numbers import numeric_array
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

if TYPE_CHECKING:
    from shapely.geometry.base import BaseGeometry

# shapely (and geometry.polygons, built on it) is imported inside the functions that draw geometries:
# loading the Dagster definitions imports this module, and most processes never score a region.

REGION_KINDS = ("box", "polygon", "multipolygon")
REFERENCE_COLUMNS = ("benchmark_name", "benchmark_id", "region_id", "kind", "coords", "label")


@dataclass(frozen=True)
class Region:
    """A reference region in level-0 pixels: a box [x, y, w, h], a polygon [[x, y], ...], or a
    multipolygon in GeoJSON's ``MultiPolygon`` coordinates [[[[x, y], ...] exterior, hole, ...], ...]
    (holes, several parts: what a pathologist's QuPath annotation can be)."""

    kind: str
    coords: Sequence[Any]
    region_id: str = ""
    label: str | None = None

    def __post_init__(self) -> None:
        self.geometry()  # validates

    def geometry(self) -> BaseGeometry:
        """The region as a shapely geometry; raises ValueError if it is malformed or has zero area."""
        import shapely

        from giant_assets.geometry.polygons import to_polygon

        name = f"region {self.region_id!r}" if self.region_id else "region"
        if self.kind == "box":
            box = as_boxes(self.coords, f"{name} box [x, y, w, h]")
            if box.shape != (1, 4):
                raise ValueError(f"{name}: a box is one [x, y, w, h], got {len(box)} boxes")
            x, y, w, h = box[0]
            geom = shapely.box(x, y, x + w, y + h) if w > 0 and h > 0 else shapely.Polygon()
        elif self.kind == "polygon":
            geom, _ = to_polygon(self.coords, f"{name} polygon")
        elif self.kind == "multipolygon":
            geom = multipolygon(self.coords, f"{name} multipolygon")
        else:
            raise ValueError(f"{name}: kind must be one of {REGION_KINDS}, got {self.kind!r}")
        if geom.area <= 0:
            raise ValueError(f"{name}: {self.kind} has zero area: {list(self.coords)}")
        return geom


def multipolygon(coords: Any, name: str = "multipolygon") -> BaseGeometry:
    """A polygonal geometry from GeoJSON ``MultiPolygon`` coordinates; an invalid one (a self-touching
    ring, overlapping parts) is repaired with ``make_valid``, keeping its polygonal parts."""
    import shapely

    from giant_assets.geometry.polygons import polygonal_part

    if not isinstance(coords, list | tuple) or not coords:
        raise ValueError(f"{name}: expected a list of polygons, each a list of rings")
    polygons = []
    for i, rings in enumerate(coords):
        if not isinstance(rings, list | tuple) or not rings:
            raise ValueError(f"{name}: polygon {i}: expected a list of rings (exterior, then holes)")
        parsed = []
        for j, ring in enumerate(rings):
            pts = numeric_array(ring, f"{name}: polygon {i} ring {j}", max_depth=2)
            if pts.ndim != 2 or pts.shape[1] != 2 or len(np.unique(pts, axis=0)) < 3:
                raise ValueError(
                    f"{name}: polygon {i} ring {j}: a ring needs at least 3 distinct [x, y] points"
                )
            parsed.append(pts)
        polygons.append(shapely.Polygon(parsed[0], parsed[1:]))
    geom = shapely.MultiPolygon(polygons)
    return geom if geom.is_valid else polygonal_part(shapely.make_valid(geom))


def _plain_coords(kind: str, coords: Any) -> list:
    """Coordinates as plain nested lists of floats (rings of a multipolygon may differ in length)."""
    if kind != "multipolygon":
        return np.asarray(coords, dtype=np.float64).tolist()
    return [[np.asarray(ring, dtype=np.float64).tolist() for ring in rings] for rings in coords]


@dataclass(frozen=True)
class RoiScore:
    """Summary of viewed boxes vs reference regions (see the module docstring for "hit")."""

    best_iou: float
    hit: bool
    first_hit_step: int | None  # 1-based index into the viewed list of the first hitting box
    n_references_hit: int
    n_references: int
    coverage_fraction: float  # area of (union of references ∩ union of viewed) / area of union of references
    step_hits: tuple[bool, ...]  # per viewed box: does it hit any reference?


def _check_fraction(name: str, value: float | None) -> None:
    if value is not None and not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be in (0, 1] or None, got {value}")


def evaluate_viewed_regions(
    viewed_boxes_xywh: ArrayLike,
    references: Sequence[Region],
    *,
    min_iou: float | None = 0.1,
    min_reference_covered: float | None = 0.5,
    min_view_inside: float | None = 0.5,
) -> RoiScore:
    """Score the boxes an agent viewed (in step order) against reference regions."""
    import shapely

    for name, value in (
        ("min_iou", min_iou),
        ("min_reference_covered", min_reference_covered),
        ("min_view_inside", min_view_inside),
    ):
        _check_fraction(name, value)
    if not references:
        raise ValueError("references: at least one reference region is needed")
    viewed = as_boxes(viewed_boxes_xywh, "viewed_boxes_xywh")
    if (viewed[:, 2:] < 0).any():
        raise ValueError("viewed_boxes_xywh: width and height must be >= 0")
    x, y, w, h = viewed.T
    view_geoms = shapely.box(x, y, x + w, y + h)
    ref_geoms = np.array([r.geometry() for r in references], dtype=object)
    inter = shapely.area(shapely.intersection(view_geoms[:, None], ref_geoms[None, :]))
    area_v = (w * h)[:, None]
    area_r = shapely.area(ref_geoms)[None, :]
    union = area_v + area_r - inter
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    pair_hit = np.zeros(inter.shape, dtype=bool)
    if min_iou is not None:
        pair_hit |= iou >= min_iou
    if min_reference_covered is not None:
        pair_hit |= inter / area_r >= min_reference_covered
    if min_view_inside is not None:
        inside = np.divide(inter, area_v, out=np.zeros_like(inter), where=area_v > 0)
        pair_hit |= inside >= min_view_inside
    step_hits = pair_hit.any(axis=1)
    ref_union = shapely.unary_union(ref_geoms)
    covered = shapely.intersection(ref_union, shapely.unary_union(view_geoms)).area if len(viewed) else 0.0
    first = np.flatnonzero(step_hits)
    return RoiScore(
        best_iou=float(iou.max()) if iou.size else 0.0,
        hit=bool(step_hits.any()),
        first_hit_step=int(first[0]) + 1 if first.size else None,
        n_references_hit=int(pair_hit.any(axis=0).sum()),
        n_references=len(references),
        coverage_fraction=float(covered / ref_union.area),
        step_hits=tuple(bool(h) for h in step_hits),
    )


def _read_rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        return frame.to_dict(orient="records")
    if suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON: {exc}") from exc
        rows = data.get("regions") if isinstance(data, dict) else data
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f'{path}: expected a list of region objects (or {{"regions": [...]}})')
        return rows
    raise ValueError(f"{path}: unsupported reference file type {suffix!r}, expected .csv or .json")


def _parse_row(row: dict[str, Any], where: str, benchmarks: tuple[str, ...]) -> dict[str, Any]:
    missing = [c for c in REFERENCE_COLUMNS[:-1] if c not in row or row[c] in ("", None)]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing}")
    name = str(row["benchmark_name"])
    if name not in benchmarks:
        raise ValueError(
            f"{where}: field 'benchmark_name': unknown {name[:80]!r}, expected one of "
            f"{', '.join(benchmarks)} (a declared benchmark is known while the experiments file declares it)"
        )
    coords = row["coords"]
    if isinstance(coords, str):
        try:
            coords = json.loads(coords)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: field 'coords': not valid JSON: {coords!r:.80}") from exc
    kind = str(row["kind"])
    if kind not in REGION_KINDS:
        raise ValueError(f"{where}: field 'kind': expected one of {REGION_KINDS}, got {kind!r}")
    label = row.get("label")
    try:
        region = Region(
            kind=kind,
            coords=coords,
            region_id=str(row["region_id"]),
            label=None if label in ("", None) else str(label),
        )
    except ValueError as exc:
        raise ValueError(f"{where}: field 'coords': {exc}") from exc
    return {
        "benchmark_name": name,
        "benchmark_id": str(row["benchmark_id"]),
        "region_id": region.region_id,
        "kind": kind,
        "coords": _plain_coords(kind, coords),
        "label": region.label,
    }


def load_reference_regions(path: str | Path, benchmarks: Iterable[str] = BENCHMARK_NAMES) -> pd.DataFrame:
    """Read reference regions from CSV (coords as a JSON string) or JSON (a list of objects).

    Columns: benchmark_name, benchmark_id, region_id, kind ("box" | "polygon" | "multipolygon"), coords
    (box [x, y, w, h] XYWH, polygon [[x, y], ...] or GeoJSON MultiPolygon coordinates, level-0 pixels),
    label (optional; missing -> NA). ``benchmarks`` are the names a row may give (the registry's: the
    built-ins and the declared ones). Raises ValueError naming the file, row and field of the first bad
    row; region_id must be unique per (benchmark_name, benchmark_id).
    """
    path = Path(path)
    known = tuple(benchmarks)
    rows = _read_rows(path)
    parsed = []
    for i, row in enumerate(rows, start=1):
        where = f"{path}: row {i}" + (f" (line {i + 1})" if path.suffix.lower() == ".csv" else "")
        parsed.append(_parse_row(row, where, known))
    frame = pd.DataFrame(parsed, columns=list(REFERENCE_COLUMNS))
    dup = frame.duplicated(["benchmark_name", "benchmark_id", "region_id"], keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        r = frame.iloc[i]
        raise ValueError(
            f"{path}: row {i + 1}: duplicate region_id {r.region_id!r} for "
            f"({r.benchmark_name}, {r.benchmark_id})"
        )
    return frame


def regions_from_frame(frame: pd.DataFrame) -> list[Region]:
    """Region objects for the rows of a `load_reference_regions` frame (e.g. one question's rows)."""
    return [
        Region(r.kind, r.coords, region_id=r.region_id, label=None if pd.isna(r.label) else r.label)
        for r in frame.itertuples(index=False)
    ]
