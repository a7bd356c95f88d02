"""``extends: NAME`` in experiments.yaml: resolved before validation, every wrong one a clear error naming
the block (no traceback, no pydantic wording); a YAML merge key is refused naming its line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.platform.experiments_cli import main

GPT = "agent: giant\n    provider: openai\n    model: gpt-5\n    budget_usd: 5\n"


def _load(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "experiments.yaml"
    path.write_text(text, encoding="utf-8")
    return load_experiments(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ExperimentsFileError) as caught:
        _load(tmp_path, text)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'experiments.yaml'}: ") and "pydantic" not in message
    return message.removeprefix(f"{tmp_path / 'experiments.yaml'}: ")


def test_a_child_overrides_and_adds_and_a_chain_is_followed(tmp_path: Path) -> None:
    declared = _load(
        tmp_path,
        f"defaults: {{seed: 3}}\nexperiments:\n  a:\n    {GPT}    description: the parent\n    name: a\n"
        "  b: {extends: a, max_steps: 7, description: child}\n"
        "  c: {extends: b, agent: thumbnail}\n",
    )
    a, b, c = declared["a"], declared["b"], declared["c"]
    assert (b.name, b.agent, b.max_steps, b.seed, b.budget_usd, b.description) == (
        "b",
        "giant",
        7,
        3,
        5,
        "child",
    )
    assert (c.agent, c.max_steps, c.model, c.description) == ("thumbnail", 7, "gpt-5", "child")
    assert a.max_steps == 20  # the parent is not changed by its children


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  b: {extends: gtp5}\n", "experiment 'b': field 'extends': no experiment 'gtp5' in this file"),
        ("  b: {extends: gpt5-gaint}\n", "did you mean 'gpt5-giant'?"),
        ("  b: {extends: b}\n", "experiment 'b': field 'extends': an experiment cannot extend itself"),
        (
            "  b: {extends: c}\n  c: {extends: d}\n  d: {extends: b}\n",
            "experiment 'b': field 'extends': circular ('b' -> 'c' -> 'd' -> 'b')",
        ),
        ("  b: {extends: [gpt5-giant]}\n", "experiment 'b': field 'extends': the name of another experiment"),
        ("  b: {extends: " + "9" * 4000 + "}\n", "experiment 'b': field 'extends': the name of another"),
        ("  b: {extends: lst}\n  lst: [1, 2]\n", "experiment 'b': field 'extends': 'lst' is not a mapping"),
        (
            "  b: {extends: gpt5-giant, agent: thumbnail, max_steps: .nan}\n",
            "experiment 'b' (with the settings of 'gpt5-giant', which it extends): field 'max_steps'",
        ),
    ],
    ids=["unknown", "closest", "itself", "circular", "list", "4000-digits", "not-a-mapping", "nan-inherited"],
)
def test_a_wrong_extends_names_the_block(tmp_path: Path, body: str, message: str) -> None:
    error = _error(tmp_path, f"experiments:\n  gpt5-giant:\n    {GPT}" + body)
    assert message in error, error


def test_an_inherited_bad_field_names_the_chain(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        "experiments:\n  a: {agent: giant, model: gpt-5, budget_usd: 5, region: evil.example.com}\n"
        "  b: {extends: a}\n",
    )
    # the parent fails first, naming itself; remove it from the parent and the child is fine
    assert error.startswith("experiment 'a': ") and "region" in error
    error = _error(
        tmp_path,
        "experiments:\n  a: {agent: giant, model: gpt-5, budget_usd: 5}\n  b: {extends: a, max_stepz: 4}\n"
        "  c: {extends: b}\n",
    )
    assert error.startswith("experiment 'b' (with the settings of 'a', which it extends): field 'max_stepz'")
    assert "did you mean 'max_steps'?" in error


def test_extends_in_defaults_is_refused(tmp_path: Path) -> None:
    error = _error(tmp_path, f"defaults: {{extends: a}}\nexperiments:\n  a:\n    {GPT}")
    assert error == "'defaults', field 'extends': belongs in an experiment, not defaults"


def test_a_misspelt_extends_suggests_it(tmp_path: Path) -> None:
    error = _error(tmp_path, f"experiments:\n  a:\n    {GPT}  b: {{extend: a}}\n")
    assert "experiment 'b': field 'extend': not a field of an experiment; did you mean 'extends'?" in error


def test_a_long_chain_resolves_without_recursion(tmp_path: Path) -> None:
    links = "".join(f"  e{i}: {{extends: e{i - 1}}}\n" for i in range(1, 1500))
    start = time.monotonic()
    declared = _load(tmp_path, f"experiments:\n  e0:\n    {GPT}" + links)
    assert time.monotonic() - start < 30
    assert declared["e1499"].model == "gpt-5" and declared["e1499"].name == "e1499"


def test_a_yaml_merge_key_is_refused_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  a: &giant\n    {GPT}  b:\n    <<: *giant\n    runs_per_item: 5\n")
    assert main(["--file", str(path), "check"]) == 1
    out, err = capsys.readouterr()
    assert err == (
        f"error: {path}: line 8: a YAML merge key (<<) is not read here: write `extends: NAME` to start from "
        "experiment NAME's settings (docs/table1-recipes.md)\n"
    )
    assert "Traceback" not in out + err
