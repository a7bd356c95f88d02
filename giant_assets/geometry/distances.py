"""Paired point distances (euclidean, manhattan, cosine) and a tolerance check, vectorised."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from giant_assets.geometry.numbers import numeric_array

FloatArray = NDArray[np.float64]


def _as_points(points: ArrayLike, name: str) -> FloatArray:
    arr = numeric_array(points, name, max_depth=2)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"{name}: expected a point (D,) or points (N, D) with D >= 1, got shape {arr.shape}")
    return arr


def _euclidean(a: FloatArray, b: FloatArray) -> FloatArray:
    return np.sqrt(np.sum((a - b) ** 2, axis=1))


def _manhattan(a: FloatArray, b: FloatArray) -> FloatArray:
    return np.sum(np.abs(a - b), axis=1)


def _cosine(a: FloatArray, b: FloatArray) -> FloatArray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.sum(a * b, axis=1)
    sim = np.zeros_like(dots)
    np.divide(dots, norms, out=sim, where=norms > 0)
    return np.where(norms > 0, np.clip(1.0 - sim, 0.0, 2.0), 1.0)


METRICS: dict[str, Callable[[FloatArray, FloatArray], FloatArray]] = {
    "euclidean": _euclidean,
    "manhattan": _manhattan,
    "cosine": _cosine,
}


def paired_distances(
    a: ArrayLike, b: ArrayLike, metric: str = "euclidean", names: tuple[str, str] = ("a", "b")
) -> FloatArray:
    """Distance between a[i] and b[i] for each row, (N,); a single point (D,) counts as N = 1.

    Cosine distance is 1 - cos(angle) in [0, 2]; a zero vector has cosine distance 1.0. `names` label errors.
    """
    if metric not in METRICS:
        raise ValueError(f"metric: unknown {metric!r}, expected one of {sorted(METRICS)}")
    (na, nb), pa, pb = names, _as_points(a, names[0]), _as_points(b, names[1])
    if pa.shape[1] != pb.shape[1]:
        raise ValueError(f"dimension mismatch: {na} has {pa.shape[1]}-D points, {nb} has {pb.shape[1]}-D")
    if len(pa) != len(pb):
        raise ValueError(f"count mismatch: {na} has {len(pa)} points, {nb} has {len(pb)} points")
    return METRICS[metric](pa, pb)


@dataclass(frozen=True)
class ToleranceResult:
    """Per-point distances and whether each lies within the tolerance (distance <= tolerance)."""

    distances: FloatArray
    hits: NDArray[np.bool_]
    tolerance: float
    metric: str

    @property
    def n_hits(self) -> int:
        return int(self.hits.sum())

    @property
    def n_misses(self) -> int:
        return int((~self.hits).sum())


def within_tolerance(
    candidate: ArrayLike, reference: ArrayLike, tolerance: float, metric: str = "euclidean"
) -> ToleranceResult:
    """Paired distances of candidate vs reference points and which are within `tolerance`."""
    if not np.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance}")
    d = paired_distances(candidate, reference, metric, names=("candidate", "reference"))
    return ToleranceResult(distances=d, hits=d <= tolerance, tolerance=float(tolerance), metric=metric)
