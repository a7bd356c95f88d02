"""The three wire formats through the real SDKs against a real loopback server: request shapes, tool calls,
reasoning/thinking passed back, caching fields, usage; retries, Retry-After, the limiter per attempt, keys."""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import socket
from datetime import UTC, datetime

import pytest
from PIL import Image

from giant_assets.agents.providers import (
    REDACTED,
    AnthropicChatModel,
    ImagePart,
    MalformedResponse,
    Message,
    MissingAPIKey,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ProviderHTTPError,
    RetriesExhausted,
    RetryPolicy,
    TextPart,
    ToolSpec,
    make_chat_model,
    parse_retry_after,
)
from giant_assets.demo.scripted import (
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
    malformed,
    rate_limited,
    server_error,
    unauthorized_echo,
)
from giant_assets.experiments.spec import Experiment

KEY = "sk-test-Zq8v1SECRETkey0000000000000042"
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=5)
ZOOM = ToolSpec("slide_zoom", "zoom", {"type": "object", "properties": {"x0": {"type": "integer"}}})


def png_b64(size: tuple[int, int], color: tuple[int, int, int]) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


MESSAGES = [
    Message.system("be brief"),
    Message.user(TextPart("what is this?"), ImagePart(png_b64((40, 30), (200, 10, 10)), "image/png")),
]


class CountingLimiter:
    """A RateLimiter that only counts: acquires (one per HTTP attempt) and tokens recorded."""

    def __init__(self) -> None:
        self.acquired = 0
        self.tokens: list[int] = []

    async def acquire(self) -> None:
        self.acquired += 1

    async def record_tokens(self, n: int) -> None:
        self.tokens.append(n)


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GIANT_TEST_KEY", KEY)
    return "GIANT_TEST_KEY"


def model_for(srv: ScriptedModelServer, api: str, key_env: str | None = None, **kwargs):
    cls = {"responses": OpenAIResponsesModel, "chat": OpenAIChatModel, "messages": AnthropicChatModel}[api]
    base = srv.base_url if api == "messages" else srv.openai_base_url
    return cls("m-x", base_url=base, api_key_env=key_env or "", retry=FAST, **kwargs)


def call(model, messages=MESSAGES, tools=(), cache_key=None):
    async def go():
        try:
            return await model.complete(messages, tools, cache_key)
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_responses_request_shape_tool_call_reasoning_and_usage(key_env: str) -> None:
    script = [Reply("zooming", crop=(1, 2, 3, 4), reasoning="look at the dark area", cached=12)]
    with ScriptedModelServer(script) as srv:
        model = model_for(srv, "responses", key_env, reasoning_effort="high", max_tokens=99)
        reply = call(model, tools=[ZOOM], cache_key="item-7")
    (req,) = srv.requests
    body = req.json
    assert req.path == "/v1/responses" and req.headers["Authorization"] == f"Bearer {KEY}"
    assert body["model"] == "m-x" and body["max_output_tokens"] == 99 and "instructions" not in body
    # as the official agent sends it
    assert body["input"][0] == {"role": "system", "type": "message", "content": "be brief"}
    assert body["tools"] == [{"type": "function", "name": "slide_zoom", "description": "zoom",
                              "parameters": ZOOM.parameters, "strict": False}]  # fmt: skip
    assert body["reasoning"]["effort"] == "high" and body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False and body["prompt_cache_key"] == "item-7"
    image = body["input"][1]["content"][1]
    assert image["type"] == "input_image" and "detail" not in image  # a part without detail: the API's auto
    assert image["image_url"].startswith("data:image/png;base64,") and req.images[0].size == (40, 30)
    assert srv.requests[0].headers.get("x-stainless-retry-count") == "0"
    (tool_call,) = reply.tool_calls
    assert (tool_call.name, tool_call.arguments) == ("slide_zoom", {"x0": 1, "y0": 2, "w": 3, "h": 4})
    assert reply.text == "zooming" and reply.reasoning == "look at the dark area"
    assert reply.usage.cached_input_tokens == 12 and reply.usage.reasoning_tokens > 0
    assert [item["type"] for item in reply.replay] == ["reasoning", "message", "function_call"]
    assert reply.replay[0]["encrypted_content"].startswith("enc-")


