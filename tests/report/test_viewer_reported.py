"""A path review's reported regions in the trajectory viewer, on a real pyramidal TIFF without Dagster:
computed from the runs as ``path_review_regions`` stores them, drawn R1, R2... in orange over the deep
zoom (the page's overlays), on the static map (pixels read back here) and on a map the served viewer
draws on a page's first visit; an invalid region is in none of them. Boxes are written out by hand."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely
from PIL import Image

from giant_assets.eval.qupath import reported_regions_of
from giant_assets.report.trajectory_images import (
    OVERVIEW_SIZE,
    PICTURE_COLUMNS,
    REPORTED,
    draw_run,
    write_pictures,
)
from giant_assets.report.viewer import item_pages, write_benchmark
from giant_assets.report.viewer.lazy import render_pending
from giant_assets.report.viewer.pages import reported_by_run
from tests.report.test_trajectory_images import DESIGN, has_colour
from tests.report.test_viewer_site import Tags, frames
from tests.support.slides import write_pyramidal_slide

W, H = 4096, 3072  # DESIGN's size
SCALE = OVERVIEW_SIZE / W  # overview px per level-0 px
CROPS = [[2700, 1050, 200, 100], [300, 2200, 400, 300]]
REGIONS = [  # as the model reports them: the third is malformed, the fifth reaches outside the slide
    {"x": 2700, "y": 1050, "width": 200, "height": 100},
    {"x": 100, "y": 100, "width": 800, "height": 600},
    {"x": 500, "y": 500, "width": "wide", "height": 100},
    {"x": 3000, "y": 2000, "width": 400, "height": 300},
    {"x": 3900, "y": 2900, "width": 400, "height": 400},
]
VALID = [[2700.0, 1050.0, 200.0, 100.0], [100.0, 100.0, 800.0, 600.0], [3000.0, 2000.0, 400.0, 300.0]]


def review_steps() -> list[dict]:
    reply = {
        "regions": [
            {"region_number": k + 1, "bbox": box, "why_zoomed": f"why {k}",
             "observations": f"<b>seen</b> {k}",
             "diagnostic_relevance": "high"}
            for k, box in enumerate(REGIONS)
        ],
        "answer": {"organ_type": "lung", "diagnosis": "x", "confidence": "low", "key_findings": "y"},
    }  # fmt: skip
    return [
        {"index": 0, "attempt": 1, "action": "thumbnail", "box": [0, 0, W, H], "image_size": [1000, 750]},
        *(
            {"index": k, "attempt": 1, "action": "crop", "box": box, "level": 0}
            for k, box in enumerate(CROPS, 1)
        ),
        {"index": 3, "attempt": 1, "action": "answer", "text": "Review:\n" + json.dumps(reply)},
    ]


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("slide") / "one.tiff", DESIGN, levels=3)


def review_frames_for(slide: Path) -> tuple[pd.DataFrame, ...]:
    """One item, two path-review runs (the viewer site's frames, the trajectory replaced)."""
    runs, voted, items = frames("tcga", ["a"], slide)
    runs["trajectory_json"] = json.dumps(review_steps())
    runs["error_kind"] = None
    return runs, voted, items


def test_reported_regions_are_the_valid_ones_in_order_with_shapelys_overlap(slide: Path) -> None:
    runs, _, _ = review_frames_for(slide)
    reported = reported_regions_of(runs)
    assert [(r["run_index"], r["box"]) for r in reported] == [(0, b) for b in VALID] + [(1, b) for b in VALID]
    crops = [shapely.box(x, y, x + w, y + h) for x, y, w, h in CROPS]
    for region in reported[:3]:
        x, y, w, h = region["box"]
        box = shapely.box(x, y, x + w, y + h)
        best = max(box.intersection(c).area / box.union(c).area for c in crops)
        assert region["best_iou"] == pytest.approx(best)
    assert reported[0]["best_iou"] == 1.0 and reported[0]["finding"] == "<b>seen</b> 0"


def corners_orange(overview: Path, boxes: list[list[float]]) -> list[bool]:
    image = np.asarray(Image.open(overview).convert("RGB"))
    return [
        has_colour(image, x * SCALE, (y + h) * SCALE, REPORTED)
        and has_colour(image, (x + w) * SCALE, y * SCALE, REPORTED)
        for x, y, w, h in boxes
    ]


def test_the_item_page_and_its_map_show_the_reported_regions(slide: Path, tmp_path: Path) -> None:
    runs, voted, items = review_frames_for(slide)
    reported = reported_by_run(reported_regions_of(runs))
    pictures = write_pictures(runs, items, tmp_path / "trajectories", reported=reported)
    site = write_benchmark(
        tmp_path / "viewer" / "pr", "tcga", item_pages(runs, voted, items, pictures, None, reported)
    )
    html = site.pages[0].read_text()
    overlays = [json.loads(unescape(o)) for o in re.findall(r"data-overlays='([^']*)'", html)]
    expected = [
        {"kind": "crop", "n": k, "step": k, "box": [float(v) for v in b]} for k, b in enumerate(CROPS, 1)
    ]
    expected += [
        {"kind": "reported", "n": k, "step": None, "box": b, "label": f"R{k}"} for k, b in enumerate(VALID, 1)
    ]
    assert overlays == [expected, expected]  # one deep zoom per run
    assert html.count("regions the path review reported, R1 to R3") == 4  # deep zoom and map legends
    for run in (0, 1):
        for k in (1, 2, 3):
            assert f'id="run-{run}-reported-{k}"><b>R{k}</b>' in html
    assert "&lt;b&gt;seen&lt;/b&gt; 1" in html and "<b>seen</b>" not in html  # the model's text escaped
    overview = tmp_path / "trajectories" / "tcga" / "a" / "run0" / "overview.png"
    assert corners_orange(overview, VALID[1:]) == [True, True]  # R1 lies under crop 1's blue outline
    invalid = [[3900, 2900, 190, 170], [500, 500, 100, 100]]  # the outside and the malformed region
    assert corners_orange(overview, invalid) == [False, False]


def test_a_map_the_served_viewer_draws_on_first_visit_shows_them_too(slide: Path, tmp_path: Path) -> None:
    runs, voted, items = review_frames_for(slide)
    reported = reported_by_run(reported_regions_of(runs))
    none_drawn = pd.DataFrame(columns=list(PICTURE_COLUMNS))
    site = write_benchmark(
        tmp_path / "viewer" / "pr", "tcga", item_pages(runs, voted, items, none_drawn, None, reported)
    )
    assert site.pending == 1
    assert render_pending(site.pages[0].parent) is not None
    assert corners_orange(site.pages[0].parent / "run1" / "overview.png", VALID[1:]) == [True, True]


def test_a_reported_box_reaching_far_outside_the_map_still_shows_its_edges(
    slide: Path, tmp_path: Path
) -> None:
    """A region 1e11 px wide (no slide check without an overview step) is drawn clamped to the map: its
    top and left edges show (Pillow draws nothing for corners that far out); NaN draws nothing."""
    hostile = [[float("nan"), 0, 1, 1], [100, 100, 5e11, 5e11]]
    records = draw_run(str(slide), review_steps(), tmp_path / "r", reported=hostile)
    image = np.asarray(Image.open(records[0]["path"]).convert("RGB"))
    assert has_colour(image, 100 * SCALE, 1000 * SCALE, REPORTED)  # the left edge
    assert has_colour(image, 1000 * SCALE, 100 * SCALE, REPORTED)  # the top edge


def test_a_path_reviews_pages_never_make_experiments_disagree(slide: Path, tmp_path: Path) -> None:
    """A path review answers no benchmark question (no vote): beside an experiment that voted, the item's
    cross-experiment page lists both but flags no disagreement, and says the review answers none."""
    runs, voted, items = frames("tcga", ["a"], slide)
    none_drawn = pd.DataFrame(columns=list(PICTURE_COLUMNS))
    write_benchmark(tmp_path / "viewer" / "exp-1", "tcga", item_pages(runs, voted, items, none_drawn))
    review, review_votes, _ = review_frames_for(slide)
    review_votes = review_votes.assign(predicted_label=pd.NA, correct=False)
    reported = reported_by_run(reported_regions_of(review))
    pages = item_pages(review, review_votes, items, none_drawn, None, reported, False)
    write_benchmark(tmp_path / "viewer" / "pr", "tcga", pages)
    summary = (tmp_path / "viewer" / "_items" / "tcga.js").read_text()
    assert json.loads(summary.rsplit(" = ", 1)[1].rstrip(";\n")) == {
        "a": {"disagree": False, "experiments": 2}
    }
    cross = (tmp_path / "viewer" / "_items" / "tcga" / "a" / "index.html").read_text()
    assert 'data-experiment="pr"' in cross and "— (answers no question)" in cross
    assert 'id="disagree"' not in cross
    index = Tags((tmp_path / "viewer" / "pr" / "index.html").read_text())
    rows = [a for t, a in index.tags if t == "tr" and "data-outcome" in a]
    assert [r["data-outcome"] for r in rows] == ["reviewed"] and rows[0]["data-confident"] == "0"
    text = " ".join(index.text)
    assert "— (answers no question)" in text and "✘ no" not in text
    assert "reviewed (a path review answers no question" in text and "accuracy over all items" not in text
