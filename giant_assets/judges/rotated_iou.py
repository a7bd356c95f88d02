"""code_judge: IoU of one candidate rotated box vs one reference rotated box (separating axis theorem).

Fields `rotated_bbox` or `rbox`: ``[cx, cy, w, h, angle]`` (angle counter-clockwise from +x). config:
threshold (0.5) for the hit/miss line and `pass`; angle_unit "degrees" (default) or "radians".
Score = IoU. A box missing on either side scores 0 with "Missing bounding box data".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from giant_assets.geometry.rotated import ANGLE_UNITS, rotated_iou
from giant_assets.judges.bbox_iou import MISSING
from giant_assets.judges.protocol import (
    JudgeInputError,
    Verdict,
    config_choice,
    config_number,
    first_present,
    serve,
)

ROTATED_FIELDS = ("rotated_bbox", "rbox")


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    threshold = config_number(config, "threshold", 0.5, 0.0, 1.0)
    unit = config_choice(config, "angle_unit", "degrees", ANGLE_UNITS)
    extracted, expected = first_present(candidate, ROTATED_FIELDS), first_present(reference, ROTATED_FIELDS)
    if extracted is None or expected is None:
        return MISSING
    try:
        iou = rotated_iou(
            extracted, expected, unit, names=("candidate rotated_bbox", "reference rotated_bbox")
        )
    except ValueError as exc:
        message = str(exc)
        raise JudgeInputError(message if "invalid box" in message else f"invalid box: {message}") from None
    passed = iou >= threshold
    return Verdict(
        score=iou,
        hits=[f"IoU: {iou:.3f}"] if passed else [],
        misses=[] if passed else [f"IoU below threshold: {iou:.3f} < {threshold}"],
        reasoning=f"Rotated box IoU = {iou:.3f}",
        passed=passed,
    )


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
