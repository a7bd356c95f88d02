"""coco_map against pycocotools COCOeval (iouType="bbox") as the oracle."""

import contextlib
import copy
import io
import math

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from giant_assets.geometry import coco_map


def pycoco(detections, ground_truths):
    images = sorted({d["image_id"] for d in detections} | {g["image_id"] for g in ground_truths})
    cats = sorted({d["category_id"] for d in detections} | {g["category_id"] for g in ground_truths})
    anns = [
        dict(g, id=i + 1, area=g["bbox"][2] * g["bbox"][3], iscrowd=g.get("iscrowd", 0))
        for i, g in enumerate(ground_truths)
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {
            "images": [{"id": i} for i in images],
            "categories": [{"id": c} for c in cats],
            "annotations": anns,
        }
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(copy.deepcopy(detections)), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def random_case(rng, n_img, n_cat, n_gt, n_det, crowd=0.0, grid=False, max_size=60):
    """Detections jittered around ground truths plus random ones; `grid` makes IoU and score ties."""
    gts = []
    for _ in range(n_gt):
        if grid:
            box = (rng.integers(0, 40, 4) * 5).astype(float)
        else:
            box = np.r_[rng.uniform(0, 200, 2), rng.uniform(1, max_size, 2)]
        img, cat = int(rng.integers(1, n_img + 1)), int(rng.integers(1, n_cat + 1))
        crowd_flag = int(rng.random() < crowd)
        gts.append({"image_id": img, "category_id": cat, "bbox": box.tolist(), "iscrowd": crowd_flag})
    dets = []
    for _ in range(n_det):
        if gts and rng.random() < 0.7:
            g = gts[rng.integers(len(gts))]
            noise = rng.integers(-2, 3, 4) * 5 if grid else rng.normal(0, 5, 4)
            box = np.abs(np.array(g["bbox"]) + noise)
            img = g["image_id"]
            cat = g["category_id"] if rng.random() < 0.8 else int(rng.integers(1, n_cat + 1))
        else:
            box = rng.uniform(0, 200, 4)
            img, cat = int(rng.integers(1, n_img + 4)), int(rng.integers(1, n_cat + 1))  # some images lack GT
        score = float(np.round(rng.random(), 1)) if grid else float(rng.random())
        dets.append({"image_id": img, "category_id": cat, "bbox": box.tolist(), "score": score})
    return dets, gts


def assert_same(result, ev):
    assert result.ap == pytest.approx(ev.stats[0], abs=1e-12)
    assert result.ap50 == pytest.approx(ev.stats[1], abs=1e-12)
    assert result.ap75 == pytest.approx(ev.stats[2], abs=1e-12)
    oracle = ev.eval["precision"][:, :, :, 0, 2]  # area "all", maxDets 100
    cat_index = {c: k for k, c in enumerate(ev.params.catIds)}
    for cat, ap in result.per_category.items():
        s = oracle[:, :, cat_index[cat]]
        expected = s[s > -1].mean() if (s > -1).any() else math.nan
        assert ap == pytest.approx(expected, abs=1e-12, nan_ok=True)
        np.testing.assert_array_equal(result.precision[:, :, result.category_ids.index(cat)], s)


@pytest.mark.parametrize("seed", range(8))
def test_random_cases_equal_pycocotools(seed):
    rng = np.random.default_rng(seed)
    crowd, grid = 0.1 * (seed % 2), seed % 3 == 0
    dets, gts = random_case(rng, n_img=12, n_cat=4, n_gt=50, n_det=250, crowd=crowd, grid=grid)
    ev = pycoco(dets, gts)
    result = coco_map(dets, gts)
    assert 0 < result.ap < 1
    assert_same(result, ev)


def test_area_ranges_equal_pycocotools_small_medium_large():
    rng = np.random.default_rng(42)
    dets, gts = random_case(rng, n_img=10, n_cat=3, n_gt=80, n_det=300, crowd=0.05, max_size=150)
    ev = pycoco(dets, gts)
    assert (ev.stats[3:6] > 0).all()
    for area_range, expected in zip([(0, 32**2), (32**2, 96**2), (96**2, 1e10)], ev.stats[3:6], strict=True):
        assert coco_map(dets, gts, area_range=area_range).ap == pytest.approx(expected, abs=1e-12)


def test_more_than_max_dets_per_image_and_ties():
    rng = np.random.default_rng(7)
    gts = [{"image_id": 1, "category_id": 1, "bbox": [float(10 * i), 0.0, 8.0, 8.0]} for i in range(120)]
    dets = [
        {
            "image_id": 1,
            "category_id": 1,
            "bbox": [float(10 * i + rng.integers(0, 3)), 0.0, 8.0, 8.0],
            "score": float(rng.integers(0, 4)) / 4,
        }
        for i in rng.permutation(130)
    ]
    assert_same(coco_map(dets, gts), pycoco(dets, gts))


def test_category_without_detections_and_image_without_gt():
    gts = [
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10]},
        {"image_id": 1, "category_id": 2, "bbox": [50, 50, 10, 10]},
    ]
    dets = [
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9},
        {"image_id": 2, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.95},
    ]
    result = coco_map(dets, gts)
    assert_same(result, pycoco(dets, gts))
    assert result.per_category[2] == 0.0
    # Category 1: the false positive on image 2 ranks first -> precision 0.5 at full recall.
    assert result.per_category[1] == pytest.approx(0.5)


