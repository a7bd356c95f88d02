"""What the scripted model answers: one ``Reply`` per request, and shorthands for common ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOOL_NAME = "slide_zoom"


@dataclass(frozen=True)
class Reply:
    """One scripted response: ``text``, and/or a ``crop`` (a slide_zoom call, or a JSON crop action when
    the request offers no tool), or an ``answer`` (wrapped as report/response, or a JSON answer action).
    ``body`` is sent verbatim instead of a wire-format body."""

    text: str = ""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay_s: float = 0.0  # on top of the server's latency
    echo_auth: bool = False  # put the request's auth header into the error body (a careless server)
    usage: tuple[int, int] | None = None  # (input, output) tokens to report; None: estimated
    cached: int | None = None  # cached input tokens to report; None: from the prefixes seen before
    crop: tuple[Any, Any, Any, Any] | None = None  # slide_zoom x0, y0, w, h
    tool_args: dict[str, Any] | None = None  # raw slide_zoom arguments (overrides ``crop``)
    answer: Any = None
    reasoning: str = ""  # reasoning summary / thinking text (sent when the request enables reasoning)
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # several tool calls (name, arguments) in one reply


def crop_reply(x: Any, y: Any, w: Any, h: Any, prose: str = "Let me look closer.") -> Reply:
    return Reply(prose, crop=(x, y, w, h), reasoning=f"zoom into {x},{y},{w},{h}")


def answer_reply(answer: Any, prose: str = "Final answer.") -> Reply:
    return Reply(prose, answer=answer, reasoning="enough seen")


def rate_limited(retry_after: float | str = 1) -> Reply:
    return Reply(status=429, headers={"Retry-After": str(retry_after)}, text="rate limit reached, slow down")


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, text="internal server error (scripted)")


def malformed(status: int = 200) -> Reply:
    return Reply(status=status, body=b'{"choices": [{"message": {"content": "trunc')


def unauthorized_echo() -> Reply:
    return Reply(status=401, echo_auth=True)


@dataclass(frozen=True)
class ReplyParts:
    """What a reply body is built from, whatever the wire format (``server._wire_body`` computes it)."""

    body: dict[str, Any]  # the request's JSON body
    model: str
    text: str
    calls: list[tuple[str, Any]]  # (tool name, arguments) of each tool call
    ids: list[str]  # one id per call
    rid: str  # the reply's id (from the request's digest)
    args: Any  # the first call's arguments, None without a call
    n_in: int
    n_out: int
    cached: int
    written: int
    thinking: str
