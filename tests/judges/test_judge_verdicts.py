"""Judge logic through the shared protocol (in-process; the subprocess path is tested in test_judge_cli)."""

import json

import pytest
import shapely
from scipy.spatial import distance as scipy_distance
from shapely import affinity

from giant_assets.judges import bbox_iou, bbox_match, coco_map, distance, polygon_iou, rotated_iou
from giant_assets.judges.protocol import evaluate_payload

FIELDS = {"score", "hits", "misses", "reasoning", "pass", "reason", "checks"}


def verdict(judge_module, candidate, reference, config=None):
    payload = {"candidate_answer": candidate, "reference_answer": reference}
    if config is not None:
        payload["config"] = config
    out = evaluate_payload(judge_module.judge, json.dumps(payload))
    assert set(out) == FIELDS and 0.0 <= out["score"] <= 1.0 and out["reason"] == out["reasoning"]
    assert out["checks"] == [{"text": h, "pass": True} for h in out["hits"]] + [
        {"text": m, "pass": False} for m in out["misses"]
    ]
    return out


def test_iou_judge_spec_fields_and_formats():
    out = verdict(bbox_iou, {"bbox": [0, 0, 10, 10]}, {"bounding_box": [5, 5, 15, 15]})
    assert out["score"] == pytest.approx(25 / 175)
    assert out["misses"] == ["IoU below threshold: 0.143 < 0.5"] and out["hits"] == []
    assert out["reasoning"] == "Bounding box IoU = 0.143"
    out = verdict(
        bbox_iou, {"bbox": [0, 0, 10, 10]}, {"bbox": [5, 5, 10, 10]}, {"format": "xywh", "threshold": 0.1}
    )
    assert out["score"] == pytest.approx(25 / 175) and out["hits"] == ["IoU: 0.143"]
    # A string answer holding JSON is accepted too.
    assert verdict(bbox_iou, json.dumps({"bbox": [0, 0, 2, 2]}), {"bbox": [0, 0, 2, 2]})["score"] == 1.0


@pytest.mark.parametrize(
    ("candidate", "reference", "config", "miss"),
    [
        ({"bbox": [0, 0, 1]}, {"bbox": [0, 0, 1, 1]}, None, "candidate bbox (xyxy): expected shape"),
        ({"bbox": [[0, 0, 1, 1]] * 2}, {"bbox": [0, 0, 1, 1]}, None, "expected exactly one box, got 2"),
        (
            {"bbox": [0, 0, 1, 1]},
            {"bbox": [0, 0, 1, 1]},
            {"threshold": 2},
            "config.threshold: expected a number",
        ),
        (
            {"bbox": [0, 0, 1, 1]},
            {"bbox": [0, 0, 1, 1]},
            {"format": "cxcywh"},
            "config.format: expected one of",
        ),
        ({"bbox": [0, 0, 1, 1]}, [1, 2], None, "reference_answer: a list answer must be chat messages"),
        ("not json", {"bbox": [0, 0, 1, 1]}, None, "candidate_answer: no JSON object found in the text"),
        (
            {"bbox": ["0", 0, 1, 1]},
            {"bbox": [0, 0, 1, 1]},
            None,
            "invalid box: candidate bbox (xyxy): expected numbers, got str '0'",
        ),
        (
            {"bbox": [0, 0, 1, 1]},
            {"bbox": [0, False, 1, 1]},
            None,
            "invalid box: reference bbox (xyxy): expected numbers, got bool",
        ),
        (
            {"bbox": [5, 0, 1, 1]},
            {"bbox": [0, 0, 1, 1]},
            None,
            "candidate bbox (xyxy): invalid box #0 [5.0, 0.0, 1.0, 1.0]",
        ),
        (
            {"bbox": [0, 0, 5, 5]},
            {"bbox": [0, 0, -1, 1]},
            {"format": "xywh"},
            "reference bbox (xywh): invalid box #0",
        ),
    ],
)
def test_iou_judge_malformed_input_is_a_zero_verdict(candidate, reference, config, miss):
    out = verdict(bbox_iou, candidate, reference, config)
    assert out["score"] == 0.0 and len(out["misses"]) == 1 and miss in out["misses"][0]


@pytest.mark.parametrize("side", ["candidate_answer", "reference_answer"])
def test_missing_box_is_the_spec_message(side):
    payload = {"candidate_answer": {"bbox": [0, 0, 1, 1]}, "reference_answer": {"bbox": [0, 0, 1, 1]}}
    del payload[side]
    out = evaluate_payload(bbox_iou.judge, json.dumps(payload))
    assert (out["score"], out["hits"], out["misses"]) == (0.0, [], ["Missing bounding box data"])
    assert out["reasoning"] == "Could not find bbox in candidate or reference" and out["pass"] is False


