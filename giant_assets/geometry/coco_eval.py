"""COCO-style bbox mAP, vectorised, reproducing pycocotools `COCOeval(iouType="bbox")` number for number.

Conventions copied from pycocotools (2.0.x):
- boxes are XYWH, areas are w*h, IoU is maskUtils.iou's formula (x2 = x + w, no +1 pixel);
- per (image, category) detections are ranked by score with a stable sort and cut at `max_dets`;
- each detection (10 IoU thresholds .50:.05:.95) takes the unmatched ground truth with the highest
  IoU >= threshold, ties going to the later ground truth; regular ground truths are preferred over
  ignored ones (crowd, or area outside `area_range`); crowd ground truths can absorb many detections and
  their IoU is intersection / detection area; a detection matched to an ignored ground truth, or
  unmatched with an area outside `area_range`, is ignored;
- precision is interpolated at 101 recall points; categories without non-ignored ground truth are left
  out of the means (pycocotools reports -1 when nothing is left; this returns NaN).
Images are the union of the image ids seen in detections and ground truths, categories those of the
ground truths (detections of other categories are dropped, as pycocotools does).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from numpy.typing import NDArray

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_THRESHOLDS = np.linspace(0.0, 1.0, 101)
AREA_ALL = (0.0, 1e10)
_CHUNK_ELEMENTS = 1 << 21  # padded (groups x dets x gts) IoU cells processed at once


@dataclass(frozen=True)
class CocoMapResult:
    """AP@[.5:.95] (`ap`), AP50, AP75, per-category AP and the (T, R, K) interpolated precision table."""

    ap: float
    ap50: float
    ap75: float
    per_category: dict[Hashable, float]
    category_ids: tuple[Hashable, ...]
    precision: NDArray[np.float64]  # (10 IoU thresholds, 101 recall points, K categories); -1 = undefined


@dataclass(frozen=True)
class _Annotations:
    image: NDArray[np.int64]
    category: NDArray[np.int64]
    boxes: NDArray[np.float64]
    values: NDArray[np.float64]  # detection scores / ground-truth crowd flags


def _parse(rows: Iterable[Mapping], what: str, value_field: str, required: bool) -> tuple[list, ...]:
    """Validate COCO-style rows; returns image ids, category ids, XYWH boxes and `value_field` values."""
    images: list = []
    cats: list = []
    boxes: list = []
    values: list = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"{what}[{i}]: expected an object, got {type(row).__name__}")
        fields = ("image_id", "category_id", "bbox") + ((value_field,) if required else ())
        missing = [f for f in fields if f not in row]
        if missing:
            raise ValueError(f"{what}[{i}]: missing field(s) {missing}")
        box = row["bbox"]
        if (
            not isinstance(box, Sequence)
            or len(box) != 4
            or not all(isinstance(v, Real) and not isinstance(v, bool) for v in box)
        ):
            raise ValueError(f"{what}[{i}].bbox: expected [x, y, w, h] numbers, got {box!r:.80}")
        if not np.isfinite(box).all() or box[2] < 0 or box[3] < 0:
            raise ValueError(f"{what}[{i}].bbox: expected finite numbers with w, h >= 0, got {list(box)}")
        for key in ("image_id", "category_id"):
            if isinstance(row[key], bool) or not isinstance(row[key], Integral | str):
                raise ValueError(f"{what}[{i}].{key}: expected an integer or a string, got {row[key]!r:.80}")
        value = row.get(value_field, 0)
        if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value):
            raise ValueError(f"{what}[{i}].{value_field}: expected a finite number, got {value!r}")
        images.append(row["image_id"])
        cats.append(row["category_id"])
        boxes.append(box)
        values.append(value)
    return images, cats, boxes, values


def _annotations(image: NDArray, category: NDArray, boxes: list, values: list) -> _Annotations:
    return _Annotations(
        image,
        category,
        np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
        np.asarray(values, dtype=np.float64),
    )


def _codes(values: list, lookup: dict) -> NDArray[np.int64]:
    return np.fromiter((lookup.get(v, -1) for v in values), dtype=np.int64, count=len(values))


def _sorted_ids(values: set, what: str) -> list:
    try:
        return sorted(values)
    except TypeError as exc:
        examples = sorted(map(repr, values))[:5]
        raise ValueError(f"{what} values must be all numbers or all strings, got {examples}") from exc


def _coco_iou(d: NDArray, g: NDArray, crowd: NDArray) -> NDArray[np.float64]:
    """maskUtils.iou for XYWH boxes, d (..., D, 4) x g (..., G, 4) -> (..., D, G), same float operations."""
    dx, dy, dw, dh = (d[..., :, None, k] for k in range(4))
    gx, gy, gw, gh = (g[..., None, :, k] for k in range(4))
    w = np.minimum(dw + dx, gw + gx) - np.maximum(dx, gx)
    h = np.minimum(dh + dy, gh + gy) - np.maximum(dy, gy)
    inter = w * h
    da = dw * dh
    union = np.where(crowd[..., None, :], da, da + (gw * gh) - inter)
    out = np.zeros(inter.shape)
    np.divide(inter, union, out=out, where=(w > 0) & (h > 0))
    return out


def _chunks(sizes_d: NDArray, sizes_g: NDArray) -> list[NDArray[np.int64]]:
    """Split groups (sorted by gt count) into chunks whose padded IoU cube stays under the budget."""
    order = np.argsort(sizes_g, kind="stable")
    chunks, start, max_d = [], 0, 0
    for pos, grp in enumerate(order):
        max_d = max(max_d, int(sizes_d[grp]))
        if pos > start and (pos - start + 1) * max_d * int(sizes_g[grp]) > _CHUNK_ELEMENTS:
            chunks.append(order[start:pos])
            start, max_d = pos, int(sizes_d[grp])
    chunks.append(order[start:])
    return [c for c in chunks if len(c)]


def _match(
    det: _Annotations,
    det_rank: NDArray,
    gt: _Annotations,
    gt_rank: NDArray,
    gt_ignore: NDArray,
    det_group: NDArray,
    gt_group: NDArray,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Greedy COCO matching for every (image, category) group at all IoU thresholds at once.

    Detections are processed rank by rank (all groups in parallel). Returns (matched, ignored), each
    (T, n_detections).
    """
    thr = np.minimum(IOU_THRESHOLDS, 1 - 1e-10)[:, None, None]
    n_thr = len(IOU_THRESHOLDS)
    matched = np.zeros((n_thr, len(det_group)), dtype=bool)
    ignored = np.zeros_like(matched)
    groups = np.intersect1d(det_group, gt_group)
    if len(groups) == 0:
        return matched, ignored
    d_pos = np.searchsorted(groups, det_group)
    d_in = (d_pos < len(groups)) & (groups[np.minimum(d_pos, len(groups) - 1)] == det_group)
    g_pos = np.searchsorted(groups, gt_group)
    g_in = (g_pos < len(groups)) & (groups[np.minimum(g_pos, len(groups) - 1)] == gt_group)
    sizes_d = np.bincount(d_pos[d_in], minlength=len(groups))
    sizes_g = np.bincount(g_pos[g_in], minlength=len(groups))
    chunk_of = np.empty(len(groups), dtype=np.int64)
    row_of = np.empty(len(groups), dtype=np.int64)
    chunks = _chunks(sizes_d, sizes_g)
    for c, members in enumerate(chunks):
        chunk_of[members] = c
        row_of[members] = np.arange(len(members))
    d_idx_all, g_idx_all = np.flatnonzero(d_in), np.flatnonzero(g_in)
    for c, members in enumerate(chunks):
        n, max_d, max_g = len(members), int(sizes_d[members].max()), int(sizes_g[members].max())
        d_idx = d_idx_all[chunk_of[d_pos[d_idx_all]] == c]
        g_idx = g_idx_all[chunk_of[g_pos[g_idx_all]] == c]
        d_row, d_col = row_of[d_pos[d_idx]], det_rank[d_idx]
        g_row, g_col = row_of[g_pos[g_idx]], gt_rank[g_idx]
        d_box = np.zeros((n, max_d, 4))
        d_box[d_row, d_col] = det.boxes[d_idx]
        d_valid = np.zeros((n, max_d), dtype=bool)
        d_valid[d_row, d_col] = True
        g_box = np.zeros((n, max_g, 4))
        g_box[g_row, g_col] = gt.boxes[g_idx]
        g_valid, g_ig, g_crowd = (np.zeros((n, max_g), dtype=bool) for _ in range(3))
        g_valid[g_row, g_col] = True
        g_ig[g_row, g_col] = gt_ignore[g_idx]
        g_crowd[g_row, g_col] = gt.values[g_idx] != 0
        ious = _coco_iou(d_box, g_box, g_crowd)
        g_taken = np.zeros((n_thr, n, max_g), dtype=bool)
        d_matched = np.zeros((n_thr, n, max_d), dtype=bool)
        d_ignored = np.zeros_like(d_matched)
        for r in range(max_d):
            iou_r = ious[:, r, :]
            ok = (g_valid & d_valid[:, r, None]) & ~(g_taken & ~g_crowd) & (iou_r >= thr)
            regular = ok & ~g_ig
            use = np.where(regular.any(-1, keepdims=True), regular, ok & g_ig)
            vals = np.where(use, iou_r, -np.inf)
            best = use & (vals == vals.max(-1, keepdims=True))
            last = max_g - 1 - np.argmax(best[..., ::-1], axis=-1)
            t_i, row_i = np.nonzero(use.any(-1))
            col = last[t_i, row_i]
            g_taken[t_i, row_i, col] = True
            d_matched[t_i, row_i, r] = True
            d_ignored[t_i, row_i, r] = g_ig[row_i, col]
        matched[:, d_idx] = d_matched[:, d_row, d_col]
        ignored[:, d_idx] = d_ignored[:, d_row, d_col]
    return matched, ignored


