"""Rotated-box IoU (separating axis theorem + convex clipping) against shapely polygons as the oracle."""

import math

import numpy as np
import pytest
import shapely
from shapely import affinity

from giant_assets.geometry import rotated_iou
from giant_assets.geometry.rotated import corners, separated


def shapely_box(b, radians=False):
    cx, cy, w, h, angle = b
    rect = shapely.box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
    return affinity.rotate(rect, angle, origin=(cx, cy), use_radians=radians)


def shapely_iou(a, b, radians=False):
    pa, pb = shapely_box(a, radians), shapely_box(b, radians)
    return pa.intersection(pb).area / pa.union(pb).area


def test_random_pairs_match_shapely():
    rng = np.random.default_rng(7)
    got, expected = [], []
    for _ in range(500):
        a = [*rng.uniform(0, 20, 2), *rng.uniform(0.1, 15, 2), rng.uniform(-180, 180)]
        b = [*rng.uniform(0, 20, 2), *rng.uniform(0.1, 15, 2), rng.uniform(-180, 180)]
        got.append(rotated_iou(a, b))
        expected.append(shapely_iou(a, b))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert sum(e == 0 for e in expected) > 20 and sum(e > 0.3 for e in expected) > 20


def test_hand_cases_and_radians():
    assert rotated_iou([0, 0, 2, 2, 0], [0, 0, 2, 2, 90]) == pytest.approx(1.0)
    # a square and the same square turned 45 degrees: intersection is a regular octagon
    octagon = 8 * (math.sqrt(2) - 1)  # area of the octagon inscribed in both unit-half-width squares
    assert rotated_iou([0, 0, 2, 2, 0], [0, 0, 2, 2, 45]) == pytest.approx(octagon / (8 - octagon))
    a, b = [1, 2, 4, 1, 0.3], [2, 2, 3, 2, -0.7]
    assert rotated_iou(a, b, "radians") == pytest.approx(shapely_iou(a, b, radians=True), abs=1e-12)
    assert rotated_iou([0, 0, 0, 5, 10], [0, 0, 2, 2, 0]) == 0.0  # zero area


def test_separating_axis_on_touching_and_far_boxes():
    a = corners(np.array([0.0, 0, 2, 2, 0]))
    assert separated(a, corners(np.array([10.0, 0, 2, 2, 30])))
    assert not separated(a, corners(np.array([1.5, 0, 2, 2, 45])))
    assert rotated_iou([0, 0, 2, 2, 0], [2, 0, 2, 2, 0]) == 0.0  # sharing an edge


@pytest.mark.parametrize(
    ("box", "message"),
    [
        ([0, 0, -1, 2, 0], "invalid box .* negative width or height"),
        ([0, 0, 1, 2], r"expected \[cx, cy, w, h, angle\]"),
        ([0, "0", 1, 2, 0], "expected numbers, got str"),
        ([0, 0, 1, 2, True], "expected numbers, got bool"),
    ],
)
def test_invalid_rotated_boxes(box, message):
    with pytest.raises(ValueError, match=message):
        rotated_iou(box, [0, 0, 1, 1, 0])
