"""Agreement statistics against independent implementations: scikit-learn's cohen_kappa_score and the
krippendorff package (nominal and ordinal, with missing ratings)."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from giant_assets.eval.agreement import cohen_kappa, krippendorff_alpha

SCALE = ["not relevant", "partly", "relevant"]


@pytest.mark.parametrize("seed", range(6))
def test_cohen_kappa_matches_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.choice(SCALE, size=40)
    b = np.where(rng.random(40) < 0.6, a, rng.choice(SCALE, size=40))  # agree more often than chance
    assert cohen_kappa(list(a), list(b)) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_cohen_kappa_edges() -> None:
    assert cohen_kappa(["x", "y", "x"], ["x", "y", "x"]) == 1.0
    assert math.isnan(cohen_kappa(["x", "x"], ["x", "x"]))
    with pytest.raises(ValueError, match="rated 2 and 1 units"):
        cohen_kappa(["x", "y"], ["x"])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_krippendorff_alpha_matches_the_krippendorff_package(seed: int, level: str) -> None:
    rng = np.random.default_rng(seed)
    raters, units = 3 + seed % 2, 30
    truth = rng.integers(0, 3, size=units)
    codes = np.where(rng.random((raters, units)) < 0.7, truth, rng.integers(0, 3, size=(raters, units)))
    missing = rng.random((raters, units)) < 0.2
    ratings = [[None if missing[r, u] else SCALE[codes[r, u]] for u in range(units)] for r in range(raters)]
    numeric = np.where(missing, np.nan, codes.astype(float))
    expected = krippendorff.alpha(reliability_data=numeric, level_of_measurement=level)
    ordered = SCALE if level == "ordinal" else None
    assert krippendorff_alpha(ratings, ordered=ordered) == pytest.approx(expected, abs=1e-12)


def test_two_raters_alpha_is_close_to_kappa_and_edges() -> None:
    a, b = ["x", "y", "y", "x", "z", "x"], ["x", "y", "x", "x", "z", "y"]
    assert krippendorff_alpha([a, b]) == pytest.approx(
        krippendorff.alpha(
            reliability_data=[[ord(v) for v in a], [ord(v) for v in b]], level_of_measurement="nominal"
        )
    )
    assert math.isnan(krippendorff_alpha([["x", None], [None, "y"]]))  # no unit rated twice
    with pytest.raises(ValueError, match="not among the ordered categories"):
        krippendorff_alpha([["x", "q"], ["x", "x"]], ordered=["x", "y"])
