"""The bounded JSON scanner (core/jsonscan.py) against the standard library's decoder: an object is found
whatever token its first 4096-character window ends in, and an object the text's end cuts short is
reported as cut off (a truncated final answer), never as a complete one or as nothing at all.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from giant_assets.core import jsonscan
from giant_assets.core.jsonscan import json_objects, scan_objects
from giant_assets.eval.path_review import parse_review

WINDOW = 4096  # written out: the test must not follow the code's constant

# every kind of JSON token a window can end inside: the literals, numbers with fractions and exponents,
# the non-finite numbers Python writes and reads, strings with escapes (\uXXXX pairs when ASCII-only)
values = st.one_of(
    st.sampled_from([True, False, None, float("inf"), float("-inf"), 0, -0.0, 1e-7, -1.5e10, 1e308]),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False),
    st.text(alphabet=st.sampled_from('ab"\\/\n\t\u00e9\U0001f600{}[],:'), max_size=12),
)


def placed(value: object, shift: int, ascii_only: bool) -> tuple[str, str]:
    """(doc, the value's text): an object whose value token starts ``shift`` characters before the
    4096th character of the object, so the first window ends inside or around it."""
    token = json.dumps(value, ensure_ascii=ascii_only)
    head = '{"pad": "'
    middle = '", "v": '
    pad = WINDOW - shift - len(head) - len(middle)
    doc = head + "x" * pad + middle + token + ', "after": [1, {"k": "z"}]}'
    assert doc.index(token, len(head) + pad) == WINDOW - shift
    return doc, token


@settings(max_examples=400, deadline=None)
@given(
    value=values,
    shift=st.integers(-3, 24),
    ascii_only=st.booleans(),
    before=st.sampled_from(["", "prose ", "```json\n", "x" * 70_000]),
)
def test_an_object_is_found_whatever_token_the_window_edge_cuts(
    value: object, shift: int, ascii_only: bool, before: str
) -> None:
    doc, _ = placed(value, shift, ascii_only)
    text = before + doc + "\nthat is all"
    expected = json.loads(doc)
    scan = scan_objects(text)
    assert [f.value for f in scan.objects] == [expected]
    (found,) = scan.objects
    assert text[found.start : found.end] == doc  # positions in the text given, the 64 KiB cut included
    assert scan.cut_off == []
    assert json_objects(text) == [expected]


def test_every_literal_at_every_edge_position_of_objects_around_the_window_size() -> None:
    """The reported bug, exhaustively: objects of 4080..4115 characters with ``true``, ``false`` or
    ``null`` (and the longest tokens) wherever the window edge falls in and around them."""
    for token in ("true", "false", "null", "-Infinity", "NaN", "1.5e+10", '"\\ud83d\\ude00"', '"a\\"b"'):
        for rest in ("}", ', "z": 1}', ', "z": [true, null]}'):
            for length in range(4080, 4116):
                pad = length - len('{"p": "", "v": ') - len(token) - len(rest)
                doc = '{"p": "' + "x" * pad + '", "v": ' + token + rest
                assert len(doc) == length
                assert json_objects("so " + doc + " ok") == [json.loads(doc)], (token, rest, length)


@settings(max_examples=200, deadline=None)
@given(value=values, shift=st.integers(-3, 24), ascii_only=st.booleans(), data=st.data())
def test_an_object_the_text_ends_inside_is_cut_off(
    value: object, shift: int, ascii_only: bool, data: st.DataObject
) -> None:
    doc, _ = placed(value, shift, ascii_only)
    cut = data.draw(st.integers(2, len(doc) - 1))  # "{" alone is no object start: "{" then a key
    prefix = doc[:cut]
    text = '{"answer": 1} then ' + prefix
    scan = scan_objects(text)
    start = len('{"answer": 1} then ')
    assert start in scan.cut_off  # every proper prefix of an object: the decoder wanted more text
    assert scan.objects[0].value == {"answer": 1}
    assert all(f.start > start for f in scan.objects[1:])  # only objects inside the cut one, if any


def test_an_object_malformed_before_the_end_is_not_cut_off() -> None:
    for text in ('{"a": 1 xx}', '{"a": tru}', '{"a": "b" "c": 2}', '{"a": 1} {"b": 2,,}'):
        scan = scan_objects(text)
        assert scan.cut_off == [], text
    assert scan_objects('{"a": 1 xx, "b": 2').cut_off == []  # junk well before the end
    # at the very end, junk of token characters reads as a token cut short (one rule for every token)
    assert scan_objects('{"a": 1.5e+').cut_off == scan_objects('{"a": 1 xx').cut_off == [0]


def test_a_python_style_dict_never_closed_is_cut_off_only_where_literals_are_read() -> None:
    text = "{'answer': 1} then {'reasoning': 'nests of {small} cells', 'answ"
    assert scan_objects(text, python_literals=True).cut_off == [text.index("{'reasoning'")]
    assert [f.value for f in scan_objects(text, python_literals=True).objects] == [{"answer": 1}]
    assert scan_objects(text).cut_off == []  # JSON only: a single-quoted start is no object
    assert scan_objects("{'a': 1} and {'b': {'c': 2}}", python_literals=True).cut_off == []


def test_a_5243_character_path_review_with_a_literal_at_the_window_edge_parses() -> None:
    """The reported reply: valid, 5,243 characters, the window edge inside ``true``/``false``/``null``."""
    region = {
        "bbox": {"x": 10, "y": 20, "width": 100, "height": 50},
        "why_zoomed": "dense",
        "observations": "cells",
        "diagnostic_relevance": "tumour",
    }
    regions = [{"region_number": n} | region for n in range(1, 6)]
    answer = {"organ_type": "lung", "diagnosis": "adenocarcinoma", "confidence": "high", "key_findings": "g"}
    head = json.dumps({"regions": regions, "answer": answer})[:-1] + ', "notes": "'
    for literal in ("true", "false", "null"):
        for inside in range(0, len(literal) + 1):  # window characters of the literal: none .. all
            pad = WINDOW - inside - len(head) - len('", "flag": ')
            doc = head + "n" * pad + '", "flag": ' + literal + "}"
            assert doc[:WINDOW].endswith('"flag": ' + literal[:inside])
            text = "<report>seen</report><response>" + doc + "</response>"
            text += "." * (5243 - len(text))
            review = parse_review(text)
            assert review.parsed and review.problems == [], (literal, inside, review.problems)
            assert len(review.regions) == 5 and review.answer["diagnosis"] == "adenocarcinoma"
    assert len(text) == 5243


def test_the_window_is_the_one_the_bound_tests_assume() -> None:
    assert jsonscan._WINDOW == WINDOW  # the tests above place the edge by it
