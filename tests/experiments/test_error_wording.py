"""Errors in an experiments file read in the platform's words: the file, the experiment and the field
named, an unknown field's closest valid one suggested, and none of pydantic's own phrasings."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.platform.experiments_cli import main

PYDANTIC_PHRASES = (
    "Extra inputs are not permitted",
    "Value error",
    "Input should be",
    "(experiment)",
    "Field required",
    "validation error",
    "For further information",
    "errors.pydantic.dev",
    "type=",
    "should be",
)
GIANT = "agent: giant, model: gpt-5"
# (body of experiment 'e', the field the message must name, words it must say)
BAD = [
    ("{agent: giant, provider: azure, model: gpt-5, endpoint: 'https://x.openai.azure.com'}",
     "endpoint", "not a field of an experiment; did you mean 'azure_endpoint'?"),
    ("{agent: random, colour: red}", "colour", "not a field of an experiment (docs/experiments.md"),
    ("{agent: random, max_stesp: 3}", "max_stesp", "did you mean 'max_steps'?"),
    ("{agent: random, max_steps: many}", "max_steps", "must be a valid integer"),
    ("{agent: random, max_steps: 0}", "max_steps", "must be greater than"),
    ("{agent: oracle}", "agent", "'oracle' is not an agent: use one of random"),
    (f"{{{GIANT}, provider: azur}}", "provider", "must be 'openai'"),
    ("{agent: random, seed: 1.5}", "seed", "must be a valid integer"),
    (f"{{{GIANT}, budget_usd: .nan}}", "budget_usd", "must be"),
    (f"{{{GIANT}, prices: {{input_per_mtok: cheap, output_per_mtok: 1}}}}", "prices.input_per_mtok", "must"),
]  # fmt: skip


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  e: {body}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("body", "field", "words"), BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_a_bad_field_is_named_in_the_platforms_words(tmp_path: Path, body: str, field: str, words: str):
    path = _write(tmp_path, body)
    with pytest.raises(ExperimentsFileError) as raised:
        load_experiments(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: experiment 'e': ") and f"field {field!r}: " in message, message
    assert words in message, message
    assert not [p for p in PYDANTIC_PHRASES if p in message], message


def test_a_5000_digit_number_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "{agent: random, seed: " + "9" * 5000 + "}")
    with pytest.raises(ExperimentsFileError) as raised:
        load_experiments(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: a number in the file is too long to read") and "9999" not in message


def test_a_check_across_fields_speaks_for_itself_and_check_prints_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "{agent: giant}")
    assert main(["check", "--file", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: experiment 'e': agent 'giant' needs a model"), err
    assert not [p for p in PYDANTIC_PHRASES if p in err] and "Traceback" not in err, err
