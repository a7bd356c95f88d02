"""Providers that leak nothing and read every stop (issue 38): a credential goes only over TLS (or to
loopback) and only to the provider's own hosts (``region`` / ``project`` checked at check time and in
the client constructors), and every safety stop (Claude's ``refusal`` on each route, Azure's filter codes
and incomplete replies, each of Gemini's finish reasons) ends a run as ``content_filtered``, its text
kept nowhere. Real SDK clients against the scripted loopback server; a raw TCP listener plays the
attacker's host."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from giant_assets.agents.providers import Message, TextPart, UnsafeEndpoint
from giant_assets.agents.providers.gemini import SAFETY_STOPS
from giant_assets.agents.registry import make_agent
from giant_assets.core.secrets import REDACTED, redact_secrets
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch
from giant_assets.slides.synthetic import ONE_LESION_DESIGN, write_pyramidal_slide
from tests.support.cloud import AWS_ENV, service_account

OPTIONS = ["Lung", "Liver", "Skin"]
PROMPT = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'
AZURE_KEY = "azure-key-0123456789abcdef0123456789abcdef"
GEMINI_KEY = "AIza" + "GeminiKeyForTests0123456789abcdefghi"
PARTIAL = "PARTIAL-FILTERED-TEXT"  # what a blocked reply held: it must be stored nowhere


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("guards") / "s.tiff", ONE_LESION_DESIGN, levels=4)


def run(exp: Experiment, slide: Path) -> AgentAnswer:
    agent = make_agent(exp, pd.DataFrame(), None)

    async def go() -> AgentAnswer:
        try:
            return await agent.answer(AgentItem("tcga", "item-1", PROMPT, OPTIONS, str(slide)), 0)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def check(tmp_path: Path, settings: str) -> dict[str, Experiment]:
    """``giant-experiments check``'s reading of one experiment with ``settings`` (YAML flow mapping)."""
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  e: {{agent: giant, budget_usd: 5, {settings}}}\n")
    return load_experiments(path)


# ---------------------------------------------------------------- region and project: check time

HOSTILE_NAMES = [
    "127.0.0.1:4443/x?", "evil.example/#", "x@evil.example", "../../v1", "us-central1\n",
    "us-east-1\nHost: evil.example", "us-central1/", "us-central1?", "us-central1#", "us-central1.evil.example",
    "evil.example", "US-CENTRAL1", " us-central1", "us-east-1 ", "us_central1", "us-central1:443",
    "%2e%2e%2fv1", "us-central1%2F..", "localhost", "[::1]", "1e308", "9" * 5000, "us-central1\x00",
    "us-сentral1",  # a Cyrillic 's'
    "http://evil.example", "us-east-1@evil.example", "a" * 300 + "-b1",
]  # fmt: skip
PROVIDERS = {"bedrock": "claude-sonnet-4-5", "vertex": "claude-sonnet-4-5", "gemini": "gemini-2.5-pro"}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("region", HOSTILE_NAMES)
def test_check_refuses_a_region_that_is_no_region_name(tmp_path: Path, provider: str, region: str) -> None:
    """The region is pasted into the host name the credential goes to: only the cloud's names pass, the
    refusal names the file, the experiment and the field, in plain words (no pydantic wording)."""
    with pytest.raises(ExperimentsFileError) as refused:
        check(tmp_path, f"provider: {provider}, model: {PROVIDERS[provider]}, region: {json.dumps(region)}")
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'experiments.yaml'}: experiment 'e': field 'region': ")
    assert "is not an AWS region" in message if provider == "bedrock" else "Google Cloud location" in message
    assert "Value error" not in message and "type=" not in message and "\n" not in message
    assert len(message) < 400  # the 5,000-digit value is shortened


@pytest.mark.parametrize(
    "project",
    ["evil.example/#", "x@evil.example", "../../v1", "giant-p1\n", "giant-p1/../x", "Giant-p1", "1giant-p1",
     "giant-p1-", "short", "g" * 31, "giant p1", "giant_p1", "giant-p1?x", "9" * 5000, "giant-p1%2F"],
)  # fmt: skip
@pytest.mark.parametrize("provider", ["vertex", "gemini"])
def test_check_refuses_a_project_that_is_no_project_id(tmp_path: Path, provider: str, project: str) -> None:
    region = "us-east5" if provider == "vertex" else "us-central1"
    model = PROVIDERS[provider]
    with pytest.raises(ExperimentsFileError, match="experiment 'e': field 'project': .* is not a Google Cloud "):
        check(tmp_path, f"provider: {provider}, model: {model}, region: {region}, project: {json.dumps(project)}")


