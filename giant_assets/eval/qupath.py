"""The QuPath round trip: where an agent looked, as annotations a pathologist opens on the slide, and the
pathologist's own annotations back as reference regions (``roi_evaluation``, the geometry evaluators).

Export: one FeatureCollection per slide, ``<out>/<slide file name>.geojson`` (the name QuPath gives its
own exports), holding every region viewed by every run of the slide's items (``runs.viewed``: crops, a
patch baseline's patches; class ``GIANT crop``) and, for a
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
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import shapely

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.paths import confined_path
from giant_assets.core.storage import ParquetStore
from giant_assets.eval.path_review import review_frames
from giant_assets.geometry.numbers import MAX_COORDINATE
from giant_assets.geometry.qupath import (
    GEOJSON_SUFFIXES,
    QuPathFileError,
    QuPathObject,
    QuPathSource,
    annotation_feature,
    box_ring,
    feature_collection,
    iter_qupath_objects,
    qupath_sources,
    strip_extension,
)
from giant_assets.geometry.roi import REFERENCE_COLUMNS
from giant_assets.runs.records import parse_trajectory, steps_frame
from giant_assets.runs.viewed import viewed_steps

CROP_CLASS, CROP_COLOR = "GIANT crop", (255, 140, 0)
REPORTED_CLASS, REPORTED_COLOR = "GIANT reported region", (0, 160, 255)
OWN_CLASSES = (CROP_CLASS, REPORTED_CLASS)  # what export writes: left out when QuPath brings them back
DEFAULT_POINT_SIZE = 256  # level-0 pixels: the side of the box a point annotation becomes
MIN_POINT_SIZE = 1.0
# what QuPath's exports end with: plain, gzip ("Compression: gzip") and ZIP ("Compression: ZIP")
EXPORT_SUFFIXES = (*(s + ".gz" for s in GEOJSON_SUFFIXES), *GEOJSON_SUFFIXES, ".zip")
_SEPARATORS = " _-.("


def slide_name(image_path: str) -> str:
    """The slide's file name, what QuPath calls the image and names its exports after."""
    return Path(str(image_path)).name


# --- export ----------------------------------------------------------------------------------------


def export_name(slide: str) -> str:
    """The file name QuPath gives an export of this slide (``GeneralTools.stripExtension`` of the image
    name, then ``.geojson``): ``X.svs`` -> ``X.geojson``, ``X.ome.tif`` -> ``X.geojson``."""
    return strip_extension(slide) + ".geojson"


def _metadata(props: Mapping[str, Any]) -> dict[str, str]:
    """The scalar properties as QuPath 0.5+ metadata, which it keeps, shows and writes back: strings only
    (QuPath reads each primitive's string form)."""
    return {
        k: v if isinstance(v, str) else json.dumps(v)
        for k, v in props.items()
        if isinstance(v, str | int | float | bool) and not (isinstance(v, float) and not math.isfinite(v))
    }


