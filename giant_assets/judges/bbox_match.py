"""code_judge: many candidate boxes vs many reference boxes (field `boxes`), one-to-one at an IoU threshold.

config: threshold (0.5); matching "greedy" (default, spec 002: each ground truth takes its best unmatched
detection), "coco" (detections by descending candidate `scores` if given, else in order, take their
best unmatched ground truth) or "hungarian" (maximum total IoU; "optimal" is accepted as a synonym);
format "xyxy" (default) or "xywh"; pass_threshold (0.5): `pass` is F1 >= it. Score = F1, and no boxes
on either side scores 0, as in the spec. Above ``geometry.boxes.MAX_PAIRS`` IoU pairs (5000 x 5000; 2000 x
2000 for hungarian) the judge refuses before allocating.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from giant_assets.geometry.boxes import check_pairs
from giant_assets.geometry.matching import MATCHERS, MAX_HUNGARIAN_PAIRS
from giant_assets.judges.protocol import (
    JudgeInputError,
    Verdict,
    boxes_xyxy,
    config_choice,
    config_number,
    serve,
)

MATCHING_NAMES = (*MATCHERS, "optimal")


def _box_list(answer: Mapping[str, Any], what: str) -> list:
    value = answer.get("boxes", [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise JudgeInputError(
            f"{what}: invalid box list: expected a list of boxes, got {type(value).__name__}"
        )
    return value


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    threshold = config_number(config, "threshold", 0.5, 1e-9, 1.0)
    pass_threshold = config_number(config, "pass_threshold", 0.5, 0.0, 1.0)
    matching = config_choice(config, "matching", "greedy", MATCHING_NAMES)
    matching = "hungarian" if matching == "optimal" else matching
    detected, truth = _box_list(candidate, "candidate boxes"), _box_list(reference, "reference boxes")
    # plan before converting anything: the list lengths are the matrix size
    check_pairs(len(detected), len(truth), "boxes", MAX_HUNGARIAN_PAIRS if matching == "hungarian" else None)
    pred = boxes_xyxy(detected, "candidate boxes", config)
    ref = boxes_xyxy(truth, "reference boxes", config)
    if matching == "coco":
        res = MATCHERS["coco"](pred, ref, threshold, scores=candidate.get("scores"))
    else:
        res = MATCHERS[matching](pred, ref, threshold)
    hits = [f"Matched {res.tp} boxes (mean IoU: {res.mean_iou:.3f})"] if res.tp else []
    misses = []
    if res.fp:
        misses.append(f"{res.fp} false positive detections")
    if res.fn:
        misses.append(f"{res.fn} missed ground truth boxes")
    return Verdict(
        score=res.f1,
        hits=hits,
        misses=misses,
        reasoning=f"Precision: {res.precision:.2f}, Recall: {res.recall:.2f}, F1: {res.f1:.2f}",
        passed=res.f1 >= pass_threshold and res.f1 > 0,
    )


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