def test_perfect_detections_and_no_detections():
    gts = [{"image_id": i, "category_id": 1, "bbox": [i, i, 20, 30]} for i in range(5)]
    perfect = coco_map([dict(g, score=1.0) for g in gts], gts)
    assert (perfect.ap, perfect.ap50, perfect.ap75) == (1.0, 1.0, 1.0)
    assert coco_map([], gts).ap == 0.0


def test_no_ground_truth_gives_nan():
    result = coco_map([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1.0}], [])
    assert math.isnan(result.ap) and result.per_category == {}


@pytest.mark.parametrize(
    ("det", "message"),
    [
        ({"bbox": [0, 0, 1, 1]}, r"detections\[0\]: missing field\(s\) \['score'\]"),
        ({"bbox": [0, 0, 1], "score": 1}, r"detections\[0\]\.bbox: expected"),
        ({"bbox": [0, 0, -1, 1], "score": 1}, "w, h >= 0"),
        ({"bbox": [0, 0, 1, 1], "score": "high"}, r"\.score: expected a finite"),
        ({"image_id": "x", "bbox": [0, 0, 1, 1], "score": 1}, "image_id values must be all"),
    ],
)
def test_bad_rows(det, message):
    with pytest.raises(ValueError, match=message):
        gt = {"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}
        coco_map([{"image_id": 1, "category_id": 1} | det], [gt])


def test_equal_iou_tie_goes_to_the_later_ground_truth():
    # det 0 has IoU 9/11 with both GTs; pycocotools gives it the later GT (B), so det 1 (IoU 9/11 with B,
    # 7/13 with A) only matches A, and only at thresholds <= 7/13.
    gts = [
        {"image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10]},
        {"image_id": 1, "category_id": 1, "bbox": [2, 0, 10, 10]},
    ]
    dets = [
        {"image_id": 1, "category_id": 1, "bbox": [1, 0, 10, 10], "score": 0.9},
        {"image_id": 1, "category_id": 1, "bbox": [3, 0, 10, 10], "score": 0.8},
    ]
    result = coco_map(dets, gts)
    assert_same(result, pycoco(dets, gts))
    # Thresholds .50 (both matched, AP 1) and .55-.80 (one match at rank 1: 51 recall points of precision 1).
    assert result.ap == pytest.approx((1.0 + 6 * 51 / 101) / 10)
