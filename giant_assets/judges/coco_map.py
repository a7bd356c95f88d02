"""code_judge: COCO bbox mAP of candidate `detections` vs reference `ground_truths` (COCO result format:
{image_id, category_id, bbox [x, y, w, h], score}; ground truths may set iscrowd).

config: metric "ap" (AP@[.5:.95], default) | "ap50" | "ap75" is the score; threshold (0.5) splits the
per-category APs into hits and misses and sets `pass` (score >= it); max_dets (100).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from giant_assets.geometry.coco_eval import coco_map
from giant_assets.judges.protocol import JudgeInputError, Verdict, config_choice, config_number, pick, serve


def _rows(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise JudgeInputError(f"{what}: expected a list of objects, got {type(value).__name__}")
    return value


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    metric = config_choice(config, "metric", "ap", ("ap", "ap50", "ap75"))
    threshold = config_number(config, "threshold", 0.5, 0.0, 1.0)
    max_dets = config_number(config, "max_dets", 100, 1, 1e9)
    if max_dets != int(max_dets):
        raise JudgeInputError(f"config.max_dets: expected an integer, got {max_dets}")
    res = coco_map(
        _rows(pick(candidate, ("detections",), "candidate detections"), "detections"),
        _rows(pick(reference, ("ground_truths",), "reference ground_truths"), "ground_truths"),
        max_dets=int(max_dets),
    )
    score = getattr(res, metric)
    if math.isnan(score):
        raise JudgeInputError("reference ground_truths: no (non-crowd) ground truth boxes, AP is undefined")
    defined = {c: ap for c, ap in res.per_category.items() if not math.isnan(ap)}
    return Verdict(
        score=score,
        hits=[f"category {c}: AP {ap:.3f}" for c, ap in defined.items() if ap >= threshold],
        misses=[f"category {c}: AP {ap:.3f} < {threshold}" for c, ap in defined.items() if ap < threshold],
        reasoning=f"AP@[.5:.95] = {res.ap:.3f}, AP50 = {res.ap50:.3f}, AP75 = {res.ap75:.3f} "
        f"over {len(defined)} categories; score = {metric}",
        passed=score >= threshold,
    )


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
