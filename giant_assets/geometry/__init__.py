"""Geometry for grading: boxes and IoU, matching, point distances, polygon and rotated-box IoU, COCO mAP,
viewed regions.

Names are loaded lazily from their submodules so that a judge process importing one function does not pay
for scipy.optimize or pandas.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "MAX_PAIRS": "boxes",
    "as_boxes": "boxes",
    "box_area": "boxes",
    "box_intersection": "boxes",
    "box_iou": "boxes",
    "check_pairs": "boxes",
    "check_xyxy": "boxes",
    "xyxy_boxes": "boxes",
    "xywh_to_xyxy": "boxes",
    "xyxy_to_xywh": "boxes",
    "CocoMapResult": "coco_eval",
    "coco_map": "coco_eval",
    "ToleranceResult": "distances",
    "paired_distances": "distances",
    "within_tolerance": "distances",
    "MATCHERS": "matching",
    "MAX_HUNGARIAN_PAIRS": "matching",
    "MatchResult": "matching",
    "coco_match": "matching",
    "greedy_match": "matching",
    "hungarian_match": "matching",
    "MAX_COORDINATE": "numbers",
    "numeric_array": "numbers",
    "PolygonIoU": "polygons",
    "polygon_iou": "polygons",
    "to_polygon": "polygons",
    "Region": "roi",
    "RoiScore": "roi",
    "evaluate_viewed_regions": "roi",
    "load_reference_regions": "roi",
    "regions_from_frame": "roi",
    "as_rotated_box": "rotated",
    "rotated_iou": "rotated",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
