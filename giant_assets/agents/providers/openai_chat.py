"""OpenAI Chat Completions with tools (``api: chat``) through ``openai.AsyncOpenAI``: OpenAI itself and
OpenAI-compatible servers (vLLM, Ollama, llama.cpp). A tool result carries text only on this wire, so
a crop image follows it in a user turn. Local servers cache prefixes on their own: no cache key sent;
``local.LocalChatModel`` adapts this wire to them (``server`` in an experiment).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openai.types.chat import ChatCompletion

from giant_assets.agents.providers.messages import (
    ImagePart,
    Message,
    ModelReply,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from giant_assets.agents.providers.openai_base import OpenAIModel, tool_arguments
from giant_assets.experiments.api_contracts import reasons


class OpenAIChatModel(OpenAIModel):
    api = "chat"
    endpoint = "/chat/completions"
    response_type = ChatCompletion
    max_tokens_field = "max_completion_tokens"  # OpenAI's name for reasoning models; local servers max_tokens
    tool_choice: str | None = None  # None: not sent (OpenAI's default with tools is auto)

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "messages": to_messages(messages)}
        if tools:
            body["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools
            ]  # fmt: skip
            if self.tool_choice:
                body["tool_choice"] = self.tool_choice
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        if self.max_tokens is not None:
            body[self._max_tokens_field()] = self.max_tokens
        return body

    def _max_tokens_field(self) -> str:
        """``max_tokens`` for a model known not to reason (as the official gpt-4o baseline sends it; the
        reasoning models refuse that name), else ``max_tokens_field``."""
        return "max_tokens" if reasons(self.provider, self.name) is False else self.max_tokens_field

    def _reply(self, response: Any) -> ModelReply:
        u = response.usage
        usage = Usage(
            input_tokens=u.prompt_tokens,
            output_tokens=u.completion_tokens,
            cached_input_tokens=getattr(u.prompt_tokens_details, "cached_tokens", 0) or 0,
            reasoning_tokens=getattr(u.completion_tokens_details, "reasoning_tokens", 0) or 0,
        ) if u else Usage()  # fmt: skip
        if response.choices == []:  # an empty reply: an answer with nothing in it (ModelReply)
            return ModelReply("", (), usage)
        message = response.choices[0].message
        text = message.content
        if isinstance(text, list):  # some servers return content parts
            text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
        text = text if text is not None else (message.refusal or "")
        if not isinstance(text, str):
            raise TypeError(f"choices[0].message.content is {type(text).__name__}, not text")
        calls = tuple(
            ToolCall(c.id, c.function.name, tool_arguments(c.function.arguments), c.function.arguments or "")
            for c in message.tool_calls or []
            if c.type == "function"
        )
        reasoning = getattr(message, "reasoning_content", None) or ""  # vLLM's reasoning parsers
        return ModelReply(text, calls, usage, reasoning=str(reasoning))


def to_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as chat messages; the images of a run of tool results follow it in one user turn."""
    wire: list[dict[str, Any]] = []
    pending: list[ImagePart] = []
    for m in messages:
        if m.role != "tool" and pending:
            wire.append({"role": "user", "content": _content(Message.user(*pending))})
            pending = []
        if m.role == "system":
            wire.append({"role": "system", "content": m.text})
        elif m.role == "user":
            wire.append({"role": "user", "content": _content(m)})
        elif m.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.raw_arguments},
                    }
                    for c in m.tool_calls
                ]
            wire.append(turn)
        elif m.role == "tool":
            wire.append({"role": "tool", "tool_call_id": m.call_id, "content": m.text})
            pending += m.images
    if pending:
        wire.append({"role": "user", "content": _content(Message.user(*pending))})
    return wire


def _content(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in m.parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            url = f"data:{p.media_type};base64,{p.data_b64}"
            image = {"url": url} | ({"detail": p.detail} if p.detail else {})
            out.append({"type": "image_url", "image_url": image})
    return out