@pytest.mark.parametrize(
    ("provider", "region", "project"),
    [("bedrock", "us-east-1", ""), ("bedrock", "us-gov-west-1", ""), ("bedrock", "ap-southeast-2", ""),
     ("vertex", "us-east5", "giant-p1"), ("vertex", "global", ""), ("vertex", "europe-west4", "a" * 30),
     ("gemini", "us-central1", "my-project-123"), ("gemini", "global", ""), ("gemini", "eu", ""),
     ("gemini", "northamerica-northeast1", "abcdef")],
)  # fmt: skip
def test_check_accepts_the_clouds_own_names(tmp_path: Path, provider: str, region: str, project: str) -> None:
    extra = f", project: {project}" if project else ""
    exp = check(tmp_path, f"provider: {provider}, model: {PROVIDERS[provider]}, region: {region}{extra}")["e"]
    assert (exp.region, exp.project) == (region, project)


# ---------------------------------------------------------------- endpoints: check time


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ("provider: azure, model: gpt-5, azure_endpoint: 'http://r.openai.azure.com'",
         "field 'azure_endpoint': 'http://r.openai.azure.com' would send the credential in clear"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'https://'", "field 'azure_endpoint': 'https://' names no host"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'https://:443'", "field 'azure_endpoint': .* names no host"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'ftp://r.example'", "is not an http.s. URL"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'r.openai.azure.com'", "is not an http.s. URL"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'https://r.example:99999'", "is not a URL"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'http://127.0.0.1.evil.example'", "in clear"),
        ("provider: azure, model: gpt-5, azure_endpoint: 'http://localhost.evil.example'", "in clear"),
        ("provider: anthropic, model: claude-sonnet-4-5, base_url: 'http://gateway.example'",
         "field 'base_url': 'http://gateway.example' would send the credential in clear"),
        ("provider: openrouter, model: openai/gpt-5, base_url: 'http://gateway.example/api/v1'", "in clear"),
        ("provider: gemini, model: gemini-2.5-pro, base_url: 'http://10.0.0.5:8080'", "in clear"),
        ("provider: bedrock, model: claude-sonnet-4-5, region: us-east-1, base_url: 'http://10.0.0.5'",
         "in clear"),
        ("provider: openai, model: gpt-5, base_url: 'http://10.0.0.5:8000/v1'",
         "field 'base_url': 'http://10.0.0.5:8000/v1' would send the credential in clear"),
        ("provider: anthropic, model: claude-sonnet-4-5, base_url: 'https://'", "field 'base_url': .* names no host"),
    ],
)  # fmt: skip
def test_check_refuses_an_endpoint_a_credential_would_cross_in_clear(
    tmp_path: Path, settings: str, refusal: str
) -> None:
    with pytest.raises(ExperimentsFileError, match=f"experiment 'e': {refusal}") as refused:
        check(tmp_path, settings)
    assert "Value error" not in str(refused.value)


@pytest.mark.parametrize(
    "settings",
    [
        "provider: azure, model: gpt-5, azure_endpoint: 'https://r.openai.azure.com'",
        "provider: azure, model: gpt-5, azure_endpoint: 'http://127.0.0.1:9'",  # loopback: never leaves
        "provider: anthropic, model: claude-sonnet-4-5, base_url: 'http://localhost:9'",
        "provider: openai, model: gpt-5, base_url: 'https://gateway.example/v1'",
        "provider: openai, model: q, server: vllm, base_url: 'http://10.0.0.5:8000/v1'",  # no key sent
    ],
)
def test_check_accepts_tls_and_loopback_endpoints(tmp_path: Path, settings: str) -> None:
    assert check(tmp_path, settings)["e"].name == "e"


# ---------------------------------------------------------------- at use: the client constructors


