"""OpenAI Chat Completions (``POST /v1/chat/completions``, as vLLM/Ollama serve it): ``tool_calls``,
``usage.prompt_tokens_details.cached_tokens``."""

from __future__ import annotations

import json
import time
from typing import Any

from giant_assets.demo.scripted.replies import ReplyParts
from giant_assets.demo.scripted.turns import Turn, b64_url, loads


def turns(body: dict[str, Any]) -> list[Turn]:
    turns = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts = [p.get("text", "") for p in parts if p.get("type") == "text"]
        images = [b64_url(p["image_url"]["url"]) for p in parts if p.get("type") == "image_url"]
        calls = [
            (c["function"]["name"], loads(c["function"].get("arguments", "")))
            for c in msg.get("tool_calls") or []
        ]
        turns.append(Turn(msg.get("role", ""), tuple(texts), tuple(images), tuple(calls)))
    return turns


def reply_body(p: ReplyParts) -> dict[str, Any]:
    """The reply body for ``p``."""
    text = p.text
    calls = p.calls
    ids = p.ids
    rid = p.rid
    model = p.model
    args = p.args
    n_in = p.n_in
    n_out = p.n_out
    cached = p.cached
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(a)}}
            for i, (name, a) in zip(ids, calls, strict=True)
        ]  # fmt: skip
    out = {
        "id": f"chatcmpl-{rid}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if args is not None else "stop"}],
        "usage": {
            "prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }  # fmt: skip
    return out
