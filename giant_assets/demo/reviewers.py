"""The demo's bundled review: two scripted reviewers rate the demo-giant runs, so ``pathologist_reviews``
and ``review_metrics`` (shares, Cohen's kappa, Krippendorff's alpha, drawn-region IoU) show what a
pathologist review produces before anyone is invited.

The ratings go through the review's real files (``eval/reviews.py``: the queue, ``validate_review``,
the durable ``append_review``), as the review server stores a pathologist's, but in their own folder,
``<data>/reviews-demo``: a real reviewer's queue and the review's assets never mix with them unless
asked (``pathologist_reviews``' config ``demo: true``, as the demo runs it). They follow fixed rules on
each viewed region's overlap with the item's reference regions (``geometry.roi``, the hit rule of
``roi_evaluation``), so every demo writes the same ratings:

- a region that hits a reference is ``relevant``, one that only overlaps one ``partly``, else ``not
  relevant``; the answer is ``correct`` when the run is right and a region was rated relevant, ``partly``
  when it is right without one, else ``wrong``; the findings support it (``yes``/``partly``/``no``) as the
  best region rating says;
- ``demo-a`` follows the rules and draws the item's reference regions (their bounding boxes);
  ``demo-b`` follows them too but moves a rating one step with probability ``NOISE`` (seeded by the
  item, run and field), so the two disagree a little, and draws nothing.

Only answered runs of items with reference regions are reviewed. A second demo appends nothing when the
stored latest review of a run is already the one the rules give.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from giant_assets.core.storage import ParquetStore
from giant_assets.eval.reviews import (
    ANSWER_RATINGS,
    DEMO_REVIEW_FOLDER,
    DEMO_REVIEWERS,
    REGION_RATINGS,
    SUPPORT_RATINGS,
    ReviewFiles,
    append_review,
    build_units,
    demo_comment,
    latest_reviews,
    read_reviews,
    validate_review,
    write_queue,
)
from giant_assets.geometry.roi import Region, evaluate_viewed_regions, regions_from_frame

REVIEWERS = DEMO_REVIEWERS
NOISE = 0.2  # demo-b's chance of moving a rating one step
REVIEWED_FIELDS = ("regions", "answer", "supports", "drawn", "comment")


def _nudge(rating: str, scale: tuple[str, ...], rng: random.Random) -> str:
    """One step along ``scale`` (best first): the middle moves either way, an end towards the middle."""
    if rng.random() >= NOISE:
        return rating
    i = scale.index(rating)
    return scale[1] if i != 1 else scale[rng.choice((0, 2))]


def region_rating(box: list[float], references: list[Region]) -> str:
    """``relevant`` when the region hits a reference (geometry.roi's rule), ``partly`` when it overlaps
    one, else ``not relevant``."""
    score = evaluate_viewed_regions([box], references)
    return REGION_RATINGS[0] if score.hit else REGION_RATINGS[1] if score.best_iou > 0 else REGION_RATINGS[2]


def scripted_review(reviewer: str, unit: Mapping[str, Any], references: list[Region]) -> dict[str, Any]:
    """The review ``reviewer`` gives ``unit`` (the submission body the review page would send)."""
    noisy = reviewer != REVIEWERS[0]
    key = f"{reviewer}/{unit['benchmark_name']}/{unit['benchmark_id']}/{unit['run_index']}"
    regions = []
    for k, region in enumerate(unit["shown"]["regions"]):
        rating = region_rating(region["box"], references)
        regions.append(_nudge(rating, REGION_RATINGS, random.Random(f"{key}/region{k}")) if noisy else rating)
    if not unit["correct"]:
        answer = ANSWER_RATINGS[2]
    else:
        answer = ANSWER_RATINGS[0] if REGION_RATINGS[0] in regions else ANSWER_RATINGS[1]
    if noisy:
        answer = _nudge(answer, ANSWER_RATINGS, random.Random(f"{key}/answer"))
    best = min((REGION_RATINGS.index(r) for r in regions), default=2)
    width, height = unit["shown"].get("slide_size") or (float("inf"), float("inf"))
    drawn = []
    if not noisy:
        for ref in references:
            x0, y0, x1, y1 = ref.geometry().bounds
            x0, y0, x1, y1 = max(x0, 0.0), max(y0, 0.0), min(x1, width), min(y1, height)
            if x1 > x0 and y1 > y0:
                drawn.append([x0, y0, x1 - x0, y1 - y0])
    return {
        "regions": regions,
        "answer": answer,
        "supports": SUPPORT_RATINGS[best],
        "drawn": drawn,
        "comment": demo_comment(reviewer),
    }


def bundle_review(root: Path, experiment: str, references: pd.DataFrame) -> dict[str, int]:
    """Queue ``experiment``'s answered runs of items with reference regions and store both scripted
    reviewers' reviews of them; ``references`` are the reference regions (``load_reference_regions``).
    Returns how many units were queued and reviews appended."""
    store = ParquetStore(root)
    files = ReviewFiles(root / DEMO_REVIEW_FOLDER)
    items = store.read("benchmark_items")
    refs_of = {
        (str(b), str(i)): regions_from_frame(group)
        for (b, i), group in references.groupby(["benchmark_name", "benchmark_id"])
    }
    cells = [p for p in store.partitions("predictions") if p.split("/", 1)[0] == experiment]
    runs = store.read("predictions", cells) if cells else pd.DataFrame()
    if runs.empty:
        return {"units": 0, "appended": 0}
    keys = list(zip(runs["benchmark_name"].astype(str), runs["benchmark_id"].astype(str), strict=True))
    runs = runs[runs["error_kind"].isna().to_numpy() & pd.Series([k in refs_of for k in keys]).to_numpy()]
    units = build_units(files.secret(), experiment, runs, items)
    write_queue(files, units)
    stored = latest_reviews(read_reviews(files)[0])
    appended = 0
    for unit in units:
        for reviewer in REVIEWERS:
            refs = refs_of[(unit["benchmark_name"], unit["benchmark_id"])]
            review = validate_review(unit, scripted_review(reviewer, unit, refs))
            last = stored.get((reviewer, unit["unit"]))
            if last is not None and {k: last.get(k) for k in REVIEWED_FIELDS} == review:
                continue
            append_review(files, reviewer, unit["unit"], review)
            appended += 1
    return {"units": len(units), "appended": appended}
