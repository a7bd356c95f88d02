import numpy as np
import pytest
import shapely

from giant_assets.geometry import as_boxes, box_area, box_intersection, box_iou, xywh_to_xyxy, xyxy_to_xywh


def spec_compute_iou(box1, box2):
    """The spec's reference loop implementation (valid for non-degenerate boxes)."""
    x1, y1 = max(box1[0], box2[0]), max(box1[1], box2[1])
    x2, y2 = min(box1[2], box2[2]), min(box1[3], box2[3])
    inter = max(0, x2 - x1) * max(0, y2 - y1)
    union = (box1[2] - box1[0]) * (box1[3] - box1[1]) + (box2[2] - box2[0]) * (box2[3] - box2[1]) - inter
    return inter / union if union > 0 else 0.0


def random_xyxy(rng, n):
    xy = rng.uniform(0, 100, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(0.5, 40, (n, 2))], axis=1)


def test_hand_computed_iou():
    a = [[0, 0, 10, 10]]
    b = [[5, 5, 15, 15], [0, 0, 10, 10], [10, 0, 20, 10], [20, 20, 30, 30], [0, 0, 5, 10]]
    np.testing.assert_allclose(box_iou(a, b), [[25 / 175, 1.0, 0.0, 0.0, 0.5]])


def test_iou_matches_shapely_and_spec_loop():
    rng = np.random.default_rng(0)
    a, b = random_xyxy(rng, 30), random_xyxy(rng, 40)
    got = box_iou(a, b)
    assert got.shape == (30, 40)
    sa, sb = shapely.box(*a.T), shapely.box(*b.T)
    inter = shapely.area(shapely.intersection(sa[:, None], sb[None, :]))
    union = shapely.area(shapely.union(sa[:, None], sb[None, :]))
    np.testing.assert_allclose(got, inter / union, rtol=1e-12, atol=1e-12)
    loop = np.array([[spec_compute_iou(p, q) for q in b] for p in a])
    np.testing.assert_allclose(got, loop, rtol=1e-12, atol=0)
    np.testing.assert_allclose(box_intersection(a, b), inter, rtol=1e-12, atol=1e-9)
    assert (got > 0).any() and (got == 0).any()


def test_degenerate_boxes_give_zero_not_nan():
    boxes = [[0, 0, 0, 0], [5, 5, 5, 10], [3, 3, 9, 3], [0, 0, 10, 10]]
    got = box_iou(boxes, boxes)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[:3, :], 0.0)
    assert got[3, 3] == 1.0
    np.testing.assert_array_equal(box_area(boxes), [0, 0, 0, 100])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[10, 10, 0, 0]], r"invalid box #0 \[10\.0, 10\.0, 0\.0, 0\.0\]: x2 < x1 or y2 < y1"),
        ([[0, 0, 1, 1], [0, 5, 1, 4]], r"invalid box #1 .*y2 < y1"),
        ([["0", 0, 1, 1]], r"expected numbers, got str '0'"),
        ([[True, 0, 1, 1]], r"expected numbers, got bool True"),
        ([[None, 0, 1, 1]], r"expected numbers, got NoneType None"),
        (np.array([[True, False, True, True]]), "expected numbers, got an array of bool"),
        ([[int("9" * 400), 0, 1, 1]], "too large for a float"),
        ([[1e200, 0, 1e201, 1]], r"beyond \+-1e\+150"),
    ],
)
def test_invalid_boxes_are_refused_not_coerced(value, message):
    """Fault 8: inverted boxes and string/boolean coordinates used to be coerced silently."""
    with pytest.raises(ValueError, match=message):
        box_iou(value, [[0, 0, 1, 1]])
    with pytest.raises(ValueError, match=message):
        box_area(value)


def test_xywh_with_negative_size_is_invalid():
    with pytest.raises(ValueError, match=r"invalid box #0 .*negative width or height"):
        xywh_to_xyxy([[0, 0, -1, 2]])


def test_empty_inputs_give_empty_matrix():
    assert box_iou(np.zeros((0, 4)), [[0, 0, 1, 1]]).shape == (0, 1)
    assert box_iou([], []).shape == (0, 0)


def test_conversions_round_trip_and_values():
    xywh = np.array([[10, 20, 30, 40], [0, 0, 1, 2]], dtype=float)
    xyxy = xywh_to_xyxy(xywh)
    np.testing.assert_array_equal(xyxy, [[10, 20, 40, 60], [0, 0, 1, 2]])
    np.testing.assert_array_equal(xyxy_to_xywh(xyxy), xywh)
    np.testing.assert_array_equal(xywh_to_xyxy([1, 2, 3, 4]), [[1, 2, 4, 6]])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[0, 0, 1]], r"shape \(N, 4\)"),
        ([[0, 0, 1, 1, 2]], r"shape \(N, 4\)"),
        ([[0, 0, np.nan, 1]], "finite"),
        ([["a", 0, 1, 1]], "numbers"),
        (np.zeros((2, 2, 4)), r"got \(2, 2, 4\)"),
    ],
)
def test_validation_errors(value, message):
    with pytest.raises(ValueError, match=message):
        as_boxes(value, "pred")
    with pytest.raises(ValueError, match="^a: "):
        box_iou(value, [[0, 0, 1, 1]])


@pytest.mark.parametrize(("n", "m"), [(3, 70_000), (5_000, 20)])
def test_row_blocking_covers_every_row(n, m):
    rng = np.random.default_rng(n)
    a, b = random_xyxy(rng, n), random_xyxy(rng, m)
    got = box_iou(a, b)
    overlapping = np.argwhere(got > 0)
    assert len(overlapping) > 100
    pairs = np.concatenate(
        [
            rng.integers(0, [n, m], size=(300, 2)),
            overlapping[:: len(overlapping) // 100],
            [[n - 1, m - 1], [0, 0], [n - 1, 0]],
        ]
    )
    expected = [spec_compute_iou(a[i], b[j]) for i, j in pairs]
    np.testing.assert_allclose(got[pairs[:, 0], pairs[:, 1]], expected, rtol=1e-12, atol=0)
