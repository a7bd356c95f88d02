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
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.cloud import AWS_ENV, service_account
from tests.support.slides import write_pyramidal_slide

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
    "us-east-1\nHost: evil.example", "us-central1/", "us-central1?", "us-central1#",
    "us-central1.evil.example",
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


def test_giant_experiments_check_names_the_field_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command itself: exit 1, one error line naming file, experiment and field; no traceback."""
    from giant_assets.platform.experiments_cli import main as experiments_main

    path = tmp_path / "experiments.yaml"
    path.write_text(
        "experiments:\n  v: {agent: giant, budget_usd: 5, provider: vertex, model: claude-sonnet-4-5,\n"
        "      region: 'x@evil.example', project: giant-p1}\n"
    )
    assert experiments_main(["check", "--file", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: {path}: experiment 'v': field 'region': 'x@evil.example' is not a Google Cloud location "
        "like us-central1, europe-west4 or global"
    )


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("region", HOSTILE_NAMES)
def test_the_cloud_clients_refuse_a_region_that_is_no_region_name(
    monkeypatch: pytest.MonkeyPatch, provider: str, region: str
) -> None:
    """At use, the same names refused as at check (a client built in code, or from an old binding),
    before any credential is looked up."""
    from giant_assets.agents.providers.anthropic_clouds import BedrockChatModel

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")  # never read
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UnsafeEndpoint, match=f"provider '{provider}': field 'region': "):
        if provider == "bedrock":
            BedrockChatModel("claude-sonnet-4-5", region=region)
        else:
            _vertex_model(provider, region, "giant-p1")


@pytest.mark.parametrize(
    "project",
    ["evil.example/#", "x@evil.example", "../../v1", "giant-p1\n", "giant-p1/../x", "Giant-p1", "1giant-p1",
     "giant-p1-", "short", "g" * 31, "giant p1", "giant_p1", "giant-p1?x", "9" * 5000, "giant-p1%2F"],
)  # fmt: skip
@pytest.mark.parametrize("provider", ["vertex", "gemini"])
def test_check_refuses_a_project_that_is_no_project_id(tmp_path: Path, provider: str, project: str) -> None:
    region = "us-east5" if provider == "vertex" else "us-central1"
    model = PROVIDERS[provider]
    with pytest.raises(
        ExperimentsFileError, match="experiment 'e': field 'project': .* is not a Google Cloud "
    ):
        check(
            tmp_path,
            f"provider: {provider}, model: {model}, region: {region}, project: {json.dumps(project)}",
        )


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

AZ = "provider: azure, model: gpt-5, azure_endpoint:"


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        (f"{AZ} 'http://r.openai.azure.com'",
         "field 'azure_endpoint': 'http://r.openai.azure.com' would send the credential in clear"),
        (f"{AZ} 'https://'", "field 'azure_endpoint': 'https://' names no host"),
        (f"{AZ} 'https://:443'", "field 'azure_endpoint': .* names no host"),
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
        ("provider: anthropic, model: claude-sonnet-4-5, base_url: 'https://'",
         "field 'base_url': .* names no host"),
    ],
)  # fmt: skip
def test_check_refuses_an_endpoint_a_credential_would_cross_in_clear(
    tmp_path: Path, settings: str, refusal: str
) -> None:
    with pytest.raises(ExperimentsFileError, match=f"experiment 'e': .*{refusal}") as refused:
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
        key = service_account(tmp_path / "sa.json", f"{srv.base_url}/token")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))

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


@pytest.mark.parametrize("provider", ["vertex", "gemini"])
def test_the_credentials_project_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """No ``project``: the key file's own project goes into the route, and is held to the same rule."""
    key = service_account(tmp_path / "sa.json", "http://127.0.0.1:9/token", project="evil.example/#")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with pytest.raises(UnsafeEndpoint, match="field 'project': 'evil.example/#' is not a Google Cloud"):
        _vertex_model(provider, "us-east5" if provider == "vertex" else "us-central1")


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
     ("giant_assets.agents.providers.azure.AzureChatModel", "AZURE_OPENAI_API_KEY", "https://",
      "azure_endpoint"),
     ("giant_assets.agents.providers.gemini.GeminiChatModel", "GEMINI_API_KEY", "http://10.0.0.5",
      "base_url"),
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


# ---------------------------------------------------------------- Claude's refusal stop, on each route


def claude(
    route: str, srv: ScriptedModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Experiment:
    """A GIANT experiment of Claude on ``route`` (direct, bedrock, vertex) at the scripted server."""
    settings: dict[str, Any] = {
        "agent": "giant",
        "model": "claude-sonnet-4-5",
        "max_steps": 4,
        "max_attempts": 2,
    }
    if route == "anthropic":
        return Experiment(name="c", provider="anthropic", base_url=srv.base_url, **settings)
    if route == "bedrock":
        for k, v in AWS_ENV.items():
            monkeypatch.setenv(k, v)
        return Experiment(name="c", provider="bedrock", region="us-east-1", base_url=srv.base_url, **settings)
    key = service_account(tmp_path / "sa.json", f"{srv.base_url}/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    return Experiment(
        name="c", provider="vertex", region="us-east5", base_url=f"{srv.base_url}/v1", **settings
    )


def refusal_body(text: str) -> bytes:
    """A Messages reply Claude's safety classifiers stopped (``stop_reason: refusal``) after some text."""
    return json.dumps({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}], "stop_reason": "refusal", "stop_sequence": None,
        "usage": {"input_tokens": 900, "output_tokens": 12},
    }).encode()  # fmt: skip


