"""`giant-experiments check` says how each paid experiment signs in and refuses what cannot work; the
key's value is never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

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
