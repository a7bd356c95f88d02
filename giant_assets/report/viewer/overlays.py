"""What the deep zoom view draws over the slide for one run, from the run's step rows (so any agent's,
a plug-in's too): the viewed boxes (crops, a patch baseline's patches) numbered in step order, a
thumbnail baseline's extent unnumbered, and the item's reference regions' bounding boxes. Every box is
level-0 [x, y, w, h], the Deep Zoom image's own coordinates (``slides.deepzoom``)."""

from __future__ import annotations

import json
import math
from typing import Any

from giant_assets.geometry.roi import Region
from giant_assets.report.trajectory_images import extent_steps, viewed_steps


def _box(values: Any) -> list[float] | None:
    """Four finite numbers with a positive size, else None (the step's box is not drawn)."""
    try:
        box = [float(v) for v in values]
    except (TypeError, ValueError):
        return None
    if len(box) != 4 or not all(math.isfinite(v) and abs(v) < 1e12 for v in box) or min(box[2:]) <= 0:
        return None
    return box


def run_overlays(steps: list[dict[str, Any]], references: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The overlays of a run view's ``steps`` and its page's ``references`` (as the page lists them)."""
    shown: list[dict[str, Any]] = []
    for step in extent_steps(steps):
        if (box := _box(step["box"])) is not None:
            shown.append({"kind": "extent", "n": None, "step": step["index"], "box": box})
    for number, step in enumerate(viewed_steps(steps), start=1):
        if (box := _box(step["box"])) is not None:
            shown.append({"kind": step["action"], "n": number, "step": step["index"], "box": box})
    for ref in references:
        try:
            x0, y0, x1, y1 = Region(ref["kind"], json.loads(ref["coords"])).geometry().bounds
        except (ValueError, TypeError):
            continue
        if (box := _box([x0, y0, x1 - x0, y1 - y0])) is not None:
            shown.append(
                {"kind": "reference", "n": None, "step": None, "box": box, "label": ref["region_id"]}
            )
    return shown