def test_responses_passes_reasoning_items_and_tool_output_back(key_env: str) -> None:
    script = [crop_reply(1, 2, 3, 4), answer_reply("2")]
    with ScriptedModelServer(script) as srv:
        model = model_for(srv, "responses", key_env, reasoning_effort="low")

        async def go():
            first = await model.complete(MESSAGES, [ZOOM])
            crop = ImagePart(png_b64((64, 32), (0, 0, 255)), "image/png", detail="high")
            result = Message.tool_result(first.tool_calls[0].id, TextPart("here"), crop)
            second = await model.complete([*MESSAGES, first.as_message(), result], [ZOOM])
            await model.aclose()
            return first, second

        first, second = asyncio.run(go())
    items = srv.requests[1].json["input"]
    assert [i.get("type", "message") for i in items] == [
        "message", "message", "reasoning", "message", "function_call", "function_call_output"
    ]  # fmt: skip
    assert items[2] == first.replay[0]  # the reasoning item went back verbatim, encrypted content included
    output = items[5]
    assert output["call_id"] == first.tool_calls[0].id and output["output"][1]["detail"] == "high"
    assert srv.requests[1].images[1].size == (64, 32)
    assert "<response>" in second.text and not second.tool_calls


def test_chat_completions_tools_and_image_after_the_tool_result(key_env: str) -> None:
    script = [crop_reply(5, 6, 7, 8), Reply("done", usage=(300, 9), cached=128)]
    with ScriptedModelServer(script) as srv:
        model = model_for(srv, "chat", key_env)

        async def go():
            first = await model.complete(MESSAGES, [ZOOM])
            crop = ImagePart(png_b64((16, 16), (0, 255, 0)), "image/png", detail="low")
            result = Message.tool_result(first.tool_calls[0].id, TextPart("crop"), crop)
            second = await model.complete([*MESSAGES, first.as_message(), result], [ZOOM])
            await model.aclose()
            return first, second

        first, second = asyncio.run(go())
    body = srv.requests[1].json
    assert srv.requests[0].path == "/v1/chat/completions"
    assert body["tools"][0] == {"type": "function", "function": {"name": "slide_zoom", "description": "zoom",
                                                                 "parameters": ZOOM.parameters}}  # fmt: skip
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]  # the crop image follows the tool result
    assert (
        body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"x0": 5, "y0": 6, "w": 7, "h": 8}'
    )
    assert body["messages"][3] == {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "crop"}
    assert body["messages"][4]["content"][0]["image_url"]["detail"] == "low"
    assert list(body["messages"][1]["content"][1]["image_url"]) == ["url"]  # no detail: the API's auto
    assert "reasoning_effort" not in body and "prompt_cache_key" not in body
    assert (second.text, second.usage.input_tokens, second.usage.cached_input_tokens) == ("done", 300, 128)


