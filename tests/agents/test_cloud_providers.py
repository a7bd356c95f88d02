"""Azure OpenAI, OpenRouter, Claude on Bedrock and Vertex AI, and Gemini: the GIANT loop over a real
generated slide, through each provider's SDK client, against the scripted loopback server at the
provider's own routes (``demo/scripted/routes.py`` refuses what the provider would refuse there), with
each provider's error bodies; and the request rules ``giant-experiments check`` refuses."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import load_price_table
from giant_assets.agents.providers import MissingAPIKey
from giant_assets.agents.registry import make_agent
from giant_assets.core.secrets import REDACTED, redact_secrets
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.cloud import (
    AWS_ENV,
    AWS_SECRET,
    CLIENT_SECRET,
    REFRESH_TOKEN,
    authorized_user,
    service_account,
)
from tests.support.slides import write_pyramidal_slide

REPO = Path(__file__).resolve().parents[2]
OPTIONS = ["Lung", "Liver", "Skin"]
PROMPT = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'
AZURE_KEY = "azure-key-0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("cloud") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def run(exp: Experiment, slide: Path) -> AgentAnswer:
    agent = make_agent(exp, pd.DataFrame(), None)
    assert isinstance(agent, GiantAgent) or exp.agent != "giant"

    async def go() -> AgentAnswer:
        try:
            return await agent.answer(AgentItem("tcga", "item-1", PROMPT, OPTIONS, str(slide)), 0)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def three_steps() -> list[Reply]:
    """A crop, a second crop, then the answer: images and tool calls both ways, on any wire."""
    return [crop_reply(0, 0, 2048, 1536), crop_reply(2048, 1536, 2048, 1536), answer_reply(2)]


def priced(ans: AgentAnswer, model: str) -> float:
    """The run's cost from its steps' tokens at ``model``'s list price (the independent sum)."""
    price = load_price_table().lookup(model)
    assert price is not None
    return sum(
        price[1].usd(s.input_tokens, s.output_tokens, s.cached_input_tokens or 0, s.cache_write_tokens or 0)
        for s in ans.steps
    )


# ---------------------------------------------------------------- Azure OpenAI


def azure(srv: ScriptedModelServer, **fields: Any) -> Experiment:
    settings = {"agent": "giant", "provider": "azure", "model": "gpt-5", "deployment": "giant-gpt5-eu",
                "azure_endpoint": srv.base_url, "max_steps": 6, "image_size": 560} | fields  # fmt: skip
    return Experiment(name="az", **settings)


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_azure_runs_the_protocol_at_its_deployment_routes(
    slide_path: Path, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    with ScriptedModelServer(three_steps()) as srv:
        ans = run(azure(srv, api=api), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 2}
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "crop", "answer"]
    path = "/openai/responses" if api == "responses" else "/openai/deployments/giant-gpt5-eu/chat/completions"
    assert [r.path for r in srv.requests] == [path] * 3 and srv.refused == []
    for r in srv.requests:
        assert r.query == {"api-version": "2025-03-01-preview"}
        assert r.headers["api-key"] == AZURE_KEY and "authorization" not in r.headers
        assert r.json["model"] == "giant-gpt5-eu"  # the deployment; the price goes by the model
    assert [len(r.images) for r in srv.requests] == [1, 2, 3]
    assert ans.cost_usd == pytest.approx(priced(ans, "gpt-5")) and ans.cost_usd > 0


def test_azure_route_without_api_version_is_refused_as_azure_would() -> None:
    """The loopback route checks what Azure checks: no api-version, no answer (the test above's oracle)."""
    import httpx

    with ScriptedModelServer([answer_reply(1)]) as srv:
        reply = httpx.post(f"{srv.base_url}/openai/responses", json={"model": "d", "input": "hi"})
    assert reply.status_code == 400 and "api-version" in reply.text
    assert len(srv.refused) == 1 and srv.requests == []


