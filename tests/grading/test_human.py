"""Human baseline comparison: biomlbench's definitions (percent of humans matched or beaten, rounded to 1
decimal; beats = strictly better than the median), property-checked and hand-checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from giant_assets.grading.human import calculate_human_performance_metrics

small = st.integers(0, 6).map(float)  # few distinct values → many ties


@given(st.lists(small, min_size=1, max_size=30), small)
def test_percentile_is_upstreams_definition(humans: list[float], agent: float) -> None:
    beats, pct = calculate_human_performance_metrics(agent, humans, is_lower_better=False)
    assert pct == round(100 * sum(h <= agent for h in humans) / len(humans), 1)
    assert beats == (agent > np.median(humans))
    beats_low, pct_low = calculate_human_performance_metrics(agent, humans, is_lower_better=True)
    assert pct_low == round(100 * sum(h >= agent for h in humans) / len(humans), 1)
    assert beats_low == (agent < np.median(humans))


def test_hand_checked_cases() -> None:
    humans = pd.DataFrame({"score": [1.0, 2.0, 3.0, 4.0]})
    # matches or beats 1, 2 and 3 → 3 / 4 (ties count as beaten, as upstream)
    assert calculate_human_performance_metrics(3.0, humans, False) == (True, 75.0)
    # median 2.5: equal is not better
    assert calculate_human_performance_metrics(2.5, humans, False) == (False, 50.0)
    # lower is better: 1.5 beats 2, 3, 4
    assert calculate_human_performance_metrics(1.5, humans, True) == (True, 75.0)
    assert calculate_human_performance_metrics(0.0, [5.0], False) == (False, 0.0)
    assert calculate_human_performance_metrics(1.0, [0.0, 2.0, 3.0], False) == (False, 33.3)  # rounded


def test_no_human_data_gives_none() -> None:
    assert calculate_human_performance_metrics(0.7, None, False) == (None, None)
    assert calculate_human_performance_metrics(0.7, [], False) == (None, None)
    assert calculate_human_performance_metrics(0.7, pd.DataFrame({"score": [np.nan]}), False) == (None, None)
    assert calculate_human_performance_metrics(None, [0.5, 0.6], False) == (None, None)


def test_missing_values_are_dropped_and_bad_frames_named() -> None:
    assert calculate_human_performance_metrics(2.0, [1.0, None, 3.0], False) == (False, 50.0)
    with pytest.raises(ValueError, match=r"'score' column.*\['accuracy'\]"):
        calculate_human_performance_metrics(0.5, pd.DataFrame({"accuracy": [0.4]}), False)