@pytest.mark.parametrize(
    "text",
    [
        '{"bbox": [0, 0, 10, 10]}',
        'Here is the box:\n```json\n{"bbox": [0, 0, 10, 10]}\n```\nHope this helps.',
        '```\n{"bbox": [0, 0, 10, 10]}\n```',
        'I looked at {the left crop} first. Final answer: {"bbox": [0, 0, 10, 10]}.',
        'Draft {"bbox": [0, 0, 1, 1]} ... revised: {"bbox": [0, 0, 10, 10]}',
        # the whole text is searched, not only the last 64 KiB an agent's reply is searched in
        'Final answer: {"bbox": [0, 0, 10, 10]}. ' + "Reasoning at length. " * 5000,
        # an integer Python refuses to read (over 4300 digits) makes that object no object, not an error
        'Draft {"bbox": [0, 0, ' + "9" * 5000 + ', 1]} ... revised: {"bbox": [0, 0, 10, 10]}',
        '{"bbox": [0, 0, 10, 10]} then {"bbox": [0, 0, ' + "9" * 5000 + ", 1]}",
    ],
    ids=[
        "object",
        "fenced-json",
        "fenced",
        "prose-braces",
        "last-of-two",
        "long-prose",
        "huge-int-first",
        "huge-int-last",
    ],  # fmt: skip
)
def test_candidate_answer_is_raw_model_text(text):
    out = verdict(bbox_iou, text, {"bbox": [0, 0, 10, 5]})
    assert out["score"] == pytest.approx(0.5) and out["pass"] is True


def test_agentv_current_field_names():
    payload = {
        "input": [{"role": "user", "content": "Detect objects"}],
        "output": 'The objects: {"boxes": [[10, 10, 50, 50], [100, 100, 150, 150]]}',
        "expected_output": [
            {"role": "assistant", "content": {"boxes": [[10, 10, 50, 50], [100, 100, 150, 150]]}}
        ],
    }
    out = evaluate_payload(bbox_match.judge, json.dumps(payload))
    assert (out["score"], out["pass"], out["reason"]) == (
        1.0,
        True,
        "Precision: 1.00, Recall: 1.00, F1: 1.00",
    )
    assert out["checks"] == [{"text": "Matched 2 boxes (mean IoU: 1.000)", "pass": True}]
    payload["expected_output"] = [
        {"role": "assistant", "content": [{"type": "text", "value": '{"boxes": []}'}]}
    ]
    out = evaluate_payload(bbox_match.judge, json.dumps(payload))
    assert out["score"] == 0.0 and out["misses"] == ["2 false positive detections"]


def test_hostile_payloads_are_refused_with_messages():
    """Fault 6: 400-digit coordinates, 100k-deep JSON and a 1e6 x 1e6 match used to be tracebacks."""
    digits = "9" * 400
    raw = (
        '{"candidate_answer": {"bbox": [0, 0, '
        + digits
        + ', 1]}, "reference_answer": {"bbox": [0, 0, 1, 1]}}'
    )
    out = evaluate_payload(bbox_iou.judge, raw)
    assert out["score"] == 0.0 and "too large for a float" in out["misses"][0]
    deep = '{"candidate_answer": ' + "[" * 100_000 + "]" * 100_000 + ', "reference_answer": {}}'
    out = evaluate_payload(bbox_iou.judge, deep)
    assert out["misses"] == ["Malformed input: payload: JSON nested 100001 levels deep; the limit is 64"]
    text = '{"x": ' * 100_000
    out = evaluate_payload(bbox_iou.judge, json.dumps({"candidate_answer": text, "reference_answer": {}}))
    assert out["score"] == 0.0 and "candidate_answer: no JSON object found" in out["misses"][0]
    boxes = "[" + ",".join(["[0,0,1,1]"] * 1_000_000) + "]"
    raw = f'{{"candidate_answer": {{"boxes": {boxes}}}, "reference_answer": {{"boxes": {boxes}}}}}'
    out = evaluate_payload(bbox_match.judge, raw)
    assert out["score"] == 0.0
    assert (
        "refusing to compare 1000000 x 1000000 boxes: 1,000,000,000,000 pairs exceed the limit of 25,000,000"
        in (out["misses"][0])
    )
    out = evaluate_payload(bbox_iou.judge, b" " * (32 * 1024 * 1024 + 1))
    assert "the limit is 33,554,432" in out["misses"][0]


