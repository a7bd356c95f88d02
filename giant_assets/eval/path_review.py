"""The path review's reply, parsed strictly, and its regions compared with the crops the agent viewed.

The reply (the final step's whole text) holds one JSON object with ``regions`` (five, each
``region_number``, ``bbox`` {x, y, width, height} in level-0 pixels, ``why_zoomed``, ``observations``,
``diagnostic_relevance``) and ``answer`` (``organ_type``, ``diagnosis``, ``confidence`` high/medium/low,
``key_findings``): the released script's shape. Nothing is dropped silently: a region that breaks the
shape keeps its row with ``valid = False`` and a ``problem`` naming the field
(``regions[2].bbox.width: ...``); every problem is also listed on the run's answer row. Each region is
checked on its own: finite numbers within +-1e150, a positive size, and inside the slide (its size from
the answering attempt's overview step), so no region can fail the run's other regions or the cell.

Did it report where it looked? Each valid region's best IoU with the crops of the answering attempt
(the boxes shown, level-0, ``geometry.boxes.box_iou``), the step of that crop, and ``viewed``: best IoU
>= ``MIN_IOU``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from giant_assets.core.jsonscan import MAX_PARSED_CHARS, json_objects
from giant_assets.geometry.boxes import box_iou, xywh_to_xyxy
from giant_assets.geometry.numbers import MAX_COORDINATE
from giant_assets.runs.records import RUN_KEY
from giant_assets.runs.viewed import viewed_rows

EXPECTED_REGIONS = 5
MIN_IOU = 0.5  # a reported region is one the agent viewed when a crop overlaps it this much
CONFIDENCE = ("high", "medium", "low")
REGION_TEXTS = ("why_zoomed", "observations", "diagnostic_relevance")
ANSWER_TEXTS = ("organ_type", "diagnosis", "confidence", "key_findings")
BBOX = ("x", "y", "width", "height")

REGION_COLUMNS = [
    *RUN_KEY,
    "region_index",  # 0-based position in the reply's list
    "region_number",
    "x",
    "y",
    "width",
    "height",
    *REGION_TEXTS,
    "valid",
    "problem",
    "best_iou",
    "best_crop_step",
    "viewed",
]
ANSWER_COLUMNS = [
    *RUN_KEY,
    "parsed",  # the reply held the review's JSON object
    *ANSWER_TEXTS,
    "n_regions",
    "n_valid_regions",
    "n_crops",
    "n_regions_viewed",
    "share_regions_viewed",
    "mean_best_iou",
    "n_problems",
    "problems",  # JSON list of "field: what is wrong"
]


@dataclass(frozen=True)
class ReviewRegion:
    """One reported region; ``problem`` set (and the box possibly None) when it breaks the shape."""

    index: int
    region_number: int | None
    box: tuple[float, float, float, float] | None  # x, y, width, height
    texts: dict[str, str | None]
    problem: str | None = None


@dataclass
class Review:
    """A parsed reply: every region (valid or not), the structured answer, every problem found."""

    parsed: bool
    regions: list[ReviewRegion] = field(default_factory=list)
    answer: dict[str, str | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def parse_review(text: str) -> Review:
    """The review in ``text`` (the last JSON object with ``regions`` or ``answer``), strictly checked."""
    text = text or ""
    found = [o for o in json_objects(text) if "regions" in o or "answer" in o]
    if not found and len(text) > MAX_PARSED_CHARS:
        return Review(False, problems=[_too_long(len(text))])
    if not found:
        return Review(False, problems=["reply: no JSON object with 'regions' and 'answer'"])
    doc = found[-1]
    review = Review(True)
    regions = doc.get("regions")
    if not isinstance(regions, list):
        review.problems.append(f"regions: must be a list of regions, got {_kind(regions)}")
        regions = []
    elif len(regions) != EXPECTED_REGIONS:
        review.problems.append(f"regions: {EXPECTED_REGIONS} expected, got {len(regions)}")
    for i, raw in enumerate(regions):
        region, problems = _region(i, raw)
        review.regions.append(region)
        review.problems += problems
    review.answer, problems = _answer(doc.get("answer"))
    review.problems += problems
    return review


def _too_long(chars: int) -> str:
    return (
        f"reply: too long ({chars:,} characters; a reply's JSON is read from its last "
        f"{MAX_PARSED_CHARS:,} only): no complete JSON object with 'regions' and 'answer' there"
    )


def _region(i: int, raw: Any) -> tuple[ReviewRegion, list[str]]:
    """The region at position ``i`` and every problem of it (also joined in its ``problem``)."""
    where = f"regions[{i}]"
    if not isinstance(raw, dict):
        problem = f"{where}: not an object ({_kind(raw)})"
        return ReviewRegion(i, None, None, dict.fromkeys(REGION_TEXTS), problem), [problem]
    problems: list[str] = []
    number = raw.get("region_number")
    if not _is_int(number):
        problems.append(f"{where}.region_number: must be an integer, got {_shown(number)}")
        number = None
    box = _bbox(raw.get("bbox"), f"{where}.bbox", problems)
    texts: dict[str, str | None] = {}
    for name in REGION_TEXTS:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}.{name}: must be non-empty text, got {_shown(value)}")
            value = value if isinstance(value, str) else None
        texts[name] = value
    return ReviewRegion(i, number, box, texts, "; ".join(problems) or None), problems


def _bbox(raw: Any, where: str, problems: list[str]) -> tuple[float, float, float, float] | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be an object {{x, y, width, height}}, got {_shown(raw)}")
        return None
    values = []
    for name in BBOX:
        value = raw.get(name)
        if not _is_number(value):
            problems.append(f"{where}.{name}: must be a number, got {_shown(value)}")
        elif name in ("width", "height") and value <= 0:
            problems.append(f"{where}.{name}: must be positive, got {value}")
        elif name in ("x", "y") and value < 0:
            problems.append(f"{where}.{name}: must be >= 0 (level-0 pixels), got {value}")
        elif abs(value) > MAX_COORDINATE:
            problems.append(f"{where}.{name}: beyond +-{MAX_COORDINATE:g}, got {_shown(value)}")
        else:
            values.append(float(value))
            continue
        return None
    x, y, w, h = values
    return x, y, w, h


def _check_inside(review: Review, size: tuple[float, float] | None) -> None:
    """Mark each well-formed region reaching outside the slide (``size``: width, height; None: unknown)
    invalid, named like the other problems."""
    if size is None:
        return
    for k, region in enumerate(review.regions):
        if region.problem is None and region.box is not None:
            x, y, w, h = region.box
            if x + w > size[0] or y + h > size[1]:
                problem = (
                    f"regions[{region.index}].bbox: reaches outside the slide ({size[0]:g} x {size[1]:g}), "
                    f"got x {x:g}, y {y:g}, width {w:g}, height {h:g}"
                )
                review.regions[k] = replace(region, problem=problem)
                review.problems.append(problem)


def _answer(raw: Any) -> tuple[dict[str, str | None], list[str]]:
    answer: dict[str, str | None] = dict.fromkeys(ANSWER_TEXTS)
    if not isinstance(raw, dict):
        return answer, [f"answer: must be an object, got {_shown(raw)}"]
    problems = []
    for name in ANSWER_TEXTS:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"answer.{name}: must be non-empty text, got {_shown(value)}")
            continue
        if name == "confidence" and value.strip().lower() not in CONFIDENCE:
            problems.append(f"answer.confidence: must be one of {', '.join(CONFIDENCE)}, got {value!r}")
        answer[name] = value.strip().lower() if name == "confidence" else value
    return answer, problems


def best_overlaps(regions: np.ndarray, crops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per region (XYWH rows): its best IoU with any crop (XYWH rows) and that crop's row (-1: no crop
    overlaps it)."""
    if not len(regions):
        return np.zeros(0), np.zeros(0, dtype=int)
    if not len(crops):
        return np.zeros(len(regions)), np.full(len(regions), -1)
    iou = box_iou(xywh_to_xyxy(regions, "reported regions"), xywh_to_xyxy(crops, "viewed crops"))
    best = iou.max(axis=1)
    return best, np.where(best > 0, iou.argmax(axis=1), -1)