def test_anthropic_tool_use_thinking_cache_control_and_usage(key_env: str) -> None:
    script = [crop_reply(1, 2, 3, 4), answer_reply("3")]
    with ScriptedModelServer(script) as srv:
        model = model_for(srv, "messages", key_env, thinking_budget=1024)

        async def go():
            first = await model.complete(MESSAGES, [ZOOM])
            crop = ImagePart(png_b64((20, 10), (9, 9, 9)), "image/png")
            result = Message.tool_result(first.tool_calls[0].id, TextPart("crop"), crop)
            second = await model.complete([*MESSAGES, first.as_message(), result], [ZOOM])
            await model.aclose()
            return first, second

        first, second = asyncio.run(go())
    req0, req1 = srv.requests
    assert req0.path == "/v1/messages" and req0.headers["anthropic-version"]
    assert KEY in (req0.headers.get("x-api-key", "") + req0.headers.get("Authorization", ""))
    body = req1.json
    assert (
        body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
        and body["max_tokens"] == 30000  # official
    )
    assert body["tools"] == [{"name": "slide_zoom", "description": "zoom", "input_schema": ZOOM.parameters}]
    assert body["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    assistant = body["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    assert assistant["content"][0] == first.replay[0]  # signature and all, as the API requires
    last = body["messages"][2]["content"][-1]
    assert last["type"] == "tool_result" and last["cache_control"] == {"type": "ephemeral"}
    assert [b["type"] for b in last["content"]] == ["text", "image"]
    # the server's cache: the first call wrote everything, the second read the prefix it had seen
    u1, u2 = first.usage, second.usage
    assert u1.cached_input_tokens == 0 and u1.cache_write_tokens == u1.input_tokens > 0
    assert 0 < u2.cached_input_tokens < u2.input_tokens and u2.cache_write_tokens > 0
    assert second.reasoning == "enough seen" and "<response>" in second.text


def test_retries_5xx_then_succeeds_and_limiter_admits_every_attempt(key_env: str) -> None:
    limiter = CountingLimiter()
    script = [server_error(500), server_error(503), Reply("ok", usage=(40, 2))]
    with ScriptedModelServer(script) as srv:
        reply = call(model_for(srv, "responses", key_env, limiter=limiter))
    assert reply.attempts == 3 and len(srv.requests) == 3 and reply.text == "ok"
    assert limiter.acquired == 3 and limiter.tokens == [42]
    # the SDK's own retries are off: each HTTP attempt came from our loop, a fresh first try for the SDK
    assert {r.headers.get("x-stainless-retry-count") for r in srv.requests} == {"0"}


@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
def test_retry_after_is_honoured(key_env: str, api: str) -> None:
    script = [rate_limited(0.2), rate_limited("0.2"), Reply("ok")]
    with ScriptedModelServer(script) as srv:
        reply = call(model_for(srv, api, key_env))
    assert reply.text == "ok" and reply.attempts == 3
    assert 0.4 <= reply.waited_s <= 0.4 * 1.1 + 1e-9  # the hint (+<=10% jitter), not the 0.01 s backoff
    gaps = [b.received_at - a.received_at for a, b in zip(srv.requests, srv.requests[1:], strict=False)]
    assert min(gaps) >= 0.2


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "7"}, now) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}, now) == 1.5
    assert parse_retry_after({"Retry-After": "Wed, 01 Jan 2025 12:00:30 GMT"}, now) == 30.0
    assert parse_retry_after({"Retry-After": "Wed, 01 Jan 2025 11:59:00 GMT"}, now) == 0.0  # in the past
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}, now) == 0.25
    assert parse_retry_after({"Retry-After": "soon"}, now) is None
    assert parse_retry_after({}, now) is None


def test_5xx_forever_stops_after_max_attempts(key_env: str) -> None:
    exhausted = pytest.raises(RetriesExhausted, match=r"failed after 4 attempts.*HTTP 502")
    with ScriptedModelServer(rule=lambda req: server_error(502)) as srv, exhausted as err:
        call(model_for(srv, "messages", key_env))
    assert len(srv.requests) == 4 and err.value.status == 502 and err.value.attempts == 4


def test_retry_after_beyond_budget_gives_up_at_once(key_env: str) -> None:
    with ScriptedModelServer(rule=lambda req: rate_limited(120)) as srv:
        model = model_for(srv, "responses", key_env)
        model.retry = RetryPolicy(max_attempts=5, max_total_wait_s=1.0)
        with pytest.raises(RetriesExhausted, match="retry budget.*HTTP 429"):
            call(model)
    assert len(srv.requests) == 1


def test_non_retryable_4xx_is_a_clear_error(key_env: str) -> None:
    refused = pytest.raises(ProviderHTTPError, match=r"HTTP 400 \(not retryable\): image too large")
    with ScriptedModelServer([Reply(status=400, text="image too large")]) as srv, refused as err:
        call(model_for(srv, "chat", key_env))
    assert err.value.status == 400 and len(srv.requests) == 1