class Listener:
    """A raw TCP listener on loopback standing for a host of the attacker's choosing: counts every
    connection made to it (a TLS handshake would carry the token next)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


def _vertex_model(provider: str, region: str, project: str = "") -> Any:
    from giant_assets.agents.providers.anthropic_clouds import VertexChatModel
    from giant_assets.agents.providers.gemini import GeminiChatModel
    from giant_assets.agents.providers.retry import RetryPolicy

    once = {"retry": RetryPolicy(max_attempts=1), "timeout_s": 5}
    if provider == "vertex":
        return VertexChatModel("claude-sonnet-4-5", region=region, project=project, **once)
    return GeminiChatModel("gemini-2.5-pro", region=region, project=project, **once)


@pytest.mark.parametrize("provider", ["vertex", "gemini"])
@pytest.mark.parametrize("template", ["127.0.0.1:{port}/x?", "x@127.0.0.1:{port}/#", "127.0.0.1:{port}#"])
def test_no_google_token_leaves_for_a_host_the_region_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, template: str
) -> None:
    """A hostile region that slipped past the check (the client built directly): the constructor
    refuses it, so no token is fetched and nothing reaches the attacker's host (without the guard the
    client fetches the token and connects to the listener)."""
    attacker = Listener()
    with ScriptedModelServer([answer_reply(1)]) as srv:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account(tmp_path / "sa.json",
                                                                                  f"{srv.base_url}/token")))  # fmt: skip

        async def go() -> None:
            model = _vertex_model(provider, template.format(port=attacker.port))
            try:
                await model.complete([Message("user", (TextPart("hi"),))])
            finally:
                await model.aclose()

        with pytest.raises(UnsafeEndpoint, match=f"provider '{provider}': field 'region': "):
            asyncio.run(go())
        assert srv.token_requests == []  # no token was even minted
    assert attacker.connections == 0
    attacker.sock.close()


@pytest.mark.parametrize(
    ("provider", "region", "project", "field"),
    [("vertex", "us-east5", "evil.example/#", "project"), ("gemini", "us-central1", "x@evil", "project"),
     ("gemini", "../../v1", "", "region"), ("vertex", "us-east-1", "", "region")],
)  # fmt: skip
def test_the_google_clients_refuse_foreign_names_before_any_request(
    monkeypatch: pytest.MonkeyPatch, provider: str, region: str, project: str, field: str
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")  # never read
    with pytest.raises(UnsafeEndpoint, match=f"provider '{provider}': field '{field}': "):
        _vertex_model(provider, region, project)


def test_the_credentials_project_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``project``: the key file's own project goes into the route, and is held to the same rule."""
    from giant_assets.agents.providers.anthropic_clouds import VertexChatModel

    key = service_account(tmp_path / "sa.json", "http://127.0.0.1:9/token", project="evil.example/#")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    with pytest.raises(UnsafeEndpoint, match="field 'project': 'evil.example/#' is not a Google Cloud"):
        VertexChatModel("claude-sonnet-4-5", region="us-east5")


def test_bedrock_client_refuses_a_foreign_region(monkeypatch: pytest.MonkeyPatch) -> None:
    from giant_assets.agents.providers.anthropic_clouds import BedrockChatModel

    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UnsafeEndpoint, match="provider 'bedrock': field 'region': 'evil.example/#'"):
        BedrockChatModel("claude-sonnet-4-5", region="evil.example/#")
    assert BedrockChatModel("claude-sonnet-4-5", region="us-east-1").region == "us-east-1"


@pytest.mark.parametrize(
    ("cls", "env", "url", "field"),
    [("giant_assets.agents.providers.azure.AzureResponsesModel", "AZURE_OPENAI_API_KEY",
      "http://r.openai.azure.com", "azure_endpoint"),
     ("giant_assets.agents.providers.azure.AzureChatModel", "AZURE_OPENAI_API_KEY", "https://", "azure_endpoint"),
     ("giant_assets.agents.providers.gemini.GeminiChatModel", "GEMINI_API_KEY", "http://10.0.0.5", "base_url"),
     ("giant_assets.agents.providers.anthropic.AnthropicChatModel", "ANTHROPIC_API_KEY", "http://gw.example",
      "base_url"),
     ("giant_assets.agents.providers.openai_responses.OpenAIResponsesModel", "OPENAI_API_KEY",
      "http://gw.example/v1", "base_url"),
     ("giant_assets.agents.providers.local.LocalChatModel", "GIANT_LOCAL_API_KEY", "http://10.0.0.5:8000/v1",
      "base_url")],
)  # fmt: skip
def test_a_client_refuses_to_send_its_credential_in_clear(
    monkeypatch: pytest.MonkeyPatch, cls: str, env: str, url: str, field: str
) -> None:
    """At use too (``OPENAI_BASE_URL``, a client built directly): a key goes over TLS or to loopback."""
    import importlib

    module, name = cls.rsplit(".", 1)
    model_class = getattr(importlib.import_module(module), name)
    monkeypatch.setenv(env, "sk-test-0123456789abcdef0123456789")
    with pytest.raises(UnsafeEndpoint, match=f"field '{field}': .*(in clear|names no host)"):
        model_class("gpt-5", base_url=url)
    assert model_class("gpt-5", base_url="http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"


def test_a_local_server_without_a_key_may_be_on_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    from giant_assets.agents.providers.local import LocalChatModel

    monkeypatch.delenv("GIANT_LOCAL_API_KEY", raising=False)
    assert LocalChatModel("q", base_url="http://10.0.0.5:8000/v1").base_url == "http://10.0.0.5:8000/v1"
