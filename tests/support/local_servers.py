"""The quirks of local OpenAI-compatible servers (vLLM, SGLang, Ollama, llama.cpp), as a rule for the
scripted loopback model (``ScriptedModelServer(rule=quirks(...))``).

Each quirk is how a real server answers, checked before the model's scripted move:

- ``max_images``: more images in one request is a 400 (vLLM ``--limit-mm-per-prompt image=N``);
- ``strict_params``: a body field outside ``KNOWN_PARAMS``, or an image ``detail``, is a 400 (servers that
  validate the request: ``reasoning_effort`` or ``max_completion_tokens`` are unknown to them);
- ``needs_tool_choice``: without ``tool_choice: "auto"`` the tools are not used and the model answers at
  once in plain text (vLLM before 0.8 read a missing tool_choice as ``"none"``);
- ``calls_in_text``: ``"hermes"`` writes tool calls as ``<tool_call>{...}</tool_call>`` in the content,
  ``"json"`` as a bare JSON object (no tool-call parser on the server), and the final answer is plain
  text without tags;
- ``context_tokens``: a prompt estimated above it is a 400 worded as vLLM words it. The estimate:
  one token per 28 x 28 image patch (Qwen2-VL and Qwen2.5-VL's vision encoder) and per 4 characters.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from giant_assets.demo.scripted import RecordedRequest, Reply, Rule

KNOWN_PARAMS = frozenset(
    {"model", "messages", "tools", "tool_choice", "max_tokens", "temperature", "top_p", "seed", "stop", "n"}
)
PLAIN_ANSWER = "I have seen enough. The tissue is liver, so the answer is 2."


@dataclass(frozen=True)
class Quirks:
    max_images: int | None = None
    strict_params: bool = False
    needs_tool_choice: bool = False
    calls_in_text: str | None = None  # "hermes" | "json"
    context_tokens: int | None = None


def prompt_tokens(request: RecordedRequest) -> int:
    """The quirks server's estimate of a prompt's tokens (see the module docstring)."""
    images = sum(math.ceil(im.width / 28) * math.ceil(im.height / 28) for im in request.images)
    return images + len(request.text) // 4


def navigate(crops: Sequence[tuple[int, int, int, int]]) -> Rule:
    """A model that asks for ``crops`` in order (one per reply), then answers: its move depends only on
    the number of assistant turns in the request, so a refused request asks again for the same move."""

    def rule(request: RecordedRequest) -> Reply:
        n = request.assistant_turns
        if n < len(crops) and request.tools:
            return Reply("Looking closer.", crop=crops[n])
        return Reply("Liver architecture throughout.", answer={"answer": 2})

    return rule


def quirks(model: Rule, q: Quirks) -> Rule:
    """``model``'s moves as served by a server with the quirks ``q``."""

    def rule(request: RecordedRequest) -> Reply:
        body = request.json or {}
        refused = _refusal(request, body, q)
        if refused:
            return Reply(status=400, text=refused)
        if q.needs_tool_choice and request.tools and body.get("tool_choice") != "auto":
            return Reply(PLAIN_ANSWER)  # the tools were not shown: no call, an untagged answer
        reply = model(request)
        if q.calls_in_text is None:
            return reply
        if reply.crop is not None:
            args = dict(zip(("x0", "y0", "w", "h"), reply.crop, strict=True))
            call = json.dumps({"name": "slide_zoom", "arguments": args})
            if q.calls_in_text == "hermes":
                return Reply(f"{reply.text}\n<tool_call>\n{call}\n</tool_call>")
            return Reply(f"{reply.text}\n```json\n{call}\n```")
        return Reply(PLAIN_ANSWER)

    return rule


def _refusal(request: RecordedRequest, body: dict, q: Quirks) -> str:
    """The 400 message a server with quirks ``q`` answers ``request`` with; empty: accepted."""
    if q.strict_params:
        unknown = sorted(set(body) - KNOWN_PARAMS)
        if unknown:
            return f"Unrecognized request argument supplied: {', '.join(unknown)}"
        for msg in body.get("messages") or []:
            for part in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if "detail" in (part.get("image_url") or {}):
                    return "Unrecognized request argument supplied: image_url.detail"
    n = len(request.images)
    if q.max_images is not None and n > q.max_images:
        return f"At most {q.max_images} image(s) may be provided in one prompt, got {n}."
    if q.context_tokens is not None:
        tokens = prompt_tokens(request)
        if tokens > q.context_tokens:
            return (
                f"This model's maximum context length is {q.context_tokens} tokens. However, you "
                f"requested {tokens} tokens in the messages. Please reduce the length of the messages."
            )
    return ""
