"""Anthropic Messages with tool use (``POST {base_url}/v1/messages``) through ``anthropic.AsyncAnthropic``.

Extended thinking is on when ``thinking_budget`` is set (>0) and the model has it: thinking blocks go
back unchanged in the assistant turn, as the API requires with tool use. Anthropic's image limits are
kept per request (``images.fit_anthropic_images``: the oldest images but the overview leave first).
The reply's blocks go back as the API sent them (every field it set, ``citations: null`` included), as
the SDK sends back the official agent's ``response.content``.
A reply with ``stop_reason: "refusal"`` (Claude's safety classifiers stopped it, whatever text it
already holds) raises ``ContentFiltered``, as the other providers' safety stops: never an answer.
Prompt caching: ``cache_control`` marks the system prompt (tools + system) and the last block of the
conversation, so every step reads the previous steps' prefix from the cache and writes only what is new.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic

from giant_assets.agents.providers.base import SDKChatModel
from giant_assets.agents.providers.errors import ContentFiltered
from giant_assets.agents.providers.images import fit_anthropic_images
from giant_assets.agents.providers.messages import (
    ImagePart,
    Message,
    ModelReply,
    Part,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
    token_count,
)
from giant_assets.agents.providers.tls import http_client
from giant_assets.experiments.api_contracts import anthropic_max_tokens, reasons

EPHEMERAL = {"type": "ephemeral"}
REFUSED = "Claude declined to answer (stop_reason refusal: its safety classifiers stopped the reply)"


class AnthropicChatModel(SDKChatModel):
    provider = "anthropic"
    api = "messages"
    endpoint = "/v1/messages"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"
    sdk = anthropic
    response_type = anthropic.types.Message

    def __init__(
        self, model: str, *, thinking_budget: int | None = None, cache: bool = True, **kwargs: Any
    ) -> None:
        # a model without extended thinking refuses the thinking option (api_contracts.reasons)
        thinks = reasons("anthropic", model) is not False
        self.thinking_budget = (thinking_budget or None) if thinks else None
        self.cache = cache
        super().__init__(model, **kwargs)

    def _make_client(self, key: str) -> anthropic.AsyncAnthropic:
        # Every request gets this client's ``timeout_s``. The typed ``messages.create`` would derive a
        # non-streaming timeout from ``max_tokens`` (and refuse a large ``max_tokens`` without streaming),
        # but only on a client left at the SDK's default timeout, which this one never is; its other
        # extras (warnings about deprecated model names, tracing span names) do not concern us.
        return anthropic.AsyncAnthropic(
            api_key=key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout_s,
            http_client=http_client(anthropic),
        )

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": anthropic_max_tokens(self.name, self.max_tokens),
            "messages": to_messages(messages, cache=self.cache),
        }
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        if system:
            block: dict[str, Any] = {"type": "text", "text": system}
            body["system"] = [block | {"cache_control": EPHEMERAL}] if self.cache else [block]
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
        if self.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        return body

    def _reply(self, response: Any) -> ModelReply:
        if getattr(response, "stop_reason", None) == "refusal":  # Claude's safety classifiers stopped it
            raise ContentFiltered(f"{self.provider} {self.url}: {REFUSED}", 200)
        blocks = response.content
        if not isinstance(blocks, list):
            raise TypeError(f"content is {type(blocks).__name__}, not a list of blocks")
        text = "".join(b.text for b in blocks if b.type == "text")
        calls = tuple(
            ToolCall(b.id, b.name, b.input if isinstance(b.input, dict) else None, str(b.input))
            for b in blocks
            if b.type == "tool_use"
        )
        thinking = "\n".join(b.thinking for b in blocks if b.type == "thinking")
        u = response.usage
        read = token_count(u.cache_read_input_tokens, "cache_read_input_tokens")
        written = token_count(u.cache_creation_input_tokens, "cache_creation_input_tokens")
        usage = Usage(
            input_tokens=token_count(u.input_tokens, "input_tokens") + read + written,
            output_tokens=u.output_tokens,
            cached_input_tokens=read,
            cache_write_tokens=written,
        )
        replay = tuple(b.to_dict(mode="json") for b in blocks)  # as the API sent them (SDK: exclude_unset)
        return ModelReply(text, calls, usage, reasoning=thinking, replay=replay)

    def _prepare(self, messages: Sequence[Message]) -> tuple[Sequence[Message], tuple[str, ...]]:
        return fit_anthropic_images(messages, f"{self.provider} {self.url}")


def to_messages(messages: Sequence[Message], cache: bool = True) -> list[dict[str, Any]]:
    """Neutral messages as Anthropic turns: tool results (with their images) open the next user turn,
    consecutive user content merges into one turn; with ``cache`` the last block is a cache breakpoint."""
    wire: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "assistant":
            content = list(m.replay) or [
                *([{"type": "text", "text": m.text}] if m.text else []),
                *({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments or {}}
                  for c in m.tool_calls),
            ]  # fmt: skip
            wire.append({"role": "assistant", "content": content})
            continue
        if m.role == "tool":
            content: str | list[dict[str, Any]] = _content(m.parts)
            if len(m.parts) == 1 and isinstance(m.parts[0], TextPart):
                content = m.parts[0].text  # a text-only result as a string, as the official agent sends it
            blocks = [{"type": "tool_result", "tool_use_id": m.call_id, "content": content}]
        else:
            blocks = _content(m.parts)
        if wire and wire[-1]["role"] == "user":
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": "user", "content": blocks})
    if cache and wire and wire[-1]["content"]:
        last = wire[-1]["content"][-1]
        wire[-1]["content"][-1] = {**last, "cache_control": EPHEMERAL}
    return wire


def _content(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            source = {"type": "base64", "media_type": p.media_type, "data": p.data_b64}
            out.append({"type": "image", "source": source})
    return out
