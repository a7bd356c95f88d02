from hypothesis import given
from hypothesis import strategies as st

from giant_assets.multipathqa.prompts import format_options, render_prompt

OPTIONS = ["Esophagus", "Lung", "Liver"]


def test_options_become_a_numbered_list_and_double_braces_single():
    template = 'Pick one:\n{options}\nAnswer as ```json\n{{"answer": N}}\n```'
    out = render_prompt(template, OPTIONS)
    assert out == 'Pick one:\n1. Esophagus\n2. Lung\n3. Liver\nAnswer as ```json\n{"answer": N}\n```'


def test_other_braces_do_not_crash_and_stay_as_they_are():
    template = "Return {isup_grade} or {0} or a lone { brace } and {options}"
    assert render_prompt(template, ["A"]) == "Return {isup_grade} or {0} or a lone { brace } and 1. A"


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
    assert render_prompt(template, options) == template.format(options=format_options(options))
