"""The QuPath round trip: where an agent looked, as annotations a pathologist opens on the slide, and the
pathologist's own annotations back as reference regions (``roi_evaluation``, the geometry evaluators).

Export: one FeatureCollection per slide, ``<out>/<slide file name>.geojson`` (the name QuPath gives its
own exports), holding every crop of every run of the slide's items (class ``GIANT crop``) and, for a
path-review experiment, the regions its runs reported (class ``GIANT reported region``), read from the
stored ``path_review_regions`` table (:func:`stored_reported_regions`) or given as plain level-0 boxes
with properties (:func:`reported_features`).

Import: QuPath exports (several files per slide allowed) become rows of a reference regions file
(``geometry.roi.load_reference_regions``) for every item of the slide: an area annotation as a
``polygon`` (holes or several parts: ``multipolygon``), a point as a box of ``point_size`` level-0 pixels
around it. Geometry outside the slide is refused, never clipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import shapely

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.paths import confined_path
from giant_assets.core.storage import ParquetStore
from giant_assets.geometry.qupath import (
    QuPathFileError,
    QuPathObject,
    annotation_feature,
    box_ring,
    feature_collection,
    read_qupath_objects,
)
from giant_assets.geometry.roi import REFERENCE_COLUMNS
from giant_assets.runs.records import parse_trajectory

CROP_CLASS, CROP_COLOR = "GIANT crop", (255, 140, 0)
REPORTED_CLASS, REPORTED_COLOR = "GIANT reported region", (0, 160, 255)
DEFAULT_POINT_SIZE = 256  # level-0 pixels: the side of the box a point annotation becomes
GEOJSON_SUFFIXES = (".geojson", ".json")
_SEPARATORS = " _-.("


def slide_name(image_path: str) -> str:
    """The slide's file name, what QuPath calls the image and names its exports after."""
    return Path(str(image_path)).name


# --- export ----------------------------------------------------------------------------------------


def crop_features(predictions: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per benchmark_id, one annotation per crop the agent viewed, in run and step order."""
    out: dict[str, list[dict[str, Any]]] = {}
    rows = predictions.sort_values(["benchmark_id", "run_index"])
    for run in rows.itertuples(index=False):
        for step in parse_trajectory(run.trajectory_json):
            box = step.get("box")
            if step.get("action") != "crop" or not box:
                continue
            reason = str(step.get("text") or step.get("reasoning") or "")
            out.setdefault(str(run.benchmark_id), []).append(
                annotation_feature(
                    [box_ring(*box)],
                    name=f"{run.benchmark_id} run {run.run_index} step {step['index']}",
                    classification=CROP_CLASS,
                    color=CROP_COLOR,
                    measurements={"run": run.run_index, "step": step["index"]},
                    properties={
                        "benchmark_id": str(run.benchmark_id),
                        "run": int(run.run_index),
                        "step": int(step["index"]),
                        "level": step.get("level"),
                        "reason": reason,
                    },
                )
            )
    return out


def reported_features(regions: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per benchmark_id, one annotation per region a path-review run reported.

    Each region is a mapping with ``benchmark_id``, ``run_index``, a level-0 ``box`` [x, y, w, h] (or
    ``box_x``/``box_y``/``box_w``/``box_h``) and any further properties (e.g. ``finding``), kept as
    properties of the feature.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    per_run: dict[tuple[str, int], int] = {}  # regions so far of each run: the next one's number
    for i, region in enumerate(regions):
        region = dict(region)
        box = region.pop("box", None)
        if box is None:
            box = [region.pop(k, None) for k in ("box_x", "box_y", "box_w", "box_h")]
        if len(box) != 4 or any(v is None for v in box):
            raise ValueError(f"reported region {i}: needs a level-0 box [x, y, w, h], got {box!r}")
        item, run = str(region.pop("benchmark_id")), int(region.pop("run_index"))
        region.pop("benchmark_name", None)
        number = per_run[item, run] = per_run.get((item, run), 0) + 1
        out.setdefault(item, []).append(
            annotation_feature(
                [box_ring(*box)],
                name=f"{item} run {run} region {number}",
                classification=REPORTED_CLASS,
                color=REPORTED_COLOR,
                measurements={"run": run, "region": number},
                properties={"benchmark_id": item, "run": run, **region},
            )
        )
    return out


def read_reported_regions(path: Path, benchmark: str) -> list[dict[str, Any]]:
    """A benchmark's reported regions from a JSON list of objects (benchmark_id, run_index, a level-0
    box, properties...; benchmark_name when the list spans benchmarks), as ``export_qupath`` and the
    review's queue take them."""
    try:
        regions = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(regions, list) or not all(isinstance(r, dict) for r in regions):
        raise ValueError(f"{path}: expected a JSON list of region objects")
    for i, region in enumerate(regions):
        missing = [k for k in ("benchmark_id", "run_index") if k not in region]
        if missing:
            raise ValueError(f"{path}: region {i}: missing field(s) {missing}")
    return [r for r in regions if r.get("benchmark_name", benchmark) == benchmark]


