"""Answer extraction on realistic model outputs, dataset-aware (panda grades vs option indices)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from giant_assets.eval.extraction import extract_label

ORGANS = ["Lung", "Liver", "Kidney", "Skin", "Colon", "Breast"]  # 6 options: no letters
FOUR = ["Adenocarcinoma", "Squamous cell carcinoma", "Small cell carcinoma", "Carcinoid tumor"]
LUNGS = ["Lung", "Lung adenocarcinoma", "Liver", "Brain"]
GRADES = ["Grade 1", "Grade 2", "Grade 3"]

PANDA_CASES = [
    ("bare-json", '{"isup_grade": 3}', 3),
    ("fenced-json", 'Here is my answer:\n```json\n{"isup_grade": 4, "reasoning": "cribriform"}\n```', 4),
    ("json-prose-after", '{"isup_grade": 0}\nNo carcinoma seen in the crops.', 0),
    ("json-string-value", '{"isup_grade": "2"}', 2),
    ("last-json-wins", '{"isup_grade": 1} ... on reflection {"isup_grade": 2}', 2),
    ("truncated-json", '{"isup_grade": 5, "reasoning": "sheets of tumour without gland', 5),
    ("isup-phrase", "The ISUP grade is 4 given the fused glands.", 4),
    ("gleason-then-isup", "Gleason score 4+3=7, which is ISUP grade group 3.", 3),
    ("gleason-only-pattern", "Predominantly Gleason pattern 4; final answer: 3", 3),
    ("integer-fallback", "2", 2),
    ("integer-in-prose", "I would assign grade 5 here.", 5),
    ("markdown-bold", "**ISUP grade: 1**", 1),
    ("json-out-of-range", '{"isup_grade": 7}', None),
    ("explicit-out-of-range", "Final answer: 9", None),
    ("no-number", "The tissue is benign-appearing stroma.", None),
    ("empty", "", None),
    ("whitespace", "   \n ", None),
    ("gleason-sum-not-grade", "Gleason score 4+4=8", None),
    ("percent-not-grade", "Tumour occupies 5% of the core.", None),
]

OPTION_CASES = [
    ("json-int", ORGANS, '{"answer": 2}', 2),
    ("json-string-int", ORGANS, '{"answer": "3"}', 3),
    ("json-option-text", ORGANS, '{"answer": "kidney"}', 3),
    ("json-fenced-prose", ORGANS, 'After review:\n```json\n{"answer": 5}\n```\nConfident.', 5),
    ("bare-int", ORGANS, "4", 4),
    ("option-text", ORGANS, "This is liver parenchyma with portal tracts.", 2),
    ("option-text-case", ORGANS, "BREAST tissue with ducts", 6),
    ("option-n-not-m", ORGANS, "Option 3, not 2.", 3),
    ("answer-is", ORGANS, "Looking at the glands, the answer is 5.", 5),
    ("markdown-answer", ORGANS, "**Answer: 2**", 2),
    ("answer-then-prose", ORGANS, "Answer: 1\n\nThe alveolar spaces are lined by pneumocytes.", 1),
    ("final-answer-overrides", ORGANS, "Initially I thought 2. Final answer: 4", 4),
    ("explicit-out-of-range", ORGANS, "Answer: 7", None),
    ("json-out-of-range", ORGANS, '{"answer": 0}', None),
    ("letter-ignored-for-6", ORGANS, "C", None),
    ("number-with-unit", ORGANS, "The lesion measures 3 mm across.", None),
    ("percent", ORGANS, "About 4% of cells are mitotic.", None),
    ("case-id-digits", ORGANS, "Slide TCGA-05-4244 shows tissue.", None),
    ("empty", ORGANS, "", None),
    ("letter-json", FOUR, '{"answer": "B"}', 2),
    ("letter-bare", FOUR, "C", 3),
    ("letter-paren", FOUR, "I pick (D) because of the nesting.", 4),
    ("letter-after-article", FOUR, "A tumor with glands is seen. Answer: B", 2),
    ("letter-option-prefix", FOUR, "Option A is most consistent.", 1),
    ("four-option-text", FOUR, "Findings favour squamous cell carcinoma with keratin pearls.", 2),
    ("four-number", FOUR, "Answer: 4", 4),
    ("four-letter-out-of-range", FOUR, "Answer: E", None),
    ("longest-option-wins", LUNGS, "Lung adenocarcinoma with lepidic growth.", 2),
    ("shorter-option", LUNGS, "Normal lung with alveoli.", 1),
    ("option-text-contains-number", GRADES, "Grade 2", 2),
    ("answer-number-vs-option", GRADES, "The answer is 3", 3),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in PANDA_CASES], ids=[c[0] for c in PANDA_CASES])
def test_panda(text: str, expected: int | None) -> None:
    result = extract_label(text, benchmark_name="panda", options=None)
    assert result.label == expected, result.reason
    assert result.reason and result.raw == text


@pytest.mark.parametrize(
    ("options", "text", "expected"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES]
)
def test_option_tasks(options: list[str], text: str, expected: int | None) -> None:
    result = extract_label(text, benchmark_name="tcga", options=options)
    assert result.label == expected, result.reason
    assert result.reason


def test_panda_options_are_ignored_and_option_task_needs_options() -> None:
    assert extract_label('{"isup_grade": 2}', benchmark_name="panda", options=["x"]).label == 2
    with pytest.raises(ValueError, match="options"):
        extract_label("1", benchmark_name="gtex", options=None)
    with pytest.raises(ValueError, match="options"):
        extract_label("1", benchmark_name="tcga", options=[])


def test_reason_says_why_nothing_matched() -> None:
    result = extract_label("Answer: 7", benchmark_name="tcga", options=ORGANS)
    assert result.label is None and "7" in result.reason and "1..6" in result.reason
    assert "empty" in extract_label("", benchmark_name="panda", options=None).reason


option_lists = st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=2, max_size=30)


@given(options=option_lists, data=st.data())
def test_json_answer_always_extracted(options: list[str], data: st.DataObject) -> None:
    k = data.draw(st.integers(1, len(options)))
    assert extract_label(json.dumps({"answer": k}), benchmark_name="gtex", options=options).label == k


@given(text=st.text(max_size=300), options=option_lists)
def test_arbitrary_text_never_raises(text: str, options: list[str]) -> None:
    result = extract_label(text, benchmark_name="tcga", options=options)
    assert result.label is None or 1 <= result.label <= len(options)
    grade = extract_label(text, benchmark_name="panda", options=None)
    assert grade.label is None or 0 <= grade.label <= 5
