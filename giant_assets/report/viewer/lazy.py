"""Draw an item page's missing pictures on demand, from the ``render.json`` written beside it.

``trajectory_pictures`` draws only the runs it is told to (``render: selected`` draws the items whose
vote is wrong or whose runs disagree); every other page keeps a recipe (the page as shown and the
experiment's settings) and the served viewer calls ``render_pending`` on its first visit: the same
drawing code (``trajectory_images.draw_runs``: the map, and a GIANT run's images re-rendered as sent
and checked against their digests) writes the pictures beside the page, the page is rewritten and the
recipe removed, so later visits are plain static files.
"""

from __future__ import annotations

import fcntl
import json
import time
from dataclasses import dataclass
from pathlib import Path

from giant_assets.experiments.spec import Experiment
from giant_assets.geometry.roi import Region
from giant_assets.report.trajectory_images import RunWork, draw_runs
from giant_assets.report.viewer.pages import attach_pictures
from giant_assets.report.viewer.site import RECIPE, _environment, _href, render_item


@dataclass(frozen=True)
class Rendered:
    """What one on-demand render did."""

    runs: int  # runs drawn
    pictures: int  # files written
    seconds: float


def _references(page: dict) -> list[Region]:
    return [
        Region(r["kind"], json.loads(r["coords"]), region_id=r["region_id"], label=r["label"] or None)
        for r in page.get("references", [])
    ]


def render_pending(page_dir: Path) -> Rendered | None:
    """Draw the pictures ``page_dir``'s recipe asks for and rewrite its page; None when there is none
    (already drawn, or never needed). Safe to call from several threads or processes at once."""
    recipe_path = page_dir / RECIPE
    if not recipe_path.is_file():
        return None
    with open(page_dir / ".render.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not recipe_path.is_file():  # drawn by whoever held the lock before us
            return None
        started = time.perf_counter()
        recipe = json.loads(recipe_path.read_text(encoding="utf-8"))
        page = recipe["page"]
        experiment = Experiment.model_validate(recipe["experiment"]) if recipe.get("experiment") else None
        pending = [run for run in page["runs"] if run.get("pictures_pending")]
        refs = _references(page)
        work = [  # a recipe written before reported regions were drawn has none
            RunWork(run["steps"], page_dir / f"run{run['run_index']}", refs, [r["box"] for r in reported])
            for run in pending
            for reported in [run.get("reported", [])]
        ]
        drawn = draw_runs(page["wsi_path"], work, experiment)
        for run, records in zip(pending, drawn, strict=True):
            by_step = {
                r["step"]: r | {"path": _href(f"run{run['run_index']}", Path(r["path"]).name)}
                for r in records
            }
            attach_pictures(run, by_step)
        render_item(_environment(), page, page_dir)
        recipe_path.unlink()
        return Rendered(len(pending), sum(map(len, drawn)), time.perf_counter() - started)
