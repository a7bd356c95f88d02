"""code_judge: IoU of a candidate polygon vs a reference polygon (field `polygon`: [[x, y], ...]).

Self-intersecting polygons are repaired (shapely.make_valid) and the repair is reported. config:
threshold (0.5) for the hit/miss line and `pass`. Score = IoU; a missing polygon scores 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from giant_assets.geometry.polygons import polygon_iou
from giant_assets.judges.protocol import Verdict, config_number, first_present, serve


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    threshold = config_number(config, "threshold", 0.5, 0.0, 1.0)
    extracted, expected = first_present(candidate, ("polygon",)), first_present(reference, ("polygon",))
    if extracted is None or expected is None:
        return Verdict(
            0.0, [], ["Missing polygon data"], "Could not find polygon in candidate or reference", False
        )
    res = polygon_iou(extracted, expected, names=("candidate polygon", "reference polygon"))
    passed = res.iou >= threshold
    misses = [] if passed else [f"IoU below threshold: {res.iou:.3f} < {threshold}"]
    if res.repaired_a:
        misses.append("candidate polygon was invalid (e.g. self-intersecting) and was repaired")
    notes = " (reference polygon repaired)" if res.repaired_b else ""
    return Verdict(
        score=res.iou,
        hits=[f"IoU: {res.iou:.3f}"] if passed else [],
        misses=misses,
        reasoning=f"Polygon IoU = {res.iou:.3f} (intersection {res.intersection:.1f}, "
        f"union {res.union:.1f}){notes}",
        passed=passed,
    )


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
