"""HTTP chat providers against a real loopback server: wire formats, retries, Retry-After, limits, keys."""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import socket
from datetime import UTC, datetime

import pytest
from aiolimiter import AsyncLimiter
from PIL import Image

from giant_assets.agents.providers import (
    REDACTED,
    AnthropicChatModel,
    ImagePart,
    MalformedResponse,
    Message,
    MissingAPIKey,
    OpenAIChatModel,
    ProviderHTTPError,
    RetriesExhausted,
    RetryPolicy,
    TextPart,
    make_chat_model,
    parse_retry_after,
)
from giant_assets.demo.scripted_model import (
    Reply,
    ScriptedModelServer,
    answer_reply,
    malformed,
    rate_limited,
    server_error,
    unauthorized_echo,
)

KEY = "sk-test-Zq8v1SECRETkey0000000000000042"
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=5)


def png_b64(size: tuple[int, int], color: tuple[int, int, int]) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


MESSAGES = [
    Message.system("be brief"),
    Message.user(TextPart("what is this?"), ImagePart(png_b64((40, 30), (200, 10, 10)), "image/png")),
]


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GIANT_TEST_KEY", KEY)
    return "GIANT_TEST_KEY"


def run(coro):
    return asyncio.run(coro)


async def call(model, messages=MESSAGES):
    try:
        return await model.complete(messages)
    finally:
        await model.aclose()


def test_openai_wire_format_and_usage(key_env: str) -> None:
    with ScriptedModelServer([Reply("hello", usage=(123, 7))]) as srv:
        model = OpenAIChatModel("gpt-x", base_url=srv.openai_base_url, api_key_env=key_env, max_tokens=99)
        reply = run(call(model))
    assert (reply.text, reply.input_tokens, reply.output_tokens, reply.raw_status) == ("hello", 123, 7, 200)
    assert reply.attempts == 1 and reply.waited_s == 0
    (req,) = srv.requests
    assert req.path == "/v1/chat/completions" and req.headers["Authorization"] == f"Bearer {KEY}"
    body = req.json
    assert body["model"] == "gpt-x" and body["max_completion_tokens"] == 99
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    parts = body["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "what is this?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    (img,) = req.images
    assert img.size == (40, 30) and img.convert("RGB").getpixel((5, 5)) == (200, 10, 10)


def test_anthropic_wire_format_and_usage(key_env: str) -> None:
    with ScriptedModelServer([Reply("bonjour", usage=(50, 4))]) as srv:
        model = AnthropicChatModel("claude-x", base_url=srv.base_url, api_key_env=key_env)
        reply = run(call(model))
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("bonjour", 50, 4)
    (req,) = srv.requests
    assert req.path == "/v1/messages" and req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01" and "Authorization" not in req.headers
    body = req.json
    assert body["system"] == "be brief" and body["max_tokens"] == 4096
    assert [m["role"] for m in body["messages"]] == ["user"]
    image = body["messages"][0]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert req.images[0].size == (40, 30)


def test_retries_5xx_then_succeeds(key_env: str) -> None:
    script = [server_error(500), server_error(503), answer_reply("3")]
    with ScriptedModelServer(script) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        reply = run(call(model))
    assert reply.attempts == 3 and len(srv.requests) == 3 and '"answer": "3"' in reply.text


def test_retry_after_is_honoured(key_env: str) -> None:
    script = [rate_limited(0.2), rate_limited("0.2"), Reply("ok")]
    with ScriptedModelServer(script) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        reply = run(call(model))
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


def test_http_date_retry_after_from_server(key_env: str) -> None:
    when = datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")  # "now": at most ~1 s of waiting
    with ScriptedModelServer([rate_limited(when), Reply("ok")]) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        reply = run(call(model))
    assert reply.text == "ok" and reply.attempts == 2 and reply.waited_s <= 1.1


def test_5xx_forever_stops_after_max_attempts(key_env: str) -> None:
    with ScriptedModelServer(rule=lambda req: server_error(502)) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        with pytest.raises(RetriesExhausted, match=r"failed after 4 attempts.*HTTP 502") as err:
            run(call(model))
    assert len(srv.requests) == 4 and err.value.status == 502 and err.value.attempts == 4


def test_retry_after_beyond_budget_gives_up_at_once(key_env: str) -> None:
    policy = RetryPolicy(max_attempts=5, max_total_wait_s=1.0)
    with ScriptedModelServer(rule=lambda req: rate_limited(120)) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=policy)
        with pytest.raises(RetriesExhausted, match="retry budget.*HTTP 429"):
            run(call(model))
    assert len(srv.requests) == 1