REPORTED_TABLE = "path_review_regions"
_REPORTED_TEXTS = ("why_zoomed", "diagnostic_relevance")


def regions_from_table(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The valid regions of a ``path_review_regions`` table as :func:`export_qupath` and the review's queue
    take them: a level-0 ``box``, the model's ``observations`` as the ``finding``, its other texts, the
    region's number and how well a viewed crop overlaps it. Invalid regions (no usable box; each named in
    the table's ``problem``) are left out."""
    if table.empty:
        return []
    valid = table[table["valid"].fillna(False).astype(bool)]
    out = []
    for row in valid.itertuples(index=False):
        region: dict[str, Any] = {
            "benchmark_name": str(row.benchmark_name),
            "benchmark_id": str(row.benchmark_id),
            "run_index": int(row.run_index),
            "box": [float(row.x), float(row.y), float(row.width), float(row.height)],
            "region_number": None if pd.isna(row.region_number) else int(row.region_number),
            "finding": "" if pd.isna(row.observations) else str(row.observations),
        }
        for name in _REPORTED_TEXTS:
            value = getattr(row, name)
            region[name] = "" if pd.isna(value) else str(value)
        region["best_iou"] = None if pd.isna(row.best_iou) else float(row.best_iou)
        region["viewed"] = None if pd.isna(row.viewed) else bool(row.viewed)
        if "experiment" in table.columns:
            region["experiment"] = str(row.experiment)
        out.append(region)
    return out


def stored_reported_regions(store: ParquetStore, experiment: str, benchmark: str) -> list[dict[str, Any]]:
    """The regions a path-review experiment reported on a benchmark, from the stored
    ``path_review_regions`` table; none for a cell it does not hold (another agent, not materialized)."""
    cell = f"{experiment}/{benchmark}"
    if cell not in store.partitions(REPORTED_TABLE):
        return []
    return regions_from_table(store.read(REPORTED_TABLE, [cell]))


def export_qupath(
    predictions: pd.DataFrame,
    items: pd.DataFrame,
    out_dir: Path,
    reported: Iterable[Mapping[str, Any]] = (),
) -> list[Path]:
    """Write one FeatureCollection per slide of the items run under ``out_dir``; returns the files.

    ``predictions`` is one benchmark's rows of the ``predictions`` table, ``items`` gives each
    ``benchmark_id``'s ``image_path``; ``reported`` the reported regions (:func:`reported_features`).
    """
    crops = crop_features(predictions)
    regions = reported_features(reported)
    slide_of = dict(zip(items["benchmark_id"].astype(str), items["image_path"].map(slide_name), strict=True))
    by_slide: dict[str, list[dict[str, Any]]] = {}
    for item in sorted(set(predictions["benchmark_id"].astype(str)) | set(regions)):
        if item not in slide_of:
            raise ValueError(f"item {item!r} has runs but is not among the benchmark's items")
        by_slide.setdefault(slide_of[item], []).extend(crops.get(item, []) + regions.get(item, []))
    written = []
    for slide, features in sorted(by_slide.items()):
        path = confined_path(out_dir, f"{slide}.geojson")
        text = json.dumps(feature_collection(features), indent=1, ensure_ascii=False)
        atomic_write_bytes(path, text.encode("utf-8"))
        written.append(path)
    return written


# --- import ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportSummary:
    files: int
    regions: int  # annotations read (before fanning out to the items of their slide)
    rows: int  # reference region rows written (one per annotation and item)
    skipped: dict[str, int]  # objects not imported, by object type (detections, cells...)


def match_slide(path: Path, slides: Sequence[str]) -> str:
    """The slide a QuPath export belongs to, by its file name: ``<slide>.geojson``, ``<slide stem>.json``,
    or either followed by a separator and more (``slide.svs - tumour.geojson``); else its folder's name.
    The longest matching slide name wins; none matching is an error naming the file."""
    stem = path.name
    for suffix in GEOJSON_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    for candidate in (stem, path.parent.name):
        best = ""
        for slide in slides:
            for name in {slide, Path(slide).stem}:
                tail = candidate[len(name) :]
                if candidate.startswith(name) and (tail == "" or tail[0] in _SEPARATORS):
                    best = slide if len(name) > len(best) else best
        if best:
            return best
    raise QuPathFileError(
        f"{path}: no slide of the items is named like this file or its folder "
        f"(expected <slide file name or stem>[ - anything].geojson, e.g. {sorted(slides)[:3]})"
    )


def _regions_of(obj: QuPathObject, point_size: float, width: float, height: float) -> list[dict]:
    """The region(s) one QuPath object becomes: {suffix of its region_id, kind, coords}."""
    if obj.is_points:
        half = point_size / 2
        out = []
        for k, p in enumerate(obj.geometry.geoms):
            x0, y0 = max(p.x - half, 0.0), max(p.y - half, 0.0)
            x1, y1 = min(p.x + half, width), min(p.y + half, height)
            out.append({"suffix": f".{k}", "kind": "box", "coords": [x0, y0, x1 - x0, y1 - y0]})
        return out
    geom = obj.geometry
    if isinstance(geom, shapely.Polygon) and not geom.interiors:
        return [{"suffix": "", "kind": "polygon", "coords": [list(c) for c in geom.exterior.coords]}]
    parts = geom.geoms if isinstance(geom, shapely.MultiPolygon) else [geom]
    rings = [
        [[list(c) for c in p.exterior.coords], *([list(c) for c in h.coords] for h in p.interiors)]
        for p in parts
    ]
    return [{"suffix": "", "kind": "multipolygon", "coords": rings}]


def import_qupath(
    paths: Sequence[Path],
    items: pd.DataFrame,
    *,
    point_size: float = DEFAULT_POINT_SIZE,
    classes: Sequence[str] = (),
    slide: str | None = None,
) -> tuple[pd.DataFrame, ImportSummary]:
    """Reference regions (``REFERENCE_COLUMNS``) from QuPath exports, for every item of each file's slide.

    ``items`` (``benchmark_items`` rows: benchmark_name, benchmark_id, image_path, width, height) are
    the items regions may belong to (restrict them to a benchmark beforehand); ``slide`` names the one
    slide of every file instead of matching file names; ``classes`` keeps only annotations of these
    classifications (all when empty). Only ``annotation`` objects are read; others are counted.
    """
    if point_size <= 0:
        raise ValueError(f"point_size must be > 0 level-0 pixels, got {point_size}")
    slides = {slide_name(p): p for p in items["image_path"]}
    if slide is not None and slide_name(slide) not in slides:
        raise ValueError(f"--slide {slide!r}: no item of the chosen benchmarks is on this slide")
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    n_regions = 0
    for path in paths:
        path = Path(path)
        name = slide_name(slide) if slide is not None else match_slide(path, list(slides))
        on_slide = items[items["image_path"].map(slide_name) == name]
        size = on_slide[["width", "height"]].dropna()
        if size.empty:
            raise QuPathFileError(
                f"{path}: slide {name!r} has no known size (its slide was not found when the items "
                "were ingested), so the annotations cannot be checked against it"
            )
        width, height = float(size.iloc[0]["width"]), float(size.iloc[0]["height"])
        seen: set[str] = set()
        for obj in read_qupath_objects(path):
            if obj.feature_id in seen:
                raise QuPathFileError(f"{path}: {obj.describe()}: a second feature with this id")
            seen.add(obj.feature_id or f"#{obj.index}")
            if obj.object_type != "annotation":
                skipped[obj.object_type] = skipped.get(obj.object_type, 0) + 1
                continue
            if classes and obj.classification not in classes:
                skipped[f"class {obj.classification}"] = skipped.get(f"class {obj.classification}", 0) + 1
                continue
            x0, y0, x1, y1 = obj.geometry.bounds
            if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
                raise QuPathFileError(
                    f"{path}: {obj.describe()}: lies outside slide {name!r} ({width:.0f} x {height:.0f} "
                    f"level-0 pixels): bounds x {x0:g}..{x1:g}, y {y0:g}..{y1:g} (not clipped: was it "
                    "drawn on another slide, or at another resolution?)"
                )
            if not obj.is_points and obj.geometry.area <= 0:
                raise QuPathFileError(f"{path}: {obj.describe()}: the annotation has zero area")
            n_regions += 1
            region_id = f"{path.name}#{obj.feature_id or obj.index}"
            for part in _regions_of(obj, point_size, width, height):
                for item in on_slide.itertuples(index=False):
                    rows.append(
                        {
                            "benchmark_name": item.benchmark_name,
                            "benchmark_id": str(item.benchmark_id),
                            "region_id": region_id + part["suffix"],
                            "kind": part["kind"],
                            "coords": part["coords"],
                            "label": obj.classification or obj.name,
                        }
                    )
    frame = pd.DataFrame(rows, columns=list(REFERENCE_COLUMNS))
    return frame, ImportSummary(len(paths), n_regions, len(frame), skipped)


def write_reference_regions(frame: pd.DataFrame, path: Path) -> None:
    """The regions as the JSON list ``load_reference_regions`` reads (``GIANT_REGIONS_PATH``)."""
    records = [
        {k: (None if k == "label" and pd.isna(v) else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]
    atomic_write_bytes(path, json.dumps(records, indent=1, ensure_ascii=False).encode("utf-8"))
