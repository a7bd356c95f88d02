"""Answer extraction on realistic model outputs, dataset-aware (panda grades vs option indices)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giant_assets.runs.extraction import extract_label

ORGANS = ["Lung", "Liver", "Kidney", "Skin", "Colon", "Breast"]  # 6 options: letters are not labels
FOUR = ["Adenocarcinoma", "Squamous cell carcinoma", "Small cell carcinoma", "Carcinoid tumor"]
LUNGS = ["Lung", "Lung adenocarcinoma", "Liver", "Brain"]
GRADES = ["Grade 1", "Grade 2", "Grade 3"]

PANDA_CASES = [
    ("bare-json", '{"isup_grade": 3}', 3),
    ("fenced-json", 'Here is my answer:\n```json\n{"isup_grade": 4, "reasoning": "cribriform"}\n```', 4),
    ("json-prose-after", '{"isup_grade": 0}\nNo carcinoma seen in the crops.', 0),
    ("json-prose-before", "Fused and poorly formed glands throughout.\n" + '{"isup_grade": 4}', 4),
    ("json-string-value", '{"isup_grade": "2"}', 2),
    ("json-python-quotes", "{'isup_grade': 1, 'reasoning': 'small well-formed glands'}", 1),
    ("json-float-integral", '{"isup_grade": 2.0}', 2),
    ("json-grade-group-text", '{"isup_grade": "Grade Group 3 (Gleason 4+3=7)"}', 3),
    ("json-nested", '{"final_answer": {"isup_grade": 2, "gleason": "3+4"}}', 2),
    ("json-reasoning-first", '{"reasoning": "pattern 4 in 60%", "isup_grade": 3}', 3),
    ("last-json-wins", '{"isup_grade": 1} ... on reflection {"isup_grade": 2}', 2),
    ("truncated-json", '{"isup_grade": 5, "reasoning": "sheets of tumour without gland', 5),
    ("isup-grade-4", "ISUP grade 4", 4),
    ("isup-phrase", "The ISUP grade is 4 given the fused glands.", 4),
    ("gleason-then-isup", "Gleason score 4+3=7, ISUP grade group 3", 3),
    ("gleason-then-gg-parens", "Gleason 3+4 = 7 (Grade Group 2)", 2),
    ("gleason-pattern-then-final", "Predominantly Gleason pattern 4; final answer: 3", 3),
    ("final-answer-gleason-tail", "Final answer: 3 (Gleason 4+3=7)", 3),
    ("integer-in-prose", "I would assign grade 5 here.", 5),
    ("markdown-bold", "**ISUP grade: 1**", 1),
    ("benign-isup-0", "Benign prostatic tissue only. ISUP grade 0.", 0),
    ("negated-grade", "The ISUP grade is not 2; it is 3.", 3),
    ("negated-grade-group", "Not grade group 2 but grade group 4.", 4),
    ("json-out-of-range", '{"isup_grade": 7}', None),
    ("json-half-grade", '{"isup_grade": 2.5}', None),
    ("json-null", '{"isup_grade": null}', 0),  # benign by default (see test_panda_null_grade_policy)
    ("isup-out-of-range", "ISUP grade 6", None),
    ("explicit-out-of-range", "Final answer: 9", None),
    ("bare-out-of-range", "7", None),
    ("no-number", "The tissue is benign-appearing stroma.", None),
    ("empty", "", None),
    ("whitespace", "   \n ", None),
    ("gleason-sum-not-grade", "Gleason score 4+4=8", None),
    ("gleason-only-final", "Final answer: Gleason 4+3=7", None),
    ("percent-not-grade", "Tumour occupies 5% of the core.", None),
    ("range-not-grade", "grade 3-4", None),
    ("gleason-7-then-gg", "Gleason 7 (4+3), grade group 3", 3),
    ("gleason-spaced-then-isup", "Gleason score of 3 + 4 = 7; ISUP 2", 2),
    ("gleason-6-isup-1-parens", "Gleason 3+3=6 (ISUP 1)", 1),
    ("gleason-arrow-isup", "Gleason score: 4+5=9 → ISUP grade 5", 5),
    ("gleason-grade-group", "Gleason grade group 2", 2),
    ("gg-abbrev", "GG4", 4),
    ("answer-benign-0", "Answer: 0 (benign)", 0),
    ("final-isup-bold", "final ISUP grade: **4**", 4),
    ("isup-n-not-m", "ISUP grade 3, not 4", 3),
    ("final-answer-json", 'The final answer is {"isup_grade": 3}', 3),
    ("json-gleason-key-ignored", '{"gleason_score": "4+3", "isup_grade": "3"}', 3),
    ("fenced-truncated-json", '```json\n{"isup_grade": 2,\n "reasoning": "small glands', 2),
    ("patterns-not-grades", "Gleason pattern 3 and pattern 4 present; overall grade 3", 3),
    ("pattern-list-not-grades", "Gleason patterns 3 and 4; I assign 2", 2),
    ("primary-secondary-pattern", "Primary pattern 4, secondary pattern 3: grade 3", 3),
    ("json-gleason-only", '{"gleason": 7}', None),
    ("gleason-score-7-only", "Gleason score 7", None),
    ("gleason-9-only", "Gleason 5+4=9", None),
]

OPTION_CASES = [
    ("json-int", ORGANS, '{"answer": 2}', 2),
    ("json-string-int", ORGANS, '{"answer": "3"}', 3),
    ("json-option-text", ORGANS, '{"answer": "kidney"}', 3),
    ("json-fenced-prose", ORGANS, 'After review:\n```json\n{"answer": 5}\n```\nConfident.', 5),
    ("json-extra-keys", ORGANS, '{"answer": 2, "confidence": 0.9}', 2),
    ("json-choice-key", FOUR, '{"choice": "D"}', 4),
    ("json-truncated", FOUR, '{"answer": 3, "reasoning": "keratin pe', 3),
    ("json-truncated-letter", FOUR, '{"answer": "B", "reasoning": "The', 2),
    ("json-option-prefix", FOUR, '{"answer": "Option 2"}', 2),
    ("json-lettered-option-text", FOUR, '{"answer": "(B) Squamous cell carcinoma"}', 2),
    ("bare-int", ORGANS, "3", 3),
    ("bare-int-period", ORGANS, "4.", 4),
    ("option-text", ORGANS, "This is liver parenchyma with portal tracts.", 2),
    ("option-text-case", ORGANS, "BREAST tissue with ducts", 6),
    ("option-n-not-m", ORGANS, "Option 3, not 2", 3),
    ("negated-option-text", ORGANS, "It is not liver; it is kidney.", 3),
    ("negated-number", ORGANS, "The answer is not 2; it is 3.", 3),
    ("answer-is", ORGANS, "Looking at the glands, the answer is 5.", 5),
    ("markdown-answer", ORGANS, "**Answer: 2**", 2),
    ("answer-then-prose", ORGANS, "Answer: 1\n\nThe alveolar spaces are lined by pneumocytes.", 1),
    ("answer-on-next-line", ORGANS, "Answer:\n\n2", 2),
    ("final-answer-overrides", ORGANS, "Initially I thought 2. Final answer: 4", 4),
    ("answer-number-then-text", ORGANS, "Answer: 3 (Kidney)", 3),
    ("i-choose-option", ORGANS, "I choose option 2.", 2),
    ("explicit-out-of-range-6", ORGANS, "Answer: 7", None),
    ("json-out-of-range", ORGANS, '{"answer": 0}', None),
    ("letter-ignored-for-6", ORGANS, "C", None),
    ("letter-json-ignored-for-6", ORGANS, '{"answer": "B"}', None),
    ("number-with-unit", ORGANS, "The lesion measures 3 mm across.", None),
    ("percent", ORGANS, "95%", None),
    ("case-id-digits", ORGANS, "TCGA-05-4244", None),
    ("empty", ORGANS, "", None),
    ("letter-json", FOUR, '{"answer": "B"}', 2),
    ("letter-json-lowercase", FOUR, '{"answer": "b"}', 2),
    ("letter-bare", FOUR, "C", 3),
    ("letter-paren", FOUR, "I pick (D) because of the nesting.", 4),
    ("letter-list-line", FOUR, "B) Squamous cell carcinoma", 2),
    ("letter-after-article", FOUR, "A tumor is seen with keratinisation. Answer: B", 2),
    ("letter-answer-is-bold", FOUR, "The answer is **C**", 3),
    ("letter-answer-a", FOUR, "My answer is (A).", 1),
    ("letter-option-prefix", FOUR, "Option A is most consistent.", 1),
    ("letter-b-cell-not-b", FOUR, "B-cell lymphoma is unlikely. Answer: 1", 1),
    ("letter-cd20-not-d", FOUR, "CD20 negative; answer: C", 3),
    ("four-option-text", FOUR, "Findings favour squamous cell carcinoma with keratin pearls.", 2),
    ("four-option-text-explicit", FOUR, "Most likely answer: carcinoid tumor", 4),
    ("four-number", FOUR, "Answer: 4", 4),
    ("four-explicit-out-of-range", FOUR, "Answer: 7", None),
    ("four-letter-out-of-range", FOUR, "Answer: E", None),
    ("four-json-out-of-range", FOUR, '{"answer": 5}', None),
    ("four-answer-range", FOUR, "Answer: 2-3", None),
    ("longest-option-wins", LUNGS, "Lung adenocarcinoma with lepidic growth.", 2),
    ("hyphen-equals-space", FOUR, "Findings favour small-cell carcinoma.", 3),
    ("hyphen-json-option-text", FOUR, '{"answer": "small-cell carcinoma"}', 3),
    ("non-prefix-is-not-the-option", FOUR, "Consistent with non-small cell carcinoma.", None),
    ("longest-option-upper", LUNGS, "LUNG ADENOCARCINOMA", 2),
    ("shorter-option", LUNGS, "Normal lung with alveoli.", 1),
    ("option-text-contains-number", GRADES, "Grade 2", 2),
    ("answer-number-vs-option", GRADES, "The answer is 3", 3),
    ("json-overlapping-option-text", LUNGS, '{"answer": "Lung adenocarcinoma"}', 2),
    ("json-shorter-option-text", LUNGS, '{"answer": "lung"}', 1),
    ("answer-is-not-n-it-is-m", FOUR, "The answer is not 2; it is 4", 4),
    ("answer-not-n-but-m", FOUR, "Answer: not 2 but 4", 4),
    ("letter-n-not-m", FOUR, "The answer is B, not C.", 2),
    ("explicit-beats-later-option-text", FOUR, "Answer: C. Squamous cell carcinoma would show keratin.", 3),
    ("option-text-then-option-number", FOUR, "Most likely squamous cell carcinoma (option 2).", 2),
    ("negated-option-text-4", FOUR, "Not adenocarcinoma. Squamous cell carcinoma.", 2),
    ("answer-option-n", FOUR, "Answer: Option 3", 3),
    ("counts-before-answer", FOUR, "After reviewing 3 regions at 20x, the answer is 4.", 4),
    ("json-letter-with-text", FOUR, '{"answer": "C) Small cell carcinoma"}', 3),
    ("final-answer-bold-letter-text", FOUR, "**Final Answer:** (B) Squamous cell carcinoma", 2),
    ("heading-then-letter-line", FOUR, "### Answer\nB", 2),
    ("bold-heading-letter-line", FOUR, "**Answer**\n\nC.\n\nThe nests are small and blue.", 3),
    ("lowercase-letter-line", FOUR, "Reasoning done\nb\n", None),
    ("im-going-with", FOUR, "I'm going with D.", 4),
    ("id-pick", FOUR, "I'd pick C", 3),
    ("json-bool", FOUR, '{"answer": true}', None),
    ("json-list", FOUR, '{"answer": [2]}', None),
    ("json-not-an-option", FOUR, '{"answer": "none of the above"}', None),
    ("cannot-determine", FOUR, "I cannot determine the answer.", None),
    ("last-explicit-wins", ORGANS, "Answer: 2\nAnswer: 5", 5),
    ("percent-then-answer", ORGANS, "I am 95% sure the answer is 4", 4),
    ("ids-units-then-answer", ORGANS, "Slide TCGA-05-4244, 95% tumour, 3 mm focus. Answer: 4", 4),
    ("fraction-not-label", ORGANS, "3/6", None),
    ("conclusion-option-text", ORGANS, "1. Look at the slide\n2. Zoom\nConclusion: kidney", 3),
]

# Inputs that once raised instead of returning None or a label: unhashable keys in a Python-style dict,
# non-finite JSON numbers, nesting deeper than the recursion limit.
HOSTILE = {
    "list-key": "{[1]: 2}",
    "dict-key": "{{}: 1}",
    "set-of-lists": "{'a': {1, [2]}}",
    "json-infinity": '{"answer": 1e400}',
    "json-nan": '{"answer": NaN}',
    "json-neg-infinity": '{"isup_grade": -Infinity}',
    "python-infinity": "{'answer': 1e999}",
    "deep-arrays": '{"a":' + "[" * 5000,
    "deep-objects": '{"a":' * 1500 + "1" + "}" * 1500,
}


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in PANDA_CASES], ids=[c[0] for c in PANDA_CASES])
def test_panda(text: str, expected: int | None) -> None:
    result = extract_label(text, benchmark_name="panda", options=None)
    assert result.label == expected, result.reason
    assert result.reason and result.raw == text


@pytest.mark.parametrize("grade", range(6))
def test_panda_integer_fallback_covers_every_grade(grade: int) -> None:
    assert extract_label(str(grade), benchmark_name="panda", options=None).label == grade
    assert extract_label(f"I'd say {grade}.", benchmark_name="panda", options=None).label == grade


@pytest.mark.parametrize(
    ("options", "text", "expected"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES]
)
def test_option_tasks(options: list[str], text: str, expected: int | None) -> None:
    result = extract_label(text, benchmark_name="tcga", options=options)
    assert result.label == expected, result.reason
    assert result.reason and result.raw == text


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_json_returns_instead_of_raising(text: str) -> None:
    for name, options in (("panda", None), ("tcga", FOUR)):
        result = extract_label(text, benchmark_name=name, options=options)
        assert result.reason
        assert result.label is None or 0 <= result.label <= 5


def test_panda_options_are_ignored_and_option_task_needs_options() -> None:
    assert extract_label('{"isup_grade": 2}', benchmark_name="panda", options=["x"]).label == 2
    with pytest.raises(ValueError, match="options"):
        extract_label("1", benchmark_name="gtex", options=None)
    with pytest.raises(ValueError, match="options"):
        extract_label("1", benchmark_name="tcga", options=[])


def test_reason_says_why_nothing_matched() -> None:
    result = extract_label("Answer: 7", benchmark_name="tcga", options=ORGANS)
    assert result.label is None and "7" in result.reason and "1..6" in result.reason
    result = extract_label('{"isup_grade": 7}', benchmark_name="panda", options=None)
    assert result.label is None and "7" in result.reason and "0..5" in result.reason
    non_finite = extract_label('{"answer": NaN}', benchmark_name="tcga", options=FOUR)
    assert non_finite.label is None and "not a valid option 1..4" in non_finite.reason
    assert "empty" in extract_label("", benchmark_name="panda", options=None).reason


option_lists = st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=2, max_size=30)
words = st.text("abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10)
distinct_option_texts = st.lists(
    st.lists(words, min_size=1, max_size=3).map(" ".join), min_size=2, max_size=12, unique=True
)
json_ish = st.text(alphabet="{}[]:,\"'0123456789.-+eE aAbBnswrNIfinty_\n", max_size=200)


@given(options=option_lists, data=st.data())
def test_json_answer_always_extracted(options: list[str], data: st.DataObject) -> None:
    k = data.draw(st.integers(1, len(options)))
    assert extract_label(json.dumps({"answer": k}), benchmark_name="gtex", options=options).label == k


@given(options=distinct_option_texts, data=st.data())
def test_json_option_text_extracts_its_index(options: list[str], data: st.DataObject) -> None:
    k = data.draw(st.integers(1, len(options)))
    text = json.dumps({"answer": options[k - 1].upper()})
    assert extract_label(text, benchmark_name="tcga", options=options).label == k


@given(grade=st.integers(0, 5), before=st.text(max_size=80), after=st.text(max_size=80))
def test_panda_json_grade_wins_over_surrounding_prose(grade: int, before: str, after: str) -> None:
    before, after = before.replace("{", "("), after.replace("{", "(")
    text = f'{before}\n```json\n{{"isup_grade": {grade}}}\n```\n{after}'
    assert extract_label(text, benchmark_name="panda", options=None).label == grade


@settings(max_examples=200)
@given(text=st.one_of(st.text(max_size=300), json_ish), options=option_lists)
def test_arbitrary_text_never_raises(text: str, options: list[str]) -> None:
    result = extract_label(text, benchmark_name="tcga", options=options)
    assert result.label is None or 1 <= result.label <= len(options)
    assert result.reason
    grade = extract_label(text, benchmark_name="panda", options=None)
    assert grade.label is None or 0 <= grade.label <= 5


@pytest.mark.parametrize(
    ("text", "options", "label", "how"),
    [
        ('{"answer": "B"}', FOUR, 2, "JSON 'answer'"),
        ('{"isup_grade": 4}', None, 4, "JSON 'isup_grade'"),
        ('{"answer": 3, "reasoning": "keratin pe', FOUR, 3, "JSON-like 'answer' (object not parseable)"),
        ("Looking closely, the answer is C.", FOUR, 3, 'explicit "answer is": letter "C"'),
        ("Final answer: 2", ORGANS, 2, 'explicit "Final answer"'),
        ("This is liver parenchyma.", ORGANS, 2, 'first marked candidate: option text "liver"'),
        ("Gleason score 4+3=7, ISUP grade group 3", None, 3, 'first marked candidate: "ISUP grade group 3"'),
        ("Maybe 4, or 5", ORGANS, 4, "first number in range: number 4 -> option 4 (also mentioned: option 5"),
        ('{"answer": 9}', FOUR, None, "JSON 'answer' value 9 is not a valid option 1..4"),
        ("Answer: 7", FOUR, None, 'explicit "Answer" names number 7, not a valid option 1..4'),
        ("No tumour seen.", FOUR, None, "no option number, letter or option text found"),
        ("No tumour seen.", None, None, "no ISUP grade 0..5 found"),
    ],
)
def test_reason_names_the_rule_that_decided(
    text: str, options: list[str] | None, label: int | None, how: str
) -> None:
    result = extract_label(text, benchmark_name="tcga" if options else "panda", options=options)
    assert result.label == label
    assert result.reason.startswith(how), result.reason


LONG_PROSE = (
    "At level 2 I cropped region 3 of 12 (x=1024, y=2048) and saw glands; B-cell infiltrate is absent. "
    "A tumor is seen with 40% necrosis. "
) * 300


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("text", "four", "panda"),
    [
        (LONG_PROSE, 2, 2),  # ~40k chars of reasoning with many numbers: took ~2 s (quadratic scans)
        (LONG_PROSE + "\nFinal answer: C", 3, 2),
        ("A " * 20_000, None, None),  # once ~20 s: each letter re-scanned the whole prefix
        ("1 " * 20_000, 1, 1),  # once ~30 s: each number re-scanned the whole prefix
        ("{" * 20_000, None, None),  # once ~20 s: a brace-matching scan per unclosed brace
        ('{"a":' * 30_000 + "1" + "}" * 30_000, 1, 1),  # once ~25 s: each "a" copied its whole line
    ],
    ids=["prose", "prose-then-answer", "letters", "numbers", "braces", "one-line-of-letters"],
)
def test_long_outputs_take_linear_time(text: str, four: int | None, panda: int | None) -> None:
    assert extract_label(text, benchmark_name="tcga", options=FOUR).label == four
    assert extract_label(text, benchmark_name="panda", options=None).label == panda


# --- hostile answers: non-ASCII digits, lists of every option, PANDA null grades -----------------------


@pytest.mark.parametrize(
    "text",
    ["٣", "The answer is ٣", '{"answer": "٣"}', "Answer: ३", "Final answer: ３", "option ³", "(٢)"],
)
def test_non_ascii_digits_are_never_answers(text: str) -> None:
    assert extract_label(text, benchmark_name="tcga", options=FOUR).label is None
    assert extract_label(text, benchmark_name="panda", options=None).label is None


@pytest.mark.parametrize(
    ("options", "text"),
    [
        (FOUR, "1, 2, 3 or 4"),
        (FOUR, "The answer is 1, 2, 3 or 4."),
        (FOUR, '{"answer": "1, 2, 3, or 4"}'),
        (FOUR, "Answer: A, B, C or D"),
        (FOUR, "Adenocarcinoma, squamous cell carcinoma, small cell carcinoma or carcinoid tumor"),
        (
            FOUR,
            '{"answer": "Adenocarcinoma / Squamous cell carcinoma / Small cell carcinoma / Carcinoid tumor"}',
        ),
        (["Low", "Medium", "High", "Cannot determine"], "1) Low\n2) Medium\n3) High\n4) Cannot determine"),
        (["Yes", "No"], "Yes or no."),
        (None, "ISUP grade 0, 1, 2, 3, 4 or 5"),
        (None, '{"isup_grade": "0-5"}'),
    ],
)
def test_an_answer_listing_every_option_is_no_answer(options: list[str] | None, text: str) -> None:
    result = extract_label(text, benchmark_name="tcga" if options else "panda", options=options)
    assert result.label is None, result
    if "0-5" not in text:
        assert "lists every option" in result.reason


@pytest.mark.parametrize(
    ("options", "text", "expected"),
    [
        (FOUR, "Between 1, 2 and 3, the answer is 3.", 3),  # not every option
        (FOUR, "Options 1, 2, 3 or 4 were considered. Final answer: 2", 2),  # the last statement decides
        (FOUR, '{"considered": "1, 2, 3, 4", "answer": 4}', 4),
        (None, "Grades 0 to 5 are possible; ISUP grade 2.", 2),
    ],
)
def test_a_choice_after_listing_the_options_still_counts(
    options: list[str] | None, text: str, expected: int
) -> None:
    assert (
        extract_label(text, benchmark_name="tcga" if options else "panda", options=options).label == expected
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"isup_grade": null}',
        '```json\n{"isup_grade": null, "reasoning": "benign glands only"}\n```',
        "{'isup_grade': None}",
        '{"isup_grade": "null"}',
        '{"isup_grade": "None"}',
        '{"final": {"isup_grade": null}}',
        '{"isup_grade": null, "reasoning": "no carcinoma seen in any',  # truncated
    ],
)
def test_panda_null_grade_policy(text: str) -> None:
    benign = extract_label(text, benchmark_name="panda", options=None)
    assert benign.label == 0 and benign.reason.startswith("panda_null_grade")
    assert benign == extract_label(text, benchmark_name="panda", options=None, panda_null_grade="benign")
    strict = extract_label(text, benchmark_name="panda", options=None, panda_null_grade="no_answer")
    assert strict.label is None and strict.reason.startswith("panda_null_grade")


def test_null_outside_the_isup_grade_is_not_a_grade() -> None:
    for text in ('{"answer": null}', '{"isup_grade": 3, "gleason": null}', "The grade is null."):
        result = extract_label(text, benchmark_name="panda", options=None)
        assert not result.reason.startswith("panda_null_grade"), result
    assert (
        extract_label('{"isup_grade": 3, "gleason": null}', benchmark_name="panda", options=None).label == 3
    )
    assert extract_label('{"answer": null}', benchmark_name="tcga", options=FOUR).label is None
    with pytest.raises(ValueError, match="panda_null_grade must be one of"):
        extract_label("1", benchmark_name="panda", options=None, panda_null_grade="zero")


def test_panda_reads_isup_grade_before_an_answer_key_in_the_same_object():
    """The spec reads ``obj["isup_grade"]`` (spec 000, PANDA extraction); an ``answer`` key beside it does
    not decide. Mutation: ``answer`` searched before ``isup_grade`` gives 3."""
    for text in ('{"answer": 3, "isup_grade": 2}', '{"isup_grade": 2, "answer": 3}'):
        found = extract_label(text, benchmark_name="panda", options=None)
        assert (found.label, found.reason) == (2, "JSON 'isup_grade': grade 2")


GRADES_OF_DIFFERENTIATION = [
    "Well-differentiated",
    "Moderately differentiated",
    "Poorly differentiated",
    "Undifferentiated",
]


@pytest.mark.parametrize(
    ("text", "benchmark", "options", "label"),
    [
        # an option written with a hyphen matches the same words written with a space (and vice versa)
        ("The answer is well differentiated.", "tcga_expert_vqa", GRADES_OF_DIFFERENTIATION, 1),
        ("The glands are well differentiated throughout.", "tcga_expert_vqa", GRADES_OF_DIFFERENTIATION, 1),
        ("Lesion: small-cell carcinoma pattern.", "tcga_slidebench", FOUR, 3),
        # "answer is not 2 ..." is no statement: the earlier one decides, not a number in its reason
        (
            "The answer is 1. The answer is not 2 because 4 of the crops show glands.",
            "tcga_slidebench",
            FOUR,
            1,
        ),
        # the article "A" after a statement is no letter answer; the option text later in the text is
        (
            "Final answer: A tumor with keratin pearls, i.e. squamous cell carcinoma.",
            "tcga_slidebench",
            FOUR,
            2,
        ),
        # unparseable objects: the last key decides, as for parsed ones
        (
            '{"isup_grade": 2, "reasoning": "first look" ... on reflection '
            '{"isup_grade": 4, "reasoning": "sheets',
            "panda",
            None,
            4,
        ),
        # nested objects: the shallowest key wins, whatever comes first in the text
        ('{"details": {"notes": {"isup_grade": 1}}, "summary": {"isup_grade": 3}}', "panda", None, 3),
    ],
    ids=[
        "hyphen-in-option",
        "hyphen-whole-text",
        "space-in-option",
        "negated-statement",
        "article-a",
        "last-truncated-key",
        "shallowest-key",
    ],  # fmt: skip
)
def test_rules_found_unguarded_by_the_mutation_audit(text, benchmark, options, label):
    """Each case fails under one mutation of extraction.py that the other tests let pass: hyphen split
    dropped, the ``answer is not`` skip dropped, the article "A" read as a letter, the unparseable-object
    fallback read first-to-last, nested keys searched depth-first."""
    assert extract_label(text, benchmark_name=benchmark, options=options).label == label
