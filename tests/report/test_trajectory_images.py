"""Trajectory pictures on a real pyramidal TIFF: boxes where the geometry says, crops showing what the
painted design has there, names confined to the picture folder whatever the benchmark id holds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from giant_assets.core.paths import decode_component
from giant_assets.report.trajectory_images import (
    CROP_SIZE,
    OVERVIEW_SIZE,
    REFERENCE,
    VIEWED,
    draw_run,
    write_pictures,
)
from giant_assets.slides.synthetic import BACKGROUND, LESION, TISSUE, Blob, SlideDesign
from tests.support.slides import write_pyramidal_slide

DESIGN = SlideDesign(
    4096,
    3072,
    tissue=(Blob(2048, 1536, 1700, 1300, TISSUE),),
    lesions=(Blob(2800, 1100, 220, 180, LESION),),
    texture=False,
)
LESION_INSIDE = [2700, 1050, 200, 100]  # well inside the lesion ellipse
CORNER = [0, 0, 300, 300]  # background
OUTSIDE = [9000, 9000, 100, 100]  # beyond the slide: refused, so no crop
SCALE = OVERVIEW_SIZE / 4096  # overview px per level-0 px (independent of the code under test)
STEPS = [
    {"index": 0, "action": "thumbnail", "image_size": [1000, 750]},
    {"index": 1, "action": "crop", "box": LESION_INSIDE, "level": 0},
    {"index": 2, "action": "crop", "box": OUTSIDE, "error": "region outside the slide"},
    {"index": 3, "action": "crop", "box": CORNER, "level": 1},
    {"index": 4, "action": "answer", "text": "3"},
]


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("slide") / "one.tiff", DESIGN, levels=4)


def regions_frame(benchmark: str, benchmark_id: str) -> pd.DataFrame:
    rows = [
        ("r1", "box", [100, 100, 800, 600]),
        ("r2", "polygon", [[3000, 2000], [3600, 2000], [3300, 2600]]),
    ]
    return pd.DataFrame(
        [
            {
                "benchmark_name": benchmark,
                "benchmark_id": benchmark_id,
                "region_id": rid,
                "kind": kind,
                "coords": coords,
                "label": None,
            }
            for rid, kind, coords in rows
        ]  # fmt: skip
    )


def has_colour(image: np.ndarray, x: float, y: float, colour: tuple[int, int, int], r: int = 2) -> bool:
    """Whether ``colour`` occurs exactly within ``r`` px of (x, y)."""
    x, y = round(x), round(y)
    patch = image[max(0, y - r) : y + r + 1, max(0, x - r) : x + r + 1].reshape(-1, 3)
    return bool((patch == colour).all(axis=1).any())


def runs_frame(ids: list[str], steps=STEPS, benchmark: str = "tcga") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "config_hash": "h",
                "benchmark_name": benchmark,
                "benchmark_id": i,
                "run_index": 0,
                "trajectory_json": json.dumps(steps),
            }
            for i in ids
        ]  # fmt: skip
    )


def items_frame(ids: list[str], wsi: Path | str, benchmark: str = "tcga") -> pd.DataFrame:
    return pd.DataFrame([{"benchmark_name": benchmark, "benchmark_id": i, "wsi_path": str(wsi)} for i in ids])


def test_overview_marks_viewed_boxes_and_reference_regions_where_they_are(
    slide: Path, tmp_path: Path
) -> None:
    from giant_assets.geometry.roi import regions_from_frame

    refs = regions_from_frame(regions_frame("tcga", "7"))
    records = draw_run(str(slide), STEPS, tmp_path / "run0", refs)
    assert [(r["kind"], r["step"]) for r in records] == [("overview", None), ("crop", 1), ("crop", 3)]
    assert sorted(p.name for p in (tmp_path / "run0").iterdir()) == ["overview.png", "step1.png", "step3.png"]
    overview = np.asarray(Image.open(tmp_path / "run0" / "overview.png").convert("RGB"))
    assert overview.shape == (576, 768, 3)
    x, y, w, h = LESION_INSIDE
    for px, py in [(x, y + h / 2), (x + w, y + h / 2), (x + w / 2, y + h)]:  # left, right, bottom edges
        assert has_colour(overview, px * SCALE, py * SCALE, VIEWED), (px, py)
    # the reference box's left edge and the polygon's top edge are green; the tissue centre is not marked
    assert has_colour(overview, 100 * SCALE, 400 * SCALE, REFERENCE)
    assert has_colour(overview, 3300 * SCALE, 2000 * SCALE, REFERENCE)
    assert not has_colour(overview, 2048 * SCALE, 1536 * SCALE, REFERENCE, r=10)
    assert not has_colour(overview, 2048 * SCALE, 1536 * SCALE, VIEWED, r=10)


def test_crops_show_what_the_slide_has_at_the_recorded_boxes(slide: Path, tmp_path: Path) -> None:
    records = draw_run(str(slide), STEPS, tmp_path, [])
    lesion = Image.open(tmp_path / "step1.png")
    corner = Image.open(tmp_path / "step3.png")
    assert lesion.size == (CROP_SIZE, CROP_SIZE // 2) and corner.size == (CROP_SIZE, CROP_SIZE)
    assert {r["step"]: r["size"] for r in records if r["kind"] == "crop"} == {1: lesion.size, 3: corner.size}
    assert np.abs(np.asarray(lesion.convert("RGB"), float).mean((0, 1)) - LESION).max() < 3
    assert np.abs(np.asarray(corner.convert("RGB"), float).mean((0, 1)) - BACKGROUND).max() < 3


def test_a_run_that_saw_nothing_draws_nothing(slide: Path, tmp_path: Path) -> None:
    assert draw_run(str(slide), [{"index": 0, "action": "answer", "text": "1"}], tmp_path / "r", []) == []
    assert not (tmp_path / "r").exists()


def test_the_baselines_pictures_show_the_patches_and_the_thumbnails_extent(
    slide: Path, tmp_path: Path
) -> None:
    """A patch baseline's patches are numbered on the map and re-read; a thumbnail baseline's map shows
    the extent it answered from (docs/viewer.md)."""
    patches = [
        {"index": 0, "action": "patch", "box": LESION_INSIDE, "level": 0, "text": "3"},
        {"index": 1, "action": "patch", "box": CORNER, "level": 0, "text": "1"},
        {"index": 2, "action": "answer", "text": '{"answer": 3}; majority of 2 patch labels'},
    ]
    records = draw_run(str(slide), patches, tmp_path / "patch", [])
    assert [(r["kind"], r["step"]) for r in records] == [("overview", None), ("crop", 0), ("crop", 1)]
    overview = np.asarray(Image.open(tmp_path / "patch" / "overview.png").convert("RGB"))
    x, y, w, h = LESION_INSIDE
    assert has_colour(overview, x * SCALE, (y + h / 2) * SCALE, VIEWED)
    lesion = np.asarray(Image.open(tmp_path / "patch" / "step0.png").convert("RGB"), float)
    assert np.abs(lesion.mean((0, 1)) - LESION).max() < 3
    extent = [1024, 768, 2048, 1536]  # a thumbnail baseline's answer step records the view it answered from
    thumb = [{"index": 0, "action": "answer", "box": extent, "level": 2, "text": '{"answer": 1}'}]
    records = draw_run(str(slide), thumb, tmp_path / "thumb", [])
    assert [r["kind"] for r in records] == ["overview"]
    overview = np.asarray(Image.open(tmp_path / "thumb" / "overview.png").convert("RGB"))
    for px, py in [(1024, 1536), (3072, 1536), (2048, 768), (2048, 2304)]:  # the four edges' middles
        assert has_colour(overview, px * SCALE, py * SCALE, VIEWED), (px, py)


HOSTILE_IDS = ["../../escape", "a/b", "a\\b", "..", ".", "x\x00y", "tab\there", "new\nline", "%2F", "/abs"]


def test_hostile_benchmark_ids_never_write_outside_the_picture_folder(slide: Path, tmp_path: Path) -> None:
    root = tmp_path / "trajectories" / "exp"
    one_crop = [{"index": 0, "action": "thumbnail"}, {"index": 1, "action": "crop", "box": CORNER}]
    pictures = write_pictures(runs_frame(HOSTILE_IDS, one_crop), items_frame(HOSTILE_IDS, slide), root)
    everything = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(everything) == 2 * len(HOSTILE_IDS)  # an overview and one crop per id, nothing else
    for path in everything:
        assert path.resolve().is_relative_to(root.resolve()), path
        assert len(path.relative_to(root).parts) == 4  # <benchmark>/<id>/run0/<file>
    id_dirs = {decode_component(p.name) for p in (root / "tcga").iterdir()}
    assert id_dirs == set(HOSTILE_IDS)  # one folder per id, reversibly named
    assert sorted(pictures["benchmark_id"].unique()) == sorted(HOSTILE_IDS)
    assert all(Path(p).is_file() for p in pictures["path"])


def test_threads_write_the_same_pictures_as_one_thread(slide: Path, tmp_path: Path) -> None:
    ids = [str(i) for i in range(6)]
    links = []
    for k in range(3):  # three slide paths: three jobs for the pool (one per slide)
        links.append(tmp_path / f"slide{k}.tiff")
        os.link(slide, links[-1])
    runs = runs_frame(ids)
    items = pd.concat([items_frame([i], links[int(i) % 3]) for i in ids])
    serial = write_pictures(runs, items, tmp_path / "serial", workers=1)
    threaded = write_pictures(runs, items, tmp_path / "threads", workers=3)
    assert len(serial) == len(threaded) == 6 * 3

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.png")}

    assert files(tmp_path / "serial") == files(tmp_path / "threads")
    key = ["benchmark_id", "kind", "step", "width", "height"]
    order = ["benchmark_id", "kind", "step"]
    assert (
        serial[key]
        .sort_values(order, ignore_index=True)
        .equals(threaded[key].sort_values(order, ignore_index=True))
    )


def test_an_unreadable_slide_is_reported_and_skipped(slide: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.svs"
    broken.write_text("not a slide")
    told: list[str] = []
    items = pd.concat([items_frame(["bad"], broken), items_frame(["good"], slide)])
    pictures = write_pictures(runs_frame(["bad", "good"]), items, tmp_path / "p", on_error=told.append)
    assert set(pictures["benchmark_id"]) == {"good"}
    assert len(told) == 1 and "tcga/bad run 0" in told[0] and "good" not in told[0]
    empty = write_pictures(runs_frame([]).reindex(columns=runs_frame(["x"]).columns), items, tmp_path / "e")
    assert empty.empty and str(empty["step"].dtype) == "Int64"


def test_selected_runs_are_those_of_items_voted_wrong_or_whose_runs_disagree() -> None:
    import pandas as pd

    from giant_assets.report.trajectory_images import selected_runs

    labels = {"wrong": [2, 2], "split": [1, None], "right": [1, 1], "nolabel": [None, None], "gone": [None]}
    runs = pd.DataFrame(
        [
            {"benchmark_name": "tcga", "benchmark_id": item, "run_index": k, "predicted_label": label}
            for item, values in labels.items()
            for k, label in enumerate(values)
        ]
    ).astype({"predicted_label": "Int64"})
    voted = pd.DataFrame(
        [
            {"benchmark_name": "tcga", "benchmark_id": "wrong", "correct": False, "slide_available": True},
            {"benchmark_name": "tcga", "benchmark_id": "split", "correct": True, "slide_available": True},
            {"benchmark_name": "tcga", "benchmark_id": "right", "correct": True, "slide_available": True},
            {"benchmark_name": "tcga", "benchmark_id": "nolabel", "correct": False, "slide_available": True},
            {"benchmark_name": "tcga", "benchmark_id": "gone", "correct": False, "slide_available": False},
        ]
    )
    chosen = selected_runs(runs, voted)
    assert sorted(zip(chosen["benchmark_id"], chosen["run_index"], strict=True)) == [
        ("nolabel", 0), ("nolabel", 1), ("split", 0), ("split", 1), ("wrong", 0), ("wrong", 1)
    ]  # fmt: skip
