"""The demo's scripted reviewers over a real Parquet store and the review's real files: the same
ratings in two data folders (each with its own secret), nothing appended by a second run, a failed run
and an item without reference regions not reviewed, demo-b's noise moving some ratings by one step."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from dagster import materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.reviewers import REVIEWERS, bundle_review
from giant_assets.eval.reviews import (
    DEMO_REVIEW_FOLDER,
    ReviewFiles,
    latest_reviews,
    load_queue,
    read_reviews,
)
from giant_assets.platform.assets.reviews import pathologist_reviews, review_metrics
from tests.support.dagster_env import resources_for

REFS = pd.DataFrame(
    {
        "benchmark_name": "tcga",
        "benchmark_id": ["0", "1"],
        "region_id": "lesion",
        "kind": "box",
        "coords": [[1000, 1000, 400, 400], [3000, 2000, 200, 200]],
        "label": "lesion",
    }
)
CROPS = ([1000, 1000, 400, 400], [1300, 1300, 400, 400], [0, 0, 100, 100])  # hit, overlap, miss


def _store(data: Path) -> None:
    store = ParquetStore(data)
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga",
            "benchmark_id": ["0", "1", "2"],
            "prompt": "q?",
            "wsi_path": "/x.svs",
            "width": 4096,
            "height": 3072,
        }  # fmt: skip
    )
    store.write("benchmark_items", items)
    steps = json.dumps(
        [{"index": k + 1, "action": "crop", "box": b, "text": "t"} for k, b in enumerate(CROPS)]
    )
    runs = pd.DataFrame(
        {
            "config_hash": "h",
            "model": "m",
            "agent": "giant",
            "benchmark_name": "tcga",
            "benchmark_id": ["0", "0", "1", "2"],
            "run_index": [0, 1, 0, 0],
            "truth_label": 1,
            "correct": [True, True, False, True],
            "answer_text": "1",
            "trajectory_json": steps,
            "error_kind": [None, "agent_error", None, None],
        }  # fmt: skip
    )
    store.write("predictions", runs, "exp/tcga")


def _ratings(data: Path) -> dict[tuple[str, str, int], dict]:
    files = ReviewFiles(data / DEMO_REVIEW_FOLDER)
    units = {u["unit"]: u for u in load_queue(files)}
    return {
        (reviewer, units[unit]["benchmark_id"], units[unit]["run_index"]): {
            k: record[k] for k in ("regions", "answer", "supports", "drawn")
        }
        for (reviewer, unit), record in latest_reviews(read_reviews(files)[0]).items()
    }


def test_the_scripted_reviews_are_the_same_everywhere_and_stored_once(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for data in (first, second):
        _store(data)
        assert bundle_review(data, "exp", REFS) == {"units": 2, "appended": 4}
    assert bundle_review(first, "exp", REFS) == {"units": 2, "appended": 0}  # the same ratings: none new
    assert len(read_reviews(ReviewFiles(first / DEMO_REVIEW_FOLDER))[0]) == 4
    ratings = _ratings(first)
    assert ratings == _ratings(second)  # other secrets, other unit ids, the same ratings
    assert sorted(ratings) == [
        (r, i, 0) for r in REVIEWERS for i in ("0", "1")
    ]  # failed run, no-ref item out
    a = ratings[("demo-a", "0", 0)]
    assert a == {
        "regions": ["relevant", "partly", "not relevant"],
        "answer": "correct",
        "supports": "yes",
        "drawn": [[1000.0, 1000.0, 400.0, 400.0]],
    }
    assert ratings[("demo-a", "1", 0)]["answer"] == "wrong"  # a wrong run, whatever its regions
    order = ("relevant", "partly", "not relevant")
    for item in ("0", "1"):
        rules, noisy = ratings[("demo-a", item, 0)], ratings[("demo-b", item, 0)]
        assert noisy["drawn"] == []
        for x, y in zip(rules["regions"], noisy["regions"], strict=True):
            assert abs(order.index(x) - order.index(y)) <= 1  # the noise moves one step at most


def test_the_scripted_reviews_stay_out_of_a_real_review_unless_asked(tmp_path: Path) -> None:
    """The scripted reviews live in their own folder: the real queue and submissions stay empty, and the
    review's assets count them only with ``demo: true``."""
    data = tmp_path / "data"
    _store(data)
    bundle_review(data, "exp", REFS)
    real = ReviewFiles(data / "reviews")
    assert load_queue(real) == [] and read_reviews(real)[0] == []
    assets = [pathologist_reviews, review_metrics]
    assert materialize(assets, resources=resources_for(data)).success
    assert ParquetStore(data).read("pathologist_reviews").empty
    asked = {"ops": {"pathologist_reviews": {"config": {"demo": True}}}}
    assert materialize(assets, resources=resources_for(data), run_config=asked).success
    reviews = ParquetStore(data).read("pathologist_reviews")
    assert sorted(set(reviews["reviewer"])) == list(REVIEWERS) and len(reviews) == 4
