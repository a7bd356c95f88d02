"""Anthropic Messages (``POST /v1/messages``): ``tool_use`` and ``thinking`` blocks,
``cache_read_input_tokens``/``cache_creation_input_tokens`` when the request marks ``cache_control``."""

from __future__ import annotations

import base64
from typing import Any

from giant_assets.demo.scripted.replies import ReplyParts
from giant_assets.demo.scripted.turns import Turn


def _anthropic_blocks(blocks: Any) -> tuple[list[str], list[bytes]]:
    if isinstance(blocks, str):
        return [blocks], []
    texts = [b.get("text", "") for b in blocks or [] if b.get("type") == "text"]
    images = [base64.b64decode(b["source"]["data"]) for b in blocks or [] if b.get("type") == "image"]
    return texts, images


def turns(body: dict[str, Any]) -> list[Turn]:
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(b.get("text", "") for b in system)
    turns = [Turn("system", (system,), ())] if system else []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if msg.get("role") == "assistant":
            texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
            calls = [(b.get("name", ""), b.get("input")) for b in blocks if b.get("type") == "tool_use"]
            replayed = [b["type"] for b in blocks if b.get("type") in ("thinking", "redacted_thinking")]
            turns.append(Turn("assistant", tuple(texts), (), tuple(calls), tuple(replayed)))
            continue
        rest = []
        for b in blocks:
            if b.get("type") == "tool_result":
                texts, images = _anthropic_blocks(b.get("content"))
                turns.append(Turn("tool", tuple(texts), tuple(images)))
            else:
                rest.append(b)
        if rest:
            texts, images = _anthropic_blocks(rest)
            turns.append(Turn("user", tuple(texts), tuple(images)))
    return turns


def reply_body(p: ReplyParts) -> dict[str, Any]:
    """The reply body for ``p``."""
    thinking = p.thinking
    rid = p.rid
    text = p.text
    ids = p.ids
    calls = p.calls
    model = p.model
    args = p.args
    n_in = p.n_in
    n_out = p.n_out
    cached = p.cached
    written = p.written
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": f"sig-{rid}"})
    if text:
        content.append({"type": "text", "text": text})
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": a}
        for i, (name, a) in zip(ids, calls, strict=True)
    ]
    out: dict[str, Any] = {
        "id": f"msg_{rid}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if args is not None else "end_turn",
        "usage": {
            "input_tokens": n_in - cached - written,
            "output_tokens": n_out,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written,
        },
    }
    return out
