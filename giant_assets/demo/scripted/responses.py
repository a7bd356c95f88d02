"""OpenAI Responses (``POST /v1/responses``): function calls, reasoning items (with encrypted content
when asked), ``usage.input_tokens_details.cached_tokens``."""

from __future__ import annotations

import json
import time
from typing import Any

from giant_assets.demo.scripted.replies import ReplyParts
from giant_assets.demo.scripted.turns import Turn, b64_url, loads


def _content(content: Any) -> tuple[list[str], list[bytes]]:
    if isinstance(content, str):
        return [content], []
    texts, images = [], []
    for p in content or []:
        if p.get("type") in ("input_text", "output_text", "text"):
            texts.append(p.get("text", ""))
        elif p.get("type") == "input_image":
            images.append(b64_url(p["image_url"]))
    return texts, images


def turns(body: dict[str, Any]) -> list[Turn]:
    turns = [Turn("system", (body["instructions"],), ())] if body.get("instructions") else []
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            texts, images = _content(item.get("output"))
            turns.append(Turn("tool", tuple(texts), tuple(images)))
            continue
        if kind == "message" and item.get("role") != "assistant":
            texts, images = _content(item.get("content"))
            turns.append(Turn(item.get("role", ""), tuple(texts), tuple(images)))
            continue
        # an assistant-side item: merged into the assistant turn it continues
        prev = turns[-1] if turns and turns[-1].role == "assistant" else None
        base = prev or Turn("assistant", (), ())
        texts, calls, replayed = list(base.texts), list(base.tool_calls), list(base.replayed)
        if kind == "function_call":
            calls.append((item.get("name", ""), loads(item.get("arguments", ""))))
        elif kind == "message":
            texts += _content(item.get("content"))[0]
        else:
            replayed.append(kind)
        turn = Turn("assistant", tuple(texts), (), tuple(calls), tuple(replayed))
        if prev is None:
            turns.append(turn)
        else:
            turns[-1] = turn
    return turns


def reply_body(p: ReplyParts) -> dict[str, Any]:
    """The reply body for ``p``."""
    thinking = p.thinking
    rid = p.rid
    body = p.body
    text = p.text
    ids = p.ids
    calls = p.calls
    model = p.model
    n_in = p.n_in
    n_out = p.n_out
    cached = p.cached
    output: list[dict[str, Any]] = []
    if thinking:
        item = {
            "type": "reasoning",
            "id": f"rs_{rid}",
            "summary": [{"type": "summary_text", "text": thinking}],
        }
        if "reasoning.encrypted_content" in (body.get("include") or []):
            item["encrypted_content"] = f"enc-{rid}"
        output.append(item)
    if text:
        output.append({
            "type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })  # fmt: skip
    output += [
        {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
         "arguments": json.dumps(a), "status": "completed"}
        for i, (name, a) in zip(ids, calls, strict=True)
    ]  # fmt: skip
    out = {
        "id": f"resp_{rid}", "object": "response", "created_at": int(time.time()), "model": model,
        "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens_details": {"reasoning_tokens": len(thinking) // 4},
        },
    }  # fmt: skip
    return out