def _ranks(sorted_group: NDArray[np.int64]) -> NDArray[np.int64]:
    """0-based position of each element within its run of equal (sorted) group keys."""
    if len(sorted_group) == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_group)) + 1]
    lengths = np.diff(np.r_[starts, len(sorted_group)])
    return np.arange(len(sorted_group)) - np.repeat(starts, lengths)


def _take(a: _Annotations, idx: NDArray) -> _Annotations:
    return _Annotations(a.image[idx], a.category[idx], a.boxes[idx], a.values[idx])


def _interpolated_precision(matched: NDArray, ignored: NDArray, scores: NDArray, n_gt: int) -> NDArray:
    """(T, R) precision at the recall thresholds for one category (pycocotools `accumulate`)."""
    order = np.argsort(-scores, kind="mergesort")
    tps = (matched & ~ignored)[:, order]
    fps = (~matched & ~ignored)[:, order]
    tp = np.cumsum(tps, axis=1).astype(float)
    fp = np.cumsum(fps, axis=1).astype(float)
    out = np.zeros((len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)))
    n = tp.shape[1]
    if n == 0:
        return out
    recall = tp / n_gt
    precision = tp / (fp + tp + np.spacing(1))
    precision = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
    for t in range(len(IOU_THRESHOLDS)):
        inds = np.searchsorted(recall[t], RECALL_THRESHOLDS, side="left")
        hit = inds < n
        out[t, hit] = precision[t, inds[hit]]
    return out


