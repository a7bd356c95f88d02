"""`giant-experiments check` says how each paid experiment signs in and refuses what cannot work; the
key's value is never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.agents.providers.factory import (
    CLOUD_CLASSES,
    DEFAULT_KEY_ENVS,
    WIRE_FORMATS,
    default_key_env,
    model_class,
)
from giant_assets.experiments.declared import load_experiments
from giant_assets.platform.experiments_cli import main
from tests.support.dagster_env import write_experiments

KEY = "sk-test-0123456789abcdef0123456789"
GPT = {"agent": "giant", "model": "gpt-5", "budget_usd": 5}
AZURE = GPT | {"provider": "azure"}


def _check(tmp_path: Path, experiments: dict, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = write_experiments(tmp_path / "e.yaml", experiments)
    status = main(["check", "--file", str(path)])
    out, err = capsys.readouterr()
    assert KEY not in out + err
    return status, out, err


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "GIANT_AZURE_AUTH", "OPENAI_BASE_URL",
                 "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "ANTHROPIC_VERTEX_ACCESS_TOKEN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_each_paid_experiment_says_how_it_signs_in(tmp_path: Path, clean_env, capsys) -> None:
    clean_env.setenv("OPENAI_API_KEY", KEY)
    clean_env.setenv("AWS_PROFILE", "lab")
    experiments = {
        "oa": GPT,
        "az": AZURE | {"azure_endpoint": "https://lab.openai.azure.com"},
        "claude-bedrock": {
            "agent": "giant",
            "model": "claude-sonnet-4-5",
            "provider": "bedrock",
            "region": "us-east-1",
            "budget_usd": 5,
        },  # fmt: skip
        "rand": {"agent": "random"},
    }
    status, out, err = _check(tmp_path, experiments, capsys)
    assert status == 0, err
    lines = out.splitlines()
    assert "oa: signs in with API key from $OPENAI_API_KEY" in lines
    assert "az: signs in with Microsoft Entra ID token (azure-identity's DefaultAzureCredential)" in lines
    assert "claude-bedrock: signs in with AWS credential chain (profile lab)" in lines
    assert not [line for line in lines if line.startswith("rand:")]  # offline: nothing to sign in
    clean_env.setenv("AZURE_OPENAI_API_KEY", KEY)
    _, out, _ = _check(tmp_path, experiments, capsys)
    assert "az: signs in with API key from $AZURE_OPENAI_API_KEY" in out.splitlines()


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        (
            AZURE | {"azure_endpoint": "https://YOUR-RESOURCE.openai.azure.com"},
            "experiment 'e': field 'azure_endpoint': still the placeholder YOUR-RESOURCE",
        ),
        (
            AZURE
            | {
                "azure_endpoint": "https://x.openai.azure.com/openai/deployments/gpt-5/chat/completions"
                "?api-version=2025-03-01-preview"
            },
            "experiment 'e': field 'azure_endpoint': a full request URI (the portal's Target URI?); "
            "keep only https://x.openai.azure.com ",
        ),
        (GPT, "experiment 'e': $OPENAI_API_KEY is not set"),
        (GPT | {"api_key_env": "LAB_KEY"}, "experiment 'e': $LAB_KEY is not set"),
    ],
    ids=["placeholder", "target-uri", "unset-key", "unset-named-key"],
)
def test_what_cannot_sign_in_is_refused(tmp_path: Path, clean_env, capsys, settings: dict, refusal: str):
    clean_env.setenv("AZURE_OPENAI_API_KEY", KEY)
    status, _, err = _check(tmp_path, {"e": settings}, capsys)
    assert status == 1 and refusal in err, err


SHIPPED = Path(__file__).resolve().parents[2] / "experiments.yaml"
DEMO = ["demo-giant", "demo-thumbnail", "demo-patch", "demo-path-review"]


def test_check_by_name_on_a_fresh_clone(clean_env, capsys: pytest.CaptureFixture[str]) -> None:
    """No key set: the demo's experiments pass alone; a paid one named still refuses, naming its key."""
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_BASE_URL"):
        clean_env.delenv(name, raising=False)
    declared = load_experiments(SHIPPED)
    assert main(["--file", str(SHIPPED), "check", *DEMO]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.endswith(
        f": 4 of {len(declared)} experiment(s), 0 declared benchmark(s), all valid\n"
    )
    assert main(["--file", str(SHIPPED), "check", "gpt5-giant", "demo-giant"]) == 1
    out, err = capsys.readouterr()
    assert out == "gpt5-giant: signs in with API key from $OPENAI_API_KEY\n"
    assert (
        err
        == f"error: {SHIPPED}: experiment 'gpt5-giant': $OPENAI_API_KEY is not set: export the key in it\n"
    )
    assert main(["--file", str(SHIPPED), "check", "demo-giant", "nope"]) == 2
    assert (
        f"error: {SHIPPED}: no experiment 'nope' declared (one of: azure-gpt5-giant,"
        in capsys.readouterr().err
    )
    # all of them, as before: every unset key refused, one line per reason, the whole on one screen
    assert main(["--file", str(SHIPPED), "check"]) == 1
    out, err = capsys.readouterr()
    assert len((out + err).splitlines()) <= 40
    assert "error: " + str(SHIPPED) + ": experiments 'gpt5-giant', 'gpt5-giant-steps-1'," in err
    refused_openai = next(line for line in err.splitlines() if "$OPENAI_API_KEY is not set" in line)
    openai = [n for n, e in declared.items() if e.paid and e.provider == "openai" and not e.api_key_env]
    assert refused_openai.count("'gpt5-") == len(openai) > 15 and "'demo-" not in err
    assert "experiments 'claude-giant', 'claude-path-review': $ANTHROPIC_API_KEY is not set" in err


def test_the_key_variable_named_is_the_one_each_model_class_reads() -> None:
    # the check names it from a table (no SDK imported); every wire format and cloud class has its entry
    assert set(DEFAULT_KEY_ENVS) == set(WIRE_FORMATS) | set(CLOUD_CLASSES)
    formats = [(api, "") for api in WIRE_FORMATS] + [(api, provider) for provider, api in CLOUD_CLASSES]
    for api, provider in formats:
        assert default_key_env(api, provider) == model_class(api, provider).default_key_env, (api, provider)
