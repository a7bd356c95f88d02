"""code_judge: distance between candidate and reference coordinates (fields `coordinates` or `point`).

A field holds one point [x, y, ...] or a list of points compared pairwise in order. config: metric
"euclidean" (default) | "manhattan" | "cosine"; threshold (default 10, or 0.5 for cosine). Per point, as
in spec 002: cosine scores 1 - distance (clipped to [0, 1]); other metrics score 1 within the threshold,
then fall linearly to 0 at twice the threshold. Score = mean over points; `pass` = every point within
the threshold. Messages are the spec's ("Missing coordinate data", "Dimension mismatch: 2D vs 3D",
"Distance exceeds threshold: 12.000 > 10.0").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from giant_assets.geometry.distances import METRICS, within_tolerance
from giant_assets.geometry.numbers import numeric_array
from giant_assets.judges.protocol import Verdict, config_choice, config_number, first_present, serve

POINT_FIELDS = ("coordinates", "point")


def _dimension(points: np.ndarray) -> int:
    return points.shape[-1] if points.ndim else 0


def judge(candidate: Mapping[str, Any], reference: Mapping[str, Any], config: Mapping[str, Any]) -> Verdict:
    metric = config_choice(config, "metric", "euclidean", tuple(METRICS))
    threshold = config_number(config, "threshold", 0.5 if metric == "cosine" else 10.0, 1e-12, float("inf"))
    extracted, expected = first_present(candidate, POINT_FIELDS), first_present(reference, POINT_FIELDS)
    if extracted is None or expected is None:
        return Verdict(0.0, [], ["Missing coordinate data"], "", False)
    cand = numeric_array(extracted, "candidate coordinates")
    ref = numeric_array(expected, "reference coordinates")
    if _dimension(cand) != _dimension(ref):
        return Verdict(0.0, [], [f"Dimension mismatch: {_dimension(cand)}D vs {_dimension(ref)}D"], "", False)
    res = within_tolerance(cand, ref, threshold, metric)
    d = res.distances
    if metric == "cosine":
        scores = np.clip(1.0 - d, 0.0, 1.0)
    else:
        scores = np.where(d <= threshold, 1.0, np.clip(1.0 - (d - threshold) / threshold, 0.0, 1.0))
    single = len(d) == 1
    label = ["" if single else f"point {i}: " for i in range(len(d))]
    hits = [f"{lab}{metric} distance: {x:.3f}" for lab, x, ok in zip(label, d, res.hits, strict=True) if ok]
    misses = [
        f"{lab}Distance exceeds threshold: {x:.3f} > {threshold}"
        for lab, x, ok in zip(label, d, res.hits, strict=True)
        if not ok
    ]
    reasoning = (
        f"{metric.capitalize()} distance = {d[0]:.3f}"
        if single
        else f"{res.n_hits}/{len(d)} points within {threshold}; mean {metric} distance = {d.mean():.3f}"
    )
    return Verdict(float(scores.mean()), hits, misses, reasoning, passed=bool(res.hits.all()))


def main() -> None:
    serve(judge)


if __name__ == "__main__":
    main()