def review_frames(steps: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(regions, answers) of every run in ``runs`` (the predictions table), from ``steps`` (the
    trajectory_steps table): the answering step's text parsed, its regions set against the crops of the
    same attempt. A run without a final reply (it failed) gets an answer row naming its error."""
    answer_steps = steps[steps["action"].eq("answer")] if len(steps) else steps
    crops = viewed_rows(steps)  # the regions viewed (runs.viewed), as the viewer and the review count them
    overviews = steps[steps["action"].eq("thumbnail") & steps["box_w"].notna()] if len(steps) else steps
    sizes = {
        (*key, row.attempt): (float(row.box_x + row.box_w), float(row.box_y + row.box_h))
        for key, frame in (overviews.groupby(RUN_KEY) if len(overviews) else [])
        for row in frame.itertuples(index=False)
    }
    finals = (
        {k: f.sort_values("step").iloc[-1] for k, f in answer_steps.groupby(RUN_KEY)} if len(steps) else {}
    )
    crops_by = {k: f.sort_values("step") for k, f in crops.groupby(RUN_KEY)} if len(crops) else {}
    region_rows: list[dict[str, Any]] = []
    answer_rows: list[dict[str, Any]] = []
    for run in runs.itertuples(index=False):
        key = tuple(getattr(run, k) for k in RUN_KEY)
        ident = dict(zip(RUN_KEY, key, strict=True))
        final = finals.get(key)
        if final is None:
            error = getattr(run, "error_kind", None) or "no final reply"
            answer_rows.append(
                ident | {"parsed": False, "n_problems": 1, "problems": json.dumps([f"run: {error}"])}
            )
            continue
        review = parse_review(str(final["text"] or ""))
        _check_inside(review, sizes.get((*key, final["attempt"])))
        viewed = crops_by.get(key)
        if viewed is not None:
            viewed = viewed[viewed["attempt"] == final["attempt"]]
        crop_boxes = (
            viewed[["box_x", "box_y", "box_w", "box_h"]].to_numpy(dtype=float)
            if viewed is not None
            else np.zeros((0, 4))
        )
        valid = [r for r in review.regions if r.problem is None and r.box is not None]
        best, where = best_overlaps(np.array([r.box for r in valid]).reshape(-1, 4), crop_boxes)
        scored = {r.index: (float(b), int(w)) for r, b, w in zip(valid, best, where, strict=True)}
        for r in review.regions:
            iou, row = scored.get(r.index, (None, -1))
            step = int(viewed.iloc[row]["step"]) if viewed is not None and row >= 0 else None
            x, y, w, h = r.box if r.box is not None else (None,) * 4
            region_rows.append(
                ident
                | {"region_index": r.index, "region_number": r.region_number, "x": x, "y": y}
                | {"width": w, "height": h, **r.texts, "valid": r.problem is None, "problem": r.problem}
                | {"best_iou": iou, "best_crop_step": step, "viewed": None if iou is None else iou >= MIN_IOU}
            )
        ious = [v[0] for v in scored.values()]
        n_viewed = sum(i >= MIN_IOU for i in ious)
        answer_rows.append(
            ident
            | {"parsed": review.parsed, **review.answer, "n_regions": len(review.regions)}
            | {"n_valid_regions": len(valid), "n_crops": len(crop_boxes), "n_regions_viewed": n_viewed}
            | {"share_regions_viewed": n_viewed / len(valid) if valid else None}
            | {"mean_best_iou": float(np.mean(ious)) if ious else None}
            | {"n_problems": len(review.problems), "problems": json.dumps(review.problems)}
        )
    regions = pd.DataFrame.from_records(region_rows, columns=REGION_COLUMNS)
    answers = pd.DataFrame.from_records(answer_rows, columns=ANSWER_COLUMNS)
    for frame, ints in ((regions, ("region_number", "best_crop_step")), (answers, ("n_regions",))):
        for name in ints:
            frame[name] = frame[name].astype("Int64")
    for name in ("n_valid_regions", "n_crops", "n_regions_viewed", "n_problems"):
        answers[name] = answers[name].astype("Int64")
    for name in ("valid", "viewed"):
        regions[name] = regions[name].astype("boolean")
    answers["parsed"] = answers["parsed"].astype(bool)
    return regions, answers


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)  # isfinite() overflows on a 400-digit int


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    if isinstance(value, int) and abs(value) > MAX_COORDINATE:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    return "nothing" if value is None else repr(value)[:80]
