"""What the deep zoom view draws over the slide for one run, from the run's step rows (so any agent's,
a plug-in's too): the viewed boxes (crops, a patch baseline's patches) numbered in step order, a
thumbnail baseline's extent unnumbered, a path review's reported regions (R1, R2...) and the item's
reference regions' bounding boxes. Every box is
level-0 [x, y, w, h], the Deep Zoom image's own coordinates (``slides.deepzoom``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from giant_assets.geometry.roi import Region
from giant_assets.report.trajectory_images import extent_steps
from giant_assets.runs.viewed import finite_box, viewed_steps


def run_overlays(
    steps: list[dict[str, Any]], references: list[dict[str, Any]], reported: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The overlays of a run view's ``steps``, its page's ``references`` (as the page lists them) and
    the regions a path review reported (the run view's ``reported``: labelled R1, R2... in their order)."""
    shown: list[dict[str, Any]] = []
    for step in extent_steps(steps):
        if (box := finite_box(step["box"])) is not None:
            shown.append({"kind": "extent", "n": None, "step": step["index"], "box": box})
    for number, step in enumerate(viewed_steps(steps), start=1):
        if (box := finite_box(step["box"])) is not None:
            shown.append({"kind": step["action"], "n": number, "step": step["index"], "box": box})
    for region in reported:
        if (box := finite_box(region["box"])) is not None:
            shown.append(
                {"kind": "reported", "n": region["n"], "step": None, "box": box, "label": f"R{region['n']}"}
            )
    for ref in references:
        try:
            x0, y0, x1, y1 = Region(ref["kind"], json.loads(ref["coords"])).geometry().bounds
        except (ValueError, TypeError):
            continue
        if (box := finite_box([x0, y0, x1 - x0, y1 - y0])) is not None:
            shown.append(
                {"kind": "reference", "n": None, "step": None, "box": box, "label": ref["region_id"]}
            )
    return shown