def test_payload_level_problems_are_verdicts():
    for raw in (
        "[1, 2]",
        '{"candidate_answer": 3}',
        '{"candidate_answer": {}, "reference_answer": {}, "config": 3}',
    ):
        out = evaluate_payload(bbox_iou.judge, raw)
        assert out["score"] == 0.0 and out["misses"][0].startswith("Malformed input: ")
    with pytest.raises(json.JSONDecodeError):
        evaluate_payload(bbox_iou.judge, "{not json")


# Pred A overlaps ref 0 by 9/11 and ref 1 by 7/13; pred B overlaps ref 0 by 7/13 and ref 1 by 3/17.
REFS, PREDS = [[0, 0, 10, 10], [4, 0, 14, 10]], [[1, 0, 11, 10], [-3, 0, 7, 10]]


def test_match_judge_greedy_coco_hungarian():
    greedy = verdict(bbox_match, {"boxes": PREDS}, {"boxes": REFS})
    assert greedy["score"] == pytest.approx(0.5)
    assert greedy["hits"] == ["Matched 1 boxes (mean IoU: 0.818)"]
    assert greedy["misses"] == ["1 false positive detections", "1 missed ground truth boxes"]
    assert greedy["reasoning"] == "Precision: 0.50, Recall: 0.50, F1: 0.50"
    coco = verdict(bbox_match, {"boxes": PREDS, "scores": [0.8, 0.9]}, {"boxes": REFS}, {"matching": "coco"})
    assert coco["score"] == 1.0 and coco["hits"] == ["Matched 2 boxes (mean IoU: 0.538)"]
    for name in ("hungarian", "optimal"):
        best = verdict(bbox_match, {"boxes": PREDS}, {"boxes": REFS}, {"matching": name})
        assert best["score"] == 1.0 and best["misses"] == []


def test_match_judge_empty_and_bad():
    assert verdict(bbox_match, {"boxes": []}, {"boxes": REFS})["score"] == 0.0
    empty = verdict(bbox_match, {"boxes": []}, {"boxes": []})
    assert (empty["score"], empty["hits"], empty["misses"]) == (0.0, [], [])  # the spec: no boxes scores 0
    assert empty["reasoning"] == "Precision: 0.00, Recall: 0.00, F1: 0.00"
    assert verdict(bbox_match, {}, {})["score"] == 0.0
    out = verdict(bbox_match, {"boxes": [[0, 0, "1", 1]]}, {"boxes": REFS})
    assert (
        out["score"] == 0.0
        and "invalid box: candidate boxes (xyxy): expected numbers, got str" in out["misses"][0]
    )
    out = verdict(bbox_match, {"boxes": PREDS, "scores": [1]}, {"boxes": REFS}, {"matching": "coco"})
    assert out["score"] == 0.0 and "scores: expected 2 values" in out["misses"][0]
    out = verdict(bbox_match, {"boxes": PREDS}, {"boxes": REFS}, {"matching": "best"})
    assert "config.matching" in out["misses"][0]


def test_distance_judge_matches_spec_scoring_and_scipy():
    out = verdict(distance, {"coordinates": [3, 4]}, {"point": [0, 0]})
    assert (out["score"], out["hits"], out["reasoning"]) == (
        1.0,
        ["euclidean distance: 5.000"],
        "Euclidean distance = 5.000",
    )
    out = verdict(distance, {"point": [3, 4]}, {"point": [0, 0]}, {"threshold": 4})
    assert out["score"] == pytest.approx(1 - (5 - 4) / 4)
    assert out["misses"] == ["Distance exceeds threshold: 5.000 > 4.0"]
    out = verdict(distance, {"point": [3, 4]}, {"point": [0, 0]}, {"metric": "manhattan", "threshold": 3})
    assert out["score"] == 0.0  # distance 7 >= 2 * threshold
    a, b = [1.0, 2.0, 3.0], [2.0, 0.5, 1.0]
    out = verdict(distance, {"point": a}, {"point": b}, {"metric": "cosine"})
    assert out["score"] == pytest.approx(1 - scipy_distance.cosine(a, b))