def test_malformed_json_is_a_clear_error(key_env: str) -> None:
    with ScriptedModelServer([malformed()]) as srv, pytest.raises(MalformedResponse):
        call(model_for(srv, "chat", key_env))
    assert len(srv.requests) == 1
    # a body without "choices" is malformed; "choices": [] is an empty reply (test_empty_replies.py)
    lacking = pytest.raises(MalformedResponse, match="lacks what was expected.*TypeError")
    with ScriptedModelServer([Reply(body=b'{"id": "x"}')]) as srv, lacking:
        call(model_for(srv, "chat", key_env))


def test_timeout_is_retried(key_env: str) -> None:
    with ScriptedModelServer([Reply("late", delay_s=1.0), Reply("on time")]) as srv:
        reply = call(model_for(srv, "responses", key_env, timeout_s=0.25))
    assert reply.text == "on time" and reply.attempts == 2


def test_connection_refused_is_retried_then_reported(key_env: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIResponsesModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=key_env, retry=FAST)
    with pytest.raises(RetriesExhausted, match="failed after 4 attempts.*connection failed") as err:
        call(model)
    assert err.value.status is None


def test_key_only_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # set, but a loopback model without api_key_env sends none
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY is not set"):
        OpenAIResponsesModel("gpt-5")  # the real API needs a key
    with pytest.raises(MissingAPIKey, match="NAME of an environment variable") as err:
        OpenAIResponsesModel("gpt-5", api_key_env=KEY)  # a key pasted where the variable name belongs
    assert KEY not in str(err.value)
    with ScriptedModelServer([Reply("ok"), Reply("ok")]) as srv:  # a local server needs none
        assert (
            call(OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env="NO_SUCH_VAR")).text == "ok"
        )
        assert call(AnthropicChatModel("m", base_url=srv.base_url, api_key_env="NO_SUCH_VAR")).text == "ok"
    for req in srv.requests:
        assert (
            "Authorization" not in req.headers
            and "x-api-key" not in req.headers
            and KEY.encode() not in req.body
        )
    with pytest.raises(MissingAPIKey, match="MY_KEY"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY", require_key=True)


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_key_never_in_errors_reprs_or_logs(key_env: str, api: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with ScriptedModelServer([rate_limited(0.01), unauthorized_echo()]) as srv:
        model = model_for(srv, api, key_env)
        assert KEY not in repr(model) and KEY not in repr(model._key) and KEY not in str(vars(model))
        with pytest.raises(ProviderHTTPError) as err:
            call(model)
    assert KEY in srv.requests[1].headers.get("Authorization", "") + srv.requests[1].headers.get(
        "x-api-key", ""
    )
    assert REDACTED in str(err.value) and err.value.status == 401  # echoed back, then redacted
    assert KEY not in str(err.value) and KEY not in repr(err.value)
    assert caplog.records and KEY not in caplog.text


def test_make_chat_model_follows_the_experiment(key_env: str) -> None:
    base = {"name": "e", "agent": "giant", "model": "m", "api_key_env": key_env}
    cases = [
        ({"provider": "openai", "base_url": "http://127.0.0.1:1/v1"}, OpenAIResponsesModel, "/v1/responses"),
        (
            {"provider": "openai", "api": "chat", "base_url": "http://127.0.0.1:1/v1"},
            OpenAIChatModel,
            "/v1/chat",
        ),
        ({"provider": "anthropic", "base_url": "http://127.0.0.1:1"}, AnthropicChatModel, "/v1/messages"),
    ]
    for extra, cls, path in cases:
        model = make_chat_model(Experiment(**base, **extra, reasoning_effort="medium"), None)
        assert type(model) is cls and path in model.url
        assert getattr(model, "reasoning_effort", "medium") == "medium"
        assert model._client.max_retries == 0  # one retry policy: ours
        asyncio.run(model.aclose())
    anthropic = make_chat_model(Experiment(**base, provider="anthropic", thinking_budget=0), None)
    assert anthropic.thinking_budget is None
    asyncio.run(anthropic.aclose())
