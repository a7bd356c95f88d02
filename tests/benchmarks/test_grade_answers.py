"""A declared grade benchmark's answers (no options): extracted as integer grades 0..1000, as panda's are
0..5, and its truth labels in range for the items check."""

from __future__ import annotations

import pandas as pd
import pytest

from giant_assets.platform.checks import truth_out_of_range
from giant_assets.runs.extraction import extract_label


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ('{"answer": 7}', 7),
        ("The final answer is 12.", 12),
        ('{"grade": 3, "answer": "2"}', 2),
        ("Answer: 1001", None),  # past the largest grade
        ("no idea", None),
    ],
)
def test_declared_grade_answers(text: str, label: int | None) -> None:
    assert extract_label(text, benchmark_name="severity", options=None).label == label


def test_panda_keeps_its_isup_range() -> None:
    assert extract_label('{"isup_grade": 7}', benchmark_name="panda", options=None).label is None
    assert extract_label("nothing", benchmark_name="panda", options=None).reason == "no ISUP grade 0..5 found"
    assert (
        extract_label("nothing", benchmark_name="severity", options=None).reason == "no grade 0..1000 found"
    )


def test_truth_in_range_for_declared_grades() -> None:
    items = pd.DataFrame(
        {"benchmark_name": ["severity", "severity", "panda", "panda", "lung", "lung"],
         "truth_label": [0, 1001, 5, 6, 2, 3], "n_options": [0, 0, 0, 0, 2, 2]}
    )  # fmt: skip
    assert truth_out_of_range(items)["truth_label"].tolist() == [1001, 6, 3]
