"""code_judge: IoU of one candidate box vs one reference box (fields `bbox` or `bounding_box`), spec 002.

config: threshold (default 0.5) for the hit/miss line and `pass`, format "xyxy" (default) or "xywh".
Score = IoU. A box missing on either side scores 0 with the spec's "Missing bounding box data".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from giant_assets.geometry.boxes import box_iou
from giant_assets.judges.protocol import (
    JudgeInputError,
    Verdict,
    boxes_xyxy,
    config_number,
    first_present,
    serve,
)

BOX_FIELDS = ("bbox", "bounding_box")
MISSING = Verdict(
    0.0, [], ["Missing bounding box data"], "Could not find bbox in candidate or reference", False
)


def _one_box(value: Any, what: str, config: Mapping[str, Any]) -> np.ndarray:
    boxes = boxes_xyxy(value, what, config)
    if len(boxes) != 1:
        raise JudgeInputError(f"{what}: expected exactly one box, got {len(boxes)}")
    return boxes


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    threshold = config_number(config, "threshold", 0.5, 0.0, 1.0)
    extracted, expected = first_present(candidate, BOX_FIELDS), first_present(reference, BOX_FIELDS)
    if extracted is None or expected is None:
        return MISSING
    cand, ref = _one_box(extracted, "candidate bbox", config), _one_box(expected, "reference bbox", config)
    iou = float(box_iou(cand, ref)[0, 0])
    passed = iou >= threshold
    return Verdict(
        score=iou,
        hits=[f"IoU: {iou:.3f}"] if passed else [],
        misses=[] if passed else [f"IoU below threshold: {iou:.3f} < {threshold}"],
        reasoning=f"Bounding box IoU = {iou:.3f}",
        passed=passed,
    )


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
