"""Our raw ``client.post`` sends what the SDK's typed ``create`` would have sent.

The providers post their wire-format bodies with the SDKs' raw-request method, skipping ``create``'s
body transform. The oracle is the SDK itself: the same multi-turn conversation (system text, a question
with a JPEG, an assistant turn with a tool call as the model returned it and one as built by hand, tool
results with JPEGs, tools offered, the cache key and reasoning options) goes once through the typed
``create`` (what the providers called before) and once through ``complete``, to the loopback server,
which records both requests: bodies equal as JSON, the headers that matter equal, the replies parsed
into the same reply.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json

import numpy as np
import pytest
from PIL import Image

from giant_assets.agents.providers import (
    AnthropicChatModel,
    ImagePart,
    Message,
    OpenAIChatModel,
    OpenAIResponsesModel,
    TextPart,
    ToolCall,
    ToolSpec,
)
from giant_assets.demo.scripted import Reply, ScriptedModelServer, crop_reply

KEY = "sk-test-wire0000SECRET0000000000000077"
ZOOM = ToolSpec(
    "slide_zoom",
    "Zoom into a region of the slide (level-0 pixels).",
    {
        "type": "object",
        "properties": {
            k: {"type": "integer", "description": f"{k} in pixels"} for k in ("x0", "y0", "w", "h")
        },
        "required": ["x0", "y0", "w", "h"],
    },
)
OPTIONS = {  # the wire's reasoning options, a token cap
    "responses": {"reasoning_effort": "medium", "max_tokens": 777},
    "chat": {"reasoning_effort": "low", "max_tokens": 555},
    "messages": {"thinking_budget": 2048, "max_tokens": 333},
}


def jpeg_b64(seed: int, size: tuple[int, int] = (96, 64)) -> str:
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=80)
    return base64.b64encode(buf.getvalue()).decode()


def model_for(srv: ScriptedModelServer, api: str, keyed: bool):
    cls = {"responses": OpenAIResponsesModel, "chat": OpenAIChatModel, "messages": AnthropicChatModel}[api]
    base = srv.base_url if api == "messages" else srv.openai_base_url
    key_env = "GIANT_WIRE_TEST_KEY" if keyed else "GIANT_WIRE_TEST_NO_SUCH_KEY"
    return cls("m-wire", base_url=base, api_key_env=key_env, **OPTIONS[api])


def typed_create(model, api: str):
    """The SDK's typed method of the wire: what the providers called before."""
    client = model._client
    if api == "responses":
        return client.responses.create
    return client.chat.completions.create if api == "chat" else client.messages.create


def conversation(first_reply) -> list[Message]:
    """System, question + JPEG, the model's own tool call (replay items and all), its result with a JPEG,
    a hand-built assistant turn with a tool call, and that result with a JPEG."""
    first_call = first_reply.tool_calls[0]
    by_hand = ToolCall(
        "call_by_hand",
        "slide_zoom",
        {"x0": 5, "y0": 6, "w": 70, "h": 80},
        '{"x0": 5, "y0": 6, "w": 70, "h": 80}',
    )
    return [
        Message.system("You are a pathologist. Answer with the option letter."),
        Message.user(
            TextPart("Which tissue is this? A) liver B) lung"), ImagePart(jpeg_b64(1), label="overview")
        ),
        first_reply.as_message(),
        Message.tool_result(first_call.id, TextPart("Region 1, shown at 96 x 64."), ImagePart(jpeg_b64(2))),
        Message.assistant("Closer still.", [by_hand]),
        Message.tool_result(by_hand.id, TextPart("Region 2, shown at 96 x 64."), ImagePart(jpeg_b64(3))),
    ]


@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no-key"])
@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
def test_post_sends_what_the_typed_create_sends(
    api: str, keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIANT_WIRE_TEST_KEY", KEY)
    monkeypatch.delenv("GIANT_WIRE_TEST_NO_SUCH_KEY", raising=False)
    # the same scripted reply to both sends (usage fixed: the server's cache would see the second as cached)
    same = Reply("Final answer: A", usage=(900, 40), cached=0, reasoning="enough seen")
    with ScriptedModelServer([crop_reply(10, 20, 300, 400), same, same]) as srv:
        model = model_for(srv, api, keyed)

        async def go():
            try:
                first = await model.complete(
                    [Message.system("s"), Message.user(TextPart("q"), ImagePart(jpeg_b64(0)))],
                    [ZOOM],
                    "item-3",
                )
                messages = conversation(first)
                body = model._body(messages, [ZOOM], "item-3")
                typed = await typed_create(model, api)(**body, extra_headers=model._auth_override())
                posted = await model.complete(messages, [ZOOM], "item-3")
                return messages, typed, posted
            finally:
                await model.aclose()

        messages, typed, posted = asyncio.run(go())
    old, new = srv.requests[1], srv.requests[2]
    assert (
        old.path
        == new.path
        == {"responses": "/v1/responses", "chat": "/v1/chat/completions", "messages": "/v1/messages"}[api]
    )
    assert isinstance(old.json, dict) and new.json == old.json
    # only the order of the top-level fields differs (``create`` lists its parameters in its own order)
    assert all(json.dumps(new.json[k]) == json.dumps(old.json[k]) for k in old.json)

    # the body is complete: every part of the conversation and every option reached the server
    assert [t.role for t in new.turns][:2] == ["system", "user"] and len(new.images) == 3
    assert new.tools == ["slide_zoom"] and new.reasoning_enabled
    assert new.json.get("prompt_cache_key") == ("item-3" if api == "responses" else None)
    if api != "chat":  # the model's own items went back verbatim
        replay = messages[2].replay
        assert replay and all(item in _items(new.json, api) for item in replay)

    # every header alike: auth, content type and length, SDK version, the client's timeout, retry count
    assert new.headers == old.headers
    assert (
        new.headers["content-type"] == "application/json"
        and new.headers["x-stainless-read-timeout"] == "600.0"  # the SDKs' default, as officially
    )
    auth = new.headers.get("authorization", "") + new.headers.get("x-api-key", "")
    if keyed:
        assert KEY in auth
    else:  # our extra headers drop the SDK's placeholder key
        assert auth == "" and b"no-key-configured" not in new.body

    # the reply parsed from each send is the same, but for the ids the server derives from the bytes it got
    assert isinstance(typed, model.response_type)
    reply = model._reply(typed)
    fields = [(r.text, r.tool_calls, r.usage, r.reasoning, r.replay) for r in (reply, posted)]
    old_id, new_id = (hashlib.sha256(r.body).hexdigest()[:16] for r in (old, new))
    assert repr(fields[1]).replace(new_id, old_id) == repr(fields[0])
    assert posted.text.startswith("Final answer: A") and posted.usage.input_tokens >= 900


def _items(body: dict, api: str) -> list:
    if api == "responses":
        return body["input"]
    return [block for m in body["messages"] if m["role"] == "assistant" for block in m["content"]]
