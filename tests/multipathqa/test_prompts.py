from hypothesis import given
from hypothesis import strategies as st

from giant_assets.multipathqa.prompts import format_options, missing_options, render_prompt, substitute

OPTIONS = ["Esophagus", "Lung", "Liver"]


def test_options_become_a_numbered_list_and_double_braces_single():
    """Each option line ends with a newline, as the official benchmark script builds ``{options}``
    (so the gtex/tcga templates' blank line after the options is followed by one more)."""
    template = 'Pick one:\n{options}\nAnswer as ```json\n{{"answer": N}}\n```'
    out = render_prompt(template, OPTIONS)
    assert out == 'Pick one:\n1. Esophagus\n2. Lung\n3. Liver\n\nAnswer as ```json\n{"answer": N}\n```'


def test_other_braces_do_not_crash_and_stay_as_they_are():
    template = "Return {isup_grade} or {0} or a lone { brace } and {options}"
    assert render_prompt(template, ["A"]) == "Return {isup_grade} or {0} or a lone { brace } and 1. A\n"


def test_no_options_and_no_placeholder():
    assert render_prompt('Grade it: {{"isup_grade": 3}}', None) == 'Grade it: {"isup_grade": 3}'


# Templates made of text, {{, }} and {options} are valid str.format templates: str.format is the oracle.
_piece = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=8),
    st.sampled_from(["{{", "}}", "{options}", "{{options}}"]),
)


@given(st.lists(_piece, max_size=12), st.lists(st.text(max_size=6), min_size=1, max_size=5))
def test_matches_str_format_on_templates_it_accepts(pieces, options):
    template = "".join(pieces)
    assert substitute(template, options) == template.format(options=format_options(options))
    if "{options}" in template:
        assert render_prompt(template, options) == template.format(options=format_options(options))


# Real tcga_slidebench / tcga_expert_vqa rows: the prompt is only the question.
SLIDEBENCH_Q = "What is the secondary Gleason pattern observed in this case of prostate adenocarcinoma?"


def test_question_only_prompt_gets_numbered_options_and_the_json_answer_format():
    out = render_prompt(SLIDEBENCH_Q, ["2", "3", "4", "5"])
    assert out.startswith(SLIDEBENCH_Q + "\n\n")
    assert "\n1. 2\n2. 3\n3. 4\n4. 5\n" in out
    assert '{"answer": N}' in out and "1 to 4" in out
    assert missing_options(out, ["2", "3", "4", "5"]) == []
    # the options come after the question, the instruction after the options
    assert out.index(SLIDEBENCH_Q) < out.index("1. 2") < out.index('{"answer": N}')


def test_question_only_prompt_with_literal_braces_keeps_them_single():
    out = render_prompt('Is the {{"json"}} example shown?', ["Yes", "No"])
    assert out.startswith('Is the {"json"} example shown?') and "2. No" in out


def test_missing_options_names_the_ones_not_shown():
    shown = render_prompt("Which? {options}", ["Low", "High"])
    assert missing_options(shown, ["Low", "High"]) == []
    assert missing_options(substitute("Which one?", ["Low", "High"]), ["Low", "High"]) == [1, 2]
    assert missing_options("1. Low\n2. Medium", ["Low", "High"]) == [2]