def test_azure_rate_limit_is_retried_and_context_too_long_is_not(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    limited = {
        "error": {
            "code": "429",
            "message": "Requests to the Responses_Create Operation under Azure OpenAI "
            "API version 2025-03-01-preview have exceeded token rate limit. Please retry after 1 second.",
        }
    }
    too_long = {"error": {"code": "context_length_exceeded", "type": "invalid_request_error",
                          "message": "This model's maximum context length is 272000 tokens."}}  # fmt: skip
    wait = Reply(status=429, headers={"retry-after-ms": "5"}, body=json.dumps(limited).encode())
    with ScriptedModelServer([wait, answer_reply(1)]) as srv:
        assert run(azure(srv), slide_path).error is None and len(srv.requests) == 2
    with ScriptedModelServer([Reply(status=400, body=json.dumps(too_long).encode())]) as srv:
        ans = run(azure(srv, max_attempts=1), slide_path)
    assert "HTTP 400 (not retryable): This model's maximum context length" in ans.error
    assert ans.error_kind is None and len(srv.requests) == 1  # an agent_error: re-run later, not filtered


FILTERED_PROMPT = {
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
        "policy. Please modify your prompt and retry.",
        "type": None, "param": "prompt", "code": "content_filter", "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                "hate": {"filtered": False, "severity": "safe"},
                "self_harm": {"filtered": False, "severity": "safe"},
                "sexual": {"filtered": False, "severity": "safe"},
                "violence": {"filtered": True, "severity": "medium"},
            },
        },
    }
}  # fmt: skip


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_azure_content_filter_is_recorded_as_such(
    slide_path: Path, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered prompt (400 ``content_filter``) ends the run with error kind content_filtered, after
    one request (not retried, not re-run), and never with the filter's text as the answer."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    blocked = Reply(status=400, body=json.dumps(FILTERED_PROMPT).encode())
    with ScriptedModelServer([crop_reply(0, 0, 2048, 1536), blocked]) as srv:
        ans = run(azure(srv, api=api, max_attempts=3), slide_path)
    assert ans.error_kind == "content_filtered" and ans.text == ""
    assert "content filter blocked the prompt (filtered: violence)" in ans.error
    assert len(srv.requests) == 2  # no retry, no second attempt


def test_azure_filtered_answer_is_not_an_answer(slide_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chat Completions: a reply cut by the filter (``finish_reason: content_filter``) is no answer."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    cut = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5",
        "choices": [{"index": 0, "finish_reason": "content_filter",
                     "message": {"role": "assistant", "content": "<report>partial"},
                     "content_filter_results": {"violence": {"filtered": True, "severity": "high"}}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 3, "total_tokens": 903},
    }  # fmt: skip
    with ScriptedModelServer([Reply(body=json.dumps(cut).encode())]) as srv:
        ans = run(azure(srv, api="chat"), slide_path)
    assert ans.error_kind == "content_filtered" and ans.text == "" and "blocked the answer" in ans.error
    assert "partial" not in json.dumps(ans.steps_as_dicts())


# ---------------------------------------------------------------- OpenRouter

OPENROUTER_KEY = "sk-or-v1-" + "0123456789abcdef" * 4


def openrouter(srv: ScriptedModelServer, **fields: Any) -> Experiment:
    settings = {"agent": "giant", "provider": "openrouter", "model": "openai/gpt-5", "max_steps": 6,
                "image_size": 560, "base_url": f"{srv.base_url}/api/v1"} | fields  # fmt: skip
    return Experiment(name="or", **settings)


def test_openrouter_runs_the_protocol_with_its_headers_and_names(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", OPENROUTER_KEY)
    with ScriptedModelServer(three_steps()) as srv:
        ans = run(openrouter(srv), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 2}
    assert [r.path for r in srv.requests] == ["/api/v1/chat/completions"] * 3
    for r in srv.requests:
        assert (
            r.headers["authorization"] == f"Bearer {OPENROUTER_KEY}"
            and r.headers["x-title"] == "giant-assets"
        )
        assert r.json["model"] == "openai/gpt-5"
        assert r.json["reasoning"] == {"effort": "high"} and "reasoning_effort" not in r.json
    assert ans.cost_usd == pytest.approx(priced(ans, "gpt-5")) and ans.cost_usd > 0


@pytest.mark.parametrize(
    ("model", "price_key", "reasons"),
    [("openai/gpt-4o", "gpt-4o", False), ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", True)],
)
def test_openrouter_names_map_to_the_vendors_rules_and_prices(
    slide_path: Path, model: str, price_key: str, reasons: bool
) -> None:
    with ScriptedModelServer([answer_reply(1)]) as srv:
        ans = run(openrouter(srv, model=model), slide_path)
    assert ans.error is None and ("reasoning" in srv.requests[0].json) is reasons
    assert load_price_table().lookup(model)[0] == price_key
    assert ans.cost_usd == pytest.approx(priced(ans, price_key)) and ans.cost_usd > 0


def test_openrouter_moderation_is_recorded_as_such(slide_path: Path) -> None:
    metadata = {"reasons": ["violence"], "flagged_input": "...", "provider_name": "OpenAI",
                "model_slug": "openai/gpt-5"}  # fmt: skip
    message = "openai/gpt-5 requires moderation on OpenAI. Your input was flagged"
    flagged = {"error": {"code": 403, "message": message, "metadata": metadata}}
    with ScriptedModelServer([Reply(status=403, body=json.dumps(flagged).encode())]) as srv:
        ans = run(openrouter(srv, max_attempts=2), slide_path)
    assert ans.error_kind == "content_filtered" and "moderation flagged the prompt (violence)" in ans.error
    assert len(srv.requests) == 1


# ---------------------------------------------------------------- Claude on Bedrock and Vertex AI


def cloud_claude(provider: str, base_url: str, **fields: Any) -> Experiment:
    region = "us-east-1" if provider == "bedrock" else "us-east5"
    settings = {"agent": "giant", "provider": provider, "model": "claude-sonnet-4-5", "max_steps": 6,
                "region": region, "base_url": base_url}  # fmt: skip
    return Experiment(name="cc", **(settings | fields))


def sigv4_oracle(request: Any, url: str) -> str:
    """The Authorization header botocore computes for the recorded request: its headers, its body, the
    signing time it carries (``x-amz-date``), so the oracle does not depend on when it runs."""
    import datetime

    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    names = request.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    aws = AWSRequest(
        method="POST", url=url, headers={k: request.headers[k] for k in names}, data=request.body
    )
    stamp = datetime.datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(botocore.auth, "get_current_datetime", lambda *args, **kwargs: stamp)
        signer = botocore.auth.SigV4Auth(
            Credentials(AWS_ENV["AWS_ACCESS_KEY_ID"], AWS_SECRET), "bedrock", "us-east-1"
        )
        signer.add_auth(aws)
    return aws.headers["Authorization"]


def test_bedrock_runs_the_protocol_signed_at_its_invoke_route(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    with ScriptedModelServer(three_steps()) as srv:
        ans = run(cloud_claude("bedrock", srv.base_url), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 2}
    model_id = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"  # an inference profile: Bedrock's rule
    assert [r.path for r in srv.requests] == [f"/model/{model_id}/invoke"] * 3 and srv.refused == []
    for r in srv.requests:
        assert r.json["anthropic_version"] == "bedrock-2023-05-31" and "model" not in r.json
        assert r.json["thinking"] == {"type": "enabled", "budget_tokens": 1024}
        assert r.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/")
        assert "/us-east-1/bedrock/aws4_request" in r.headers["authorization"]
        assert r.headers["authorization"] == sigv4_oracle(r, f"{srv.base_url}{r.path}")
        assert AWS_SECRET not in json.dumps(dict(r.headers))
    assert [len(r.images) for r in srv.requests] == [1, 2, 3]
    assert ans.cost_usd == pytest.approx(priced(ans, "claude-sonnet-4-5")) and ans.cost_usd > 0
    assert redact_secrets(f"boom {AWS_SECRET}") == f"boom {REDACTED}"  # remembered from the chain


def test_bedrock_throttling_is_retried_and_a_validation_error_is_not(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    throttled = Reply(status=429, headers={"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/"},
                      text="Too many requests, please wait before trying again.")  # fmt: skip
    too_long = Reply(status=400, headers={"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/"},
                     text="Input is too long for requested model.")  # fmt: skip
    with ScriptedModelServer([throttled, answer_reply(1)]) as srv:
        ans = run(cloud_claude("bedrock", srv.base_url), slide_path)
    assert ans.error is None and len(srv.requests) == 2
    with ScriptedModelServer([too_long]) as srv:
        ans = run(cloud_claude("bedrock", srv.base_url, max_attempts=1), slide_path)
    assert "HTTP 400 (not retryable): Input is too long for requested model." in ans.error
    assert len(srv.requests) == 1


def test_vertex_runs_the_protocol_with_adc_at_its_raw_predict_route(
    slide_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Application Default Credentials as Google's chain finds them (GOOGLE_APPLICATION_CREDENTIALS), the
    token fetched from the key file's token endpoint (here the loopback), the project from the file."""
    with ScriptedModelServer(three_steps()) as srv:
        key = service_account(tmp_path / "sa.json", f"{srv.base_url}/token")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        ans = run(cloud_claude("vertex", f"{srv.base_url}/v1"), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 2}
    route = "/v1/projects/giant-test-project/locations/us-east5/publishers/anthropic/models"
    assert [r.path for r in srv.requests] == [f"{route}/claude-sonnet-4-5@20250929:rawPredict"] * 3
    assert len(srv.token_requests) == 1 and srv.refused == []
    for r in srv.requests:
        assert r.json["anthropic_version"] == "vertex-2023-10-16" and "model" not in r.json
        assert r.headers["authorization"] == f"Bearer {srv.access_token}"
    assert ans.cost_usd == pytest.approx(priced(ans, "claude-sonnet-4-5")) and ans.cost_usd > 0
    assert srv.access_token not in redact_secrets(f"token {srv.access_token}")


def test_cloud_credentials_missing_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(MissingAPIKey, match="no AWS credentials found"):
        make_agent(
            cloud_claude("bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com"), pd.DataFrame(), None
        )


# ---------------------------------------------------------------- Gemini

GEMINI_KEY = "AIza" + "GeminiKeyForTests0123456789abcdefghi"


def gemini(srv: ScriptedModelServer, **fields: Any) -> Experiment:
    settings = {"agent": "giant", "provider": "gemini", "model": "gemini-2.5-pro", "max_steps": 6,
                "image_size": 560, "base_url": srv.base_url} | fields  # fmt: skip
    return Experiment(name="gm", **settings)


def test_gemini_runs_the_protocol_through_generate_content(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    with ScriptedModelServer(three_steps()) as srv:
        ans = run(gemini(srv), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 2}
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "crop", "answer"]
    assert [r.path for r in srv.requests] == ["/v1beta/models/gemini-2.5-pro:generateContent"] * 3
    for r in srv.requests:
        assert r.headers["x-goog-api-key"] == GEMINI_KEY
        thinking = r.json["generationConfig"]["thinkingConfig"]  # the SDK keeps these in proto names
        assert {k.replace("_", "").lower(): v for k, v in thinking.items()} == {
            "thinkingbudget": 1024, "includethoughts": True
        }  # fmt: skip
        declared = r.json["tools"][0]["functionDeclarations"][0]
        schema = (
            declared.get("parametersJsonSchema") or declared["parameters_json_schema"]
        )  # proto JSON: both
        assert declared["name"] == "slide_zoom" and schema["required"] == ["x0", "y0", "w", "h"]
        assert r.json["systemInstruction"]["parts"][0]["text"]
    assert [len(r.images) for r in srv.requests] == [1, 2, 3]
    # the model's first reply goes back verbatim: its thought and the call's thought signature
    sent = srv.requests[1].json["contents"]
    model_turn = next(c for c in sent if c["role"] == "model")
    signature = next(p["thoughtSignature"] for p in model_turn["parts"] if "functionCall" in p)
    assert base64.urlsafe_b64decode(signature + "==").startswith(b"sig-")
    result = next(p["functionResponse"] for p in sent[-1]["parts"] if "functionResponse" in p)
    assert result["name"] == "slide_zoom" and result["id"].startswith("call_")
    assert any("inlineData" in p for p in sent[-1]["parts"])  # the crop follows its result
    assert ans.cost_usd == pytest.approx(priced(ans, "gemini-2.5-pro")) and ans.cost_usd > 0


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]},
          "usageMetadata": {"promptTokenCount": 900, "totalTokenCount": 900}},
         "safety system blocked the prompt (SAFETY)"),
        ({"candidates": [{"finishReason": "PROHIBITED_CONTENT", "index": 0}],
          "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 0, "totalTokenCount": 900}},
         "safety system stopped the answer (PROHIBITED_CONTENT)"),
    ],
)  # fmt: skip
def test_gemini_safety_blocks_are_recorded_as_such(slide_path: Path, reply: dict, message: str) -> None:
    with ScriptedModelServer([Reply(body=json.dumps(reply).encode())]) as srv:
        ans = run(gemini(srv, max_attempts=2), slide_path)
    assert ans.error_kind == "content_filtered" and message in ans.error and ans.text == ""
    assert len(srv.requests) == 1


def test_gemini_rate_limit_is_retried_and_an_invalid_argument_is_not(slide_path: Path) -> None:
    exhausted = Reply(status=429, headers={"Retry-After": "0"}, text="Resource has been exhausted")
    too_long = Reply(status=400, text="The input token count (1200000) exceeds the maximum number of tokens")
    with ScriptedModelServer([exhausted, answer_reply(1)]) as srv:
        assert run(gemini(srv), slide_path).error is None and len(srv.requests) == 2
    with ScriptedModelServer([too_long]) as srv:
        ans = run(gemini(srv, max_attempts=1), slide_path)
    assert "HTTP 400 (not retryable): INVALID_ARGUMENT The input token count" in ans.error
    assert len(srv.requests) == 1


def test_gemini_implicit_cache_hits_are_billed_at_the_cached_rate(slide_path: Path) -> None:
    """Gemini 2.5's implicit caching: ``cachedContentTokenCount`` (a part of ``promptTokenCount``) is
    billed at the cache-read rate, the rest of the prompt at the input rate, thinking as output."""
    replies = [
        Reply(crop=(0, 0, 2048, 1536), usage=(10_000, 400), cached=0),
        Reply(answer=2, usage=(20_000, 400), cached=8_000),
    ]
    with ScriptedModelServer(replies) as srv:
        ans = run(gemini(srv), slide_path)
    assert ans.error is None and [s.cached_input_tokens for s in ans.steps[1:]] == [0, 8_000]
    # gemini-2.5-pro: $1.25 input, $0.125 cached input, $10 output per 1M tokens (2025-10-31 list)
    expected = (10_000 * 1.25 + 400 * 10 + 12_000 * 1.25 + 8_000 * 0.125 + 400 * 10) / 1e6
    assert ans.cost_usd == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("model", "rates"),
    [("gemini-2.5-pro", (1.25, 0.125, 10.0)), ("gemini-2.5-flash", (0.30, 0.03, 2.50)),
     ("gemini-2.5-flash-lite", (0.10, 0.01, 0.40)), ("gemini-3-pro-preview", (2.0, 0.20, 12.0))],
)  # fmt: skip
def test_gemini_list_prices_are_the_pricing_pages(model: str, rates: tuple[float, float, float]) -> None:
    """(input, cached input, output) per 1M tokens, paid tier, prompts up to 200k tokens, as
    https://ai.google.dev/gemini-api/docs/pricing lists them ("Last updated 2025-10-31 UTC")."""
    price = load_price_table().prices[model]
    assert (price.input_per_mtok, price.cached_input_per_mtok, price.output_per_mtok) == rates


def vertex_gemini(srv: ScriptedModelServer, **fields: Any) -> Experiment:
    return gemini(srv, region="us-central1", **fields)


def test_gemini_on_vertex_signs_in_with_adc_at_its_generate_content_route(
    slide_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini through Vertex AI: a service-account key as Google's chain finds it, the token fetched
    from the key file's token endpoint (here the loopback), the project from the file, the bearer token
    on every request, no API key; priced as the model; the token scrubbed from every stored text."""
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)  # present, and not sent: Vertex signs in with ADC
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with ScriptedModelServer(three_steps()) as srv:
        key = service_account(tmp_path / "sa.json", f"{srv.base_url}/token")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        ans = run(vertex_gemini(srv), slide_path)
    assert ans.error is None and json.loads(ans.text) == {"answer": 2}
    route = "/v1beta1/projects/giant-test-project/locations/us-central1/publishers/google/models"
    assert [r.path for r in srv.requests] == [f"{route}/gemini-2.5-pro:generateContent"] * 3
    assert len(srv.token_requests) == 1 and srv.refused == []
    assert b"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer" in srv.token_requests[0].body
    for r in srv.requests:
        assert r.headers["authorization"] == f"Bearer {srv.access_token}"
        assert "x-goog-api-key" not in r.headers and "key" not in r.query
        assert r.json["tools"][0]["functionDeclarations"][0]["name"] == "slide_zoom"
    assert [len(r.images) for r in srv.requests] == [1, 2, 3]
    assert ans.cost_usd == pytest.approx(priced(ans, "gemini-2.5-pro")) and ans.cost_usd > 0
    assert redact_secrets(f"token {srv.access_token}") == f"token {REDACTED}"


def test_gemini_on_vertex_is_its_own_result_set_whatever_its_region() -> None:
    """Vertex AI is another service than the Gemini API: another config hash (its own journals); the
    region and project are where it runs, not what it answers (speed fields)."""
    declared = load_experiments(REPO / "experiments.yaml")
    api, vertex = declared["gemini-giant"], declared["vertex-gemini-giant"]
    assert vertex.vertex_ai and not api.vertex_ai
    assert vertex.config_hash() != api.config_hash()
    moved = vertex.model_copy(update={"region": "europe-west4", "project": "another"})
    assert moved.config_hash() == vertex.config_hash()
    assert vertex.endpoint == "https://us-central1-aiplatform.googleapis.com"
    assert vertex.model_copy(update={"region": "global"}).endpoint == "https://aiplatform.googleapis.com"


def test_gemini_on_vertex_refused_token_is_one_clear_error(
    slide_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 403 from Vertex (no permission on the project) fails the run with Google's message, after one
    request, the token not in it."""
    denied = Reply(status=403, text="Permission 'aiplatform.endpoints.predict' denied on resource")
    with ScriptedModelServer([denied]) as srv:
        key = service_account(tmp_path / "sa.json", f"{srv.base_url}/token")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        ans = run(vertex_gemini(srv, max_attempts=1, project="other-project"), slide_path)
    assert (
        "HTTP 403 (not retryable): PERMISSION_DENIED Permission 'aiplatform.endpoints.predict'" in ans.error
    )
    assert srv.requests[0].path.startswith("/v1beta1/projects/other-project/locations/us-central1/")
    assert len(srv.requests) == 1 and srv.access_token not in ans.error


def test_authorized_user_credentials_are_remembered_for_redaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gcloud auth application-default login``'s file: its refresh token and client secret are
    scrubbed from stored text once read (google-auth sends this kind to Google's own token endpoint
    whatever the file says, so its exchange is not served on loopback); a private key by its shape."""
    from giant_assets.agents.providers.google_auth import google_credentials

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(authorized_user(tmp_path / "adc.json", "x")))
    credentials, _ = google_credentials("gemini")
    assert credentials.refresh_token == REFRESH_TOKEN
    pem = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"
    text = f"a {REFRESH_TOKEN} b {CLIENT_SECRET} c {pem} d"
    assert redact_secrets(text) == f"a {REDACTED} b {REDACTED} c {REDACTED}\\n d"


def test_google_credentials_missing_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")
    with pytest.raises(MissingAPIKey, match="provider 'gemini': no Google credentials"):
        make_agent(
            Experiment(
                name="v", agent="giant", provider="gemini", model="gemini-2.5-pro", region="us-central1"
            ),
            pd.DataFrame(),
            None,
        )


# ---------------------------------------------------------------- what check refuses

AZ = "provider: azure, azure_endpoint: https://r.openai.azure.com"


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ("provider: azure, model: gpt-5", "field 'azure_endpoint': provider 'azure' needs"),
        ("provider: azure, model: gpt-5, azure_endpoint: https://r.openai.azure.com, api_version: 2024-10-21",
         "field 'api_version': Azure serves the Responses API from 2025-03-01-preview"),
        (f"{AZ}, model: gpt-5, api_version: 2024-12-01-preview",
         "field 'api_version': Azure serves the Responses API from 2025-03-01-preview"),
        ("provider: azure, model: gpt-5, azure_endpoint: https://r.openai.azure.com, api_version: latest",
         "field 'api_version': 'latest' is not an Azure api-version"),
        ("provider: azure, model: gpt-5, azure_endpoint: https://r.openai.azure.com, api: messages",
         "provider 'azure' speaks api 'responses' or 'chat', not 'messages'"),
        (f"{AZ}, model: gpt-4.1, api: chat, api_version: 2024-06-01, batch: true",
         "field 'api_version': Azure's batch API .* needs api-version 2024-07-01-preview or later"),
        ("provider: openrouter, model: gpt-5", "field 'model': OpenRouter names models 'vendor/model'"),
        ("provider: openrouter, model: openai/gpt-5, api: responses",
         "provider 'openrouter' speaks api 'chat'"),
        ("provider: bedrock, model: claude-sonnet-4-5", "field 'region': provider 'bedrock' needs"),
        ("provider: vertex, model: claude-sonnet-4-5, region: us-east5, thinking_budget: 500",
         "field 'thinking_budget': 500 is below Anthropic's minimum"),
        ("provider: bedrock, model: claude-opus-4-1, region: us-east-1, thinking_budget: 30000",
         "field .thinking_budget.: 30000 thinking tokens leave nothing of max_tokens 30000"),
        ("provider: gemini, model: gemini-2.5-pro, thinking_budget: 0",
         "field 'thinking_budget': gemini-2.5-pro takes a thinking budget of 128 to 32768 tokens"),
        ("provider: gemini, model: gemini-2.5-flash-lite, thinking_budget: 100", "field .*512 to 24576"),
        ("provider: openai, model: gpt-5, region: us-east-1", "field 'region' applies to provider 'bedrock'"),
        ("provider: vertex, model: gemini-2.5-pro, region: us-central1",
         "field 'provider': provider 'vertex' serves Claude .* use provider 'gemini' with its region"),
        ("provider: gemini, model: gemini-2.5-pro, project: giant-p1",
         "field 'project': Gemini through Vertex AI needs its region too"),
        ("provider: gemini, model: gemini-2.5-pro, region: us-central1, api_key_env: MY_KEY",
         "field 'api_key_env': Gemini on Vertex AI .* Application Default Credentials"),
        ("provider: gemini, model: gemini-2.5-pro, region: us-central1, batch: true",
         "field 'batch': Vertex AI batch prediction .* is not wired for Gemini"),
        ("provider: gemini, model: gemini-2.5-pro, deployment: d", "field 'deployment' applies to provider"),
        ("provider: gemini, model: gemini-2.5-pro, region: us-central1, thinking_budget: 0",
         "field 'thinking_budget': gemini-2.5-pro takes a thinking budget of 128 to 32768 tokens"),
        *((f"provider: {p}, model: {m}, {extra} batch: true",
           f"field 'batch': batch mode is not available for provider '{p}' yet")
          for p, m, extra in [("openrouter", "openai/gpt-5", ""),
                              ("bedrock", "claude-sonnet-4-5", "region: us-east-1,"),
                              ("vertex", "claude-sonnet-4-5", "region: us-east5,")]),
    ],
)  # fmt: skip
def test_settings_the_provider_would_refuse_fail_the_check(
    tmp_path: Path, settings: str, refusal: str
) -> None:
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  e: {{agent: giant, budget_usd: 5, {settings}}}\n")
    with pytest.raises(
        ExperimentsFileError, match=f"experiment 'e': (field '\\(experiment\\)': Value error, )?{refusal}"
    ):
        load_experiments(path)


@pytest.mark.parametrize(
    "settings",
    [
        f"{AZ}, model: gpt-5, api_version: 2025-04-01-preview",
        f"{AZ}, model: gpt-4.1, api: chat, api_version: 2024-10-21",
        f"{AZ}, model: gpt-5, batch: true",  # Global Batch: Files + Batches at the default api-version
        "provider: gemini, model: gemini-2.5-flash, thinking_budget: 0",
        "provider: gemini, model: gemini-2.5-pro, batch: true, batch_wait: detach",
        "provider: vertex, model: claude-sonnet-4-5, region: global, deployment: claude-sonnet-4-5@20250929",
        "provider: gemini, model: gemini-2.5-flash, region: us-central1, project: giant-p1",
        "provider: gemini, model: gemini-2.5-pro, region: global",
    ],
)  # fmt: skip
def test_settings_within_the_providers_rules_pass_the_check(tmp_path: Path, settings: str) -> None:
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  e: {{agent: giant, budget_usd: 5, {settings}}}\n")
    assert load_experiments(path)["e"].provider in settings


def test_declared_cloud_examples_pass_the_check_and_are_priced() -> None:
    """``giant-experiments check`` accepts each declared example; the estimate prices each."""
    from giant_assets.agents.estimate import estimate

    declared = load_experiments(REPO / "experiments.yaml")
    names = ["azure-gpt5-giant", "openrouter-gpt5-giant", "bedrock-claude-giant", "vertex-claude-giant",
             "gemini-giant", "vertex-gemini-giant"]  # fmt: skip
    for name in names:
        exp = declared[name]
        assert exp.paid and exp.unbudgeted() is None
        est = estimate(exp, "tcga", items=10, prices=load_price_table())
        assert est.priced and est.usd.low > 0, name


def test_a_thumbnail_blocked_by_gemini_safety_is_recorded_as_such(slide_path: Path) -> None:
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}
    with ScriptedModelServer([Reply(body=json.dumps(blocked).encode())]) as srv:
        ans = run(gemini(srv, agent="thumbnail"), slide_path)
    assert ans.error_kind == "content_filtered" and ans.text == "" and len(srv.requests) == 1


def test_cloud_credentials_of_a_known_shape_are_redacted_unread() -> None:
    """Credentials this process never read are still scrubbed by their shape; model names, digests and
    ordinary words are left alone."""
    signature = "Signature=" + "0123456789abcdef" * 4
    text = (f"AKIAIOSFODNN7EXAMPLE {signature} ya29.a0AfB_byC-abcdefghijklmnop AIza{'x' * 35} "
            f"sk-or-v1-{'ab' * 32} gemini-2.5-pro sha256={'0123456789abcdef' * 4}")  # fmt: skip
    assert redact_secrets(text) == (
        f"{REDACTED} Signature={REDACTED} {REDACTED} {REDACTED} {REDACTED} gemini-2.5-pro "
        f"sha256={'0123456789abcdef' * 4}"
    )


@pytest.mark.parametrize(
    ("cloud", "direct"),
    [("azure-gpt5-giant", "gpt5-giant"), ("bedrock-claude-giant", "claude-giant"),
     ("vertex-claude-giant", "claude-giant"), ("openrouter-gpt5-giant", "gpt5-giant"),
     ("vertex-gemini-giant", "gemini-giant")],
)  # fmt: skip
def test_a_cloud_estimates_as_the_model_it_serves(cloud: str, direct: str) -> None:
    """The same model through a cloud is counted by its family's image rules and priced alike."""
    from giant_assets.agents.estimate import estimate

    declared, prices = load_experiments(REPO / "experiments.yaml"), load_price_table()
    a, b = (estimate(declared[n], "tcga", items=10, prices=prices) for n in (cloud, direct))
    assert (a.input_tokens, a.output_tokens, a.usd) == (b.input_tokens, b.output_tokens, b.usd)


def test_gemini_image_tokens_follow_its_tiles() -> None:
    from giant_assets.agents.pricing import image_tokens

    assert [image_tokens("gemini", w, h) for w, h in [(384, 384), (500, 375), (1000, 750), (1537, 768)]] == [
        258, 258, 516, 774
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (["--provider", "azure", "--model", "gpt-5"], "field 'azure_endpoint': provider 'azure' needs"),
        (["--provider", "gemini", "--model", "gemini-2.5-pro", "--thinking-budget", "0"],
         "gemini-2.5-pro takes a thinking budget of 128 to 32768"),
        (["--provider", "bedrock", "--model", "claude-sonnet-4-5"],
         "field 'region': provider 'bedrock' needs"),
    ],
)  # fmt: skip
def test_giant_run_refuses_what_the_provider_would_before_any_call(
    slide_path: Path, flags: list[str], refusal: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from tests.agents.test_run_cli import giant_run_in_process

    with ScriptedModelServer([answer_reply(1)]) as srv:
        where = (
            ["--api-key-env", "AZURE_OPENAI_API_KEY"] if "azure" in flags else ["--base-url", srv.base_url]
        )
        code, stderr = giant_run_in_process(
            monkeypatch, capsys, str(slide_path), "--question", "Which?", *where, *flags
        )
        assert srv.requests == [] and srv.refused == []
    assert code == 2 and refusal in stderr


@pytest.mark.parametrize(
    ("provider", "env", "token"),
    [("bedrock", "AWS_BEARER_TOKEN_BEDROCK", "ABSKQmVkcm9ja0FQSUtleS1TRUNSRVQ0NTY3ODkw"),
     ("vertex", "ANTHROPIC_VERTEX_ACCESS_TOKEN", "ya29.c.given-token-SECRET-0123456789")],
)  # fmt: skip
def test_a_cloud_token_from_the_environment_replaces_the_chain(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, env: str, token: str
) -> None:
    """A Bedrock API key / a Vertex access token: sent as the bearer token, no signing, no ADC, and
    scrubbed from stored text as every key is."""
    monkeypatch.setenv(env, token)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    with ScriptedModelServer([answer_reply(1)]) as srv:
        base = srv.base_url + ("/v1" if provider == "vertex" else "")
        ans = run(
            cloud_claude(provider, base, project="giant-p1" if provider == "vertex" else ""), slide_path
        )
    assert ans.error is None and srv.token_requests == [] and srv.refused == []
    assert srv.requests[0].headers["authorization"] == f"Bearer {token}"
    assert redact_secrets(f"x {token} y") == f"x {REDACTED} y"
