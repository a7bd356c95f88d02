"""Gemini ``generateContent`` (``POST /v1beta/models/{model}:generateContent``): ``functionCall`` parts
with thought signatures, thought parts when thinking is on, ``usageMetadata`` with
``cachedContentTokenCount`` and ``thoughtsTokenCount``."""

from __future__ import annotations

import base64
from typing import Any

from giant_assets.demo.scripted.replies import ReplyParts
from giant_assets.demo.scripted.turns import Turn


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    return d.get(camel, d.get(snake))


def turns(body: dict[str, Any]) -> list[Turn]:
    out: list[Turn] = []
    system = _get(body, "systemInstruction", "system_instruction")
    if system:
        out.append(Turn("system", tuple(p.get("text", "") for p in system.get("parts") or []), ()))
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        texts = tuple(p["text"] for p in parts if "text" in p and not p.get("thought"))
        images = tuple(
            base64.urlsafe_b64decode(str(blob["data"]).replace("+", "-").replace("/", "_"))
            for p in parts
            if (blob := _get(p, "inlineData", "inline_data"))
        )
        calls = tuple(
            (call.get("name", ""), call.get("args") or {})
            for p in parts
            if (call := _get(p, "functionCall", "function_call"))
        )
        results = [r for p in parts if (r := _get(p, "functionResponse", "function_response"))]
        if content.get("role") == "model":
            replayed = tuple("thought" for p in parts if p.get("thought"))
            out.append(Turn("assistant", texts, (), calls, replayed))
        elif results:
            result_texts = tuple(str((r.get("response") or {}).get("result", "")) for r in results)
            out.append(Turn("tool", result_texts + texts, images))
        else:
            out.append(Turn("user", texts, images))
    return out


def tool_names(body: dict[str, Any]) -> list[str]:
    return [
        d.get("name", "")
        for tool in body.get("tools") or []
        for d in _get(tool, "functionDeclarations", "function_declarations") or []
    ]


def thinking(body: dict[str, Any]) -> bool:
    config = _get(body, "generationConfig", "generation_config") or {}
    budget = _get(config, "thinkingConfig", "thinking_config") or {}
    return bool(_get(budget, "thinkingBudget", "thinking_budget"))


def reply_body(p: ReplyParts) -> dict[str, Any]:
    """The reply body for ``p``: the thought summary first, then the text, then the function calls (the
    first carrying a thought signature, as Gemini sends it with thinking on)."""
    parts: list[dict[str, Any]] = []
    if p.thinking:
        parts.append({"text": p.thinking, "thought": True})
    if p.text:
        parts.append({"text": p.text})
    for n, ((name, args), call_id) in enumerate(zip(p.calls, p.ids, strict=True)):
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args, "id": f"call_{call_id}"}}
        if n == 0 and p.thinking:
            part["thoughtSignature"] = base64.b64encode(f"sig-{p.rid}".encode()).decode()
        parts.append(part)
    thoughts = len(p.thinking) // 4
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": p.n_in, "candidatesTokenCount": p.n_out - thoughts,
            "thoughtsTokenCount": thoughts, "cachedContentTokenCount": p.cached,
            "totalTokenCount": p.n_in + p.n_out,
        },
        "modelVersion": p.model, "responseId": p.rid,
    }  # fmt: skip