def crop_features(predictions: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per benchmark_id, one annotation per region the agent viewed (``runs.viewed``: a crop, a patch
    baseline's patch), in run and step order."""
    out: dict[str, list[dict[str, Any]]] = {}
    rows = predictions.sort_values(["benchmark_id", "run_index"])
    for run in rows.itertuples(index=False):
        for step in viewed_steps(parse_trajectory(run.trajectory_json)):
            box = step["box"]
            reason = str(step.get("text") or step.get("reasoning") or "")
            props = {
                "benchmark_id": str(run.benchmark_id),
                "run": int(run.run_index),
                "step": int(step["index"]),
                "level": step.get("level"),
                "reason": reason,
            }
            out.setdefault(str(run.benchmark_id), []).append(
                annotation_feature(
                    [box_ring(*box)],
                    name=f"{run.benchmark_id} run {run.run_index} step {step['index']}",
                    classification=CROP_CLASS,
                    color=CROP_COLOR,
                    measurements={"run": run.run_index, "step": step["index"]},
                    properties=props,
                    metadata=_metadata(props),
                )
            )
    return out


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def check_region(region: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A reported region made safe to write: ``benchmark_id`` text, ``run_index`` a whole number >= 0, a
    level-0 ``box`` [x, y, w, h] (or ``box_x``/``box_y``/``box_w``/``box_h``) of finite numbers with
    w, h > 0, every other number finite. ValueError names ``where`` and the field."""
    region = dict(region)
    for key in ("benchmark_id", "run_index"):
        if key not in region:
            raise ValueError(f"{where}: missing field {key!r}")
    item = region["benchmark_id"]
    if isinstance(item, bool) or not isinstance(item, str | int) or str(item) == "":
        raise ValueError(f"{where}: field 'benchmark_id': expected an item id, got {item!r:.80}")
    run = _whole(region["run_index"])
    if run is None or run < 0:
        raise ValueError(
            f"{where}: field 'run_index': expected a whole number >= 0, got {region['run_index']!r:.80}"
        )
    if "box" in region:
        box, field = region.pop("box"), "box"
    else:
        box, field = (
            [region.pop(k, None) for k in ("box_x", "box_y", "box_w", "box_h")],
            "box_x/box_y/box_w/box_h",
        )
    numbers = isinstance(box, list | tuple) and len(box) == 4
    numbers = numbers and all(isinstance(v, int | float) and not isinstance(v, bool) for v in box)
    if not numbers or not all(math.isfinite(v) and abs(v) <= MAX_COORDINATE for v in box):
        raise ValueError(f"{where}: field {field!r}: expected 4 finite numbers [x, y, w, h], got {box!r:.80}")
    if box[2] <= 0 or box[3] <= 0:
        raise ValueError(f"{where}: field {field!r}: the box's width and height must be > 0, got {list(box)}")
    for key, value in region.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: field {key!r}: not a finite number ({value})")
    return {**region, "benchmark_id": str(item), "run_index": run, "box": [float(v) for v in box]}


def reported_features(regions: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per benchmark_id, one annotation per region a path-review run reported, numbered per run.

    Each region is a mapping with ``benchmark_id``, ``run_index``, a level-0 ``box`` [x, y, w, h] (or
    ``box_x``/``box_y``/``box_w``/``box_h``) and any further properties (e.g. ``finding``), kept as
    properties of the feature and, as text, its QuPath metadata.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    per_run: dict[tuple[str, int], int] = {}  # regions so far of each run: the next one's number
    for i, given in enumerate(regions):
        region = check_region(given, f"reported region {i}")
        box = region.pop("box")
        item, run = region.pop("benchmark_id"), region.pop("run_index")
        region.pop("benchmark_name", None)
        number = per_run[item, run] = per_run.get((item, run), 0) + 1
        props = {"benchmark_id": item, "run": run, **region}
        out.setdefault(item, []).append(
            annotation_feature(
                [box_ring(*box)],
                name=f"{item} run {run} region {number}",
                classification=REPORTED_CLASS,
                color=REPORTED_COLOR,
                measurements={"run": run, "region": number},
                properties=props,
                metadata=_metadata(props),
            )
        )
    return out


def _load_json(path: Path) -> Any:
    """A UTF-8 JSON file (a byte order mark allowed); every problem a ValueError naming the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise ValueError(f"{path}: invalid JSON: {exc}") from None


def read_reported_regions(path: Path, benchmark: str | None, check: bool = True) -> list[dict[str, Any]]:
    """A benchmark's reported regions from a JSON list of objects (benchmark_id, run_index, a level-0
    box, properties...; benchmark_name when the list spans benchmarks), as ``export_qupath`` and the
    review's queue take them; ``benchmark`` None keeps them all (each must then name its benchmark).
    Every problem is a ValueError naming the file, the region and the field; ``check`` False leaves each
    region's box and run to its reader (the review's queue refuses bad regions one by one)."""
    regions = _load_json(path)
    if not isinstance(regions, list) or not all(isinstance(r, dict) for r in regions):
        raise ValueError(f"{path}: expected a JSON list of region objects")
    out = []
    for i, region in enumerate(regions):
        where = f"{path}: region {i}"
        checked = check_region(region, where) if check else region
        name = region.get("benchmark_name", benchmark)
        if name is None:
            raise ValueError(
                f"{where}: missing field 'benchmark_name' (the file is read for every benchmark)"
            )
        if benchmark is None or name == benchmark:
            out.append({**checked, "benchmark_name": name} if benchmark is None else checked)
    return out


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


def reported_regions_of(predictions: pd.DataFrame) -> list[dict[str, Any]]:
    """The valid regions a path-review experiment's runs (``predictions`` rows) reported, computed from
    their trajectories exactly as ``path_review_regions`` stores them (``eval.path_review.review_frames``):
    for a reader holding the runs but not that table (the trajectory viewer)."""
    if not len(predictions):
        return []
    regions, _ = review_frames(steps_frame(predictions), predictions)
    return regions_from_table(regions)


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
    Each file is named as QuPath names its own export of the slide (:func:`export_name`; the slide's
    full file name when two slides would share it); a slide without any crop or region gets no file.
    """
    crops = crop_features(predictions)
    regions = reported_features(reported)
    slide_of = dict(zip(items["benchmark_id"].astype(str), items["image_path"].map(slide_name), strict=True))
    by_slide: dict[str, list[dict[str, Any]]] = {}
    for item in sorted(set(predictions["benchmark_id"].astype(str)) | set(regions)):
        if item not in slide_of:
            raise ValueError(f"item {item!r} has runs but is not among the benchmark's items")
        features = crops.get(item, []) + regions.get(item, [])
        if features:
            by_slide.setdefault(slide_of[item], []).extend(features)
    names = [export_name(s) for s in set(slide_of.values())]
    written = []
    for slide, features in sorted(by_slide.items()):
        name = export_name(slide) if names.count(export_name(slide)) == 1 else f"{slide}.geojson"
        path = confined_path(out_dir, name)
        text = json.dumps(feature_collection(features), indent=1, ensure_ascii=False, allow_nan=False)
        atomic_write_bytes(path, text.encode("utf-8"))
        written.append(path)
    return written


# --- import ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportSummary:
    files: int  # exports read (a ZIP export's entries each)
    regions: int  # annotations read (before fanning out to the items of their slide)
    rows: int  # reference region rows written (one per annotation and item)
    skipped: dict[str, int]  # objects not imported: by object type, "line", our own classes, "class X"


def export_stem(path_name: str) -> str:
    """An export's file name without what QuPath adds: ``.geojson`` / ``.json``, gzip's ``.gz`` after
    them, or ``.zip`` (its ZIP export)."""
    name, lower = path_name, path_name.lower()
    for suffix in EXPORT_SUFFIXES:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def match_slide(path: Path, slides: Sequence[str]) -> str:
    """The slide a QuPath export belongs to, by its file name: the slide's name as QuPath strips it
    (``X.svs`` -> ``X.geojson``, ``X.ome.tif`` -> ``X.geojson``, what QuPath names its exports), its full
    file name, or either followed by a separator and more (``X - tumour.geojson``); else its folder's
    name. The longest matching name wins, whatever the slides' order; a tie between slides (``X.svs`` and
    ``X.tiff`` for ``X.geojson``) or no match is an error naming the file."""
    for candidate in (export_stem(path.name), path.parent.name):
        found: dict[str, int] = {}  # slide -> length of its longest name that matches
        for slide in slides:
            for name in {slide, strip_extension(slide), Path(slide).stem}:
                tail = candidate[len(name) :]
                if name and candidate.startswith(name) and (tail == "" or tail[0] in _SEPARATORS):
                    found[slide] = max(found.get(slide, 0), len(name))
        if found:
            longest = max(found.values())
            best = sorted(slide for slide, n in found.items() if n == longest)
            if len(best) > 1:
                raise QuPathFileError(f"{path}: named like several slides of the items: {best}; use --slide")
            return best[0]
    raise QuPathFileError(
        f"{path}: no slide of the items is named like this file or its folder "
        f"(expected <slide name without extension, or file name>[ - anything].geojson, e.g. "
        f"{[strip_extension(s) + '.geojson' for s in sorted(slides)[:3]]})"
    )


def _regions_of(obj: QuPathObject, point_size: float, width: float, height: float) -> list[dict]:
    """The region(s) one QuPath object becomes: {suffix of its region_id, kind, coords}."""
    geom = obj.geometry
    assert geom is not None  # annotations always carry their geometry
    if obj.is_points:
        half = point_size / 2
        out = []
        for k, p in enumerate(geom.geoms):
            x0, y0 = max(p.x - half, 0.0), max(p.y - half, 0.0)
            x1, y1 = min(p.x + half, width), min(p.y + half, height)
            out.append({"suffix": f".{k}", "kind": "box", "coords": [x0, y0, x1 - x0, y1 - y0]})
        return out
    if isinstance(geom, shapely.Polygon) and not geom.interiors:
        return [{"suffix": "", "kind": "polygon", "coords": [list(c) for c in geom.exterior.coords]}]
    parts = geom.geoms if isinstance(geom, shapely.MultiPolygon) else [geom]
    rings = [
        [[list(c) for c in p.exterior.coords], *([list(c) for c in h.coords] for h in p.interiors)]
        for p in parts
    ]
    return [{"suffix": "", "kind": "multipolygon", "coords": rings}]


def check_point_size(point_size: Any) -> float:
    """The side of a point's box: a finite number of at least one level-0 pixel (NaN, infinity, zero,
    negative or a sub-pixel size would write boxes no region score can use)."""
    if isinstance(point_size, bool) or not isinstance(point_size, int | float):
        raise ValueError(f"point size must be a number of level-0 pixels, got {point_size!r}")
    if not math.isfinite(point_size) or point_size < MIN_POINT_SIZE:
        raise ValueError(
            f"point size must be a finite number >= {MIN_POINT_SIZE:g} level-0 pixel, got {point_size!r}"
        )
    return float(point_size)


def _slide_size(items: pd.DataFrame, name: str, where: object) -> tuple[pd.DataFrame, float, float]:
    on_slide = items[items["image_path"].map(slide_name) == name]
    size = on_slide[["width", "height"]].dropna()
    if size.empty:
        raise QuPathFileError(
            f"{where}: slide {name!r} has no known size (its slide was not found when the items "
            "were ingested), so the annotations cannot be checked against it"
        )
    return on_slide, float(size.iloc[0]["width"]), float(size.iloc[0]["height"])


def import_qupath(
    paths: Sequence[Path | QuPathSource],
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
    classifications (all when empty). Only area and point ``annotation`` objects are read; detections,
    cells, tiles, lines and the annotations ``export_qupath`` wrote (classes ``OWN_CLASSES``, unless
    ``classes`` names them) are counted as skipped. Feature ids must be unique per slide, across files.
    """
    point_size = check_point_size(point_size)
    slides = {slide_name(p): p for p in items["image_path"]}
    if slide is not None and slide_name(slide) not in slides:
        raise ValueError(f"--slide {slide!r}: no item of the chosen benchmarks is on this slide")
    sources = [s for p in paths for s in ([p] if isinstance(p, QuPathSource) else qupath_sources(p))]
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    seen: dict[str, dict[str, str]] = {}  # slide -> feature id -> the export it was first read in
    n_regions = 0

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for source in sources:
        name = slide_name(slide) if slide is not None else match_slide(source.path, list(slides))
        on_slide, width, height = _slide_size(items, name, source)
        ids = seen.setdefault(name, {})
        for obj in iter_qupath_objects(source):
            if obj.object_type != "annotation":
                skip(obj.object_type)
                continue
            if obj.is_line:
                skip("line")
                continue
            if obj.classification in OWN_CLASSES and obj.classification not in classes:
                skip(str(obj.classification))  # our own export brought back: never a reference
                continue
            if classes and obj.classification not in classes:
                skip(f"class {obj.classification}")
                continue
            if obj.feature_id:
                if obj.feature_id in ids:
                    raise QuPathFileError(
                        f"{source}: {obj.describe()}: a second feature with this id on slide {name!r} "
                        f"(the first is in {ids[obj.feature_id]})"
                    )
                ids[obj.feature_id] = str(source)
            _check_inside(obj, source, name, width, height)
            n_regions += 1
            region_id = f"{source.member or source.path.name}#{obj.feature_id or obj.index}"
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
    return frame, ImportSummary(len(sources), n_regions, len(frame), skipped)


def _check_inside(obj: QuPathObject, source: object, name: str, width: float, height: float) -> None:
    """Geometry outside the slide, or a polygon without area, is refused (never clipped)."""
    assert obj.geometry is not None
    x0, y0, x1, y1 = obj.geometry.bounds
    if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
        raise QuPathFileError(
            f"{source}: {obj.describe()}: lies outside slide {name!r} ({width:.0f} x {height:.0f} "
            f"level-0 pixels): bounds x {x0:g}..{x1:g}, y {y0:g}..{y1:g} (not clipped: was it "
            "drawn on another slide, or at another resolution?)"
        )
    if not obj.is_points and obj.geometry.area <= 0:
        raise QuPathFileError(f"{source}: {obj.describe()}: the annotation has zero area")


def write_reference_regions(frame: pd.DataFrame, path: Path) -> None:
    """The regions as the JSON list ``load_reference_regions`` reads (``GIANT_REGIONS_PATH``)."""
    records = [
        {k: (None if k == "label" and pd.isna(v) else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]
    atomic_write_bytes(path, json.dumps(records, indent=1, ensure_ascii=False).encode("utf-8"))
