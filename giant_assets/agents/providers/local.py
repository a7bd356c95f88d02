"""OpenAI-compatible local servers (vLLM, SGLang, Ollama, llama.cpp): Chat Completions as they serve it.

What differs from OpenAI's own Chat Completions (``openai_chat``), for an experiment with ``server``:

- no key needed (``GIANT_LOCAL_API_KEY`` is sent when set, e.g. for ``vllm serve --api-key``; never
  ``OPENAI_API_KEY``), no reasoning options, no image ``detail`` (``send_detail`` turns it on),
  ``max_tokens`` rather than ``max_completion_tokens``;
- ``tool_choice: "auto"`` whenever tools are offered: vLLM before 0.8 read a missing tool_choice as
  ``"none"``;
- tool calls the server left in the reply's text (no tool-call parser, or not the model's) are read
  from it: Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, or else a
  bare JSON object ``{"name": <an offered tool>, "arguments" or "parameters": {...}}``;
- at most ``max_images`` images per request (vLLM ``--limit-mm-per-prompt``): the first image (the
  slide's overview) stays, the oldest others leave, each replaced by a one-line note;
- a request the server refuses as longer than its context (HTTP 400 naming the context length) is sent
  again without the oldest image but the overview, until it fits or only the overview is left.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from giant_assets.agents.providers.errors import ProviderHTTPError
from giant_assets.agents.providers.messages import (
    ImagePart,
    Message,
    ModelReply,
    TextPart,
    ToolCall,
    ToolSpec,
)
from giant_assets.agents.providers.openai_chat import OpenAIChatModel
from giant_assets.core.jsonscan import json_objects

_LOG = logging.getLogger(__name__)
LOCAL_KEY_ENV = "GIANT_LOCAL_API_KEY"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
# how vLLM, SGLang and llama.cpp word a prompt longer than the model's context
_TOO_LONG = re.compile(
    r"maximum context length|maximum model length|context length|context size|max_model_len",
    re.IGNORECASE,
)


class LocalChatModel(OpenAIChatModel):
    """A model on a local OpenAI-compatible server; see the module docstring for what it adapts."""

    default_key_env = LOCAL_KEY_ENV
    max_tokens_field = "max_tokens"
    tool_choice = "auto"

    def __init__(
        self,
        model: str,
        *,
        server: str = "local",
        max_images: int | None = None,
        send_detail: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("reasoning_effort", None)  # local models take no reasoning options
        kwargs.setdefault("require_key", False)
        self.provider = server
        self.max_images = max_images
        self.send_detail = send_detail
        super().__init__(model, **kwargs)

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        body = super()._body(messages, tools, cache_key)
        if not self.send_detail:  # the body's dicts are new for every request: edited in place
            for message in body["messages"]:
                for part in message["content"] if isinstance(message["content"], list) else ():
                    if part.get("type") == "image_url":
                        part["image_url"].pop("detail", None)
        return body

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), cache_key: str | None = None
    ) -> ModelReply:
        messages = keep_images(messages, self.max_images)
        while True:
            try:
                reply = await super().complete(messages, tools, cache_key)
                break
            except ProviderHTTPError as exc:
                if exc.status != 400 or not _TOO_LONG.search(str(exc)):
                    raise
                fewer = keep_images(messages, image_count(messages) - 1)
                if image_count(fewer) == image_count(messages):
                    raise ProviderHTTPError(
                        f"{exc}; the overview alone does not fit: raise the server's context length "
                        "(vLLM --max-model-len, llama.cpp --ctx-size) or lower image_size",
                        exc.status,
                        exc.attempts,
                    ) from None
                _LOG.info("%s: prompt over the context length, sent again with one image fewer", self.name)
                messages = fewer
        if reply.tool_calls or not tools:
            return reply
        calls = text_tool_calls(reply.text, {t.name for t in tools})
        return replace(reply, tool_calls=calls) if calls else reply


def image_count(messages: Sequence[Message]) -> int:
    return sum(isinstance(p, ImagePart) for m in messages for p in m.parts)


def keep_images(messages: Sequence[Message], keep: int | None) -> Sequence[Message]:
    """``messages`` with at most ``keep`` images: the first (the overview) and the newest others; each
    image that leaves is replaced by a note naming what it showed."""
    positions = [
        (i, k) for i, m in enumerate(messages) for k, p in enumerate(m.parts) if isinstance(p, ImagePart)
    ]
    if keep is None or len(positions) <= keep:
        return messages
    drop = set(positions[1 : 1 + len(positions) - max(keep, 1)])
    out = list(messages)
    for i in {i for i, _ in drop}:
        parts = tuple(
            TextPart(f"[{p.label}: image removed from the context]") if (i, k) in drop else p
            for k, p in enumerate(messages[i].parts)
        )  # fmt: skip
        out[i] = replace(messages[i], parts=parts)
    return out


def text_tool_calls(text: str, offered: set[str]) -> tuple[ToolCall, ...]:
    """The tool calls written in ``text``: ``<tool_call>`` blocks (any tool name: the agent answers an
    unknown one), else bare JSON objects naming an offered tool; ``()`` when there are none.

    A ``<tool_call>`` block with no readable JSON object (malformed, or nested too deep for the bounded
    scanner) is still a call: it comes back with ``arguments`` None and a ``raw_arguments`` saying so,
    so the agent reports it to the model and in the trajectory instead of scoring the text as an answer.
    """
    blocks = _TOOL_CALL.findall(text)
    digest = hashlib.sha256(text.encode(errors="replace")).hexdigest()[:12]
    if blocks:
        found = []
        for block in blocks:
            objects = json_objects(block)
            found.extend(objects or [_unreadable(block)])
    else:
        found = json_objects(text)
    calls: list[ToolCall] = []
    for obj in found:
        name = obj.get("name")
        args = obj.get("arguments", obj.get("parameters"))
        if not isinstance(name, str) or args is None or (not blocks and name not in offered):
            continue
        raw = args if isinstance(args, str) else json.dumps(args)
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (json.JSONDecodeError, RecursionError):  # RecursionError: a string nested too deep
                args = None
        arguments = args if isinstance(args, dict) else None
        calls.append(ToolCall(f"call_text_{digest}_{len(calls)}", name, arguments, raw))
    return tuple(calls)


_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,64})"')


def _unreadable(block: str) -> dict[str, Any]:
    """A ``<tool_call>`` block no JSON object could be read from, as a call without arguments."""
    name = _NAME.search(block[:4096])
    head = " ".join(block[:80].split())
    return {
        "name": name.group(1) if name else "(unnamed)",
        "arguments": f"unreadable <tool_call> block of {len(block):,} characters (malformed JSON, or nested "
        f"too deep): {head}...",
    }
