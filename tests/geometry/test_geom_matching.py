"""Matching: spec 002 greedy (against the spec's own code), COCO-style, Hungarian (against brute force),
spec metrics (no boxes on either side scores 0) and the planned refusal of huge matrices."""

import itertools
import tracemalloc
import types
from pathlib import Path

import numpy as np
import pytest

from giant_assets.geometry import MATCHERS, box_iou, coco_match, greedy_match, hungarian_match

SPEC_BATCH = Path(__file__).parents[1] / "compat" / "spec_examples" / "002_batch_iou_evaluator.py.txt"


def spec_module() -> types.ModuleType:
    module = types.ModuleType("spec_batch_iou")
    exec(compile(SPEC_BATCH.read_text(), str(SPEC_BATCH), "exec"), module.__dict__)
    return module


def brute_force_best_total(ious, threshold):
    """Max total IoU over all one-to-one partial matchings, counting only pairs with IoU >= threshold."""
    n, m = ious.shape
    best = 0.0
    refs = list(range(m)) + [None] * n
    for perm in itertools.permutations(refs, n):
        total = sum(ious[i, j] for i, j in enumerate(perm) if j is not None and ious[i, j] >= threshold)
        best = max(best, total)
    return best


def clustered_boxes(rng, n):
    centres = rng.uniform(0, 30, (n, 2))
    sizes = rng.uniform(8, 20, (n, 2))
    return np.concatenate([centres, centres + sizes], axis=1)


@pytest.mark.parametrize("seed", range(25))
def test_hungarian_equals_brute_force_and_bounds_the_greedy_methods(seed):
    rng = np.random.default_rng(seed)
    pred, ref = clustered_boxes(rng, int(rng.integers(1, 6))), clustered_boxes(rng, int(rng.integers(1, 6)))
    threshold = float(rng.choice([0.1, 0.3, 0.5]))
    ious = box_iou(pred, ref)
    res = hungarian_match(pred, ref, threshold)
    assert res.total_iou == pytest.approx(brute_force_best_total(ious, threshold), abs=1e-12)
    for r in (res, greedy_match(pred, ref, threshold), coco_match(pred, ref, threshold)):
        assert r.total_iou <= res.total_iou + 1e-12
        assert len({p for p, _, _ in r.pairs}) == r.tp == len({q for _, q, _ in r.pairs})
        assert all(iou >= threshold and iou == ious[p, q] for p, q, iou in r.pairs)
        assert r.tp + r.fp == len(pred) and r.tp + r.fn == len(ref)


@pytest.mark.parametrize("seed", range(40))
def test_greedy_equals_the_spec_code(seed):
    spec = spec_module()
    rng = np.random.default_rng(100 + seed)
    pred = clustered_boxes(rng, int(rng.integers(0, 8))).round(1).tolist()
    ref = clustered_boxes(rng, int(rng.integers(0, 8))).round(1).tolist()
    threshold = float(rng.choice([0.2, 0.5]))
    tp, fp, fn, mean_iou = spec.greedy_match(pred, ref, threshold)
    ours = greedy_match(pred, ref, threshold)
    assert (ours.tp, ours.fp, ours.fn) == (tp, fp, fn)
    assert ours.mean_iou == pytest.approx(mean_iou, abs=1e-12)


# pred A (higher score) overlaps ref 0 by 9/11 and ref 1 by 7/13;
# pred B overlaps ref 0 by 7/13 and ref 1 by 3/17.
REFS = [[0, 0, 10, 10], [4, 0, 14, 10]]
PREDS = [[1, 0, 11, 10], [-3, 0, 7, 10]]