@pytest.mark.parametrize("route", ["anthropic", "bedrock", "vertex"])
def test_a_claude_refusal_is_content_filtered_not_its_text(
    slide_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """``{"answer": 2}`` in a refused reply's text is no answer: the run ends content_filtered after that
    one request (not re-run), the text in no step; the same route answers normally otherwise."""
    text = f'<report>{PARTIAL}</report><response>{{"answer": 2}}</response>'
    with ScriptedModelServer([crop_reply(0, 0, 2048, 1536), Reply(body=refusal_body(text))]) as srv:
        ans = run(claude(route, srv, tmp_path, monkeypatch), slide_path)
        assert srv.refused == [] and len(srv.requests) == 2
    assert ans.error_kind == "content_filtered" and ans.text == ""
    assert "Claude declined to answer (stop_reason refusal" in ans.error
    assert PARTIAL not in json.dumps(ans.steps_as_dicts()) and PARTIAL not in ans.error
    with ScriptedModelServer([answer_reply(2)]) as srv:  # the oracle: the route itself works
        ok = run(claude(route, srv, tmp_path, monkeypatch), slide_path)
    assert ok.error is None and json.loads(ok.text) == {"answer": 2}


# ---------------------------------------------------------------- Azure's filter


def azure(srv: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, **fields: Any) -> Experiment:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    settings = {"agent": "giant", "provider": "azure", "model": "gpt-5", "azure_endpoint": srv.base_url,
                "max_steps": 4, "image_size": 560, "max_attempts": 2} | fields  # fmt: skip
    return Experiment(name="az", **settings)


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_azure_policy_violation_in_innererror_alone_is_content_filtered(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    """The Responses API's filter answers ``code: invalid_prompt`` with the filter's code only in
    ``innererror``: still the filter, not an agent error (which would be re-run and paid again)."""
    verdict = {"sexual": {"filtered": True, "severity": "high"}, "violence": {"filtered": False}}
    body = {"error": {
        "message": "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
        "type": "invalid_request_error", "param": None, "code": "invalid_prompt",
        "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": verdict},
    }}  # fmt: skip
    with ScriptedModelServer([Reply(status=400, body=json.dumps(body).encode())]) as srv:
        ans = run(azure(srv, monkeypatch, api=api), slide_path)
    assert ans.error_kind == "content_filtered" and ans.text == "" and len(srv.requests) == 1
    assert "content filter blocked the prompt (filtered: sexual)" in ans.error


def incomplete_body() -> bytes:
    """A Responses reply Azure's filter cut (``status: incomplete``, ``reason: content_filter``)."""
    text = f'<report>{PARTIAL}</report><response>{{"answer": 2}}</response>'
    return json.dumps({
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "incomplete",
        "incomplete_details": {"reason": "content_filter"}, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [],
        "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "incomplete",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 900, "output_tokens": 12, "total_tokens": 912,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }).encode()  # fmt: skip


def test_azure_incomplete_for_the_filter_is_content_filtered_and_its_text_kept_nowhere(
    slide_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the batch runner (journal and reply store beside it): the run ends content_filtered, and
    the cut reply's text is in no journal row, no reply-store line, no step; a whole reply of the same
    run is stored (the store is written, so its silence is the filter's doing)."""
    rows = [{"benchmark_name": "tcga", "benchmark_id": bid, "prompt": PROMPT, "options": OPTIONS,
             "wsi_path": str(slide_path), "truth_label": 2} for bid in ("1",)]  # fmt: skip
    journal = Journal(tmp_path / "journals" / "tcga.jsonl")
    journal.path.parent.mkdir(parents=True)
    with ScriptedModelServer([crop_reply(0, 0, 2048, 1536), Reply(body=incomplete_body())]) as srv:
        agent = make_agent(azure(srv, monkeypatch), pd.DataFrame(), None)

        async def go() -> Any:
            try:
                return await run_batch(agent, rows, config_hash="h", journal=journal,
                                       settings=BatchSettings(concurrency=1), log=lambda _: None)  # fmt: skip
            finally:
                await agent.aclose()

        outcome = asyncio.run(go())
    assert len(srv.requests) == 2  # not retried, not re-run
    (row,) = outcome.rows
    assert row["error_kind"] == "content_filtered" and not row["correct"]
    store = tmp_path / "journals" / "tcga.replies.jsonl"
    stored = store.read_text().splitlines()
    assert len(stored) == 1 and "slide_zoom" in stored[0]  # the crop's reply, not the cut one
    for text in (journal.path.read_text(), store.read_text(), json.dumps(outcome.rows, default=str)):
        assert PARTIAL not in text


# ---------------------------------------------------------------- Gemini's calls and stops


def gemini(srv: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, **fields: Any) -> Experiment:
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    settings = {"agent": "giant", "provider": "gemini", "model": "gemini-2.5-pro", "max_steps": 4,
                "image_size": 560, "base_url": srv.base_url, "max_attempts": 2} | fields  # fmt: skip
    return Experiment(name="gm", **settings)


def gemini_body(parts: list[dict[str, Any]], finish: str = "STOP") -> bytes:
    return json.dumps({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 20, "totalTokenCount": 920},
    }).encode()  # fmt: skip


def test_gemini_calls_without_an_id_get_a_local_one_that_is_never_sent(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Gemini API usually sends function calls without an ``id``: each gets a local id (two calls of
    one reply stay apart: both are served), and the next request's ``functionResponse`` parts carry no
    ``id`` (Gemini would refuse one it never gave)."""
    calls = [
        {"functionCall": {"name": "slide_zoom", "args": {"x0": 0, "y0": 0, "w": 2048, "h": 1536}}},
        {"functionCall": {"name": "slide_zoom", "args": {"x0": 2048, "y0": 1536, "w": 2048, "h": 1536}}},
    ]
    answer = gemini_body([{"text": '<report>seen</report><response>{"answer": 3}</response>'}])
    with ScriptedModelServer([Reply(body=gemini_body(calls)), Reply(body=answer)]) as srv:
        ans = run(gemini(srv, monkeypatch), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 3}
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "crop", "answer"]
    results = [p["functionResponse"] for c in srv.requests[1].json["contents"] for p in c["parts"]
               if "functionResponse" in p]  # fmt: skip
    assert [r["name"] for r in results] == ["slide_zoom", "slide_zoom"]
    assert all("id" not in r for r in results)
    from google.genai import types

    from giant_assets.agents.providers.gemini import _call

    made = [_call(types.FunctionCall(name="slide_zoom", args={}), n) for n in range(2)]
    assert [c.id for c in made] == ["gemini-call-0", "gemini-call-1"]


@pytest.mark.parametrize("finish", sorted(SAFETY_STOPS))
def test_every_gemini_safety_stop_is_content_filtered(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch, finish: str
) -> None:
    text = [{"text": f'<report>{PARTIAL}</report><response>{{"answer": 2}}</response>'}]
    with ScriptedModelServer([Reply(body=gemini_body(text, finish))]) as srv:
        ans = run(gemini(srv, monkeypatch), slide_path)
    assert ans.error_kind == "content_filtered" and ans.text == "" and len(srv.requests) == 1
    assert f"safety system stopped the answer ({finish})" in ans.error
    assert PARTIAL not in json.dumps(ans.steps_as_dicts())


def test_the_gemini_safety_stops_are_the_documented_ones() -> None:
    """The API reference's FinishReason values that mean a safety block (not STOP, MAX_TOKENS, ...)."""
    assert {
        "SAFETY",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "MODEL_ARMOR",
    } == SAFETY_STOPS


# ---------------------------------------------------------------- the clouds' own secrets

SESSION_TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE-session-token-0123456789abcdefSECRET"


def test_the_aws_session_token_is_remembered_for_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Temporary credentials (SSO, an assumed role): the session token travels in every request's
    ``X-Amz-Security-Token``; the chain's token is scrubbed from stored text as the secret key is."""
    from giant_assets.agents.providers.anthropic_clouds import BedrockChatModel

    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    assert redact_secrets(f"x {SESSION_TOKEN} y") == f"x {SESSION_TOKEN} y"  # no shape rule knows it
    BedrockChatModel("claude-sonnet-4-5", region="us-east-1")
    assert redact_secrets(f"x {SESSION_TOKEN} y") == f"x {REDACTED} y"


class TokenEndpoint:
    """Google's OAuth token endpoint on loopback handing out a new opaque token each time, each valid for
    one second (within google-auth's refresh margin: expired as soon as it is received)."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.tokens: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.tokens.append(f"opaque-{len(endpoint.tokens)}-token-0123456789SECRET")
                data = json.dumps({"access_token": endpoint.tokens[-1], "expires_in": 1,
                                   "token_type": "Bearer"}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/token"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()


def test_a_refreshed_vertex_token_is_remembered_whatever_its_shape(
    slide_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request of a run goes with a freshly fetched token (an opaque value the ``ya29.`` shape rule
    does not catch): every one is scrubbed from stored text once used."""
    tokens = TokenEndpoint()
    try:
        with ScriptedModelServer([crop_reply(0, 0, 2048, 1536), answer_reply(2)]) as srv:
            exp = claude("vertex", srv, tmp_path, monkeypatch)
            key = service_account(tmp_path / "sa.json", tokens.url)  # tokens from the rotating endpoint
            monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
            ans = run(exp, slide_path)
            sent = [r.headers["authorization"].removeprefix("Bearer ") for r in srv.requests]
    finally:
        tokens.httpd.shutdown()
    assert ans.error is None and len(sent) == 2
    assert len(set(sent)) == 2 and set(sent) <= set(tokens.tokens)  # refreshed: another token each time
    for token in tokens.tokens:
        assert redact_secrets(f"a {token} b") == f"a {REDACTED} b"
