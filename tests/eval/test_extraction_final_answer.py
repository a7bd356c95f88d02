"""The scored label is the answer a long reply ends with, read by the same scanner as the GIANT agent.

Replies of 25 KB and more with several candidate objects: an object quoted while reasoning (or the
prompt's example echoed back) comes first, the final answer last, in the released prompts' formats
(PANDA's ``isup_grade`` block, option numbers, option text).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from giant_assets.agents.giant import parse_action
from giant_assets.core.jsonscan import MAX_PARSED_CHARS
from giant_assets.runs.extraction import extract_label

ORGANS = ["Lung", "Liver", "Kidney", "Skin", "Colon", "Breast"]
FOUR = ["Adenocarcinoma", "Squamous cell carcinoma", "Small cell carcinoma", "Carcinoid tumor"]
# prose without digits, braces or option words: padding that is never a candidate itself
PROSE = "The crop shows tissue architecture under higher magnification; reviewing the region again. "


def padding(chars: int) -> str:
    return (PROSE * (chars // len(PROSE) + 1))[:chars]


def test_a_long_reply_is_scored_by_its_final_answer_not_an_early_quoted_one() -> None:
    text = (
        'The prompt says to reply like {"answer": 1} for option one. '
        + padding(25_000)
        + '\nFinal answer:\n```json\n{"answer": 3}\n```\n'
    )
    assert len(text) > 25_000
    found = extract_label(text, benchmark_name="tcga_slidebench", options=FOUR)
    assert (found.label, found.reason) == (3, "JSON 'answer': option 3")
    assert parse_action(text).answer == "3"  # the agent's parser reads the same


def test_panda_report_ends_with_the_released_isup_block() -> None:
    early = '{"primary_pattern": 3, "secondary_pattern": 4, "total_score": 7, "isup_grade": 2}'
    final = '{\n  "primary_pattern": 4,\n  "secondary_pattern": 4,\n  "total_score": 8,\n  "isup_grade": 4\n}'
    text = f"At first glance {early} seemed likely. {padding(30_000)}\n```json\n{final}\n```"
    found = extract_label(text, benchmark_name="panda", options=None)
    assert (found.label, found.reason) == (4, "JSON 'isup_grade': grade 4")


def test_final_option_text_and_python_literal_after_long_prose() -> None:
    text = '{"answer": "Lung"} was my first guess. ' + padding(40_000) + '\n{"answer": "Kidney"}'
    assert extract_label(text, benchmark_name="gtex", options=ORGANS).label == 3
    literal = '{"answer": 2} ' + padding(26_000) + "\nSo: {'answer': 5, 'reasoning': 'keratin pearls'}"
    assert extract_label(literal, benchmark_name="gtex", options=ORGANS).label == 5


def test_a_truncated_final_object_is_read_from_the_end_of_a_long_reply() -> None:
    text = '{"answer": 1} ' + padding(70_000) + '\n{"answer": 4, "reasoning": "sheets of small cells wi'
    found = extract_label(text, benchmark_name="tcga", options=FOUR)
    assert found.label == 4 and found.reason.startswith("JSON-like")


def test_json_is_looked_for_in_the_last_64_kib_only() -> None:
    """The bound is the shared scanner's: a reply's only JSON further back than 64 KiB is not parsed."""
    text = '{"answer": 2}' + padding(MAX_PARSED_CHARS) + "\nI will go with option 4."
    found = extract_label(text, benchmark_name="tcga", options=FOUR)
    assert (found.label, found.reason.startswith("explicit")) == (4, True)


answer_objects = st.integers(1, 4).flatmap(
    lambda k: st.sampled_from(
        [
            json.dumps({"answer": k}),
            json.dumps({"action": "answer", "answer": k}),
            json.dumps({"answer": str(k), "reasoning": "glands {fused} here"}),
            "```json\n" + json.dumps({"answer": k}, indent=2) + "\n```",
        ]
    ).map(lambda obj: (k, obj))
)


@settings(max_examples=60, deadline=None)
@given(
    answers=st.lists(answer_objects, min_size=2, max_size=6),
    gaps=st.lists(st.integers(0, 12_000), min_size=6, max_size=6),
)
def test_extraction_agrees_with_the_agents_parser_on_long_multi_answer_replies(
    answers: list[tuple[int, str]], gaps: list[int]
) -> None:
    text = "".join(padding(gap) + "\n" + obj + "\n" for (_, obj), gap in zip(answers, gaps, strict=False))
    text = padding(max(0, 25_000 - len(text))) + text  # 25 KB at least, the answers near the end
    last = answers[-1][0]
    action = parse_action(text)
    assert action is not None and action.kind == "answer"
    by_agent = extract_label(action.answer, benchmark_name="tcga", options=FOUR).label
    assert extract_label(text, benchmark_name="tcga", options=FOUR).label == by_agent == last


# --- a truncated final answer after an earlier complete object, both inside the scanned 64 KiB ---------

LIKE = "JSON-like"  # the reason of an answer read from an object that did not parse
ENDS = "the reply ends in a JSON"
CUT_FINALS = [
    # (benchmark, options, early object, the cut-off final object ending the reply, label, reason start)
    ("tcga", FOUR, '{"answer": 1}', '{"answer": 3, "reasoning": "sheets of small cells wi', 3, LIKE),
    ("gtex", ORGANS, '{"answer": "Lung"}', '{"answer": "Kidney", "reasoning": "tubules and glo', 3, LIKE),
    ("panda", None, '{"isup_grade": 1}', '{"primary_pattern": 4, "isup_grade": 5, "reasoning": "sh', 5, LIKE),
    (
        "panda",
        None,
        '{"isup_grade": 2}',
        '{"isup_grade": null, "reasoning": "benign gl',
        0,
        "panda_null_grade",
    ),
    # the answer field itself cut: no answer, not the early object
    ("tcga", FOUR, '{"answer": 1}', '{"reasoning": "keratin", "answer": "Squamous cell car', None, LIKE),
    ("tcga", FOUR, '{"answer": 1}', '{"reasoning": "keratin pearls", "answer": 2', None, LIKE),
    ("panda", None, '{"isup_grade": 3}', '```json\n{"isup_grade": ', None, LIKE),
    # cut before any answer field: no answer either
    ("gtex", ORGANS, '{"answer": 2}', '{"reasoning": "alveoli lined by pneumo', None, ENDS),
    ("panda", None, '{"isup_grade": 4}', '{"primary_pattern": 3, "secon', None, ENDS),
    # single-quoted Python-style dicts, which models write too
    ("tcga", FOUR, "{'answer': 1}", "{'answer': 4, 'reasoning': 'nests of small cel", 4, LIKE),
    ("tcga", FOUR, "{'answer': 1}", "{'reasoning': 'nests of small cells', 'confid", None, ENDS),
]


def test_a_truncated_final_answer_is_never_the_earlier_complete_object() -> None:
    """The early object lies inside the scanned window (a few KB before the end): the old rule read it."""
    for benchmark, options, early, final, label, reason in CUT_FINALS:
        text = f"The prompt's example is {early}. " + padding(3_000) + "\nFinal JSON:\n" + final
        assert len(text) < MAX_PARSED_CHARS
        found = extract_label(text, benchmark_name=benchmark, options=options)
        assert (found.label, found.reason[: len(reason)]) == (label, reason), (final, found)
        if label is None:
            assert "no answer" in found.reason, found.reason


def test_a_complete_final_object_after_a_cut_or_malformed_one_still_decides() -> None:
    """Only what the reply ends with decides: a complete object after a broken one is read."""
    text = '{"answer": 2, "reasoning": "first look" ... ' + padding(500) + '\n{"answer": 4}\n'
    assert extract_label(text, benchmark_name="tcga", options=FOUR).reason == "JSON 'answer': option 4"
    # an answer key that is not an object's key (prose after the object) does not override it
    text = '{"answer": 3}\nI wrote "answer": as the prompt asked.'
    assert extract_label(text, benchmark_name="tcga", options=FOUR).label == 3
    # nor does one quoted inside a later object that parsed (a string holding a Python-style dict)
    text = '{"answer": 3}\n{"note": "the example was {\'answer\': 1, \'why\': 2}"}'
    assert extract_label(text, benchmark_name="tcga", options=FOUR).reason == "JSON 'answer': option 3"


def test_an_earlier_statement_does_not_beat_a_truncated_final_json() -> None:
    text = "Answer: 2 was my first thought. " + padding(800) + '\n{"answer": "Carcinoid tu'
    found = extract_label(text, benchmark_name="tcga", options=FOUR)
    assert found.label is None and "ends inside its value" in found.reason


def test_the_agents_parser_reads_no_earlier_action_when_the_final_one_is_cut() -> None:
    """The free-JSON protocol: a quoted example action, then the final one cut at the token limit. No
    action (the agent tells the model, or at its last step scores the raw reply): never the quote."""
    early = '{"action": "answer", "answer": 1}'
    for final, label in (('{"action": "answer", "answer": 3, "reasoning": "small ce', 3),
                         ('{"action": "answer", "reasoning": "small cells with moul', None),
                         ('{"action": "crop", "x": 10, "y": 20, "w": 3', None)):  # fmt: skip
        text = f"Example: {early}. " + padding(2_000) + "\n" + final
        assert parse_action(text) is None, final
        assert extract_label(text, benchmark_name="tcga", options=FOUR).label == label
    complete = f"Example: {early}. " + padding(2_000) + '\n{"action": "answer", "answer": 3} and {"cut'
    assert parse_action(complete) is None  # a reply ending in a cut object lost its final action
    assert extract_label(complete, benchmark_name="tcga", options=FOUR).label is None
    whole = f"Example: {early}. " + padding(2_000) + '\n{"action": "answer", "answer": 3}\nDone.'
    assert parse_action(whole) == parse_action(whole[-200:]) and parse_action(whole).answer == "3"
