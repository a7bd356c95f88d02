"""code_judge: distance between candidate and reference coordinates (fields `coordinates` or `point`).

A field holds one point [x, y, ...] or a list of points compared pairwise in order. config: metric
"euclidean" (default) | "manhattan" | "cosine"; threshold (default 10, or 0.5 for cosine). Per point, as
in the spec: cosine scores 1 - distance (clipped to [0, 1]); other metrics score 1 within the threshold,
then fall linearly to 0 at twice the threshold. Score = mean over points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from giant_assets.geometry.distances import METRICS, within_tolerance
from giant_assets.judges.protocol import Verdict, config_choice, config_number, pick, serve

POINT_FIELDS = ("coordinates", "point")


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    metric = config_choice(config, "metric", "euclidean", tuple(METRICS))
    threshold = config_number(config, "threshold", 0.5 if metric == "cosine" else 10.0, 1e-12, float("inf"))
    cand = pick(candidate, POINT_FIELDS, "candidate coordinates")
    ref = pick(reference, POINT_FIELDS, "reference coordinates")
    res = within_tolerance(cand, ref, threshold, metric)
    d = res.distances
    if metric == "cosine":
        scores = np.clip(1.0 - d, 0.0, 1.0)
    else:
        scores = np.where(d <= threshold, 1.0, np.clip(1.0 - (d - threshold) / threshold, 0.0, 1.0))
    single = len(d) == 1
    label = [f"{metric} distance" if single else f"point {i}: {metric} distance" for i in range(len(d))]
    hits = [f"{lab}: {x:.3f}" for lab, x, ok in zip(label, d, res.hits, strict=True) if ok]
    misses = [
        f"{lab} exceeds threshold: {x:.3f} > {threshold}"
        for lab, x, ok in zip(label, d, res.hits, strict=True)
        if not ok
    ]
    reasoning = (
        f"{metric.capitalize()} distance = {d[0]:.3f}"
        if single
        else f"{res.n_hits}/{len(d)} points within {threshold}; mean {metric} distance = {d.mean():.3f}"
    )
    return Verdict(score=float(scores.mean()), hits=hits, misses=misses, reasoning=reasoning)


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
