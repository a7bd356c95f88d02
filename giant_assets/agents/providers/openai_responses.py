"""OpenAI Responses API (``POST {base_url}/responses``) through ``openai.AsyncOpenAI``.

Tools are function tools; the model's output items (reasoning, function calls, messages) go back
verbatim on the next call. Nothing is stored server-side (``store=False``), so with reasoning on the
encrypted reasoning content is requested and passed back. An image carries its part's ``detail``
(none: the API's default, ``auto``); ``prompt_cache_key`` routes an item's calls to the same prompt cache.
A reasoning summary is asked for; when the API refuses it (an unverified organisation), the
request is sent once more without it, later requests go without it, and every reply says so in
its ``notes``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from openai.types.responses import Response

from giant_assets.agents.providers.base import dump
from giant_assets.agents.providers.errors import ProviderError
from giant_assets.agents.providers.messages import (
    ImagePart,
    Message,
    ModelReply,
    Part,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from giant_assets.agents.providers.openai_base import OpenAIModel, tool_arguments

_LOG = logging.getLogger(__name__)


class OpenAIResponsesModel(OpenAIModel):
    api = "responses"
    endpoint = "/responses"
    response_type = Response

    def __init__(self, model: str, *, reasoning_summary: str = "detailed", **kwargs: Any) -> None:
        self.summary_dropped: str | None = None  # why reasoning summaries are no longer asked for
        self.reasoning_summary = reasoning_summary  # the official agents ask for "detailed"
        super().__init__(model, **kwargs)

    async def _call(self, body: dict[str, Any], headers: dict[str, Any]) -> tuple[Any, int, float, float]:
        """With one fallback: a refused reasoning summary (an organisation that OpenAI has not verified
        may not have them) is sent again once without it, and not asked for again by this client."""
        try:
            return await super()._call(body, headers)
        except ProviderError as refused:  # ProviderHTTPError, or a batch line refused
            if "summary" not in body.get("reasoning", {}) or not _summary_refused(refused):
                raise
            reason = self.summary_dropped = str(refused)
        _LOG.warning("%s: reasoning summary refused, sent again without it: %s", self.name, reason)
        body = body | {"reasoning": {k: v for k, v in body["reasoning"].items() if k != "summary"}}
        return await super()._call(body, headers)

    def _notes(self) -> tuple[str, ...]:
        if self.summary_dropped and self.reasoning_effort:
            return (f"reasoning summary dropped (refused: {self.summary_dropped})",)
        return ()

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "input": to_input(messages), "store": False}
        if tools:
            body["tools"] = [
                {"type": "function", "name": t.name, "description": t.description,
                 "parameters": t.parameters, "strict": False}
                for t in tools
            ]  # fmt: skip
        if self.reasoning_effort:
            body["reasoning"] = {"effort": self.reasoning_effort}
            if not self.summary_dropped:
                body["reasoning"]["summary"] = self.reasoning_summary
            body["include"] = ["reasoning.encrypted_content"]
        if cache_key:
            body["prompt_cache_key"] = cache_key
        if self.max_tokens is not None:
            body["max_output_tokens"] = self.max_tokens
        return body

    def _reply(self, response: Any) -> ModelReply:
        texts, calls, reasoning = [], [], []
        for item in response.output:
            if item.type == "message":
                texts += [c.text for c in item.content if c.type == "output_text"]
                texts += [c.refusal for c in item.content if c.type == "refusal"]
            elif item.type == "function_call":
                calls.append(
                    ToolCall(item.call_id, item.name, tool_arguments(item.arguments), item.arguments)
                )
            elif item.type == "reasoning":
                reasoning += [s.text for s in item.summary or []]
        u = response.usage
        usage = Usage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cached_input_tokens=getattr(u.input_tokens_details, "cached_tokens", 0) or 0,
            reasoning_tokens=getattr(u.output_tokens_details, "reasoning_tokens", 0) or 0,
        ) if u else Usage()  # fmt: skip
        replay = tuple(dump(item) for item in response.output)
        return ModelReply("".join(texts), tuple(calls), usage, reasoning="\n".join(reasoning), replay=replay)


def _summary_refused(exc: ProviderError) -> bool:
    """A 400 refusing the reasoning summary (e.g. 'Your organization must be verified to generate
    reasoning summaries'), as opposed to another invalid request."""
    text = str(exc).lower()
    return exc.status == 400 and ("reasoning summar" in text or "reasoning.summary" in text)


def to_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Responses ``input`` items; the system prompt is the first item, a system
    message, as the official agent sends it (not ``instructions``), and like its user turns typed
    ``"type": "message"``."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            items.append({"role": "system", "type": "message", "content": m.text})
        elif m.role == "user":
            items.append({"role": "user", "type": "message", "content": _content(m.parts)})
        elif m.role == "assistant":
            if m.replay:
                items.extend(m.replay)
                continue
            if m.text:
                items.append({"role": "assistant", "content": m.text})
            items += [
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.raw_arguments}
                for c in m.tool_calls
            ]
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.call_id, "output": _content(m.parts)})
    return items


def _content(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "input_text", "text": p.text})
        elif isinstance(p, ImagePart):
            url = f"data:{p.media_type};base64,{p.data_b64}"
            image = {"type": "input_image", "image_url": url}
            out.append(image | ({"detail": p.detail} if p.detail else {}))
    return out
