"""One-to-one matching of detected boxes to ground-truth boxes at an IoU threshold.

Three named methods (all return a ``MatchResult``):

* ``greedy_match`` (spec 002, the default): ground truths in input order, each takes its best
  still-unmatched detection (highest IoU, first on ties) if that IoU is >= the threshold;
* ``coco_match`` (COCO-style): detections by descending confidence score (input order without
  scores), each takes its best still-unmatched ground truth if that IoU is >= the threshold;
* ``hungarian_match``: the matching that maximises the total IoU over pairs >= the threshold.

Precision, recall and F1 follow spec 002: a ratio with a zero denominator is 0, so no boxes on either
side scores 0. Work is planned first: more than ``MAX_PAIRS`` IoU cells (``MAX_HUNGARIAN_PAIRS`` for the
O(n^3) Hungarian method) is refused with a message before anything is allocated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from giant_assets.geometry.boxes import box_iou, check_pairs, xyxy_boxes
from giant_assets.geometry.numbers import numeric_array

MAX_HUNGARIAN_PAIRS = 4_000_000  # 2000 x 2000: a few seconds of linear_sum_assignment


@dataclass(frozen=True)
class MatchResult:
    """Outcome of matching detections to ground truths.

    `pairs` holds (detection_idx, ground_truth_idx, iou) for every accepted match, sorted by detection.
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
        return self.tp / self.n_preds if self.n_preds else 0.0

    @property
    def recall(self) -> float:
        return self.tp / self.n_refs if self.n_refs else 0.0

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


def _prepare(pred_xyxy: ArrayLike, ref_xyxy: ArrayLike, threshold: float, limit: int | None):
    threshold = _check_threshold(threshold)
    pred, ref = xyxy_boxes(pred_xyxy, "pred"), xyxy_boxes(ref_xyxy, "ref")
    check_pairs(len(pred), len(ref), "boxes", limit)
    return pred, ref, threshold


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


def greedy_match(pred_xyxy: ArrayLike, ref_xyxy: ArrayLike, threshold: float = 0.5) -> MatchResult:
    """Spec 002's greedy matching: each ground truth, in order, takes its best unmatched detection."""
    pred, ref, threshold = _prepare(pred_xyxy, ref_xyxy, threshold, None)
    ious = box_iou(ref, pred)  # (ground truths, detections)
    free = np.ones(len(pred), dtype=bool)
    pairs: list[tuple[int, int, float]] = []
    for j in range(len(ref)):
        if not free.any():
            break
        cand = np.where(free, ious[j], -1.0)
        i = int(np.argmax(cand))  # first index on ties, like the spec's strict '>'
        if cand[i] > 0 and cand[i] >= threshold:
            free[i] = False
            pairs.append((i, j, float(ious[j, i])))
    return _result(pairs, len(pred), len(ref))


def coco_match(
    pred_xyxy: ArrayLike, ref_xyxy: ArrayLike, threshold: float = 0.5, scores: ArrayLike | None = None
) -> MatchResult:
    """COCO-style: detections by descending score (stable; input order without scores) each take the
    still-unmatched ground truth with the highest IoU >= threshold (ties: lowest ground-truth index)."""
    pred, ref, threshold = _prepare(pred_xyxy, ref_xyxy, threshold, None)
    if scores is None:
        order = np.arange(len(pred))
    else:
        s = numeric_array(scores, "scores", max_depth=1).reshape(-1)
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


def hungarian_match(pred_xyxy: ArrayLike, ref_xyxy: ArrayLike, threshold: float = 0.5) -> MatchResult:
    """Matching that maximises the total IoU over pairs with IoU >= threshold (Hungarian algorithm)."""
    from scipy.optimize import linear_sum_assignment  # imported here: ~0.7 s, only this method needs it

    pred, ref, threshold = _prepare(pred_xyxy, ref_xyxy, threshold, MAX_HUNGARIAN_PAIRS)
    ious = box_iou(pred, ref)
    weights = np.where(ious >= threshold, ious, 0.0)
    rows, cols = linear_sum_assignment(weights, maximize=True)
    pairs = [(int(i), int(j), float(ious[i, j])) for i, j in zip(rows, cols, strict=True) if weights[i, j]]
    return _result(pairs, len(pred), len(ref))


MATCHERS: dict[str, Callable[..., MatchResult]] = {
    "greedy": greedy_match,
    "coco": coco_match,
    "hungarian": hungarian_match,
}