def test_distance_judge_several_points_and_errors():
    out = verdict(distance, {"coordinates": [[0, 0], [30, 0]]}, {"coordinates": [[0, 1], [0, 0]]})
    assert out["score"] == pytest.approx((1.0 + 0.0) / 2)
    assert out["hits"] == ["point 0: euclidean distance: 1.000"]
    assert out["misses"] == ["point 1: Distance exceeds threshold: 30.000 > 10.0"]
    mismatch = verdict(distance, {"point": [1, 2]}, {"point": [1, 2, 3]})
    assert (mismatch["score"], mismatch["misses"]) == (0.0, ["Dimension mismatch: 2D vs 3D"])
    missing = verdict(distance, {"point": [1, 2]}, {})
    assert (missing["score"], missing["misses"]) == (0.0, ["Missing coordinate data"])
    assert (
        "expected numbers, got bool"
        in verdict(distance, {"point": [1, True]}, {"point": [0, 0]})["misses"][0]
    )
    assert (
        verdict(distance, {"point": [0, 0]}, {"point": [0, 0]}, {"metric": "cosine"})["score"] == 0.0
    )  # zero vector
    assert "config.metric" in verdict(distance, {"point": [0]}, {"point": [0]}, {"metric": "l3"})["misses"][0]


def test_polygon_judge_against_shapely_and_repairs():
    tri, square = [[0, 0], [4, 0], [0, 4]], [[0, 0], [2, 0], [2, 2], [0, 2]]
    out = verdict(polygon_iou, {"polygon": tri}, {"polygon": square})
    t, s = shapely.Polygon(tri), shapely.Polygon(square)
    assert out["score"] == pytest.approx(t.intersection(s).area / t.union(s).area)
    bowtie = [[0, 0], [2, 2], [2, 0], [0, 2]]
    out = verdict(polygon_iou, {"polygon": bowtie}, {"polygon": square})
    assert out["score"] == pytest.approx(0.5)
    assert "candidate polygon was invalid (e.g. self-intersecting) and was repaired" in out["misses"]
    out = verdict(polygon_iou, {"polygon": [[0, 0], [1, 1]]}, {"polygon": square})
    assert (
        out["score"] == 0.0
        and "candidate polygon: a polygon needs at least 3 distinct points" in out["misses"][0]
    )


def test_rotated_judge_against_shapely():
    a, b = [5, 5, 4, 2, 30], [6, 5, 4, 2, -15]
    pa = affinity.rotate(shapely.box(3, 4, 7, 6), 30, origin=(5, 5))
    pb = affinity.rotate(shapely.box(4, 4, 8, 6), -15, origin=(6, 5))
    out = verdict(rotated_iou, {"rotated_bbox": a}, {"rbox": b})
    assert out["score"] == pytest.approx(pa.intersection(pb).area / pa.union(pb).area, abs=1e-12)
    assert out["reasoning"].startswith("Rotated box IoU = ")
    assert verdict(rotated_iou, {}, {"rbox": b})["misses"] == ["Missing bounding box data"]
    bad = verdict(rotated_iou, {"rbox": [5, 5, -4, 2, 30]}, {"rbox": b})
    assert "candidate rotated_bbox: invalid box" in bad["misses"][0]
    radians = verdict(
        rotated_iou,
        {"rbox": [0, 0, 2, 2, 0]},
        {"rbox": [0, 0, 2, 2, 1.5707963267948966]},
        {"angle_unit": "radians"},
    )
    assert radians["score"] == pytest.approx(1.0)


def test_map_judge():
    gts = [
        {"image_id": i, "category_id": c, "bbox": [10 * i, 5 * c, 20, 20]} for i in range(3) for c in (1, 2)
    ]
    dets = [dict(g, score=0.9) for g in gts if g["category_id"] == 1]
    dets.append({"image_id": 0, "category_id": 2, "bbox": [100, 100, 5, 5], "score": 0.5})
    out = verdict(coco_map, {"detections": dets}, {"ground_truths": gts})
    assert out["score"] == pytest.approx(0.5)  # category 1 perfect, category 2 only a false positive
    assert out["hits"] == ["category 1: AP 1.000"] and out["misses"] == ["category 2: AP 0.000 < 0.5"]
    assert verdict(coco_map, {"detections": dets}, {"ground_truths": gts}, {"metric": "ap50"})["score"] == (
        pytest.approx(0.5)
    )
    out = verdict(coco_map, {"detections": dets}, {"ground_truths": []})
    assert out["score"] == 0.0 and "AP is undefined" in out["misses"][0]
    out = verdict(coco_map, {"detections": [{"image_id": 0}]}, {"ground_truths": gts})
    assert "detections[0]: missing field(s)" in out["misses"][0]
    out = verdict(coco_map, {"detections": {}}, {"ground_truths": gts})
    assert out["score"] == 0.0 and "detections: expected a list of objects, got dict" in out["misses"][0]
