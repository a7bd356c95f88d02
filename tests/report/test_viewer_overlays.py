"""What the viewer's deep zoom draws for a run (``viewer.overlays``), from the step rows of any agent,
and the item page naming its tile source literally. Expected values are written out by hand."""

from __future__ import annotations

import hashlib
import json
import re
from html import unescape
from pathlib import Path

import pytest

from giant_assets.report.trajectory_images import write_pictures
from giant_assets.report.viewer import item_pages, write_benchmark
from giant_assets.report.viewer.overlays import run_overlays
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.report.test_viewer_site import frames
from tests.support.slides import write_pyramidal_slide

SQUARE = {"region_id": "r1", "kind": "polygon", "label": "", "coords": "[[10, 20], [110, 20], [60, 220]]"}


def test_viewed_boxes_are_numbered_in_step_order_and_baselines_and_references_are_outlined() -> None:
    steps = [
        {"index": 0, "action": "thumbnail", "box": None},
        {"index": 1, "action": "crop", "box": [100, 200, 300, 400]},
        {"index": 2, "action": "crop", "box": None},  # an invalid region: nothing was shown
        {"index": 3, "action": "patch", "box": [5, 6, 7, 8]},
        {"index": 4, "action": "crop", "box": [1, 2, 3, 4]},
        {"index": 5, "action": "answer", "box": [0, 0, 4096, 3072]},  # a one-call baseline's view
    ]
    assert run_overlays(steps, [SQUARE]) == [
        {"kind": "extent", "n": None, "step": 5, "box": [0.0, 0.0, 4096.0, 3072.0]},
        {"kind": "crop", "n": 1, "step": 1, "box": [100.0, 200.0, 300.0, 400.0]},
        {"kind": "patch", "n": 2, "step": 3, "box": [5.0, 6.0, 7.0, 8.0]},
        {"kind": "crop", "n": 3, "step": 4, "box": [1.0, 2.0, 3.0, 4.0]},
        {"kind": "reference", "n": None, "step": None, "box": [10.0, 20.0, 100.0, 200.0], "label": "r1"},
    ]


@pytest.mark.parametrize(
    "box",
    [[float("nan"), 0, 10, 10], [0, 0, float("inf"), 10], [1e308, 0, 10, 10], [0, 0, 0, 10], [0, 0, 10, -1],
     ["x", 0, 10, 10], [0, 0, 10], "1,2,3,4"],
)  # fmt: skip
def test_a_step_box_that_is_no_box_is_not_drawn_and_does_not_take_a_number(box) -> None:
    steps = [{"index": 0, "action": "crop", "box": box}, {"index": 1, "action": "crop", "box": [0, 0, 9, 9]}]
    assert run_overlays(steps, []) == [{"kind": "crop", "n": 1, "step": 1, "box": [0.0, 0.0, 9.0, 9.0]}]


def test_the_item_page_names_its_dzi_and_carries_each_runs_overlays(tmp_path: Path) -> None:
    slide = write_pyramidal_slide(tmp_path / "one.tiff", ONE_LESION_DESIGN, levels=2)
    runs, voted, items = frames("tcga", ["a"], slide)
    pictures = write_pictures(runs, items, tmp_path / "trajectories", workers=1)
    site = write_benchmark(tmp_path / "viewer" / "exp-1", "tcga", item_pages(runs, voted, items, pictures))
    html = site.pages[0].read_text()
    key = hashlib.sha256(str(slide).encode()).hexdigest()[:24]
    assert html.count(f'data-dzi="/slides/{key}.dzi"') == 2  # one deep zoom per run
    overlays = [json.loads(unescape(o)) for o in re.findall(r"data-overlays='([^']*)'", html)]
    assert overlays == [[{"kind": "crop", "n": 1, "step": 1, "box": [2580.0, 920.0, 440.0, 360.0]}]] * 2
    keys = json.loads((tmp_path / "viewer" / "exp-1" / "_slides" / "tcga.json").read_text())
    assert keys == {key: str(slide)}