def _mean_defined(values: NDArray) -> float:
    defined = values[values > -1]
    return float(np.mean(defined)) if defined.size else float("nan")


def coco_map(
    detections: Iterable[Mapping],
    ground_truths: Iterable[Mapping],
    *,
    max_dets: int = 100,
    area_range: tuple[float, float] = AREA_ALL,
) -> CocoMapResult:
    """COCO bbox AP of `detections` ({image_id, category_id, bbox [x, y, w, h], score}) against
    `ground_truths` ({image_id, category_id, bbox, optional iscrowd}). See the module docstring."""
    if max_dets < 1:
        raise ValueError(f"max_dets must be >= 1, got {max_dets}")
    d_imgs, d_cats, d_boxes, d_scores = _parse(detections, "detections", "score", required=True)
    g_imgs, g_cats, g_boxes, g_crowd = _parse(ground_truths, "ground_truths", "iscrowd", required=False)
    image_ids = _sorted_ids(set(d_imgs) | set(g_imgs), "image_id")
    category_ids = _sorted_ids(set(g_cats), "category_id")
    img_code = {v: k for k, v in enumerate(image_ids)}
    cat_code = {v: k for k, v in enumerate(category_ids)}
    det = _annotations(_codes(d_imgs, img_code), _codes(d_cats, cat_code), d_boxes, d_scores)
    gt = _annotations(_codes(g_imgs, img_code), _codes(g_cats, cat_code), g_boxes, g_crowd)
    n_img = max(len(image_ids), 1)

    det = _take(det, np.flatnonzero(det.category >= 0))
    order = np.argsort(-det.values, kind="mergesort")
    order = order[np.argsort((det.category * n_img + det.image)[order], kind="mergesort")]
    det = _take(det, order)
    det_group = det.category * n_img + det.image
    det_rank = _ranks(det_group)
    keep = det_rank < max_dets
    det, det_group, det_rank = _take(det, keep), det_group[keep], det_rank[keep]

    gt_area = gt.boxes[:, 2] * gt.boxes[:, 3]
    gt_ignore = (gt.values != 0) | (gt_area < area_range[0]) | (gt_area > area_range[1])
    order = np.argsort(gt_ignore, kind="mergesort")
    order = order[np.argsort((gt.category * n_img + gt.image)[order], kind="mergesort")]
    gt, gt_ignore = _take(gt, order), gt_ignore[order]
    gt_group = gt.category * n_img + gt.image

    matched, ignored = _match(det, det_rank, gt, _ranks(gt_group), gt_ignore, det_group, gt_group)
    det_area = det.boxes[:, 2] * det.boxes[:, 3]
    ignored |= ~matched & ((det_area < area_range[0]) | (det_area > area_range[1]))[None, :]

    precision = -np.ones((len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS), len(category_ids)))
    n_gt = np.bincount(gt.category[~gt_ignore], minlength=len(category_ids))
    bounds = np.searchsorted(det.category, np.arange(len(category_ids) + 1))
    for k in range(len(category_ids)):
        if n_gt[k] == 0:
            continue
        sl = slice(bounds[k], bounds[k + 1])
        precision[:, :, k] = _interpolated_precision(matched[:, sl], ignored[:, sl], det.values[sl], n_gt[k])
    t50 = np.flatnonzero(np.isclose(IOU_THRESHOLDS, 0.5))
    t75 = np.flatnonzero(np.isclose(IOU_THRESHOLDS, 0.75))
    return CocoMapResult(
        ap=_mean_defined(precision),
        ap50=_mean_defined(precision[t50]),
        ap75=_mean_defined(precision[t75]),
        per_category={c: _mean_defined(precision[:, :, k]) for k, c in enumerate(category_ids)},
        category_ids=tuple(category_ids),
        precision=precision,
    )
