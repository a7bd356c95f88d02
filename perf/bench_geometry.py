"""Geometry: vectorised box IoU vs the spec's per-pair Python loop, and coco_map vs pycocotools COCOeval.

Box IoU: 2000 x 2000 random XYXY boxes. The spec's nested loop (`compute_iou` per pair) runs on the first
LOOP_ROWS rows and its time is scaled to the full matrix; its values are compared with `box_iou`'s.
mAP: ~5000 detections over 300 images and 10 categories. pycocotools is timed twice: with its default
parameters (4 area ranges x 3 maxDets, what `COCOeval` users run) and restricted to area "all" and
maxDets 100 (the exact work `coco_map` does); AP, AP50 and AP75 must agree.
"""

from __future__ import annotations

import contextlib
import copy
import io

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from giant_assets.geometry.boxes import box_iou
from giant_assets.geometry.coco_eval import coco_map
from perf.timing import best_of

N_BOXES = 2000
LOOP_ROWS = 200
IOU_TARGET = 100.0
MAP_TARGET = 2.0


def spec_compute_iou(box1: list, box2: list) -> float:
    """Verbatim logic of the spec's `compute_iou` (XYXY)."""
    x1 = max(box1[0], box2[0])
    y1 = max(box1[1], box2[1])
    x2 = min(box1[2], box2[2])
    y2 = min(box1[3], box2[3])
    inter_area = max(0, x2 - x1) * max(0, y2 - y1)
    box1_area = (box1[2] - box1[0]) * (box1[3] - box1[1])
    box2_area = (box2[2] - box2[0]) * (box2[3] - box2[1])
    union_area = box1_area + box2_area - inter_area
    return inter_area / union_area if union_area > 0 else 0.0


def bench_iou(rng: np.random.Generator) -> float:
    xy = rng.uniform(0, 1000, (2 * N_BOXES, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 150, (2 * N_BOXES, 2))], axis=1)
    a, b = boxes[:N_BOXES], boxes[N_BOXES:]
    t_vec, ious = best_of(lambda: box_iou(a, b), 5)
    a_list, b_list = a[:LOOP_ROWS].tolist(), b.tolist()
    t_loop, loop = best_of(lambda: [[spec_compute_iou(p, q) for q in b_list] for p in a_list], 1)
    t_loop_full = t_loop * N_BOXES / LOOP_ROWS
    diff = float(np.abs(np.asarray(loop) - ious[:LOOP_ROWS]).max())
    ratio = t_loop_full / t_vec
    print(
        f"box IoU {N_BOXES}x{N_BOXES}: box_iou {t_vec * 1e3:.1f} ms; spec loop {t_loop:.2f} s on "
        f"{LOOP_ROWS}x{N_BOXES} -> {t_loop_full:.1f} s scaled; ratio {ratio:.0f}x "
        f"(target >= {IOU_TARGET:g}x: {'met' if ratio >= IOU_TARGET else 'MISSED'}); max |diff| {diff:.1e}; "
        f"non-zero IoUs {int((ious > 0).sum())}"
    )
    return ratio


def map_case(rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    gts = []
    for i in range(1500):
        box = np.r_[rng.uniform(0, 800, 2), rng.uniform(4, 200, 2)]
        gts.append(
            {
                "id": i + 1,
                "image_id": int(rng.integers(1, 301)),
                "category_id": int(rng.integers(1, 11)),
                "bbox": box.tolist(),
                "iscrowd": 0,
            }
        )
    dets = []
    for _ in range(5000):
        if rng.random() < 0.6:
            g = gts[rng.integers(len(gts))]
            box = np.abs(np.array(g["bbox"]) + rng.normal(0, 6, 4))
            img, cat = g["image_id"], g["category_id"]
        else:
            box = np.r_[rng.uniform(0, 800, 2), rng.uniform(4, 200, 2)]
            img, cat = int(rng.integers(1, 301)), int(rng.integers(1, 11))
        dets.append({"image_id": img, "category_id": cat, "bbox": box.tolist(), "score": float(rng.random())})
    return dets, gts


def pycoco_stats(dets: list[dict], gts: list[dict], restricted: bool) -> tuple[float, float, float]:
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {
            "images": [{"id": i} for i in range(1, 301)],
            "categories": [{"id": c} for c in range(1, 11)],
            "annotations": [dict(g, area=g["bbox"][2] * g["bbox"][3]) for g in gts],
        }
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(copy.deepcopy(dets)), "bbox")
        if restricted:
            ev.params.areaRng, ev.params.areaRngLbl, ev.params.maxDets = [[0, 1e10]], ["all"], [100]
        ev.evaluate()
        ev.accumulate()
    p = ev.eval["precision"][:, :, :, 0, -1]  # area "all", maxDets 100
    return tuple(float(np.mean(s[s > -1])) for s in (p, p[0], p[5]))


def bench_map(rng: np.random.Generator) -> float:
    dets, gts = map_case(rng)
    t_ours, res = best_of(lambda: coco_map(dets, gts), 3)
    ours = (res.ap, res.ap50, res.ap75)
    print(f"mAP on {len(dets)} detections / {len(gts)} ground truths / 300 images / 10 categories:")
    print(f"{'implementation':>36} {'time s':>8} {'ratio':>7} {'AP':>8} {'AP50':>8} {'AP75':>8} {'equal':>6}")
    print(f"{'coco_map':>36} {t_ours:>8.3f} {'1.0x':>7} {ours[0]:>8.5f} {ours[1]:>8.5f} {ours[2]:>8.5f}")
    ratio = 0.0
    for label, restricted in (
        ("pycocotools (default params)", False),
        ("pycocotools (all, maxDets 100)", True),
    ):
        t, theirs = best_of(lambda r=restricted: pycoco_stats(dets, gts, r), 2)
        equal = np.allclose(ours, theirs, rtol=0, atol=1e-12)
        ratio = t / t_ours
        print(
            f"{label:>36} {t:>8.3f} {ratio:>6.1f}x {theirs[0]:>8.5f} {theirs[1]:>8.5f} {theirs[2]:>8.5f} "
            f"{str(equal):>6}"
        )
    print(
        f"coco_map is {ratio:.1f}x faster than pycocotools doing the same work "
        f"(target >= {MAP_TARGET:g}x: {'met' if ratio >= MAP_TARGET else 'MISSED'})"
    )
    return ratio


def main() -> None:
    rng = np.random.default_rng(0)
    bench_iou(rng)
    bench_map(rng)


if __name__ == "__main__":
    main()