def test_three_methods_differ_where_they_should():
    spec_greedy = greedy_match(PREDS, REFS, 0.5)  # ref 0 first: takes pred A (9/11); ref 1 then gets nothing
    assert spec_greedy.pairs == ((0, 0, pytest.approx(9 / 11)),)
    coco = coco_match(PREDS, REFS, 0.5, scores=[0.8, 0.9])  # pred B first: takes ref 0 (7/13)
    assert coco.pairs == ((0, 1, pytest.approx(7 / 13)), (1, 0, pytest.approx(7 / 13)))
    best = hungarian_match(PREDS, REFS, 0.5)
    assert [(p, r) for p, r, _ in best.pairs] == [(0, 1), (1, 0)]
    assert best.total_iou == pytest.approx(14 / 13)
    assert (best.tp, best.fp, best.fn, best.f1) == (2, 0, 0, 1.0)
    assert spec_greedy.f1 == pytest.approx(0.5)
    assert set(MATCHERS) == {"greedy", "coco", "hungarian"}


def test_coco_visits_by_descending_score_then_input_order():
    preds = [[0, 0, 10, 9], [0, 0, 10, 10]]
    refs = [[0, 0, 10, 10]]
    assert coco_match(preds, refs).pairs[0][0] == 0  # input order
    assert coco_match(preds, refs, scores=[0.2, 0.7]).pairs[0][0] == 1
    assert coco_match(preds, refs, scores=[0.5, 0.5]).pairs[0][0] == 0  # stable on ties
    assert greedy_match(preds, refs).pairs[0][0] == 1  # the ground truth takes its best detection


def test_metrics_on_hand_case():
    refs = [[0, 0, 10, 10], [20, 20, 30, 30], [50, 50, 60, 60]]
    preds = [[0, 0, 10, 10], [21, 20, 31, 30], [80, 80, 90, 90], [0, 50, 5, 55]]
    res = greedy_match(preds, refs, 0.5)
    assert (res.tp, res.fp, res.fn) == (2, 2, 1)
    assert res.precision == 0.5 and res.recall == pytest.approx(2 / 3)
    assert res.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert res.mean_iou == pytest.approx((1 + 90 / 110) / 2)


@pytest.mark.parametrize("match", [greedy_match, coco_match, hungarian_match])
def test_empty_sides_score_zero_as_the_spec(match):
    both = match(np.zeros((0, 4)), np.zeros((0, 4)))
    assert (both.precision, both.recall, both.f1, both.mean_iou) == (0.0, 0.0, 0.0, 0.0)
    assert spec_module().greedy_match([], [], 0.5) == (0, 0, 0, 0.0)
    no_pred = match(np.zeros((0, 4)), [[0, 0, 1, 1]])
    assert (no_pred.tp, no_pred.fn, no_pred.precision, no_pred.recall, no_pred.f1) == (0, 1, 0.0, 0.0, 0.0)
    no_ref = match([[0, 0, 1, 1]], np.zeros((0, 4)))
    assert (no_ref.fp, no_ref.precision, no_ref.recall, no_ref.f1) == (1, 0.0, 0.0, 0.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="threshold must be in"):
        hungarian_match(PREDS, REFS, 0.0)
    with pytest.raises(ValueError, match="scores: expected 2 values"):
        coco_match(PREDS, REFS, scores=[1.0])
    with pytest.raises(ValueError, match=r"^ref: "):
        greedy_match(PREDS, [[0, 0, 1]])
    with pytest.raises(ValueError, match=r"invalid box #1 \[5\.0, 0\.0, 1\.0, 1\.0\]"):
        greedy_match(PREDS, [[0, 0, 1, 1], [5, 0, 1, 1]])


@pytest.mark.parametrize("match", [greedy_match, coco_match, hungarian_match])
def test_a_million_by_a_million_is_refused_before_allocating(match):
    boxes = np.tile([0.0, 0.0, 1.0, 1.0], (1_000_000, 1))  # 32 MB each side
    tracemalloc.start()
    try:
        with pytest.raises(
            ValueError, match=r"refusing to compare 1000000 x 1000000 boxes: .* exceed the limit"
        ):
            match(boxes, boxes)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * boxes.nbytes  # counted in bytes: a copy or two of the input at most, no pair matrix
