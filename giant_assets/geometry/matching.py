"""One-to-one matching of predicted to reference boxes at an IoU threshold (greedy or optimal)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from giant_assets.geometry.boxes import as_boxes, box_iou


@dataclass(frozen=True)
class MatchResult:
    """Outcome of matching predictions to references.

    `pairs` holds (pred_idx, ref_idx, iou) for every accepted match. Precision/recall use the usual
    counts; with no predictions AND no references everything is vacuously right (1.0); with exactly one
    side empty they are 0.0. `mean_iou` is the mean IoU of the matches, 0.0 without matches.
    """

    pairs: tuple[tuple[int, int, float], ...]
    unmatched_preds: tuple[int, ...]
    unmatched_refs: tuple[int, ...]
    n_preds: int
    n_refs: int

    @property
    def tp(self) -> int:
        return len(self.pairs)

    @property
    def fp(self) -> int:
        return self.n_preds - self.tp

    @property
    def fn(self) -> int:
        return self.n_refs - self.tp

    @property
    def precision(self) -> float:
        if self.n_preds == 0:
            return 1.0 if self.n_refs == 0 else 0.0
        return self.tp / self.n_preds

    @property
    def recall(self) -> float:
        if self.n_refs == 0:
            return 1.0 if self.n_preds == 0 else 0.0
        return self.tp / self.n_refs

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    @property
    def mean_iou(self) -> float:
        return float(np.mean([iou for _, _, iou in self.pairs])) if self.pairs else 0.0

    @property
    def total_iou(self) -> float:
        return float(sum(iou for _, _, iou in self.pairs))


def _check_threshold(threshold: float) -> float:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    return float(threshold)


def _result(pairs: list[tuple[int, int, float]], n_preds: int, n_refs: int) -> MatchResult:
    pairs.sort()
    used_p = {p for p, _, _ in pairs}
    used_r = {r for _, r, _ in pairs}
    return MatchResult(
        pairs=tuple(pairs),
        unmatched_preds=tuple(i for i in range(n_preds) if i not in used_p),
        unmatched_refs=tuple(j for j in range(n_refs) if j not in used_r),
        n_preds=n_preds,
        n_refs=n_refs,
    )


def greedy_match(
    pred_xyxy: ArrayLike, ref_xyxy: ArrayLike, threshold: float = 0.5, scores: ArrayLike | None = None
) -> MatchResult:
    """COCO-style greedy matching of XYXY boxes.

    Predictions are visited by descending score (stable, so ties keep input order), or in input order
    when `scores` is None; each takes the still-unmatched reference with the highest IoU if that IoU is
    >= threshold (ties: lowest reference index).
    """
    threshold = _check_threshold(threshold)
    pred = as_boxes(pred_xyxy, "pred")
    ref = as_boxes(ref_xyxy, "ref")
    if scores is None:
        order = np.arange(len(pred))
    else:
        try:
            s = np.asarray(scores, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"scores: expected one number per prediction, got {scores!r:.80}") from exc
        if s.shape[0] != len(pred):
            raise ValueError(f"scores: expected {len(pred)} values (one per prediction), got {s.shape[0]}")
        order = np.argsort(-s, kind="stable")
    ious = box_iou(pred, ref)
    free = np.ones(len(ref), dtype=bool)
    pairs: list[tuple[int, int, float]] = []
    for i in order:
        if not free.any():
            break
        cand = np.where(free, ious[i], -1.0)
        j = int(np.argmax(cand))
        if cand[j] >= threshold:
            free[j] = False
            pairs.append((int(i), j, float(ious[i, j])))
    return _result(pairs, len(pred), len(ref))


def optimal_match(pred_xyxy: ArrayLike, ref_xyxy: ArrayLike, threshold: float = 0.5) -> MatchResult:
    """Matching that maximises the total IoU over pairs with IoU >= threshold (Hungarian algorithm)."""
    from scipy.optimize import linear_sum_assignment  # imported here: ~0.7 s, only optimal matching needs it

    threshold = _check_threshold(threshold)
    pred = as_boxes(pred_xyxy, "pred")
    ref = as_boxes(ref_xyxy, "ref")
    ious = box_iou(pred, ref)
    weights = np.where(ious >= threshold, ious, 0.0)
    rows, cols = linear_sum_assignment(weights, maximize=True)
    pairs = [(int(i), int(j), float(ious[i, j])) for i, j in zip(rows, cols, strict=True) if weights[i, j]]
    return _result(pairs, len(pred), len(ref))