def test_non_retryable_4xx_is_a_clear_error(key_env: str) -> None:
    with ScriptedModelServer([Reply(status=400, text="image too large")]) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        with pytest.raises(ProviderHTTPError, match=r"HTTP 400 \(not retryable\): image too large") as err:
            run(call(model))
    assert err.value.status == 400 and len(srv.requests) == 1


def test_malformed_json_is_a_clear_error(key_env: str) -> None:
    with ScriptedModelServer([malformed()]) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        with pytest.raises(MalformedResponse, match="body is not valid JSON"):
            run(call(model))
    assert len(srv.requests) == 1
    with ScriptedModelServer([Reply(body=b'{"id": "x", "choices": []}')]) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        with pytest.raises(MalformedResponse, match="lacks the expected reply.*IndexError"):
            run(call(model))
    with ScriptedModelServer([Reply(body=b'{"content": "not blocks"}')]) as srv:
        model = AnthropicChatModel("m", base_url=srv.base_url, api_key_env=key_env, retry=FAST)
        with pytest.raises(MalformedResponse, match="not a list of blocks"):
            run(call(model))


def test_timeout_is_retried(key_env: str) -> None:
    with ScriptedModelServer([Reply("late", delay_s=1.0), Reply("on time")]) as srv:
        model = OpenAIChatModel(
            "m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST, timeout_s=0.25
        )
        reply = run(call(model))
    assert reply.text == "on time" and reply.attempts == 2


def test_connection_refused_is_retried_then_reported(key_env: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=key_env, retry=FAST)
    with pytest.raises(RetriesExhausted, match="failed after 4 attempts.*connection failed") as err:
        run(call(model))
    assert err.value.status is None


def test_shared_rate_limiter_spaces_requests(key_env: str) -> None:
    """Two models sharing a 2-per-0.5 s limiter: 6 calls cannot all start within 1 s."""
    limiter = AsyncLimiter(2, 0.5)

    async def go(srv):
        models = [
            OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, limiter=limiter)
            for _ in range(2)
        ]
        try:
            await asyncio.gather(*(m.complete(MESSAGES) for m in models for _ in range(3)))
        finally:
            for m in models:
                await m.aclose()

    with ScriptedModelServer(rule=lambda req: Reply("ok")) as srv:
        run(go(srv))
    times = sorted(r.received_at for r in srv.requests)
    assert len(times) == 6 and times[-1] - times[0] >= 0.9  # burst of 2, then one per 0.25 s


def test_key_only_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY is not set"):
        OpenAIChatModel("gpt-5")  # the real API needs a key
    with pytest.raises(MissingAPIKey, match="NAME of an environment variable") as err:
        OpenAIChatModel("gpt-5", api_key_env=KEY)  # a key pasted where the variable name belongs
    assert KEY not in str(err.value)
    with ScriptedModelServer([Reply("ok")]) as srv:  # a local server needs none
        reply = run(call(OpenAIChatModel("m", base_url=srv.openai_base_url)))
    assert reply.text == "ok" and "Authorization" not in srv.requests[0].headers
    with pytest.raises(MissingAPIKey, match="MY_KEY"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY", require_key=True)


def test_key_never_in_errors_reprs_or_logs(key_env: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with ScriptedModelServer([rate_limited(0.01), unauthorized_echo()]) as srv:
        model = OpenAIChatModel("m", base_url=srv.openai_base_url, api_key_env=key_env, retry=FAST)
        assert KEY not in repr(model) and KEY not in repr(model._key) and KEY not in str(vars(model))
        with pytest.raises(ProviderHTTPError) as err:
            run(call(model))
    assert srv.requests[1].headers["Authorization"] == f"Bearer {KEY}"  # the key was really sent ...
    assert REDACTED in str(err.value) and err.value.status == 401  # ... and echoed back, then redacted
    assert KEY not in str(err.value) and KEY not in repr(err.value)
    assert caplog.records and KEY not in caplog.text


def test_make_chat_model(key_env: str) -> None:
    model = make_chat_model("anthropic", "claude-x", base_url="http://127.0.0.1:1", api_key_env=key_env)
    assert isinstance(model, AnthropicChatModel) and model.url == "http://127.0.0.1:1/v1/messages"
    run(model.aclose())
    with pytest.raises(ValueError, match="unknown provider 'gemini'"):
        make_chat_model("gemini", "x")
    with pytest.raises(ValueError, match="needs a model name"):
        make_chat_model("openai", "")
