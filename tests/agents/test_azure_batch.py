"""Azure OpenAI's batch API and Entra ID sign-in, through ``AsyncAzureOpenAI`` against loopback servers:
the wire Azure's reference describes (routes under ``/openai`` with ``api-version``, the deployment in
every line's ``body.model``, one line url per file, the round tag in the input file's name), Azure's
validation failures, and keyless requests with a Microsoft Entra ID token from azure-identity's
``DefaultAzureCredential`` (a managed-identity endpoint on loopback), never stored anywhere."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.providers import MissingAPIKey
from giant_assets.agents.providers.azure import AzureChatModel, AzureResponsesModel
from giant_assets.agents.providers.batching import BatchRound, BatchStore, batch_client
from giant_assets.core.secrets import redact_secrets
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.batching import answer_all
from tests.support.cloud import ManagedIdentityEndpoint
from tests.support.slides import write_pyramidal_slide

KEY = "azure-batch-key-SECRET-0123456789abcdef"
DEPLOYMENT = "gpt5-global-batch"
PROMPT = "Which organ?\n1. Lung\n2. Liver\n3. Skin"
WIRES = {"responses": (AzureResponsesModel, "/v1/responses"), "chat": (AzureChatModel, "/chat/completions")}


def two_calls(request: RecordedRequest) -> Reply:
    return crop_reply(64, 32, 512, 512) if request.assistant_turns == 0 else answer_reply("2")


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("s") / "s.tiff", ONE_LESION_DESIGN, levels=3)


@pytest.fixture(autouse=True)
def _no_ambient_azure(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "GIANT_AZURE_AUTH", "IDENTITY_ENDPOINT", "IDENTITY_HEADER",
                 "MSI_ENDPOINT", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def _items(slide: Path, n: int) -> list[AgentItem]:
    return [AgentItem("gtex", str(i), f"{PROMPT}\n(item {i})", None, str(slide)) for i in range(n)]


def _batched(api: BatchAPIServer, store: Path, wire: str = "responses", logs: list[str] | None = None):
    model_class = WIRES[wire][0]
    chat = model_class("gpt-5", deployment=DEPLOYMENT, base_url=api.base_url, reasoning_effort="low")
    log = logs.append if logs is not None else (lambda _: None)
    chat.batch = BatchRound(
        batch_client(chat), BatchStore(store), poll_s=0.001, settle_s=0.05, log=log, max_line_attempts=1
    )
    return GiantAgent(chat, max_steps=3, image_size=500), chat.batch


@pytest.mark.parametrize("wire", list(WIRES))
def test_batches_follow_azures_wire(slide, tmp_path, monkeypatch, wire) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    with ScriptedModelServer(rule=two_calls) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        api.azure_key, api.deployments = KEY, {DEPLOYMENT}  # anything else: refused or failed validation
        agent, batch = _batched(api, tmp_path / "s", wire)
        answers = asyncio.run(answer_all(agent, _items(slide, 3), batch))
        calls, auth = list(api.calls), set(api.azure_auth)
        batches, files, names = list(api.batches.values()), dict(api.files), dict(api.file_names)
    assert all(a.error is None for a in answers), [a.error for a in answers]
    assert [json.loads(a.text)["answer"] for a in answers] == ["2"] * 3
    assert batch.rounds == 2 and len(batches) == 2 and all(b.kind == "azure" for b in batches)
    # the resource's routes only, each with the api-version and the key (the server refuses otherwise)
    assert {path for _, path in calls} <= {"/openai/files", "/openai/batches"} | {
        f"/openai/batches/{b.id}" for b in batches
    } | {f"/openai/files/{f}/content" for f in files}
    assert ("POST", "/openai/files") in calls and ("POST", "/openai/batches") in calls
    assert auth == {"api-key"}
    for b in batches:
        lines = [json.loads(raw) for raw in files[b.input_file_id].splitlines()]
        assert len(lines) == 3 and {line["url"] for line in lines} == {WIRES[wire][1]}
        assert {line["body"]["model"] for line in lines} == {DEPLOYMENT}  # the deployment, not gpt-5
        assert names[b.input_file_id].startswith("giant-round-") and b.metadata == {}  # no metadata sent


def test_a_batch_failing_azures_validation_fails_its_runs_with_azures_code(slide, tmp_path) -> None:
    logs: list[str] = []
    with ScriptedModelServer(rule=two_calls) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.deployments = {"some-other-deployment"}
        agent, batch = _batched(api, tmp_path / "s", logs=logs)
        answers = asyncio.run(answer_all(agent, _items(slide, 2), batch))
        assert not api.answered and [b.status for b in api.batches.values()] == ["failed"]
    assert all(a.error and "batch_max_line_attempts is 1" in a.error for a in answers)
    assert any("model_not_found" in line and DEPLOYMENT in line for line in logs), logs


def test_the_loopback_resource_refuses_what_azure_refuses(tmp_path) -> None:
    """The oracle of the tests above: no api-version, a wrong key or a missing token is refused."""
    import httpx

    with ScriptedModelServer(rule=two_calls) as model, BatchAPIServer(model) as api:
        api.azure_key = KEY
        no_version = httpx.get(f"{api.base_url}/openai/batches", headers={"api-key": KEY})
        wrong_key = httpx.get(f"{api.base_url}/openai/batches?api-version=2025-03-01-preview",
                              headers={"api-key": "nope"})  # fmt: skip
        listed = httpx.get(f"{api.base_url}/openai/batches?api-version=2025-03-01-preview",
                           headers={"api-key": KEY})  # fmt: skip
        api.azure_key, api.azure_token = None, "tok"
        keyed = httpx.get(f"{api.base_url}/openai/batches?api-version=2024-10-21", headers={"api-key": KEY})
    assert no_version.status_code == 400 and "api-version" in no_version.json()["error"]["message"]
    assert wrong_key.status_code == 401 and wrong_key.json()["error"]["code"] == "401"
    assert listed.status_code == 200 and listed.json()["data"] == []
    assert keyed.status_code == 401 and "Access token" in keyed.json()["error"]["message"]


# ---------------------------------------------------------------- Microsoft Entra ID


def test_entra_id_token_is_sent_as_bearer_and_never_kept(slide, tmp_path, monkeypatch) -> None:
    def rule(request: RecordedRequest) -> Reply:  # the second item's first call echoes its credentials
        if "(item 1)" in request.text:
            return Reply(status=400, text="bad request", echo_auth=True)
        return two_calls(request)

    with ManagedIdentityEndpoint() as identity, ScriptedModelServer(rule=rule) as srv:
        for k, v in (identity.env | {"GIANT_AZURE_AUTH": "entra"}).items():
            monkeypatch.setenv(k, v)
        chat = AzureResponsesModel("gpt-5", deployment=DEPLOYMENT, base_url=srv.base_url)
        answers = asyncio.run(
            answer_all(GiantAgent(chat, max_steps=3, image_size=500), _items(slide, 2), None)
        )
        requests, token = list(srv.requests), identity.token
    assert answers[0].error is None and json.loads(answers[0].text)["answer"] == "2"
    assert requests and all(r.headers["authorization"] == f"Bearer {token}" for r in requests)
    assert not any("api-key" in r.headers for r in requests)
    # asked for Azure OpenAI's scope, then cached (the two runs' first calls may both ask)
    assert set(identity.resources) == {"https://cognitiveservices.azure.com"} and len(identity.resources) <= 2
    # the echoed token is redacted from the run's error and from anything later written
    assert answers[1].error and "invalid credentials" in answers[1].error and token not in answers[1].error
    kept = json.dumps([dataclasses.asdict(a) for a in answers], default=str)
    assert token not in kept and token not in redact_secrets(f"x {token} y")


def test_entra_id_batches_carry_the_token(slide, tmp_path, monkeypatch) -> None:
    with (
        ManagedIdentityEndpoint() as identity,
        ScriptedModelServer(rule=two_calls) as model,
        BatchAPIServer(model, polls_to_finish=1) as api,
    ):
        api.azure_token = identity.token  # a key, or another token, is refused
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)  # set, but entra is asked for
        for k, v in (identity.env | {"GIANT_AZURE_AUTH": "entra"}).items():
            monkeypatch.setenv(k, v)
        agent, batch = _batched(api, tmp_path / "s")
        answers = asyncio.run(answer_all(agent, _items(slide, 2), batch))
        auth = list(api.azure_auth)
    assert all(a.error is None for a in answers), [a.error for a in answers]
    assert auth and set(auth) == {"bearer"} and batch.rounds == 2


def test_without_key_or_entra_credential_the_error_names_both(slide, monkeypatch) -> None:
    with ManagedIdentityEndpoint() as identity, ScriptedModelServer(rule=two_calls) as srv:
        env = identity.env | {"IDENTITY_HEADER": "not-the-secret", "GIANT_AZURE_AUTH": "entra",
                              "AZURE_TOKEN_CREDENTIALS": "ManagedIdentityCredential"}  # fmt: skip
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        chat = AzureResponsesModel("gpt-5", deployment=DEPLOYMENT, base_url=srv.base_url)
        (answer,) = asyncio.run(
            answer_all(GiantAgent(chat, max_steps=3, image_size=500), _items(slide, 1), None)
        )
        assert not srv.requests  # nothing sent without a credential
    assert "no Microsoft Entra ID token" in answer.error and "AZURE_OPENAI_API_KEY" in answer.error
    # no key at a remote endpoint: Entra ID by default; azure-identity not installed: refused when the
    # model is made, naming the key and the extra
    monkeypatch.delenv("GIANT_AZURE_AUTH")
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    with pytest.raises(
        MissingAPIKey, match=r"AZURE_OPENAI_API_KEY is not set and azure-identity .*giant-assets\[azure\]"
    ):
        AzureResponsesModel("gpt-5", deployment=DEPLOYMENT, base_url="https://r.openai.azure.com")
