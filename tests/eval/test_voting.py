"""Majority vote: hand cases for the tie and None rules, and the table version against the per-item one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giant_assets.eval.voting import majority_vote, vote_frame


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([3, 3, 1, 2, 3], 3),
        ([1, 2, 2, 1, 4], 1),  # 1 and 2 tie with two votes; run 0 said 1
        ([2, 1, 1, 2, 4], 2),  # same tie, run 0 said 2
        ([None, 4, 5, 5, 4], 4),  # run 0 did not vote; among tied 4/5 the earliest voter said 4
        ([None, None, 2], 2),
        ([None, None], None),
        ([], None),
        ([0, 0, 5], 0),  # label 0 is a real grade, not a missing vote
        ([np.int64(4), pd.NA, 4.0], 4),
    ],
)
def test_majority_vote_rules(labels, expected):
    assert majority_vote(labels) == expected


def _frame() -> pd.DataFrame:
    rows = [
        # item a: 2 votes for 3, 1 for 1, one run without a label
        ("tcga", "a", 0, 3), ("tcga", "a", 1, None), ("tcga", "a", 2, 1), ("tcga", "a", 3, 3),
        # item b: tie 2 vs 4, run 1 is the earliest voter (4) -> 4; runs listed out of order
        ("tcga", "b", 2, 2), ("tcga", "b", 1, 4), ("tcga", "b", 0, None),
        ("tcga", "b", 3, 2), ("tcga", "b", 4, 4),
        # item c: nobody answered
        ("gtex", "c", 0, None), ("gtex", "c", 1, None),
        # item d: single run with grade 0
        ("panda", "d", 0, 0),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["benchmark_name", "benchmark_id", "run_index", "predicted_label"])
    df["predicted_label"] = df["predicted_label"].astype("Int64")
    return df


def test_vote_frame_hand_computed():
    out = vote_frame(_frame(), ["benchmark_name", "benchmark_id"]).set_index("benchmark_id")
    assert out.loc["a", "predicted_label"] == 3
    assert out.loc["b", "predicted_label"] == 4
    assert out.loc["c", "predicted_label"] is pd.NA
    assert out.loc["d", "predicted_label"] == 0
    assert out["n_runs"].to_dict() == {"a": 4, "b": 5, "c": 2, "d": 1}
    assert out["n_votes"].to_dict() == {"a": 3, "b": 4, "c": 0, "d": 1}
    assert out.loc["a", "agreement"] == pytest.approx(2 / 3)
    assert out.loc["b", "agreement"] == pytest.approx(0.5)
    assert np.isnan(out.loc["c", "agreement"])
    assert out.loc["d", "agreement"] == 1.0
    assert str(out["predicted_label"].dtype) == "Int64"


# the claim is per item: fewer frames of more items (each vote_frame call costs ~0.1 s of pandas)
@settings(max_examples=20, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=6),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_vote_frame_agrees_with_majority_vote(items, random):
    rows = [(f"id{i}", run, label) for i, labels in enumerate(items) for run, label in enumerate(labels)]
    random.shuffle(rows)  # row order must not matter, only run indices
    df = pd.DataFrame(rows, columns=["item", "run", "label"]).astype({"label": "Int64"})
    out = vote_frame(df, ["item"], run_col="run", label_col="label").set_index("item")
    for i, labels in enumerate(items):
        row = out.loc[f"id{i}"]
        expected = majority_vote(labels)
        assert (None if row["label"] is pd.NA else int(row["label"])) == expected
        votes = [x for x in labels if x is not None]
        assert (row["n_runs"], row["n_votes"]) == (len(labels), len(votes))
        if votes:
            assert row["agreement"] == pytest.approx(votes.count(expected) / len(votes))


def test_vote_frame_errors_name_the_problem():
    df = _frame()
    with pytest.raises(ValueError, match=r"missing column\(s\) \['run'\]"):
        vote_frame(df, ["benchmark_id"], run_col="run")
    dup = pd.concat([df, df.iloc[[0]]])
    with pytest.raises(ValueError, match="1 duplicate .* 'benchmark_id': 'a'"):
        vote_frame(dup, ["benchmark_name", "benchmark_id"])
